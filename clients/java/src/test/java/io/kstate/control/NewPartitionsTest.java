package io.kstate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kstate.control.Protocol.Barrier;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** Rules 4.7 (a position on every partition assigned) and 4.8 (take new partitions at once), without I/O. */
class NewPartitionsTest {
    static TopicPartition tp(int p) {
        return new TopicPartition("t", p);
    }

    static Barrier pending(long epoch, List<String> groups, int partitions) {
        return Protocol.barrier("t", epoch, "pending", List.of(), groups, partitions, "test");
    }

    static Barrier grew(int from, int to) {
        return Protocol.barrier("t", 1, "pending", List.of(), List.of("g"), to, from, "test");
    }

    @Test
    void theStartIsCommittedOnlyWhereTheGroupHasNoOffset() {
        Map<TopicPartition, OffsetAndMetadata> committed = new HashMap<>();
        committed.put(tp(0), new OffsetAndMetadata(17));
        committed.put(tp(1), null); // KafkaConsumer.committed: null where none
        Map<TopicPartition, Long> starts = Map.of(tp(0), 40L, tp(1), 0L, tp(2), 5L);
        Map<TopicPartition, OffsetAndMetadata> seeds = NewPartitions.seeds(List.of(tp(0), tp(1), tp(2), tp(3)),
                committed, starts);
        assertEquals(Map.of(tp(1), new OffsetAndMetadata(0), tp(2), new OffsetAndMetadata(5)), seeds,
                "never over a committed offset (0 keeps 17, not 40); a partition without a start yet waits (3)");
    }

    @Test
    void aPendingBarrierWithMorePartitionsThanTheMetadataMakesATarget() {
        NewPartitions n = new NewPartitions("g", List.of("t"));
        assertFalse(n.onPending(pending(1, List.of("g"), 0), 4, 0, 1000), "partitions not said");
        assertFalse(n.onPending(pending(2, List.of("g"), 4), 4, 0, 1000), "the metadata shows them already");
        assertFalse(n.onPending(pending(3, List.of("other"), 8), 4, 0, 1000), "another group's");
        assertFalse(n.onPending(Protocol.barrier("u", 4, "pending", List.of(), List.of("g"), 8, ""), 4, 0, 1000),
                "a topic it does not read");
        assertFalse(n.onPending(Protocol.barrier("t", 5, "hold", List.of(1L), List.of("g"), 8, ""), 4, 0, 1000),
                "only pending");
        assertTrue(n.isEmpty());
        assertTrue(n.onPending(pending(6, List.of("g"), 8), 4, 100, 1000));
        assertEquals(Map.of("t", new NewPartitions.Target(8, 1100)), n.targets());
        assertEquals("", n.check("t", 6, 500), "not yet: look again");
        assertEquals("reached", n.check("t", 8, 600));
        assertTrue(n.isEmpty());
        assertTrue(n.onPending(pending(7, List.of("g"), 12), 8, 2000, 1000));
        assertEquals("expired", n.check("t", 8, 3000), "bounded");
        assertTrue(n.isEmpty());
        assertEquals(List.of(tp(4), tp(5)), NewPartitions.range("t", 4, 6));
    }

    @Test
    void afterAGrowItsNewPartitionsStartAt0WithoutALookupAndTheOthersKeepIt() {
        NewPartitions n = new NewPartitions("g", List.of("t"));
        assertTrue(n.onGrown(grew(4, 8)));
        List<TopicPartition> asked = new ArrayList<>();
        Map<TopicPartition, Long> starts = n.starts(List.of(tp(1), tp(4), tp(7), tp(8)), tp -> {
            asked.add(tp);
            return tp.partition() == 1 ? 40L : null; // 8: not served yet
        });
        assertEquals(List.of(tp(1), tp(8)), asked, "no position lookup on the new partitions 4 .. 7");
        assertEquals(Map.of(tp(1), 40L, tp(4), 0L, tp(7), 0L), starts,
                "the old partition keeps its reset position; 8 is beyond the grow: looked up, left out until known");
        assertEquals(Map.of(tp(1), new OffsetAndMetadata(40), tp(4), new OffsetAndMetadata(0), tp(7),
                new OffsetAndMetadata(0)), NewPartitions.seeds(List.of(tp(1), tp(4), tp(7), tp(8)), Map.of(), starts),
                "committed: offset 0 on the new ones");
        n.clear();
        assertTrue(n.isNew(tp(5)), "a new membership keeps the grow: it is about the topic");
    }

    @Test
    void onlyAGrowThatSaysWhichPartitionsAreNewSkipsTheLookup() {
        NewPartitions n = new NewPartitions("g", List.of("t"));
        assertFalse(n.onGrown(grew(0, 8)), "grown_from not said");
        assertFalse(n.onGrown(grew(8, 8)), "not a grow");
        assertFalse(n.onGrown(grew(9, 8)), "inconsistent");
        assertFalse(n.onGrown(Protocol.barrier("t", 2, "pending", List.of(), List.of("other"), 8, 4, "")),
                "another group's");
        assertFalse(n.onGrown(Protocol.barrier("u", 3, "pending", List.of(), List.of("g"), 8, 4, "")),
                "a topic it does not read");
        assertFalse(n.onGrown(Protocol.barrier("t", 4, "hold", List.of(1L), List.of("g"), 8, 4, "")), "only pending");
        List<TopicPartition> asked = new ArrayList<>();
        n.starts(List.of(tp(4), tp(5)), tp -> {
            asked.add(tp);
            return 0L;
        });
        assertEquals(List.of(tp(4), tp(5)), asked, "without a grow announced every partition is looked up");
        assertTrue(n.onGrown(grew(4, 8)));
        assertTrue(n.onGrown(grew(8, 12)));
        assertFalse(n.isNew(tp(4)), "a later grow replaces the earlier one");
        assertTrue(n.isNew(tp(8)) && n.isNew(tp(11)) && !n.isNew(tp(12)));
    }
}
