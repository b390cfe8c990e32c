package io.kstate.control;

import io.kstate.control.Protocol.Barrier;
import io.kstate.control.Protocol.Release;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The consumer's side of the key-order barrier (section 5a): which barrier is active per topic, which
 * partitions this consumer holds, and the bookkeeping of each passage. No I/O: {@link ControlledConsumer}
 * pauses, commits and reads offsets. Not thread-safe: used from the consumer's polling thread.
 */
public final class Barriers {
    /** What a barrier record asks for. */
    public enum Action {
        /** ignored: another topic, or not newer than the last barrier seen for the topic */
        NONE,
        /** a barrier is announced: acknowledge {@code pending}, look often */
        PENDING,
        /** a new barrier to hold at */
        HOLD,
        /** a newer record that does not hold this group: the topic's barrier, if any, ends */
        OFF
    }

    /** A barrier that ended and the partitions held at it (to resume). */
    public record Ended(Barrier barrier, List<Integer> held) {}

    /** The result of a barrier record. */
    public record Applied(Action action, Ended ended) {}

    /** One barrier this consumer kept: when it was seen, first held at, released, and by what. */
    public static final class Passage {
        public final String topic;
        public final long epoch;
        public final long seen;
        public Long firstHold;
        public Long released;
        public String by = "";
        public final Set<Integer> heldPartitions = new TreeSet<>();

        Passage(String topic, long epoch) {
            this.topic = topic;
            this.epoch = epoch;
            this.seen = System.currentTimeMillis();
        }

        public Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("topic", topic);
            m.put("epoch", epoch);
            m.put("seen", seen);
            m.put("firstHold", firstHold);
            m.put("released", released);
            m.put("by", by);
            m.put("heldPartitions", new ArrayList<>(heldPartitions));
            return m;
        }
    }

    private final String group;
    private final Set<String> topics;
    final Map<String, Barrier> active = new HashMap<>();
    final Map<String, Set<Integer>> held = new HashMap<>();
    private final Map<String, Long> seen = new HashMap<>();
    private final Map<String, Long> released = new HashMap<>();
    final List<Passage> passages = new ArrayList<>();

    public Barriers(String group, Collection<String> topics) {
        this.group = group;
        this.topics = Set.copyOf(topics);
    }

    /** Apply a barrier record. */
    public Applied onBarrier(Barrier barrier) {
        String topic = barrier.topic();
        if (!topics.contains(topic) || barrier.epoch() <= seen.getOrDefault(topic, 0L)) {
            return new Applied(Action.NONE, null);
        }
        seen.put(topic, barrier.epoch());
        boolean named = barrier.groups().contains(group);
        if (Barrier.PENDING.equals(barrier.state()) && named) {
            return new Applied(Action.PENDING, null);
        }
        if (!Barrier.HOLD.equals(barrier.state()) || !named || released.getOrDefault(topic, 0L) >= barrier.epoch()) {
            return new Applied(Action.OFF, end(topic, "off"));
        }
        Ended ended = end(topic, "replaced");
        active.put(topic, barrier);
        held.put(topic, new TreeSet<>());
        passages.add(new Passage(topic, barrier.epoch()));
        return new Applied(Action.HOLD, ended);
    }

    /** Apply a release record; true when it ends the barrier this consumer keeps for the topic. */
    public boolean onRelease(Release release) {
        if (!release.group().equals(group) || !topics.contains(release.topic())) {
            return false;
        }
        released.merge(release.topic(), release.epoch(), Math::max);
        Barrier barrier = active.get(release.topic());
        return barrier != null && release.epoch() >= barrier.epoch();
    }

    /** The barrier in force for {@code topic}, or null. */
    public Barrier active(String topic) {
        return active.get(topic);
    }

    public Map<String, Barrier> active() {
        return Map.copyOf(active);
    }

    /** The first offset of {@code topic}/{@code partition} this consumer must not hand out (MAX_VALUE: none). */
    public long limit(String topic, int partition) {
        Barrier barrier = active.get(topic);
        return barrier == null ? Long.MAX_VALUE : barrier.offset(partition);
    }

    public boolean isHeld(String topic, int partition) {
        Set<Integer> h = held.get(topic);
        return h != null && h.contains(partition);
    }

    /** Record {@code partitions} of {@code topic} as held; return those newly held. */
    public List<Integer> hold(String topic, Collection<Integer> partitions) {
        Set<Integer> h = held.get(topic);
        List<Integer> fresh = new ArrayList<>();
        if (h == null) {
            return fresh;
        }
        for (Integer p : partitions) {
            if (h.add(p)) {
                fresh.add(p);
            }
        }
        Passage passage = passage(topic, null);
        if (!fresh.isEmpty() && passage != null) {
            passage.heldPartitions.addAll(fresh);
            if (passage.firstHold == null) {
                passage.firstHold = System.currentTimeMillis();
            }
        }
        return fresh;
    }

    /** Stop keeping {@code topic}'s barrier; return it and the partitions to resume, or null. */
    public Ended end(String topic, String by) {
        Barrier barrier = active.remove(topic);
        Set<Integer> h = held.remove(topic);
        if (barrier == null) {
            return null;
        }
        released.merge(topic, barrier.epoch(), Math::max);
        Passage passage = passage(topic, barrier.epoch());
        if (passage != null) {
            passage.released = System.currentTimeMillis();
            passage.by = by;
        }
        return new Ended(barrier, h == null ? List.of() : new ArrayList<>(h));
    }

    /** The consumer left its group: it holds nothing (the barriers stay). */
    public void forgetHeld() {
        held.values().forEach(Set::clear);
    }

    /** Every passage so far, oldest first. */
    public List<Passage> passages() {
        return List.copyOf(passages);
    }

    private Passage passage(String topic, Long epoch) {
        for (int i = passages.size() - 1; i >= 0; i--) {
            Passage p = passages.get(i);
            if (p.topic.equals(topic) && (epoch == null || p.epoch == epoch)) {
                return p;
            }
        }
        return null;
    }

    /** True when {@code committed} (partition to offset) is at or past the barrier on every partition it lists. */
    public static boolean passed(Barrier barrier, Map<Integer, Long> committed) {
        for (int p = 0; p < barrier.offsets().size(); p++) {
            Long c = committed.get(p);
            if (c == null || c < barrier.offsets().get(p)) {
                return false;
            }
        }
        return true;
    }
}
