package io.kstate.control.apps;

import com.fasterxml.jackson.databind.JsonNode;
import io.kstate.control.ControlledConsumer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Members of one consumer group for the integration tests: ControlledConsumers ("controlled": true, the
 * default) or plain KafkaConsumers with auto-commit (false).
 *
 * <pre>java ... io.kstate.control.apps.Consume '{"brokers": "...", "groupId": "g", "topics": ["t"],
 *     "members": [{"clientId": "g-0", "workMs": 5}], "controlTopic": "_kstate_control", "range": true,
 *     "autoOffsetReset": "earliest", "groupProtocol": "classic", "assignor": "cooperative-sticky"}'</pre>
 *
 * Each member (a thread) processes a record in {@code workMs} (a sleep). Events on stdout: started {c, state,
 * epoch}, state {c, state}, assigned {c, assignment}, revoked {c, revoked} (ControlledConsumers), record {c, p,
 * o, key, seq}, closed {c, passages}.
 * "close" on stdin (or its end) closes every member and exits.
 */
public final class Consume {
    private static volatile boolean closing;

    public static void main(String[] args) throws Exception {
        JsonNode config = Common.config(args);
        List<String> topics = new ArrayList<>();
        config.get("topics").forEach(t -> topics.add(t.asText()));
        JsonNode members = config.get("members");
        CountDownLatch done = new CountDownLatch(members.size());
        List<Thread> threads = new ArrayList<>();
        for (JsonNode m : members) {
            Thread t = new Thread(() -> {
                try {
                    run(config, topics, m.get("clientId").asText(), m.path("workMs").asLong(0));
                } catch (Throwable e) {
                    e.printStackTrace();
                    Common.emit("error", "c", m.get("clientId").asText(), "error", e.toString());
                } finally {
                    done.countDown();
                }
            }, m.get("clientId").asText());
            threads.add(t);
            t.start();
        }
        Common.commands(line -> {
            if (line.equals("close")) {
                closing = true;
            }
        }, () -> closing = true);
        done.await();
        System.exit(0);
    }

    static Map<String, Object> consumerConfig(JsonNode config, String clientId) {
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Common.brokers(config));
        c.put(ConsumerConfig.GROUP_ID_CONFIG, config.get("groupId").asText());
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, config.path("autoOffsetReset").asText("earliest"));
        c.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, config.path("metadataMaxAgeMs").asInt(300_000));
        String protocol = config.path("groupProtocol").asText("classic");
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
            c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
            if (config.path("range").asBoolean(false)) {
                c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
            } else if (config.path("assignor").asText("").equals("cooperative-sticky")) {
                c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
            }
        }
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 50);
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        return c;
    }

    static void process(String clientId, ConsumerRecords<String, String> records, long workMs) throws InterruptedException {
        for (ConsumerRecord<String, String> r : records) {
            if (workMs > 0) {
                Thread.sleep(workMs);
            }
            Map<String, Object> v = Common.parseValue(r.value());
            Common.emit("record", "c", clientId, "p", r.partition(), "o", r.offset(), "key", v.get("key"),
                    "seq", v.get("seq"));
        }
    }

    static Map<String, List<Integer>> byTopic(Collection<TopicPartition> tps) {
        Map<String, List<Integer>> out = new TreeMap<>();
        for (TopicPartition tp : tps) {
            out.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        out.values().forEach(l -> l.sort(null));
        return out;
    }

    static void run(JsonNode config, List<String> topics, String clientId, long workMs) throws Exception {
        Map<String, Object> conf = consumerConfig(config, clientId);
        if (!config.path("controlled").asBoolean(true)) {
            try (KafkaConsumer<String, String> plain = new KafkaConsumer<>(conf)) {
                plain.subscribe(topics, new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        Common.emit("assigned", "c", clientId, "assignment", byTopic(plain.assignment()));
                    }
                });
                Common.emit("started", "c", clientId, "state", "running", "epoch", 0);
                while (!closing) {
                    process(clientId, plain.poll(Duration.ofMillis(100)), workMs);
                }
            }
            Common.emit("closed", "c", clientId, "passages", List.of());
            return;
        }
        ControlledConsumer.Options options = new ControlledConsumer.Options()
                .clientId(clientId)
                .controlTopic(config.path("controlTopic").asText("_kstate_control"))
                .checkIntervalMs(config.path("checkIntervalMs").asLong(100))
                .autoCommitIntervalMs(config.path("autoCommitIntervalMs").asLong(200))
                .onStateChange(state -> Common.emit("state", "c", clientId, "state", state))
                .onAssign(assignment -> Common.emit("assigned", "c", clientId, "assignment", assignment))
                .onRevoke(revoked -> Common.emit("revoked", "c", clientId, "revoked", revoked));
        ControlledConsumer<String, String> consumer = new ControlledConsumer<>(conf, topics, options);
        Common.emit("started", "c", clientId, "state", consumer.state(), "epoch", consumer.epoch());
        try {
            while (!closing) {
                process(clientId, consumer.poll(Duration.ofMillis(100)), workMs);
            }
        } finally {
            consumer.close();
            List<Map<String, Object>> passages = new ArrayList<>();
            consumer.passages().forEach(p -> passages.add(p.toMap()));
            Common.emit("closed", "c", clientId, "passages", passages);
        }
    }
}
