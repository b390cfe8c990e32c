package io.kstate.fleet;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A plain consumer-group member on the reference client (KafkaConsumer of kafka-clients): the "foreign"
 * Java service of issue 30, the counterpart of {@code support/node/consumer.js} (no kstate control protocol).
 *
 * <pre>
 *   java io.kstate.fleet.Consumer --name NAME --run-dir DIR --brokers HOST:PORT --topic T --group G
 *        [--group-protocol classic|consumer] [--auto-offset-reset latest] [--delay-ms 0]
 *        [--auto-commit false|true] [--commit-interval-ms 200]
 * </pre>
 *
 * <p>{@code --group-protocol consumer} is KIP-848: the broker assigns (on the member's next heartbeat), and
 * the client's classic settings ({@code session.timeout.ms}, {@code heartbeat.interval.ms},
 * {@code partition.assignment.strategy}) are refused by the client, so they are set only under
 * {@code classic} ({@code --remote-assignor} names a broker assignor under {@code consumer}). A partition
 * without a committed offset starts at {@code --auto-offset-reset} (latest by default: the KAFKA-12261 danger
 * when partitions are added under it). Each record sleeps {@code --delay-ms} (a processing time), then
 * {"p","o","key","seq","t"} is appended to DIR/NAME.jsonl; processed offsets are committed every
 * {@code --commit-interval-ms}, on revocation and at the stop (at least once). Metadata is refreshed every
 * {@code --metadata-max-age-ms}.
 *
 * <p>{@code --auto-commit true} leaves the commits to the client instead ({@code enable.auto.commit=true},
 * {@code auto.commit.interval.ms} = {@code --commit-interval-ms}; this service commits nothing itself): the
 * client commits the position of every partition it is assigned, one without a record too (the reset
 * position, offset 0 on a new partition no one wrote to yet), which is the evidence issue 41's
 * {@code committing_groups} relies on. Records are processed inside the poll loop, so a position the client
 * commits at the next poll is one processed (at least once, as with the manual commits).
 *
 * <p>DIR/NAME.pid holds its pid while it runs; DIR/NAME.ready exists while it holds a settled assignment
 * (written with the whole assignment at each onPartitionsAssigned, which both protocols call at the end of
 * every rebalance or reconciliation, even with nothing added; removed when partitions are revoked or lost
 * and at SIGTERM);
 * DIR/NAME.events.jsonl logs start/join/rebalancing/lost/stop/exit with times (a rebalancing or lost event
 * names the partitions it took away, {@code "partitions"}). SIGTERM stops it cleanly: the
 * record in hand is finished, processed offsets are committed, the member leaves the group, and the process
 * exits 0 (1 when that did not finish within {@code --grace-ms}).
 */
public final class Consumer {
    private final Map<String, String> opt;
    private final Common.ServiceFiles files;
    private final Common.Lines out;
    private final Common.Lines events;
    private final KafkaConsumer<String, String> consumer;
    private final Common.Lifecycle life;
    private final boolean classic;
    /** {@code --auto-commit true}: the client commits (enable.auto.commit), this service never does. */
    private final boolean autoCommit;
    /** Next offset to commit per partition: what this member processed and has not seen revoked. */
    private final Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
    private boolean dirty;

    private Consumer(Map<String, String> opt) {
        this.opt = opt;
        String protocol = opt.get("group-protocol");
        if (!protocol.equals("classic") && !protocol.equals("consumer")) {
            throw new IllegalArgumentException("--group-protocol is classic or consumer, not " + protocol);
        }
        classic = protocol.equals("classic");
        autoCommit = autoCommit(opt);
        files = new Common.ServiceFiles(opt.get("run-dir"), opt.get("name"));
        out = new Common.Lines(files.out);
        events = new Common.Lines(files.events);
        consumer = new KafkaConsumer<>(properties(opt, classic));
        life = new Common.Lifecycle(files, events, consumer::wakeup, Long.parseLong(opt.get("grace-ms")));
    }

    static Properties properties(Map<String, String> opt, boolean classic) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("brokers"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, opt.get("client-id").isEmpty() ? opt.get("name") : opt.get("client-id"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, opt.get("group-protocol"));
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, opt.get("auto-offset-reset"));
        if (autoCommit(opt)) {
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
            p.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, opt.get("commit-interval-ms"));
        } else {
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, opt.get("metadata-max-age-ms"));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, opt.get("max-wait-ms"));
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opt.get("max-poll-records"));
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, opt.get("rebalance-timeout-ms"));
        p.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        if (classic) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opt.get("session-timeout-ms"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opt.get("heartbeat-interval-ms"));
            if (!opt.get("assignor").isEmpty()) {
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, opt.get("assignor"));
            }
        } else if (!opt.get("remote-assignor").isEmpty()) {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, opt.get("remote-assignor"));
        }
        return p;
    }

    static boolean autoCommit(Map<String, String> opt) {
        String value = opt.get("auto-commit");
        if (!value.equals("true") && !value.equals("false")) {
            throw new IllegalArgumentException("--auto-commit is true or false, not " + value);
        }
        return value.equals("true");
    }

    /** The partitions of {@code partitions} of the topic, sorted. */
    private List<Integer> numbers(Collection<TopicPartition> partitions) {
        TreeSet<Integer> out = new TreeSet<>();
        for (TopicPartition tp : partitions) {
            if (tp.topic().equals(opt.get("topic"))) {
                out.add(tp.partition());
            }
        }
        return List.copyOf(out);
    }

    /** The partitions of the topic this member holds now, sorted. */
    private List<Integer> held() {
        return numbers(consumer.assignment());
    }

    /** A settled assignment: log it and write the ready marker (not while stopping). */
    private void join() {
        double t = Common.now();
        String member = consumer.groupMetadata().memberId();
        int generation = consumer.groupMetadata().generationId();
        List<Integer> assigned = held();
        events.write("ev", "join", "t", t, "member", member, "generation", generation, "assigned", assigned);
        if (!life.stopping()) {
            Common.writeFile(files.ready, Common.json("t", t, "member", member, "assigned", assigned) + "\n");
        }
    }

    private final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (classic || !partitions.isEmpty()) {
                Common.remove(files.ready);
                events.write("ev", "rebalancing", "t", Common.now(), "revoked", partitions.size(),
                        "partitions", numbers(partitions));
            }
            commit(partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            join();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            Common.remove(files.ready);
            events.write("ev", "lost", "t", Common.now(), "lost", partitions.size(),
                    "partitions", numbers(partitions));
            for (TopicPartition tp : partitions) {
                processed.remove(tp);
            }
        }
    };

    /** Commit what was processed of {@code partitions} (synchronously: they are being revoked) and forget it. */
    private void commit(Collection<TopicPartition> partitions) {
        if (autoCommit) {
            return; // the client commits the revoked partitions' positions itself before it lets them go
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : partitions) {
            OffsetAndMetadata o = processed.remove(tp);
            if (o != null) {
                offsets.put(tp, o);
            }
        }
        if (!offsets.isEmpty()) {
            commitSync(offsets);
        }
    }

    private void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        for (int attempt = 0; attempt < 2; attempt++) {
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(10));
                return;
            } catch (WakeupException e) {
                // the stop's wakeup, consumed here: commit again
            } catch (KafkaException e) {
                events.write("ev", "commit-failed", "t", Common.now(), "error", e.toString());
                return;
            }
        }
    }

    private void process(ConsumerRecord<String, String> record) {
        Common.sleepMs(Double.parseDouble(opt.get("delay-ms")));
        String value = record.value();
        String key = Common.keyOf(value);
        out.write("p", record.partition(), "o", record.offset(), "key", key != null ? key : record.key(),
                "seq", Common.seqOf(value), "t", Common.now());
        processed.put(new TopicPartition(record.topic(), record.partition()),
                new OffsetAndMetadata(record.offset() + 1));
        dirty = true;
    }

    private void run() {
        long interval = Long.parseLong(opt.get("commit-interval-ms"));
        long lastCommit = System.nanoTime();
        consumer.subscribe(List.of(opt.get("topic")), listener);
        try {
            while (!life.stopping()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<String, String> record : records) {
                    if (life.stopping()) {
                        break;
                    }
                    process(record);
                }
                if (!autoCommit && dirty && System.nanoTime() - lastCommit >= interval * 1_000_000L) {
                    consumer.commitAsync(new HashMap<>(processed), null);
                    dirty = false;
                    lastCommit = System.nanoTime();
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: stop below
        }
        if (!autoCommit) {
            commitSync(new HashMap<>(processed));
        }
        consumer.close(CloseOptions.timeout(Duration.ofMillis(Long.parseLong(opt.get("grace-ms")))));
        out.close();
    }

    public static void main(String[] argv) {
        Map<String, String> opt = Common.options(argv, Common.defaults(
                "name", null,
                "run-dir", null,
                "brokers", null,
                "topic", null,
                "group", null,
                "client-id", "",
                "group-protocol", "classic",
                "auto-offset-reset", "latest",
                "delay-ms", "0",
                "session-timeout-ms", "6000",
                "heartbeat-interval-ms", "500",
                "rebalance-timeout-ms", "10000",
                "max-wait-ms", "100",
                "metadata-max-age-ms", "500",
                "commit-interval-ms", "200",
                "auto-commit", "false",
                "max-poll-records", "100",
                "assignor", "",
                "remote-assignor", "",
                "grace-ms", "15000",
                "log-level", "WARN"));
        Common.logLevel(opt.get("log-level"));
        Consumer service = new Consumer(opt);
        try {
            service.run();
        } catch (RuntimeException e) {
            e.printStackTrace();
            service.life.finish(1);
        }
        service.life.finish(0);
    }
}
