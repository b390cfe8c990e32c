package io.kstate.control;

import io.kstate.control.Barriers.Action;
import io.kstate.control.Barriers.Applied;
import io.kstate.control.Barriers.Ended;
import io.kstate.control.Protocol.Barrier;
import io.kstate.control.Protocol.Command;
import io.kstate.control.Protocol.ControlRecord;
import io.kstate.control.Protocol.Release;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KafkaConsumer} that honours the kstate control protocol (docs/control-protocol.md, sections 4 and
 * 5a). The application calls {@link #poll(Duration)} in its loop as usual; records returned by one poll are
 * taken as processed at the next call (as Kafka's auto-commit does): the wrapper commits them every
 * {@code autoCommitIntervalMs}, at a barrier, on a revoke and before leaving ({@code enable.auto.commit} is
 * forced off). Control records are read by a background thread on the multiples of {@code checkIntervalMs}
 * on the wall clock and applied in the polling thread, between two polls:
 *
 * <ul>
 *   <li><b>pause</b>: commit what was handed out, close the inner consumer (LeaveGroup), ack {@code paused};
 *       if that commit met a rebalance, ack {@code left}, commit the same offsets without membership once the
 *       group is EMPTY, then ack {@code paused};
 *       {@code poll} returns nothing while paused;
 *   <li><b>resume</b>: a new inner consumer subscribes (joins) and the wrapper acks {@code running};
 *   <li><b>barrier</b>: no record at or past {@code B[p]} is handed out; the partition is paused (and the
 *       fetch position set back to the first record not handed out) until the group's committed offsets pass
 *       the barrier or the release arrives.
 *   <li><b>a position on every partition</b> (rule 4.7): on assignment, a partition on which the group has no
 *       committed offset gets its start (where auto.offset.reset puts it: {@code position()}) committed
 *       synchronously in the rebalance listener, before anything is fetched from it; one whose start cannot be
 *       read yet is paused and tried again at each look until it is committed or revoked. After a grow's
 *       {@code pending} barrier carrying {@code grown_from}, a new partition's start is offset 0, committed
 *       without a lookup (it is empty until the producers switch; its leader may still be loading);
 *   <li><b>new partitions at once</b> (rule 4.8): on the classic protocol, a {@code pending} barrier naming
 *       the group with a {@code partitions} count the consumer's metadata lacks: the metadata is refreshed (a
 *       ListOffsets of the missing partitions makes the consumer update it) until it shows the count (bounded
 *       by {@code timeoutMs}), then {@code enforceRebalance()}: the group rejoins at once (with the
 *       cooperative-sticky assignor only the new partitions move); on KIP-848 nothing (the broker assigns them
 *       at the member's next heartbeat).
 * </ul>
 *
 * <p>Not thread-safe, like KafkaConsumer: one thread polls. The Kafka {@code client.id} is the
 * acknowledgements' {@code client} (set from {@link Options#clientId} when the config has none).
 */
public class ControlledConsumer<K, V> implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ControlledConsumer.class);
    private static final long PAUSED_FAST_MS = 10_000;
    private static final long PENDING_FAST_MS = 30_000;
    /** How long the rebalance listener waits for the starts of partitions without a committed offset. */
    private static final long SEED_CALLBACK_MS = 2_000;

    /** Options of the wrapper (everything else is the KafkaConsumer's config). */
    public static final class Options {
        String clientId;
        String controlTopic = Protocol.DEFAULT_CONTROL_TOPIC;
        long checkIntervalMs = 200;
        long pausedCheckIntervalMs = 10;
        long autoCommitIntervalMs = 1000;
        boolean ensureControlTopic = true;
        long timeoutMs = 30_000;
        Consumer<String> onStateChange = s -> {};
        Consumer<ControlledConsumer<?, ?>> onPause = c -> {};
        Consumer<Map<String, List<Integer>>> onAssign = a -> {};
        Consumer<Map<String, List<Integer>>> onRevoke = a -> {};

        /** The acknowledgements' client and the Kafka client.id (default: client.id, else host-pid). */
        public Options clientId(String v) {
            clientId = v;
            return this;
        }

        public Options controlTopic(String v) {
            controlTopic = v;
            return this;
        }

        /** Look at the control topic this often (wall clock multiples); default 200 ms. */
        public Options checkIntervalMs(long v) {
            checkIntervalMs = v;
            return this;
        }

        /** ... and this often for 10 s after a pause and 30 s after a barrier is announced; default 10 ms. */
        public Options pausedCheckIntervalMs(long v) {
            pausedCheckIntervalMs = v;
            return this;
        }

        /** Commit what was handed out at least this often; default 1000 ms. */
        public Options autoCommitIntervalMs(long v) {
            autoCommitIntervalMs = v;
            return this;
        }

        public Options ensureControlTopic(boolean v) {
            ensureControlTopic = v;
            return this;
        }

        /** Bound of start-up reads, acknowledgements and the commit after leaving; default 30 s. */
        public Options timeoutMs(long v) {
            timeoutMs = v;
            return this;
        }

        /** Called with "running" / "paused". */
        public Options onStateChange(Consumer<String> v) {
            onStateChange = v;
            return this;
        }

        /** Called on a pause before the commit (flush a batch the application keeps). */
        public Options onPause(Consumer<ControlledConsumer<?, ?>> v) {
            onPause = v;
            return this;
        }

        /** Called with {topic: partitions} after every assignment change. */
        public Options onAssign(Consumer<Map<String, List<Integer>>> v) {
            onAssign = v;
            return this;
        }

        /** Called with {topic: partitions} revoked (or lost) from this member, before they go. */
        public Options onRevoke(Consumer<Map<String, List<Integer>>> v) {
            onRevoke = v;
            return this;
        }
    }

    private final Map<String, Object> config;
    private final List<String> topics;
    private final Options options;
    private final String group;
    private final String clientId;
    private final String commandKey;
    private final Barriers barriers;
    private final NewPartitions growth;
    private final boolean kip848;
    private final Control.Channel channel;
    private final Control.Tail tail;
    private final LinkedBlockingQueue<Control.Entry> incoming = new LinkedBlockingQueue<>();
    private final Thread follower;
    private final Map<String, Object> connection;

    private volatile long fastUntil;
    private volatile boolean closed;
    private KafkaConsumer<K, V> inner;
    private long epoch;
    private String wanted;
    private boolean leaving;
    /** The offset after the last record handed out, per partition (this membership). */
    private final Map<TopicPartition, Long> next = new HashMap<>();
    /** The offset this membership committed last, per partition. */
    private final Map<TopicPartition, Long> committed = new HashMap<>();
    private long lastCommit;
    private boolean commitNow;
    private long nextReleaseCheck;
    /** Partitions assigned without a committed offset whose start could not be committed yet (paused). */
    private final Set<TopicPartition> unseeded = new HashSet<>();

    /**
     * Read the control topic to its end, then join the group unless its latest command is pause.
     *
     * @param config the KafkaConsumer config ({@code group.id} required; deserializers, bootstrap, ...)
     * @param topics the topics to subscribe to
     */
    public ControlledConsumer(Map<String, Object> config, Collection<String> topics, Options options) {
        this.options = options;
        this.topics = List.copyOf(topics);
        Object g = config.get(ConsumerConfig.GROUP_ID_CONFIG);
        if (g == null || g.toString().isEmpty()) {
            throw new IllegalArgumentException("group.id is required");
        }
        if (config.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG) != null) {
            throw new IllegalArgumentException("static membership (group.instance.id) cannot take part: a static "
                    + "member does not leave its group on close (docs/control-protocol.md, rule 4.5)");
        }
        this.group = g.toString();
        Object kafkaClientId = config.get(ConsumerConfig.CLIENT_ID_CONFIG);
        if (options.clientId != null && kafkaClientId != null && !options.clientId.equals(kafkaClientId.toString())) {
            throw new IllegalArgumentException("clientId " + options.clientId + " differs from client.id " + kafkaClientId
                    + ": the plan matches members by it");
        }
        this.clientId = options.clientId != null ? options.clientId
                : kafkaClientId != null ? kafkaClientId.toString() : ControlledPartitioner.defaultClientId();
        this.config = new HashMap<>(config);
        this.config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        this.config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        this.commandKey = Protocol.Keys.command(group);
        this.barriers = new Barriers(group, this.topics);
        this.growth = new NewPartitions(group, this.topics);
        Object protocol = config.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG);
        this.kip848 = protocol != null && protocol.toString().equalsIgnoreCase("consumer");
        this.connection = Control.connection(config);
        this.channel = new Control.Channel(connection, options.controlTopic, clientId, options.timeoutMs);
        if (options.ensureControlTopic) {
            channel.ensure();
        }
        this.tail = new Control.Tail(connection, options.controlTopic, clientId, options.timeoutMs);
        start(tail.catchUp());
        this.follower = new Thread(this::follow, "kstate-consumer-" + clientId);
        this.follower.setDaemon(true);
        this.follower.start();
    }

    private void start(List<Control.Entry> entries) {
        Command latest = null;
        for (Control.Entry e : entries) {
            ControlRecord r = e.record();
            if (r instanceof Barrier || r instanceof Release) {
                barrierRecord(r, false);
            } else if (e.key().equals(commandKey)) {
                if (r == null) {
                    latest = null; // a tombstone (or a value to ignore) deletes the instruction
                } else if (r instanceof Command c && c.group().equals(group)) {
                    latest = latest == null || c.epoch() > latest.epoch() ? c : latest;
                }
            }
        }
        epoch = latest == null ? 0 : latest.epoch();
        if (latest != null && latest.pause()) {
            LOG.info("group {} is paused (epoch {}): starting without joining", group, epoch);
            hurry(PAUSED_FAST_MS);
            options.onStateChange.accept("paused");
            ack("paused", epoch, "");
        } else {
            join();
            ack("running", epoch, ""); // the presence acknowledgement, also without any command (epoch 0)
        }
    }

    // -- public surface ------------------------------------------------------------------------------------

    public String clientId() {
        return clientId;
    }

    public String group() {
        return group;
    }

    /** "running" or "paused". */
    public String state() {
        return inner == null ? "paused" : "running";
    }

    /** The epoch of the last command applied (0: none). */
    public long epoch() {
        return epoch;
    }

    /** The inner consumer while running (null while paused): for calls the wrapper does not offer. */
    public KafkaConsumer<K, V> inner() {
        return inner;
    }

    /** The key-order barriers this consumer went through (or keeps now), oldest first. */
    public List<Barriers.Passage> passages() {
        return barriers.passages();
    }

    /** {topic: partitions} held here at a key-order barrier. */
    public Map<String, List<Integer>> heldPartitions() {
        Map<String, List<Integer>> out = new TreeMap<>();
        barriers.held.forEach((t, ps) -> {
            if (!ps.isEmpty()) {
                out.put(t, new ArrayList<>(ps));
            }
        });
        return out;
    }

    /**
     * Apply what the control topic said, then poll the inner consumer (in slices of the check interval, so a
     * command is applied within one); the records returned stop before any barrier. Empty while paused.
     */
    public ConsumerRecords<K, V> poll(Duration timeout) {
        long deadline = System.currentTimeMillis() + timeout.toMillis();
        while (true) {
            applyControl();
            long left = deadline - System.currentTimeMillis();
            if (inner == null) {
                if (left <= 0) {
                    return ConsumerRecords.empty();
                }
                try { // out of the group: wait for the next control record (or the timeout)
                    Thread.sleep(Math.max(1, Math.min(left, options.pausedCheckIntervalMs)));
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    return ConsumerRecords.empty();
                }
                continue;
            }
            seedPending();
            takeNewPartitions();
            commitIfDue();
            releaseCheck();
            ConsumerRecords<K, V> got = inner.poll(Duration.ofMillis(Math.max(0, Math.min(left, options.checkIntervalMs))));
            ConsumerRecords<K, V> out = handOut(got);
            if (!out.isEmpty() || System.currentTimeMillis() >= deadline) {
                return out;
            }
        }
    }

    /** Commit what was handed out so far (synchronously). */
    public void commitSync() {
        if (inner != null) {
            commit(false);
        }
    }

    /** Stop following the control topic, commit what was handed out and leave the group. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        follower.interrupt();
        try {
            follower.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (inner != null) {
            leave(false);
        }
        tail.close();
        channel.close();
    }

    // -- the control topic -----------------------------------------------------------------------------

    private void hurry(long ms) {
        fastUntil = ms > 0 ? System.currentTimeMillis() + ms : 0;
    }

    private void follow() {
        while (!closed) {
            try {
                boolean fast = System.currentTimeMillis() < fastUntil;
                Control.sleepToNextMultiple(fast ? Math.min(options.pausedCheckIntervalMs, options.checkIntervalMs)
                        : options.checkIntervalMs);
                if (closed) {
                    break;
                }
                incoming.addAll(tail.fetchNew());
            } catch (InterruptedException e) {
                break;
            } catch (RuntimeException e) {
                if (!closed) {
                    LOG.warn("control topic {}: {}", options.controlTopic, e.toString());
                }
            }
        }
    }

    /** Apply the control records read since the last poll, then bring the membership to the last command. */
    private void applyControl() {
        Control.Entry e;
        while ((e = incoming.poll()) != null) {
            ControlRecord r = e.record();
            if (r == null) {
                continue;
            }
            if (e.key().equals(commandKey) && r instanceof Command c) {
                if (!c.group().equals(group) || c.epoch() <= epoch) {
                    continue; // stale or replayed
                }
                epoch = c.epoch();
                wanted = c.pause() ? "paused" : "running";
            } else if (r instanceof Barrier || r instanceof Release) {
                barrierRecord(r, true);
            }
        }
        reconcile();
    }

    private void reconcile() {
        if (wanted == null) {
            return;
        }
        try {
            if (wanted.equals("paused") && inner != null) {
                leave(true);
            }
            if (wanted.equals("running") && inner == null) {
                join();
            }
        } catch (RuntimeException ex) {
            LOG.warn("group {}: could not apply {} (epoch {}), retrying: {}", group, wanted, epoch, ex.toString());
            return;
        }
        String state = wanted;
        wanted = null;
        ack(state, epoch, "");
    }

    private void barrierRecord(ControlRecord record, boolean ack) {
        if (record instanceof Release release) {
            if (!barriers.onRelease(release)) {
                return;
            }
            resume(barriers.end(release.topic(), "controller"));
            if (ack) {
                ack("released", release.epoch(), release.topic());
            }
            return;
        }
        Barrier barrier = (Barrier) record;
        Applied applied = barriers.onBarrier(barrier);
        resume(applied.ended());
        if (applied.action() == Action.PENDING) {
            hurry(PENDING_FAST_MS);
            if (ack && growth.onGrown(barrier)) { // on both protocols: KIP-848 assigns them too
                LOG.info("group {}: {} grew from {} to {} partitions: the new ones start at 0", group, barrier.topic(),
                        barrier.grownFrom(), barrier.partitions());
            }
            if (ack && inner != null && barrier.partitions() > 0 && !kip848) { // KIP-848: the broker assigns them
                int count = metadataCount(barrier.topic());
                if (growth.onPending(barrier, count, System.currentTimeMillis(), options.timeoutMs)) {
                    LOG.info("group {}: {} has {} partitions, the consumer's metadata {}: taking the new ones now",
                            group, barrier.topic(), barrier.partitions(), count);
                }
            }
            if (ack) {
                ack("pending", barrier.epoch(), barrier.topic());
            }
        } else if (applied.action() == Action.HOLD) {
            LOG.info("group {}: key-order barrier of {} (epoch {}): holding at {}", group, barrier.topic(),
                    barrier.epoch(), barrier.offsets());
            nextReleaseCheck = 0;
            if (inner != null) {
                holdReached(barrier.topic(), assigned(barrier.topic()));
            }
            if (ack) {
                ack("barrier", barrier.epoch(), barrier.topic());
            }
        }
    }

    private void resume(Ended ended) {
        if (ended == null || ended.held().isEmpty() || inner == null) {
            return;
        }
        List<TopicPartition> tps = new ArrayList<>();
        Set<TopicPartition> assignment = inner.assignment();
        for (int p : ended.held()) {
            TopicPartition tp = new TopicPartition(ended.barrier().topic(), p);
            if (assignment.contains(tp) && !unseeded.contains(tp)) {
                tps.add(tp);
            }
        }
        inner.resume(tps);
        LOG.info("group {}: passed the key-order barrier of {} (epoch {})", group, ended.barrier().topic(),
                ended.barrier().epoch());
    }

    /** Every check interval while a barrier is kept: release it once the group committed past it. */
    private void releaseCheck() {
        if (barriers.active.isEmpty() || inner == null || System.currentTimeMillis() < nextReleaseCheck) {
            return;
        }
        nextReleaseCheck = System.currentTimeMillis() + options.checkIntervalMs;
        for (Map.Entry<String, Barrier> e : barriers.active().entrySet()) {
            Barrier barrier = e.getValue();
            Map<Integer, Long> offsets = committedOffsets(e.getKey(), barrier.offsets().size());
            if (offsets != null && Barriers.passed(barrier, offsets)) {
                resume(barriers.end(e.getKey(), "committed"));
                ack("released", barrier.epoch(), e.getKey());
            }
        }
    }

    private Map<Integer, Long> committedOffsets(String topic, int partitions) {
        Set<TopicPartition> tps = new HashSet<>();
        for (int p = 0; p < partitions; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        try {
            Map<Integer, Long> out = new HashMap<>();
            inner.committed(tps, Duration.ofMillis(options.timeoutMs)).forEach((tp, om) -> {
                if (om != null) {
                    out.put(tp.partition(), om.offset());
                }
            });
            return out;
        } catch (KafkaException ex) {
            LOG.debug("committed offsets of {}: {}", group, ex.toString());
            return null;
        }
    }

    /** The acknowledgement this consumer writes: of a command ({@code topic} "") or of a barrier. */
    static Protocol.Ack ackRecord(String clientId, String group, long ackEpoch, String state, String topic) {
        return Protocol.ack(clientId, ackEpoch, state, group, topic, 0);
    }

    private void ack(String state, long ackEpoch, String topic) {
        try {
            channel.publish(ackRecord(clientId, group, ackEpoch, state, topic));
        } catch (RuntimeException ex) {
            LOG.warn("group {}: could not acknowledge {}: {}", group, state, ex.toString());
        }
    }

    // -- membership ------------------------------------------------------------------------------------

    private void join() {
        next.clear();
        committed.clear();
        unseeded.clear();
        growth.clear(); // a new membership reads fresh metadata
        lastCommit = System.currentTimeMillis();
        KafkaConsumer<K, V> consumer = new KafkaConsumer<>(config);
        try {
            consumer.subscribe(topics, new Listener());
        } catch (RuntimeException ex) {
            consumer.close(CloseOptions.timeout(Duration.ZERO));
            throw ex;
        }
        inner = consumer;
        hurry(0);
        options.onStateChange.accept("running");
    }

    /**
     * Leave the group: commit what was handed out (as a member), close the inner consumer (LeaveGroup). If that
     * commit failed (the group was rebalancing: another member left first), commit the same offsets without
     * membership once the broker accepts it (the group is EMPTY); never move a committed offset backwards.
     */
    private void leave(boolean pausing) {
        leaving = true;
        try {
            if (pausing) {
                options.onPause.accept(this);
            }
            Map<TopicPartition, OffsetAndMetadata> leftover = uncommitted();
            if (!leftover.isEmpty()) {
                try {
                    inner.commitSync(leftover, Duration.ofMillis(options.timeoutMs));
                    leftover = Map.of();
                } catch (KafkaException ex) {
                    LOG.info("group {}: commit before leaving failed ({}); committing once EMPTY", group, ex.toString());
                }
            }
            KafkaConsumer<K, V> consumer = inner;
            inner = null;
            barriers.forgetHeld();
            next.clear();
            committed.clear();
            unseeded.clear();
            try {
                // LeaveGroup: the broker reports EMPTY once every member left (rule 4.3)
                consumer.close(CloseOptions.timeout(Duration.ofMillis(options.timeoutMs))
                        .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            } catch (KafkaException ex) {
                LOG.warn("group {}: close: {}", group, ex.toString());
            }
            if (!leftover.isEmpty()) {
                if (pausing) {
                    // out of the group, the commit still to land (once EMPTY): "left" lets the controller remove
                    // a member the coordinator still lists (its LeaveGroup lost in a broker fault) instead of
                    // the commit and the group waiting for each other until the session ends (rule 4.3)
                    ack("left", epoch, "");
                }
                commitWithoutMembership(leftover);
            }
        } finally {
            leaving = false;
        }
        if (pausing) {
            hurry(PAUSED_FAST_MS);
            options.onStateChange.accept("paused");
        }
    }

    /** An OffsetCommit with generation -1 and no member id (a consumer of the group that never subscribes). */
    private void commitWithoutMembership(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> conf = new HashMap<>(connection);
        conf.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        conf.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-kstate-commit");
        conf.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + options.timeoutMs;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(conf)) {
            while (true) {
                try {
                    Map<TopicPartition, OffsetAndMetadata> now = c.committed(offsets.keySet(), Duration.ofMillis(options.timeoutMs));
                    Map<TopicPartition, OffsetAndMetadata> ahead = new HashMap<>();
                    offsets.forEach((tp, om) -> {
                        OffsetAndMetadata have = now.get(tp);
                        if (have == null || have.offset() < om.offset()) {
                            ahead.put(tp, om);
                        }
                    });
                    if (!ahead.isEmpty()) {
                        c.commitSync(ahead, Duration.ofMillis(options.timeoutMs));
                    }
                    LOG.info("group {}: committed {} after leaving", group, ahead);
                    return;
                } catch (KafkaException ex) {
                    if (System.currentTimeMillis() > deadline) {
                        LOG.warn("group {}: could not commit {} after leaving: {}", group, offsets, ex.toString());
                        return;
                    }
                    Thread.sleep(5); // the broker takes it once the group is EMPTY: within ms of the last leave
                }
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    // -- records and commits ---------------------------------------------------------------------------

    private Map<TopicPartition, OffsetAndMetadata> uncommitted() {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        next.forEach((tp, offset) -> {
            if (offset > committed.getOrDefault(tp, -1L)) {
                out.put(tp, new OffsetAndMetadata(offset));
            }
        });
        return out;
    }

    private void commit(boolean quiet) {
        Map<TopicPartition, OffsetAndMetadata> offsets = uncommitted();
        if (offsets.isEmpty()) {
            return;
        }
        try {
            inner.commitSync(offsets, Duration.ofMillis(options.timeoutMs));
            offsets.forEach((tp, om) -> committed.put(tp, om.offset()));
            lastCommit = System.currentTimeMillis();
        } catch (KafkaException ex) {
            if (!quiet) {
                throw ex;
            }
            LOG.info("group {}: commit failed ({}); retried at the next", group, ex.toString());
        }
    }

    /** What the previous polls handed out is processed now: commit it when due or at a barrier. */
    private void commitIfDue() {
        if (commitNow || System.currentTimeMillis() - lastCommit >= options.autoCommitIntervalMs) {
            commitNow = false;
            lastCommit = System.currentTimeMillis();
            commit(true);
        }
    }

    /**
     * The records of {@code got} below the barrier of their partition. At the barrier the partition is
     * paused and its fetch position set to the first record not handed out (the next fetch after the release
     * starts there).
     */
    private ConsumerRecords<K, V> handOut(ConsumerRecords<K, V> got) {
        if (got.isEmpty()) {
            return got;
        }
        Map<TopicPartition, List<ConsumerRecord<K, V>>> out = new LinkedHashMap<>();
        Map<TopicPartition, OffsetAndMetadata> nextOffsets = new HashMap<>();
        for (TopicPartition tp : got.partitions()) {
            List<ConsumerRecord<K, V>> records = got.records(tp);
            long limit = barriers.limit(tp.topic(), tp.partition());
            List<ConsumerRecord<K, V>> mine = new ArrayList<>(records.size());
            Long cut = null;
            if (barriers.isHeld(tp.topic(), tp.partition())) {
                cut = records.get(0).offset();
            } else {
                for (ConsumerRecord<K, V> r : records) {
                    if (r.offset() >= limit) { // never hand out a record at or past the barrier
                        cut = r.offset();
                        break;
                    }
                    mine.add(r);
                }
            }
            if (!mine.isEmpty()) {
                long after = mine.get(mine.size() - 1).offset() + 1;
                next.put(tp, after);
                out.put(tp, mine);
                nextOffsets.put(tp, new OffsetAndMetadata(after));
                if (after >= limit) { // the last record before the barrier: hold, commit at the next poll
                    cut = cut == null ? after : cut;
                }
            }
            if (cut != null) {
                inner.seek(tp, cut);
                hold(tp.topic(), List.of(tp.partition()));
                commitNow = true;
            }
        }
        return new ConsumerRecords<>(out, nextOffsets);
    }

    private void hold(String topic, Collection<Integer> partitions) {
        List<Integer> fresh = barriers.hold(topic, partitions);
        if (!fresh.isEmpty() && inner != null) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p : fresh) {
                tps.add(new TopicPartition(topic, p));
            }
            inner.pause(tps);
        }
    }

    private List<Integer> assigned(String topic) {
        List<Integer> out = new ArrayList<>();
        if (inner != null) {
            for (TopicPartition tp : inner.assignment()) {
                if (tp.topic().equals(topic)) {
                    out.add(tp.partition());
                }
            }
        }
        return out;
    }

    /**
     * Pause those of {@code partitions} whose position (the offset after the last record handed out, else the
     * committed offset, else where auto.offset.reset puts it) is at or past the barrier; a partition without
     * a committed offset that starts at or past it gets that offset committed, so the group can pass.
     */
    private void holdReached(String topic, List<Integer> partitions) {
        Barrier barrier = barriers.active(topic);
        if (barrier == null || partitions.isEmpty() || inner == null) {
            return;
        }
        Set<TopicPartition> tps = new HashSet<>();
        for (int p : partitions) {
            tps.add(new TopicPartition(topic, p));
        }
        Map<TopicPartition, OffsetAndMetadata> have = inner.committed(tps, Duration.ofMillis(options.timeoutMs));
        List<Integer> at = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> seed = new HashMap<>();
        for (TopicPartition tp : tps) {
            Long position = next.get(tp);
            OffsetAndMetadata c = have.get(tp);
            if (position == null && c != null) {
                position = c.offset();
            }
            boolean started = position != null;
            if (position == null) {
                position = inner.position(tp, Duration.ofMillis(options.timeoutMs));
            }
            if (position >= barrier.offset(tp.partition())) {
                at.add(tp.partition());
                if (!started) {
                    seed.put(tp, new OffsetAndMetadata(position));
                }
            }
        }
        hold(topic, at);
        if (!seed.isEmpty()) {
            inner.commitSync(seed, Duration.ofMillis(options.timeoutMs));
            seed.forEach((tp, om) -> committed.put(tp, om.offset()));
        }
    }

    /** Commits on revoke, re-holds on assignment (paused state does not survive a reassignment). */
    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                options.onRevoke.accept(byTopic(partitions));
            }
            if (!leaving && inner != null) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                uncommitted().forEach((tp, om) -> {
                    if (partitions.contains(tp)) {
                        offsets.put(tp, om);
                    }
                });
                if (!offsets.isEmpty()) {
                    try {
                        inner.commitSync(offsets, Duration.ofMillis(options.timeoutMs));
                        offsets.forEach((tp, om) -> committed.put(tp, om.offset()));
                    } catch (KafkaException ex) {
                        LOG.info("group {}: commit on revoke failed: {}", group, ex.toString());
                    }
                }
            }
            forget(partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                options.onRevoke.accept(byTopic(partitions));
            }
            forget(partitions);
        }

        private void forget(Collection<TopicPartition> partitions) {
            for (TopicPartition tp : partitions) {
                next.remove(tp);
                committed.remove(tp);
                unseeded.remove(tp);
                java.util.Set<Integer> h = barriers.held.get(tp.topic());
                if (h != null) {
                    h.remove(tp.partition());
                }
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (inner == null) {
                return;
            }
            seed(partitions, SEED_CALLBACK_MS); // rule 4.7: before anything is fetched from them
            Map<String, List<Integer>> byTopic = new TreeMap<>();
            for (TopicPartition tp : partitions) {
                byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
            }
            for (Map.Entry<String, List<Integer>> e : byTopic.entrySet()) {
                Barrier barrier = barriers.active(e.getKey());
                if (barrier == null) {
                    continue;
                }
                List<Integer> fresh = new ArrayList<>();
                for (int p : e.getValue()) {
                    if (barrier.offset(p) == 0) {
                        fresh.add(p); // new partitions (B = 0) at once
                    }
                }
                hold(e.getKey(), fresh);
                try {
                    holdReached(e.getKey(), e.getValue());
                } catch (KafkaException ex) {
                    LOG.warn("group {}: barrier on assignment: {}", group, ex.toString());
                }
            }
            options.onAssign.accept(byTopic(inner.assignment()));
        }
    }

    private static Map<String, List<Integer>> byTopic(Collection<TopicPartition> partitions) {
        Map<String, List<Integer>> out = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            out.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        out.values().forEach(l -> l.sort(null));
        return out;
    }

    // -- rule 4.7: a position on every partition it is assigned ----------------------------------------

    /**
     * Commit, synchronously, the start (where auto.offset.reset puts the consumer: {@code position()}, one
     * ListOffsets for all of them; offset 0 without asking on a new partition of an announced grow:
     * {@link NewPartitions#starts}) of those of {@code partitions} on which the group has no committed offset;
     * never where it has one. A partition whose start (or committed offset) cannot be read within
     * {@code boundMs}, or whose commit failed, is paused and tried again at each look ({@link #seedPending}).
     */
    private void seed(Collection<TopicPartition> partitions, long boundMs) {
        if (inner == null || partitions.isEmpty()) {
            return;
        }
        Set<TopicPartition> tps = new HashSet<>(partitions);
        long deadline = System.currentTimeMillis() + boundMs;
        Set<TopicPartition> later = new HashSet<>();
        Map<TopicPartition, OffsetAndMetadata> have;
        try {
            have = inner.committed(tps, Duration.ofMillis(boundMs));
        } catch (KafkaException ex) {
            LOG.info("group {}: committed offsets of {} not read yet ({}); tried again", group, tps, ex.toString());
            have = null;
            later.addAll(tps);
        }
        if (have != null) {
            List<TopicPartition> bare = new ArrayList<>();
            for (TopicPartition tp : tps) {
                if (have.get(tp) == null) {
                    bare.add(tp);
                }
            }
            Map<TopicPartition, Long> starts = growth.starts(bare, tp -> resetPosition(tp, deadline, later));
            Map<TopicPartition, OffsetAndMetadata> seeds = NewPartitions.seeds(tps, have, starts);
            if (!seeds.isEmpty()) {
                try {
                    inner.commitSync(seeds, Duration.ofMillis(options.timeoutMs));
                    seeds.forEach((tp, om) -> committed.put(tp, om.offset()));
                    LOG.info("group {}: committed the start of {} (rule 4.7)", group, seeds);
                } catch (KafkaException ex) {
                    LOG.info("group {}: commit of the start of {} failed ({}); tried again", group, seeds.keySet(),
                            ex.toString());
                    later.addAll(seeds.keySet());
                }
            }
        }
        List<TopicPartition> resume = new ArrayList<>();
        for (TopicPartition tp : tps) {
            if (later.contains(tp)) {
                if (unseeded.add(tp)) {
                    inner.pause(List.of(tp)); // nothing fetched from it before its start is committed
                }
            } else if (unseeded.remove(tp) && !barriers.isHeld(tp.topic(), tp.partition())) {
                resume.add(tp);
            }
        }
        if (!resume.isEmpty()) {
            inner.resume(resume);
        }
    }

    /**
     * Where auto.offset.reset puts the consumer on {@code tp} (a ListOffsets, bounded by {@code deadline});
     * null when there is nothing to commit now: {@code none} (the application places the consumer) or not
     * read yet (added to {@code later}).
     */
    private Long resetPosition(TopicPartition tp, long deadline, Set<TopicPartition> later) {
        try {
            return inner.position(tp, Duration.ofMillis(Math.max(1, deadline - System.currentTimeMillis())));
        } catch (NoOffsetForPartitionException ex) {
            return null; // auto.offset.reset=none: the application places the consumer; nothing to commit here
        } catch (KafkaException ex) {
            later.add(tp); // e.g. a new partition whose leader is still loading
            return null;
        }
    }

    /** At each look: the partitions whose start is not committed yet, again. */
    private void seedPending() {
        if (unseeded.isEmpty() || inner == null) {
            return;
        }
        unseeded.retainAll(inner.assignment());
        if (!unseeded.isEmpty()) {
            seed(new ArrayList<>(unseeded), options.checkIntervalMs);
        }
    }

    // -- rule 4.8: take new partitions at once ---------------------------------------------------------

    /** The partition count of {@code topic} in the consumer's metadata (0 when it cannot tell). */
    private int metadataCount(String topic) {
        try {
            List<org.apache.kafka.common.PartitionInfo> parts = inner.partitionsFor(topic,
                    Duration.ofMillis(options.checkIntervalMs));
            return parts == null ? 0 : parts.size();
        } catch (KafkaException ex) {
            return 0;
        }
    }

    /**
     * Classic protocol, at each look while a topic is a target: refresh the consumer's metadata until it shows
     * the count (a ListOffsets of the partitions it lacks: the consumer requests a metadata update for a
     * partition without a known leader and waits for it), bounded by {@code timeoutMs}; then rejoin at once
     * ({@code enforceRebalance}). Measured on Apache Kafka 4.4 with kafka-clients 4.4 (cooperative-sticky):
     * subscribing again to the same topics does nothing (the subscription did not change), and
     * {@code enforceRebalance()} alone rejoins without assigning a new partition (no metadata was refreshed);
     * the refresh alone makes the group's leader rejoin (its metadata changed), the refresh and the rejoin are
     * faster. On KIP-848 nothing is done: the broker assigns them at the member's next heartbeat.
     */
    private void takeNewPartitions() {
        if (growth.isEmpty() || inner == null) {
            return;
        }
        List<String> reached = new ArrayList<>();
        for (Map.Entry<String, NewPartitions.Target> e : growth.targets().entrySet()) {
            String topic = e.getKey();
            int want = e.getValue().partitions();
            int count = metadataCount(topic);
            if (count < want) {
                try {
                    inner.endOffsets(NewPartitions.range(topic, count, want), Duration.ofMillis(options.checkIntervalMs));
                } catch (KafkaException ex) {
                    LOG.debug("group {}: metadata of {} not refreshed yet: {}", group, topic, ex.toString());
                }
                count = metadataCount(topic);
            }
            String outcome = growth.check(topic, count, System.currentTimeMillis());
            if (outcome.equals("reached")) {
                reached.add(topic);
            } else if (outcome.equals("expired")) {
                LOG.warn("group {}: the metadata of {} still shows {} of {} partitions after {} ms; the group takes "
                        + "the new ones at its next metadata refresh", group, topic, count, want, options.timeoutMs);
            }
        }
        if (!reached.isEmpty()) {
            LOG.info("group {}: metadata shows the new partitions of {}: rejoining now", group, reached);
            inner.enforceRebalance("kstate: new partitions of " + reached + " (control protocol rule 4.8)");
        }
    }
}
