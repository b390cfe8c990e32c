package io.kstate.control.apps;

import com.fasterxml.jackson.databind.JsonNode;
import io.kstate.control.ControlledPartitioner;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A keyed producer for the integration tests, with the ControlledPartitioner ("controlled": true, the
 * default) or Kafka's default partitioner (false).
 *
 * <pre>java ... io.kstate.control.apps.Produce '{"brokers": "...", "topic": "t", "clientId": "p", "keys": 200,
 *     "rate": 300, "burst": 0, "controlTopic": "_kstate_control", "controlled": true, "metadataMaxAgeMs": 500}'</pre>
 *
 * Writes {"key": k, "seq": n} round-robin over {@code keys} keys at {@code rate} records per second after an
 * initial {@code burst}; per key, seq increases by one with every record. Events on stdout: started {n, epoch},
 * sent {key, seq, p, o, n, epoch} per delivered record, failed {key, seq, error}, closed {written, holds}.
 * "stop" on stdin (or its end) stops, flushes, closes and exits.
 */
public final class Produce {
    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        JsonNode config = Common.config(args);
        String topic = config.get("topic").asText();
        String clientId = config.get("clientId").asText();
        boolean controlled = config.path("controlled").asBoolean(true);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Common.brokers(config));
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        // "idempotent": false for a producer that writes to a partition the moment it exists: on Apache Kafka
        // 4.4 an idempotent producer whose first request to a brand-new partition got NOT_LEADER_OR_FOLLOWER
        // while a later one was appended retries the first with OUT_OF_ORDER_SEQUENCE_NUMBER until its
        // delivery timeout (KAFKA-15591, fixed after 4.4): one in flight keeps its order without idempotence.
        boolean idempotent = config.path("idempotent").asBoolean(true);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotent);
        if (!idempotent) {
            props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
        }
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, config.path("metadataMaxAgeMs").asInt(300_000));
        if (controlled) {
            ControlledPartitioner.install(props, clientId);
            props.put(ControlledPartitioner.CONTROL_TOPIC, config.path("controlTopic").asText("_kstate_control"));
            props.put(ControlledPartitioner.TOPICS, topic);
            props.put(ControlledPartitioner.CHECK_INTERVAL_MS, config.path("checkIntervalMs").asText("100"));
        }
        int keyCount = config.path("keys").asInt(200);
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < keyCount; i++) {
            keys.add(String.format("k%04d", i));
        }
        double rate = config.path("rate").asDouble(300);
        int burst = config.path("burst").asInt(0);

        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            ControlledPartitioner partitioner = controlled ? ControlledPartitioner.forClient(clientId) : null;
            int n = producer.partitionsFor(topic).size();
            long epoch = 0;
            if (partitioner != null) {
                while (partitioner.livePartitions(topic) == null) { // resolved by its thread at start
                    Thread.sleep(5);
                }
                n = partitioner.livePartitions(topic);
                epoch = partitioner.layoutEpoch(topic);
            }
            Common.emit("started", "n", n, "epoch", epoch);
            Common.commands(line -> {
                if (line.equals("stop")) {
                    stopping = true;
                }
            }, () -> stopping = true);

            Map<String, Long> nextSeq = new HashMap<>();
            long written = 0;
            long started = System.currentTimeMillis();
            long sent = 0;
            while (!stopping) {
                long due = burst + (long) ((System.currentTimeMillis() - started) / 1000.0 * rate) - sent;
                if (due <= 0) {
                    Thread.sleep(2);
                    continue;
                }
                for (long i = 0; i < due && !stopping; i++) {
                    String key = keys.get((int) (written % keys.size()));
                    long seq = nextSeq.merge(key, 1L, Long::sum) - 1;
                    written++;
                    sent++;
                    String value = Common.JSON.writeValueAsString(Map.of("key", key, "seq", seq));
                    long[] layout = new long[2]; // [n, epoch] of the placement; the callback waits for it
                    synchronized (layout) {
                        producer.send(new ProducerRecord<>(topic, key, value), (md, ex) -> {
                            synchronized (layout) {
                                if (ex != null) {
                                    Common.emit("failed", "key", key, "seq", seq, "error", ex.toString());
                                } else {
                                    Common.emit("sent", "key", key, "seq", seq, "p", md.partition(), "o", md.offset(),
                                            "n", layout[0], "epoch", layout[1], "ts", md.timestamp());
                                }
                            }
                        });
                        long[] placed = ControlledPartitioner.lastPlacement();
                        layout[0] = controlled && placed != null ? placed[0] : n;
                        layout[1] = controlled && placed != null ? placed[1] : 0;
                    }
                }
            }
            producer.flush();
            List<Map<String, Object>> holds = new ArrayList<>();
            if (partitioner != null) {
                partitioner.holds().forEach(h -> holds.add(h.toMap()));
            }
            Common.emit("closed", "written", written, "holds", holds);
        }
        System.exit(0);
    }
}
