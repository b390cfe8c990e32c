package io.kstate.fleet;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A plain share-group member on the reference client (KafkaShareConsumer, KIP-932): the same files and
 * JSON lines as {@link Consumer}, for a share group.
 *
 * <pre>
 *   java io.kstate.fleet.ShareConsumer --name NAME --run-dir DIR --brokers HOST:PORT --topic T --group G
 *        [--delay-ms 0] [--ack-mode implicit|explicit] [--share-auto-offset-reset ""|latest|earliest]
 * </pre>
 *
 * <p>Where a share group starts on a partition is the group's config {@code share.auto.offset.reset}
 * (latest by default), not the client's: {@code --share-auto-offset-reset} sets it on the group through the
 * Admin API before subscribing, as a user would with {@code kafka-configs --entity-type groups}; empty (the
 * default) leaves the group's config alone. Each record sleeps {@code --delay-ms}, then
 * {"p","o","key","seq","t","n"} is appended to DIR/NAME.jsonl ({@code n}: the broker's delivery count);
 * records are acknowledged as ACCEPT (implicitly on the next poll, or explicitly one by one) and the
 * acknowledgements committed every {@code --commit-interval-ms} and at the stop. At SIGTERM an implicit
 * member finishes the records of its last poll (all of them are accepted at the commit); an explicit one
 * releases those not yet in hand.
 *
 * <p>A share member has no assignment in the client's API: DIR/NAME.ready is written (and a join event
 * with {@code "assigned": null} logged) after its first poll returned as a subscribed member. SIGTERM:
 * the record in hand is finished, acknowledgements committed, the member leaves, the process exits 0.
 */
public final class ShareConsumer {
    private final Map<String, String> opt;
    private final Common.ServiceFiles files;
    private final Common.Lines out;
    private final Common.Lines events;
    private final KafkaShareConsumer<String, String> consumer;
    private final Common.Lifecycle life;
    private final boolean explicit;

    private ShareConsumer(Map<String, String> opt) {
        this.opt = opt;
        String mode = opt.get("ack-mode");
        if (!mode.equals("implicit") && !mode.equals("explicit")) {
            throw new IllegalArgumentException("--ack-mode is implicit or explicit, not " + mode);
        }
        explicit = mode.equals("explicit");
        files = new Common.ServiceFiles(opt.get("run-dir"), opt.get("name"));
        out = new Common.Lines(files.out);
        events = new Common.Lines(files.events);
        consumer = new KafkaShareConsumer<>(properties(opt));
        life = new Common.Lifecycle(files, events, consumer::wakeup, Long.parseLong(opt.get("grace-ms")));
    }

    static Properties properties(Map<String, String> opt) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("brokers"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, opt.get("client-id").isEmpty() ? opt.get("name") : opt.get("client-id"));
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, opt.get("ack-mode"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, opt.get("metadata-max-age-ms"));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, opt.get("max-wait-ms"));
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opt.get("max-poll-records"));
        return p;
    }

    /** Set the group's {@code share.auto.offset.reset} (what a user does with kafka-configs). */
    private void groupConfig(String reset) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("brokers"));
        try (Admin admin = Admin.create(p)) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, opt.get("group"));
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", reset),
                    AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(group, List.of(op))).all().get(30, TimeUnit.SECONDS);
        }
        events.write("ev", "group-config", "t", Common.now(), "share.auto.offset.reset", reset);
    }

    private void process(ConsumerRecord<String, String> record) {
        Common.sleepMs(Double.parseDouble(opt.get("delay-ms")));
        String value = record.value();
        String key = Common.keyOf(value);
        out.write("p", record.partition(), "o", record.offset(), "key", key != null ? key : record.key(),
                "seq", Common.seqOf(value), "t", Common.now(), "n", record.deliveryCount().orElse(null));
        if (explicit) {
            consumer.acknowledge(record);
        }
    }

    private void commit() {
        for (int attempt = 0; attempt < 2; attempt++) {
            try {
                consumer.commitSync(Duration.ofSeconds(10));
                return;
            } catch (WakeupException e) {
                // the stop's wakeup, consumed here: commit again
            } catch (KafkaException e) {
                events.write("ev", "commit-failed", "t", Common.now(), "error", e.toString());
                return;
            }
        }
    }

    private void run() throws Exception {
        if (!opt.get("share-auto-offset-reset").isEmpty()) {
            groupConfig(opt.get("share-auto-offset-reset"));
        }
        long interval = Long.parseLong(opt.get("commit-interval-ms"));
        long lastCommit = System.nanoTime();
        boolean ready = false;
        consumer.subscribe(List.of(opt.get("topic")));
        try {
            while (!life.stopping()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                if (!ready) {
                    ready = true;
                    double t = Common.now();
                    events.write("ev", "join", "t", t, "member", "", "assigned", null);
                    if (!life.stopping()) {
                        Common.writeFile(files.ready, Common.json("t", t) + "\n");
                    }
                }
                for (ConsumerRecord<String, String> record : records) {
                    if (explicit && life.stopping()) {
                        consumer.acknowledge(record, AcknowledgeType.RELEASE); // back to the group at once
                    } else {
                        process(record); // implicit mode accepts the whole batch: finish it
                    }
                }
                if (System.nanoTime() - lastCommit >= interval * 1_000_000L) {
                    consumer.commitAsync();
                    lastCommit = System.nanoTime();
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: stop below
        }
        commit();
        consumer.close(Duration.ofMillis(Long.parseLong(opt.get("grace-ms"))));
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
                "delay-ms", "0",
                "ack-mode", "implicit",
                "share-auto-offset-reset", "",
                "max-wait-ms", "100",
                "metadata-max-age-ms", "500",
                "commit-interval-ms", "200",
                "max-poll-records", "100",
                "grace-ms", "15000",
                "log-level", "WARN"));
        Common.logLevel(opt.get("log-level"));
        ShareConsumer service = new ShareConsumer(opt);
        try {
            service.run();
        } catch (Exception e) {
            e.printStackTrace();
            service.life.finish(1);
        }
        service.life.finish(0);
    }
}
