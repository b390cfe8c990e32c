package io.kstate.fleet;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A plain keyed producer on the reference client (KafkaProducer of kafka-clients): the "foreign" Java
 * producer of issue 30, the counterpart of {@code support/node/producer.js}.
 *
 * <pre>
 *   java io.kstate.fleet.Producer --name NAME --run-dir DIR --brokers HOST:PORT --topic T [--keys 200] [--rate 200]
 * </pre>
 *
 * <p>It writes {"key": "k0042", "seq": n} with key "k0042", round-robin over {@code --keys} keys at
 * {@code --rate} records per second; per key, seq increases by one (a restart continues from DIR/NAME.jsonl).
 * The partition is the client's default partitioner (murmur2 of the key modulo the partition count, no
 * {@code partitioner.class} set), on metadata at most {@code --metadata-max-age-ms} old, so it writes to new
 * partitions within about that after an increase. Idempotent with acks=all (the client's defaults), so a
 * key's records are appended in seq order; each delivered record is logged to DIR/NAME.jsonl as
 * {"key","seq","p","o","t"} from its delivery callback.
 *
 * <p>DIR/NAME.pid while it runs, DIR/NAME.ready after its first delivered record; SIGTERM stops sending,
 * flushes what is in flight, closes and exits 0.
 */
public final class Producer {
    private final Map<String, String> opt;
    private final Common.ServiceFiles files;
    private final Common.Lines out;
    private final Common.Lines events;
    private final KafkaProducer<String, String> producer;
    private final Common.Lifecycle life;
    private final String[] keys;
    private final Map<String, Long> nextSeq = new HashMap<>();
    private final AtomicBoolean ready = new AtomicBoolean();
    private long written;

    private Producer(Map<String, String> opt) {
        this.opt = opt;
        files = new Common.ServiceFiles(opt.get("run-dir"), opt.get("name"));
        keys = new String[Integer.parseInt(opt.get("keys"))];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = String.format("k%04d", i);
            nextSeq.put(keys[i], 0L);
        }
        resume();
        out = new Common.Lines(files.out);
        events = new Common.Lines(files.events);
        producer = new KafkaProducer<>(properties(opt));
        life = new Common.Lifecycle(files, events, () -> { }, Long.parseLong(opt.get("grace-ms")));
    }

    static Properties properties(Map<String, String> opt) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("brokers"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, opt.get("client-id").isEmpty() ? opt.get("name") : opt.get("client-id"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.LINGER_MS_CONFIG, opt.get("linger-ms"));
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, opt.get("metadata-max-age-ms"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return p;
    }

    /** Continue each key's seq after what an earlier run of NAME delivered. */
    private void resume() {
        if (!Files.exists(files.out)) {
            return;
        }
        try {
            for (String line : Files.readAllLines(files.out)) {
                String key = Common.keyOf(line);
                Long seq = Common.seqOf(line);
                if (key != null && seq != null && nextSeq.containsKey(key) && seq >= nextSeq.get(key)) {
                    nextSeq.put(key, seq + 1);
                }
                if (key != null) {
                    written++;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void send(int n) {
        for (int i = 0; i < n; i++) {
            String key = keys[(int) ((written + i) % keys.length)];
            long seq = nextSeq.get(key);
            nextSeq.put(key, seq + 1);
            String value = Common.json("key", key, "seq", seq);
            producer.send(new ProducerRecord<>(opt.get("topic"), key, value), (meta, error) -> {
                double t = Common.now();
                if (error != null) {
                    events.write("ev", "error", "t", t, "key", key, "seq", seq, "error", error.toString());
                    return;
                }
                out.write("key", key, "seq", seq, "p", meta.partition(), "o", meta.offset(), "t", t);
                if (ready.compareAndSet(false, true)) {
                    Common.writeFile(files.ready, Common.json("t", t) + "\n");
                    events.write("ev", "ready", "t", t);
                }
            });
        }
        written += n;
    }

    private void run() {
        double rate = Double.parseDouble(opt.get("rate"));
        int maxBatch = Integer.parseInt(opt.get("max-batch"));
        long start = System.nanoTime();
        long sent = 0;
        while (!life.stopping()) {
            long due = (long) Math.floor((System.nanoTime() - start) / 1e9 * rate) - sent;
            if (due <= 0) {
                Common.sleepMs(Math.max(1, Math.min(20, 1000 / rate)));
                continue;
            }
            int n = (int) Math.min(due, maxBatch);
            sent += n;
            send(n);
        }
        producer.flush();
        producer.close();
        out.close();
    }

    public static void main(String[] argv) {
        Map<String, String> opt = Common.options(argv, Common.defaults(
                "name", null,
                "run-dir", null,
                "brokers", null,
                "topic", null,
                "client-id", "",
                "keys", "200",
                "rate", "200",
                "metadata-max-age-ms", "500",
                "max-batch", "500",
                "linger-ms", "5",
                "grace-ms", "15000",
                "log-level", "WARN"));
        Common.logLevel(opt.get("log-level"));
        Producer service = new Producer(opt);
        try {
            service.run();
        } catch (RuntimeException e) {
            e.printStackTrace();
            service.life.finish(1);
        }
        service.life.finish(0);
    }
}
