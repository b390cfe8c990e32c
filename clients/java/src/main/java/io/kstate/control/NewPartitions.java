package io.kstate.control;

import io.kstate.control.Protocol.Barrier;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The consumer's side of rules 4.7 and 4.8 (docs/control-protocol.md), without I/O: which offsets a consumer
 * commits on assignment (a position on every partition it is assigned, only where the group has none) and
 * which topics it must take new partitions of now (a {@code pending} barrier naming its group with a
 * {@code partitions} count its metadata lacks). After such a barrier carrying {@code grown_from}, the new
 * partitions start at offset 0 without a lookup: nothing is written there before the producers switch, and
 * their leaders may still be loading (seconds for thousands of new partitions), which would hold the
 * rebalance callback and the application's poll. {@link ControlledConsumer} reads offsets, refreshes
 * metadata, commits and rejoins. Not thread-safe: used from the consumer's polling thread.
 */
public final class NewPartitions {
    /** A topic to grow to {@code partitions} in the consumer's metadata, given up at {@code deadline} (ms). */
    public record Target(int partitions, long deadline) {}

    /** A grow announced to this consumer: partitions {@code from .. to-1} of the topic are new. */
    public record Grown(int from, int to) {
        boolean holds(int partition) {
            return partition >= from && partition < to;
        }
    }

    private final String group;
    private final Set<String> topics;
    private final Map<String, Target> targets = new TreeMap<>();
    /** Per topic, the latest grow announced (kept across memberships: it is about the topic, not the group). */
    private final Map<String, Grown> grown = new HashMap<>();

    public NewPartitions(String group, Collection<String> topics) {
        this.group = group;
        this.topics = Set.copyOf(topics);
    }

    /**
     * Rule 4.7: the offsets to commit for {@code assigned}: each partition's start ({@code starts}, where
     * auto.offset.reset puts it) where {@code committed} has no offset. A partition with a committed offset is
     * never committed here (a committed offset never moves backwards); one without a start (not resolved yet)
     * is left out (tried again at the next look).
     */
    public static Map<TopicPartition, OffsetAndMetadata> seeds(Collection<TopicPartition> assigned,
            Map<TopicPartition, OffsetAndMetadata> committed, Map<TopicPartition, Long> starts) {
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        for (TopicPartition tp : assigned) {
            Long start = starts.get(tp);
            if (committed.get(tp) == null && start != null && start >= 0) {
                out.put(tp, new OffsetAndMetadata(start));
            }
        }
        return out;
    }

    /**
     * Rule 4.7: where each of {@code bare} (assigned, no committed offset) starts. A new partition of an
     * announced grow ({@link #onGrown}) starts at 0, without calling {@code lookup}: it holds no record until
     * the producers switch, and its leader may be loading. Every other partition keeps the lookup (where
     * auto.offset.reset puts the consumer); one it answers null for is left out (tried again later).
     */
    public Map<TopicPartition, Long> starts(Collection<TopicPartition> bare, Function<TopicPartition, Long> lookup) {
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        for (TopicPartition tp : bare) {
            Long start = isNew(tp) ? Long.valueOf(0L) : lookup.apply(tp); // boxed: a null lookup stays null
            if (start != null) {
                out.put(tp, start);
            }
        }
        return out;
    }

    /**
     * Rules 4.7 and 4.8: a {@code pending} barrier of a topic this consumer reads that names its group and
     * carries {@code 0 < grownFrom < partitions} makes partitions {@code grownFrom .. partitions-1} new (the
     * producers are pinned to the old count, so they are empty). It replaces an earlier grow of the topic.
     * True when it does; any other barrier changes nothing (those partitions keep the lookup).
     */
    public boolean onGrown(Barrier barrier) {
        if (!names(barrier) || barrier.grownFrom() <= 0 || barrier.grownFrom() >= barrier.partitions()) {
            return false;
        }
        grown.put(barrier.topic(), new Grown(barrier.grownFrom(), barrier.partitions()));
        return true;
    }

    /** Whether {@code tp} is a new partition of the latest grow announced for its topic. */
    public boolean isNew(TopicPartition tp) {
        Grown g = grown.get(tp.topic());
        return g != null && g.holds(tp.partition());
    }

    /**
     * Rule 4.8: a {@code pending} barrier of a topic this consumer reads that names its group and carries a
     * {@code partitions} count larger than {@code metadataCount} (the count in the consumer's metadata) makes
     * the topic a target until {@code now + boundMs}. True when it does.
     */
    public boolean onPending(Barrier barrier, int metadataCount, long now, long boundMs) {
        if (!names(barrier) || barrier.partitions() <= metadataCount) {
            return false;
        }
        Target have = targets.get(barrier.topic());
        int partitions = have == null ? barrier.partitions() : Math.max(have.partitions(), barrier.partitions());
        targets.put(barrier.topic(), new Target(partitions, now + boundMs));
        return true;
    }

    /** The topics to grow now, with their targets. */
    public Map<String, Target> targets() {
        return Map.copyOf(targets);
    }

    public boolean isEmpty() {
        return targets.isEmpty();
    }

    /** A {@code pending} barrier of a topic this consumer reads, naming its group. */
    private boolean names(Barrier barrier) {
        return Barrier.PENDING.equals(barrier.state()) && topics.contains(barrier.topic())
                && barrier.groups().contains(group);
    }

    /** Forget every target (a new membership reads fresh metadata); the grows announced stay. */
    public void clear() {
        targets.clear();
    }

    /**
     * After a metadata refresh: {@code topic} shows {@code count} partitions. Returns "reached" (the target is
     * met: take the new partitions now), "expired" (given up: the bound passed) or "" (look again).
     */
    public String check(String topic, int count, long now) {
        Target t = targets.get(topic);
        if (t == null) {
            return "";
        }
        if (count >= t.partitions()) {
            targets.remove(topic);
            return "reached";
        }
        if (now >= t.deadline()) {
            targets.remove(topic);
            return "expired";
        }
        return "";
    }

    /** The partitions {@code from .. to-1} of {@code topic}: those the metadata lacks. */
    public static List<TopicPartition> range(String topic, int from, int to) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = Math.max(0, from); p < to; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }
}
