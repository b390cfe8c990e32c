package io.kstate.control;

import io.kstate.control.Protocol.Layout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Partitioner} that places every record over the topic's <em>live</em> partition count {@code n}
 * (docs/control-protocol.md, section 5): the latest {@code layout/<topic>} record on the control topic when
 * there is one, else the count in the producer's metadata at first use (then kept). Keyed records:
 * {@code Utils.toPositive(Utils.murmur2(keyBytes)) % n}; keyless: round-robin over {@code 0 .. n-1}. A layout
 * with {@code hold} blocks {@code send()} for the topic (inside this partitioner, on the sending thread),
 * waits until everything sent before is delivered (its {@link DeliveryTracker} interceptor counts), then
 * acknowledges {@code held}; the next layout (or {@code hold_until}) releases it.
 *
 * <p>Install both with {@link #install(Properties, String)} (or set {@code partitioner.class} to this class
 * and add {@link DeliveryTracker} to {@code interceptor.classes}). Settings (producer configs, ignored by
 * Kafka): {@code kstate.client.id} (the acknowledgements' {@code client}; default the producer's
 * {@code client.id}), {@code kstate.control.topic} ({@code _kstate_control}), {@code kstate.topics} (topics
 * resolved and acknowledged at start, comma-separated), {@code kstate.check.interval.ms} (200),
 * {@code kstate.held.check.interval.ms} (10), {@code kstate.ensure.control.topic} (true),
 * {@code kstate.timeout.ms} (30000).
 */
public class ControlledPartitioner implements Partitioner {
    public static final String CLIENT_ID = "kstate.client.id";
    public static final String CONTROL_TOPIC = "kstate.control.topic";
    public static final String TOPICS = "kstate.topics";
    public static final String CHECK_INTERVAL_MS = "kstate.check.interval.ms";
    public static final String HELD_CHECK_INTERVAL_MS = "kstate.held.check.interval.ms";
    public static final String ENSURE_CONTROL_TOPIC = "kstate.ensure.control.topic";
    public static final String TIMEOUT_MS = "kstate.timeout.ms";
    /** Pairs the partitioner with its interceptor (both are created by one producer); set by install(). */
    public static final String INSTANCE = "kstate.instance";

    private static final Logger LOG = LoggerFactory.getLogger(ControlledPartitioner.class);
    private static final Map<String, Inflight> INFLIGHT = new ConcurrentHashMap<>();
    private static final Map<String, ControlledPartitioner> BY_CLIENT = new ConcurrentHashMap<>();
    private static final ThreadLocal<long[]> LAST = new ThreadLocal<>();
    private static final String LAYOUT_PREFIX = "layout/";

    /** One hold applied: when it started and ended, how long sends were blocked, whether hold_until ended it. */
    public static final class Hold {
        public final String topic;
        public final long epoch;
        public final int partitions;
        volatile long holdUntil;
        public final long started = System.currentTimeMillis();
        public volatile Long heldAck;
        public volatile Long ended;
        public volatile boolean expired;
        final AtomicLong blockedMs = new AtomicLong();

        Hold(String topic, long epoch, int partitions) {
            this.topic = topic;
            this.epoch = epoch;
            this.partitions = partitions;
        }

        public long blockedMs() {
            return blockedMs.get();
        }

        public Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("topic", topic);
            m.put("epoch", epoch);
            m.put("partitions", partitions);
            m.put("started", started);
            m.put("heldAck", heldAck);
            m.put("ended", ended);
            m.put("blockedMs", blockedMs.get());
            m.put("expired", expired);
            return m;
        }
    }

    /** Records sent (intercepted) and not yet acknowledged, per topic, of one producer. */
    static final class Inflight {
        final Map<String, AtomicLong> count = new ConcurrentHashMap<>();
        volatile boolean tracked;

        void sent(String topic) {
            count.computeIfAbsent(topic, t -> new AtomicLong()).incrementAndGet();
        }

        void done(String topic) {
            count.computeIfAbsent(topic, t -> new AtomicLong()).decrementAndGet();
        }

        long of(String topic) {
            AtomicLong c = count.get(topic);
            return c == null ? 0 : c.get();
        }
    }

    // -- state (guarded by this) ----------------------------------------------------------------------------
    private final Map<String, Layout> layouts = new HashMap<>();
    private final Map<String, Integer> live = new HashMap<>();
    private final Map<String, Long> epochs = new HashMap<>();
    private final Map<String, Hold> held = new HashMap<>();
    private final Map<String, Integer> blocked = new HashMap<>();
    private final Map<String, Integer> metadataCounts = new HashMap<>();
    private final List<Hold> holds = new ArrayList<>();
    private final Map<String, AtomicLong> roundRobin = new ConcurrentHashMap<>();
    /** Acknowledgements the control thread owes: layouts applied at first use, holds not yet delivered. */
    private final ConcurrentLinkedQueue<Layout> owed = new ConcurrentLinkedQueue<>();
    private final Map<String, Layout> heldAckDue = new HashMap<>();

    private String clientId;
    private String instance;
    private String controlTopic;
    private long checkIntervalMs;
    private long heldCheckIntervalMs;
    private long timeoutMs;
    private List<String> startTopics;
    private Inflight inflight;
    private Control.Channel channel;
    private Control.Tail tail;
    /** Publishes an acknowledgement (the control channel; a recorder in the unit tests). */
    private java.util.function.Consumer<Protocol.ControlRecord> publisher;
    /** A topic's partition count from a metadata request of this client (0: unknown). */
    private java.util.function.ToIntFunction<String> metadata;
    private Thread thread;
    private volatile boolean closed;

    public ControlledPartitioner() {}

    /** A partitioner without a broker (unit tests): acknowledgements go to {@code publisher}. */
    ControlledPartitioner(String clientId, java.util.function.Consumer<Protocol.ControlRecord> publisher,
            java.util.function.ToIntFunction<String> metadata, Inflight inflight, List<Control.Entry> controlTopic) {
        this.clientId = clientId;
        this.publisher = publisher;
        this.metadata = metadata;
        this.inflight = inflight;
        this.checkIntervalMs = 200;
        this.heldCheckIntervalMs = 10;
        this.startTopics = List.of();
        absorb(controlTopic, true);
    }

    /**
     * Add the partitioner, its interceptor and a pairing token to {@code props}; set {@code client.id} to
     * {@code clientId} (the acknowledgements' {@code client}) unless given. Returns {@code props}.
     */
    public static Properties install(Properties props, String clientId) {
        props.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, ControlledPartitioner.class.getName());
        String interceptors = String.valueOf(props.getOrDefault(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, "")).trim();
        String tracker = DeliveryTracker.class.getName();
        if (!Arrays.asList(interceptors.split("\\s*,\\s*")).contains(tracker)) {
            props.put(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, interceptors.isEmpty() ? tracker : interceptors + "," + tracker);
        }
        if (clientId != null) {
            props.putIfAbsent(ProducerConfig.CLIENT_ID_CONFIG, clientId);
            props.put(CLIENT_ID, clientId);
        }
        props.put(INSTANCE, UUID.randomUUID().toString());
        return props;
    }

    /** The partitioner of the producer whose acknowledgements carry {@code clientId} (null: none). */
    public static ControlledPartitioner forClient(String clientId) {
        return BY_CLIENT.get(clientId);
    }

    /**
     * {@code [n, epoch]} of the last record this thread's {@code send()} placed through a ControlledPartitioner:
     * the live count it was placed over and the epoch of the layout in use (0: the metadata count).
     */
    public static long[] lastPlacement() {
        return LAST.get();
    }

    static String instanceKey(Map<String, ?> configs) {
        Object token = configs.get(INSTANCE);
        if (token != null) {
            return token.toString();
        }
        Object id = configs.get(ProducerConfig.CLIENT_ID_CONFIG);
        return "client:" + id;
    }

    private static String setting(Map<String, ?> configs, String key, String fallback) {
        Object v = configs.get(key);
        return v == null || v.toString().isEmpty() ? fallback : v.toString();
    }

    @Override
    public void configure(Map<String, ?> configs) {
        Object interceptors = configs.get(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG);
        if (interceptors == null || !interceptors.toString().contains(DeliveryTracker.class.getName())) {
            throw new ConfigException(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, interceptors,
                    "ControlledPartitioner needs " + DeliveryTracker.class.getName() + " among the interceptors "
                            + "(to acknowledge a hold only once everything sent before was delivered): "
                            + "use ControlledPartitioner.install(props, clientId)");
        }
        String producerClientId = setting(configs, ProducerConfig.CLIENT_ID_CONFIG, "");
        clientId = setting(configs, CLIENT_ID, producerClientId.isEmpty() ? defaultClientId() : producerClientId);
        instance = instanceKey(configs);
        controlTopic = setting(configs, CONTROL_TOPIC, Protocol.DEFAULT_CONTROL_TOPIC);
        checkIntervalMs = Long.parseLong(setting(configs, CHECK_INTERVAL_MS, "200"));
        heldCheckIntervalMs = Math.min(checkIntervalMs, Long.parseLong(setting(configs, HELD_CHECK_INTERVAL_MS, "10")));
        timeoutMs = Long.parseLong(setting(configs, TIMEOUT_MS, "30000"));
        startTopics = new ArrayList<>();
        for (String t : setting(configs, TOPICS, "").split(",")) {
            if (!t.isBlank()) {
                startTopics.add(t.trim());
            }
        }
        inflight = INFLIGHT.computeIfAbsent(instance, k -> new Inflight());
        Map<String, Object> connection = Control.connection(configs);
        channel = new Control.Channel(connection, controlTopic, clientId, timeoutMs);
        if (Boolean.parseBoolean(setting(configs, ENSURE_CONTROL_TOPIC, "true"))) {
            channel.ensure();
        }
        tail = new Control.Tail(connection, controlTopic, clientId, timeoutMs);
        publisher = records -> channel.publish(records);
        metadata = tail::partitionCount;
        // read the control topic to its end before the first record is placed (rule 4.1 for producers)
        absorb(tail.catchUp(), true);
        BY_CLIENT.put(clientId, this);
        thread = new Thread(this::follow, "kstate-partitioner-" + clientId);
        thread.setDaemon(true);
        thread.start();
    }

    static String defaultClientId() {
        try {
            return InetAddress.getLocalHost().getHostName() + "-" + ProcessHandle.current().pid();
        } catch (java.io.IOException e) {
            return "java-" + ProcessHandle.current().pid();
        }
    }

    public String clientId() {
        return clientId;
    }

    /** The live partition count of {@code topic} (null: not used yet). */
    public synchronized Integer livePartitions(String topic) {
        return live.get(topic);
    }

    /** The epoch of the layout in use for {@code topic} (0: none, the metadata count). */
    public synchronized long layoutEpoch(String topic) {
        return epochs.getOrDefault(topic, 0L);
    }

    /** True while {@code send()} for {@code topic} is blocked by a hold. */
    public synchronized boolean held(String topic) {
        return held.containsKey(topic);
    }

    /** Sending threads blocked in partition() by a hold of {@code topic}. */
    synchronized int blockedCount(String topic) {
        return blocked.getOrDefault(topic, 0);
    }

    /** Every hold applied, oldest first. */
    public synchronized List<Hold> holds() {
        return List.copyOf(holds);
    }

    // -- placement (the sending thread) ---------------------------------------------------------------------

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
        Integer known = cluster.partitionCountForTopic(topic);
        int meta = known == null ? 0 : known;
        int n;
        long epoch;
        synchronized (this) {
            metadataCounts.merge(topic, meta, Math::max);
            while (true) {
                waitReleased(topic);
                if (live.containsKey(topic)) {
                    break;
                }
                firstUse(topic, meta);
            }
            n = live.get(topic);
            epoch = epochs.getOrDefault(topic, 0L);
        }
        LAST.set(new long[] {n, epoch});
        if (keyBytes == null) {
            long next = roundRobin.computeIfAbsent(topic, t -> new AtomicLong()).getAndIncrement();
            return (int) (next % n);
        }
        return Placement.partitionFor(keyBytes, n);
    }

    /** Block while {@code topic} is held (holds the monitor; wait() releases it). */
    private void waitReleased(String topic) {
        while (held.containsKey(topic) && !closed) {
            Hold hold = held.get(topic);
            long began = System.currentTimeMillis();
            blocked.merge(topic, 1, Integer::sum);
            try {
                wait(heldCheckIntervalMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new org.apache.kafka.common.errors.InterruptException(e);
            } finally {
                blocked.merge(topic, -1, Integer::sum);
                hold.blockedMs.addAndGet(System.currentTimeMillis() - began);
            }
        }
    }

    /** The first record of {@code topic}: the latest layout when the metadata shows its partitions, else the metadata count. */
    private void firstUse(String topic, int meta) {
        if (meta <= 0) {
            throw new org.apache.kafka.common.KafkaException("topic " + topic + " has no partitions in the producer's metadata");
        }
        Layout layout = layouts.get(topic);
        if (layout == null) {
            live.put(topic, meta);
            return;
        }
        // a layout naming more partitions than the metadata shows: min(metadata, partitions) until it does
        live.put(topic, Math.min(meta, layout.partitions()));
        if (meta >= layout.partitions()) {
            applyLocked(layout);
        }
    }

    /** Apply a layout whose partitions the metadata shows (holds the monitor). */
    private void applyLocked(Layout layout) {
        String topic = layout.topic();
        live.put(topic, layout.partitions());
        epochs.put(topic, layout.epoch());
        boolean expired = layout.hold() && layout.holdUntil() > 0 && System.currentTimeMillis() >= layout.holdUntil();
        if (layout.hold() && !expired) {
            Hold current = held.get(topic);
            if (current == null) {
                current = new Hold(topic, layout.epoch(), layout.partitions());
                held.put(topic, current);
                holds.add(current);
                LOG.info("topic {}: producer held (epoch {})", topic, layout.epoch());
            }
            current.holdUntil = layout.holdUntil();
            heldAckDue.put(topic, layout);
        } else {
            unholdLocked(topic, false);
            if (!layout.hold()) {
                owed.add(layout);
            }
        }
        notifyAll();
    }

    private void unholdLocked(String topic, boolean expired) {
        Hold hold = held.remove(topic);
        heldAckDue.remove(topic);
        if (hold != null) {
            hold.ended = System.currentTimeMillis();
            hold.expired = expired;
            if (expired) {
                LOG.warn("topic {}: the hold outlived its hold_until: producing again on the held layout", topic);
            }
            notifyAll();
        }
    }

    // -- the control topic (the partitioner's thread) ---------------------------------------------------

    /** Keep the newest layout per topic; apply it at once to topics in use. */
    private void absorb(List<Control.Entry> entries, boolean catchingUp) {
        for (Control.Entry e : entries) {
            if (!e.key().startsWith(LAYOUT_PREFIX)) {
                continue;
            }
            if (!(e.record() instanceof Layout layout) || !e.key().equals(Protocol.Keys.layout(layout.topic()))) {
                if (catchingUp) { // read from the start, a tombstone or a value to ignore deletes the key's record
                    synchronized (this) {
                        layouts.remove(e.key().substring(LAYOUT_PREFIX.length()));
                    }
                }
                continue;
            }
            synchronized (this) {
                Layout known = layouts.get(layout.topic());
                if (known != null && layout.epoch() <= known.epoch()) {
                    continue;
                }
                layouts.put(layout.topic(), layout);
            }
            if (!catchingUp) {
                trySwitch(layout);
            }
        }
    }

    /**
     * Apply a layout to a topic in use once its partitions exist: the producer's metadata shows them (seen in
     * partition()), or a metadata request of this client does (a Java producer keeps a record for a partition
     * its metadata lacks and refreshes at once; it does not drop it). False: retried every check interval.
     */
    private boolean trySwitch(Layout layout) {
        String topic = layout.topic();
        synchronized (this) {
            if (!live.containsKey(topic) || layout.epoch() <= epochs.getOrDefault(topic, 0L)) {
                return true;
            }
            if (metadataCounts.getOrDefault(topic, 0) >= layout.partitions()) {
                applyLocked(layout);
                return true;
            }
        }
        int count = metadata.applyAsInt(topic);
        synchronized (this) {
            metadataCounts.merge(topic, count, Math::max);
            if (count < layout.partitions()) {
                LOG.warn("topic {}: the metadata lacks partitions of the layout of {} ({}); retrying", topic,
                        layout.partitions(), count);
                return false;
            }
            if (layout.epoch() > epochs.getOrDefault(topic, 0L)) {
                applyLocked(layout);
            }
        }
        return true;
    }

    private void follow() {
        try {
            for (String topic : startTopics) {
                int count = metadata.applyAsInt(topic);
                if (count > 0) {
                    synchronized (this) {
                        metadataCounts.merge(topic, count, Math::max);
                        if (!live.containsKey(topic)) {
                            firstUse(topic, count);
                        }
                    }
                }
            }
        } catch (RuntimeException e) {
            LOG.warn("resolving {}: {}", startTopics, e.toString());
        }
        long nextRetry = 0;
        while (!closed) {
            try {
                boolean hurry;
                synchronized (this) {
                    hurry = !held.isEmpty();
                }
                Control.sleepToNextMultiple(hurry ? heldCheckIntervalMs : checkIntervalMs);
                if (closed) {
                    break;
                }
                List<Control.Entry> fresh = tail.fetchNew();
                boolean retry = System.currentTimeMillis() >= nextRetry;
                if (retry) {
                    nextRetry = System.currentTimeMillis() + checkIntervalMs;
                }
                tick(fresh, retry);
            } catch (InterruptedException e) {
                break;
            } catch (RuntimeException e) {
                if (!closed) {
                    LOG.warn("control topic {}: {}", controlTopic, e.toString());
                }
            }
        }
    }

    /** One look at the control topic: apply what is new, pay the acknowledgements owed, retry, expire holds. */
    void tick(List<Control.Entry> fresh, boolean retry) {
        absorb(fresh, false);
        if (retry) {
            retryWaiting();
        }
        payAcks();
        expireHolds();
    }

    /** Layouts of topics in use not applied yet (their partitions were not in the metadata). */
    private void retryWaiting() {
        List<Layout> waiting = new ArrayList<>();
        synchronized (this) {
            for (Layout l : layouts.values()) {
                if (live.containsKey(l.topic()) && l.epoch() > epochs.getOrDefault(l.topic(), 0L)) {
                    waiting.add(l);
                }
            }
        }
        for (Layout l : waiting) {
            trySwitch(l);
        }
    }

    /** Acknowledge applied layouts, and holds once every record sent before them was delivered. */
    private void payAcks() {
        Layout layout;
        while ((layout = owed.poll()) != null) {
            ack(layout, "layout");
        }
        List<Layout> due = new ArrayList<>();
        synchronized (this) {
            for (Map.Entry<String, Layout> e : heldAckDue.entrySet()) {
                String topic = e.getKey();
                // everything intercepted and not acknowledged by the broker is blocked here, not in flight
                if (inflight.of(topic) <= blocked.getOrDefault(topic, 0)) {
                    due.add(e.getValue());
                }
            }
            for (Layout l : due) {
                heldAckDue.remove(l.topic());
            }
        }
        for (Layout l : due) {
            ack(l, "held");
            synchronized (this) {
                Hold hold = held.get(l.topic());
                if (hold != null && hold.heldAck == null) {
                    hold.heldAck = System.currentTimeMillis();
                }
            }
        }
    }

    private void expireHolds() {
        synchronized (this) {
            long now = System.currentTimeMillis();
            for (String topic : new ArrayList<>(held.keySet())) {
                Hold hold = held.get(topic);
                if (hold.holdUntil > 0 && now >= hold.holdUntil) {
                    unholdLocked(topic, true);
                }
            }
        }
    }

    /** The acknowledgement of a layout ({@code layout} or {@code held}) this producer writes. */
    static Protocol.Ack ackRecord(String clientId, Layout layout, String state) {
        return Protocol.ack(clientId, layout.epoch(), state, "", layout.topic(), layout.partitions());
    }

    private void ack(Layout layout, String state) {
        try {
            publisher.accept(ackRecord(clientId, layout, state));
        } catch (RuntimeException e) {
            LOG.warn("topic {}: could not acknowledge {}: {}", layout.topic(), state, e.toString());
        }
    }

    @Override
    public void close() {
        closed = true;
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(5000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (this) {
            for (String topic : new ArrayList<>(held.keySet())) {
                unholdLocked(topic, false);
            }
        }
        if (tail != null) {
            tail.close();
        }
        if (channel != null) {
            channel.close();
        }
        if (instance != null) {
            INFLIGHT.remove(instance);
        }
    }

    /** Topics this partitioner placed records of. */
    public synchronized Set<String> topics() {
        return new LinkedHashSet<>(live.keySet());
    }

    /**
     * The interceptor that counts what a producer sent and the broker has not acknowledged yet, per topic, so
     * the partitioner acknowledges a hold only once every record sent before it was delivered (or failed).
     */
    public static class DeliveryTracker implements ProducerInterceptor<Object, Object> {
        private Inflight inflight;

        @Override
        public void configure(Map<String, ?> configs) {
            inflight = INFLIGHT.computeIfAbsent(instanceKey(configs), k -> new Inflight());
            inflight.tracked = true;
        }

        @Override
        public ProducerRecord<Object, Object> onSend(ProducerRecord<Object, Object> record) {
            inflight.sent(record.topic());
            return record;
        }

        @Override
        public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
            if (metadata != null) {
                inflight.done(metadata.topic());
            }
        }

        @Override
        public void close() {}
    }
}
