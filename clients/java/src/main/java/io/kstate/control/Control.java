package io.kstate.control;

import io.kstate.control.Protocol.ControlRecord;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The control topic: the connection settings the control clients share with the application's client,
 * publishing records ({@link Channel}) and reading partition 0 without a group ({@link Tail}).
 */
public final class Control {
    private Control() {}

    /** A key and its decoded value ({@code null}: a tombstone or a value to ignore). */
    public record Entry(String key, ControlRecord record) {}

    /**
     * The settings of {@code config} that say how to reach the cluster (bootstrap, security, DNS): what the
     * control clients of a producer or consumer take from it.
     */
    public static Map<String, Object> connection(Map<String, ?> config) {
        Map<String, Object> out = new HashMap<>();
        for (Map.Entry<String, ?> e : config.entrySet()) {
            String k = e.getKey();
            if (k.equals("bootstrap.servers") || k.equals("security.protocol") || k.startsWith("sasl.")
                    || k.startsWith("ssl.") || k.equals("client.dns.lookup") || k.equals("metadata.recovery.strategy")) {
                out.put(k, e.getValue());
            }
        }
        return out;
    }

    /** Sleep until the next multiple of {@code intervalMs} on the wall clock (all members look at once). */
    static void sleepToNextMultiple(long intervalMs) throws InterruptedException {
        long now = System.currentTimeMillis();
        Thread.sleep(Math.max(1, intervalMs - now % intervalMs));
    }

    /** Publishes records on the control topic (acks=all, idempotent) and creates the topic when missing. */
    public static final class Channel implements AutoCloseable {
        private final Map<String, Object> connection;
        private final String topic;
        private final String clientId;
        private final long timeoutMs;
        private KafkaProducer<String, String> producer;

        public Channel(Map<String, Object> connection, String topic, String clientId, long timeoutMs) {
            this.connection = connection;
            this.topic = topic;
            this.clientId = clientId;
            this.timeoutMs = timeoutMs;
        }

        /** Create the control topic (one partition, compacted, LogAppendTime) unless it exists. */
        public void ensure() {
            Map<String, Object> conf = new HashMap<>(connection);
            conf.put("client.id", clientId + "-kstate-admin");
            try (Admin admin = Admin.create(conf)) {
                if (admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS).contains(topic)) {
                    return;
                }
                NewTopic t = new NewTopic(topic, 1, (short) -1).configs(Protocol.CONTROL_TOPIC_CONFIG);
                admin.createTopics(List.of(t)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw new KafkaException("cannot create the control topic " + topic, e.getCause());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KafkaException("interrupted", e);
            } catch (TimeoutException e) {
                throw new KafkaException("cannot create the control topic " + topic + " within " + timeoutMs + " ms", e);
            }
        }

        /** Write records on partition 0 and wait until the broker has them all. */
        public synchronized void publish(ControlRecord... records) {
            if (producer == null) {
                Map<String, Object> conf = new HashMap<>(connection);
                conf.put(ProducerConfig.CLIENT_ID_CONFIG, clientId + "-kstate-control");
                conf.put(ProducerConfig.ACKS_CONFIG, "all");
                conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
                conf.put(ProducerConfig.LINGER_MS_CONFIG, 0);
                conf.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                conf.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                producer = new KafkaProducer<>(conf);
            }
            List<java.util.concurrent.Future<?>> sent = new ArrayList<>();
            for (ControlRecord r : records) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, r.key(), Protocol.encode(r))));
            }
            try {
                for (java.util.concurrent.Future<?> f : sent) {
                    f.get(timeoutMs, TimeUnit.MILLISECONDS);
                }
            } catch (ExecutionException e) {
                throw new KafkaException("cannot publish on " + topic, e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KafkaException("interrupted", e);
            } catch (TimeoutException e) {
                throw new KafkaException("cannot publish on " + topic + " within " + timeoutMs + " ms", e);
            }
        }

        @Override
        public synchronized void close() {
            if (producer != null) {
                producer.close(Duration.ofMillis(timeoutMs));
                producer = null;
            }
        }
    }

    /**
     * Follows partition 0 of the control topic with a consumer that has no group and never commits: one
     * ListOffsets per look, a fetch only when the end moved. Not thread-safe: one thread uses it.
     */
    public static final class Tail implements AutoCloseable {
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final TopicPartition partition;
        private final long timeoutMs;
        private long position;

        public Tail(Map<String, Object> connection, String topic, String clientId, long timeoutMs) {
            Map<String, Object> conf = new HashMap<>(connection);
            conf.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-kstate-tail");
            conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
            conf.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            conf.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 50);
            conf.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
            conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            this.consumer = new KafkaConsumer<>(conf);
            this.partition = new TopicPartition(topic, 0);
            this.timeoutMs = timeoutMs;
            long deadline = System.currentTimeMillis() + timeoutMs;
            // a just-created control topic may take a moment to appear in the metadata
            while (consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs)).isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new KafkaException("control topic " + topic + " not found");
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new KafkaException("interrupted", e);
                }
            }
            consumer.assign(List.of(partition));
        }

        /** The end offset of partition 0 now. */
        public long end() {
            return consumer.endOffsets(Set.of(partition), Duration.ofMillis(timeoutMs)).get(partition);
        }

        /** Read from offset 0 to the current end, in log order. */
        public List<Entry> catchUp() {
            position = 0;
            consumer.seek(partition, 0);
            return readTo(end());
        }

        /** The records appended since the last read (nothing after one ListOffsets when nothing is new). */
        public List<Entry> fetchNew() {
            long high = end();
            return high > position ? readTo(high) : List.of();
        }

        private List<Entry> readTo(long high) {
            List<Entry> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (position < high) {
                if (System.currentTimeMillis() > deadline) {
                    throw new KafkaException("control topic " + partition.topic() + ": read timed out at "
                            + position + "/" + high);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    if (r.offset() < position) {
                        continue;
                    }
                    String key = r.key() == null ? "" : new String(r.key(), java.nio.charset.StandardCharsets.UTF_8);
                    out.add(new Entry(key, Protocol.decode(r.value())));
                    position = r.offset() + 1;
                }
                // compaction and transaction markers leave gaps: the consumer's position passes them
                position = Math.max(position, consumer.position(partition, Duration.ofMillis(timeoutMs)));
            }
            return out;
        }

        /** The partition count of {@code topic} from a metadata request of this client (0: unknown). */
        public int partitionCount(String topic) {
            List<PartitionInfo> parts = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs));
            return parts == null ? 0 : parts.size();
        }

        @Override
        public void close() {
            consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofMillis(Math.min(timeoutMs, 5000))));
        }
    }
}
