package io.kstate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kstate.control.Barriers.Action;
import io.kstate.control.Protocol.Barrier;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The consumer's barrier bookkeeping (section 5a): hold, limits, newer records, releases. */
class BarriersTest {
    static Barrier barrier(long epoch, String state, List<Long> offsets, List<String> groups) {
        return Protocol.barrier("t", epoch, state, offsets, groups, "test");
    }

    @Test
    void holdLimitsNewerRecordsAndReleases() {
        Barriers b = new Barriers("g", List.of("t"));
        Barrier hold = barrier(10, "hold", List.of(5L, 7L), List.of("g"));
        assertEquals(Action.PENDING, b.onBarrier(barrier(9, "pending", List.of(), List.of("g"))).action());
        assertEquals(Action.HOLD, b.onBarrier(hold).action());
        assertEquals(Action.NONE, b.onBarrier(hold).action(), "not newer: ignored");
        assertEquals(Action.NONE, b.onBarrier(Protocol.barrier("other", 11, "hold", List.of(1L), List.of("g"), "")).action(),
                "another topic");
        assertEquals(List.of(5L, 7L, 0L, Long.MAX_VALUE), List.of(b.limit("t", 0), b.limit("t", 1), b.limit("t", 2), b.limit("u", 0)));
        assertEquals(List.of(2, 0), b.hold("t", List.of(2, 0)));
        assertEquals(List.of(), b.hold("t", List.of(0)));
        assertTrue(b.isHeld("t", 2));
        assertFalse(Barriers.passed(hold, Map.of(0, 5L, 1, 6L)));
        assertTrue(Barriers.passed(hold, Map.of(0, 5L, 1, 7L)));
        assertFalse(Barriers.passed(hold, Map.of(1, 7L)), "no committed offset is not past");
        assertFalse(b.onRelease(Protocol.release("t", "other", 10, "")));
        assertFalse(b.onRelease(Protocol.release("t", "g", 9, "")), "an older release");
        assertTrue(b.onRelease(Protocol.release("t", "g", 10, "")));
        Barriers.Ended ended = b.end("t", "controller");
        assertEquals(List.of(0, 2), ended.held());
        assertEquals(Long.MAX_VALUE, b.limit("t", 0));
        assertEquals("controller", b.passages().get(0).by);
        assertTrue(b.passages().get(0).firstHold != null && b.passages().get(0).released != null);
    }

    @Test
    void aReleaseBeforeItsBarrierAndANewerBarrierThatDoesNotNameTheGroup() {
        Barriers c = new Barriers("g", List.of("t"));
        Barrier hold = barrier(20, "hold", List.of(5L, 7L), List.of("g"));
        c.onRelease(Protocol.release("t", "g", 20, ""));
        assertEquals(Action.OFF, c.onBarrier(hold).action(), "released before it arrived");
        assertEquals(Action.HOLD, c.onBarrier(barrier(21, "hold", List.of(5L), List.of("g"))).action());
        Barriers.Applied ended = c.onBarrier(barrier(22, "hold", List.of(5L), List.of("someone-else")));
        assertEquals(Action.OFF, ended.action(), "a newer barrier that does not name the group ends its hold");
        assertEquals(21, ended.ended().barrier().epoch());
        assertEquals(Action.HOLD, c.onBarrier(barrier(23, "hold", List.of(5L), List.of("g"))).action());
        assertEquals(Action.OFF, c.onBarrier(barrier(24, "pending", List.of(), List.of())).action(),
                "a pending that does not name the group ends it like off");
        assertEquals(Action.HOLD, c.onBarrier(barrier(25, "hold", List.of(5L), List.of("g"))).action());
        assertEquals(Action.PENDING, c.onBarrier(barrier(26, "pending", List.of(), List.of("g"))).action());
        assertEquals(5L, c.limit("t", 0), "a pending that names the group only announces: the barrier stays");
        assertEquals(Action.OFF, c.onBarrier(barrier(27, "off", List.of(), List.of("g"))).action());
        assertEquals(Long.MAX_VALUE, c.limit("t", 0));
    }
}
