package io.kstate.control;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kstate.control.Protocol.Ack;
import io.kstate.control.Protocol.ControlRecord;
import io.kstate.control.Protocol.Layout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The producer's state machine without a broker: first use, the pin, a layout the metadata lacks, hold, release, hold_until. */
@Timeout(60) // a hang guard for the threads blocked by a hold, not a performance bound
class PartitionerTest {
    static final String T = "orders";
    static final Node NODE = new Node(1, "localhost", 9092);

    final List<ControlRecord> published = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger brokerCount = new AtomicInteger(4);
    final ControlledPartitioner.Inflight inflight = new ControlledPartitioner.Inflight();

    static Cluster cluster(int partitions) {
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            infos.add(new PartitionInfo(T, p, NODE, new Node[] {NODE}, new Node[] {NODE}));
        }
        return new Cluster("c", List.of(NODE), infos, Set.of(), Set.of());
    }

    static Control.Entry entry(ControlRecord r) {
        return new Control.Entry(r.key(), r);
    }

    ControlledPartitioner partitioner(ControlRecord... controlTopic) {
        List<Control.Entry> entries = new ArrayList<>();
        for (ControlRecord r : controlTopic) {
            entries.add(entry(r));
        }
        return new ControlledPartitioner("api-0", published::add, t -> brokerCount.get(), inflight, entries);
    }

    static byte[] key(String k) {
        return k.getBytes(StandardCharsets.UTF_8);
    }

    /** What the sending thread does: the interceptor counts the record, then the partitioner places it. */
    int send(ControlledPartitioner p, String k, Cluster cluster) {
        inflight.sent(T);
        return p.partition(T, k, k == null ? null : key(k), null, null, cluster);
    }

    List<String> acks() {
        List<String> out = new ArrayList<>();
        for (ControlRecord r : published) {
            Ack a = (Ack) r;
            assertEquals(List.of(), Protocol.errors(a), a.toString());
            out.add(a.state() + " " + a.epoch() + " " + a.partitions());
        }
        return out;
    }

    static void waitFor(java.util.function.BooleanSupplier condition) throws InterruptedException {
        while (!condition.getAsBoolean()) {
            Thread.sleep(2);
        }
    }

    @Test
    void withoutALayoutTheMetadataCountAtFirstUseIsKept() {
        ControlledPartitioner p = partitioner();
        assertEquals(Placement.partitionFor("k0185", 4), send(p, "k0185", cluster(4)));
        assertArrayEquals(new long[] {4, 0}, ControlledPartitioner.lastPlacement());
        assertEquals(Placement.partitionFor("k0185", 4), send(p, "k0185", cluster(6)), "metadata changes are not followed");
        List<Integer> keyless = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            keyless.add(send(p, null, cluster(6)));
        }
        assertEquals(List.of(0, 1, 2, 3, 0), keyless, "keyless: round-robin over n");
        p.tick(List.of(), true);
        assertEquals(List.of(), acks(), "no layout, nothing to acknowledge");
    }

    @Test
    void thePinKeepsTheOldCountAndTheRaiseWaitsForThePartitions() {
        ControlledPartitioner p = partitioner(Protocol.layout(T, 4, 100, false, 0, "test"));
        // the topic has 6 partitions already: keys stay on the pinned 4
        assertEquals(Placement.partitionFor("order-7-ключ", 4), send(p, "order-7-ключ", cluster(6)));
        assertEquals(0, Placement.partitionFor("order-7-ключ", 4));
        assertEquals(4, Placement.partitionFor("order-7-ключ", 6), "the key would move at 6");
        p.tick(List.of(), true);
        assertEquals(List.of("layout 100 4"), acks(), "acknowledged at first use");

        ControlledPartitioner q = partitioner(Protocol.layout(T, 4, 100, false, 0, "test"));
        published.clear();
        send(q, "k0185", cluster(4));
        q.tick(List.of(entry(Protocol.layout(T, 6, 200, false, 0, "test"))), true);
        assertEquals(List.of("layout 100 4"), acks(), "the metadata lacks partitions: no switch, no ack");
        assertEquals(4, q.livePartitions(T));
        brokerCount.set(6);
        q.tick(List.of(), true);
        assertEquals(List.of("layout 100 4", "layout 200 6"), acks());
        assertEquals(Placement.partitionFor("k0185", 6), send(q, "k0185", cluster(4)));
        assertEquals(200, q.layoutEpoch(T));
    }

    @Test
    void aHoldBlocksSendsAcksHeldOnlyOnceDeliveredAndTheNextLayoutReleases() throws Exception {
        ControlledPartitioner p = partitioner(Protocol.layout(T, 4, 100, false, 0, "test"));
        for (int i = 0; i < 3; i++) {
            send(p, "k" + i, cluster(4)); // three records sent, not acknowledged by the broker yet
        }
        p.tick(List.of(entry(Protocol.layout(T, 4, 150, true, 0, "test"))), true);
        assertTrue(p.held(T));
        CompletableFuture<Integer> blocked = CompletableFuture.supplyAsync(() -> send(p, "k0185", cluster(6)));
        waitFor(() -> p.blockedCount(T) == 1);
        p.tick(List.of(), true);
        assertEquals(List.of("layout 100 4"), acks(), "held is acknowledged only once the earlier records are delivered");
        for (int i = 0; i < 3; i++) {
            inflight.done(T);
        }
        p.tick(List.of(), true);
        assertEquals(List.of("layout 100 4", "held 150 4"), acks());
        assertFalse(blocked.isDone(), "still held after the held acknowledgement");
        brokerCount.set(6);
        p.tick(List.of(entry(Protocol.layout(T, 6, 200, false, 0, "test"))), true);
        assertEquals(Placement.partitionFor("k0185", 6), blocked.get());
        assertEquals(List.of("layout 100 4", "held 150 4", "layout 200 6"), acks());
        ControlledPartitioner.Hold hold = p.holds().get(0);
        assertFalse(hold.expired);
        assertNotNull(hold.heldAck);
        assertTrue(hold.ended >= hold.heldAck);
        assertFalse(p.held(T));
    }

    @Test
    void aHoldEndsItselfAtHoldUntilOnTheHeldLayout() throws Exception {
        ControlledPartitioner p = partitioner(Protocol.layout(T, 4, 100, false, 0, "test"));
        send(p, "k1", cluster(4));
        inflight.done(T);
        long until = System.currentTimeMillis() + 200;
        p.tick(List.of(entry(Protocol.layout(T, 4, 150, true, until, "test"))), true);
        assertTrue(p.held(T));
        waitFor(() -> System.currentTimeMillis() > until);
        p.tick(List.of(), true);
        assertFalse(p.held(T));
        assertTrue(p.holds().get(0).expired);
        assertEquals(4, p.livePartitions(T));
        assertEquals(150, p.layoutEpoch(T), "the held layout stays the one in force");
        assertEquals(List.of("layout 100 4", "held 150 4"), acks());
    }

    @Test
    void aProducerThatFirstWritesDuringAHoldStartsHeld() throws Exception {
        ControlledPartitioner p = partitioner(Protocol.layout(T, 4, 150, true, 0, "test"));
        assertNull(p.livePartitions(T));
        CompletableFuture<Integer> first = CompletableFuture.supplyAsync(() -> send(p, "k0148", cluster(6)));
        waitFor(() -> p.blockedCount(T) == 1);
        p.tick(List.of(), true);
        assertEquals(List.of("held 150 4"), acks(), "the blocked record is not in flight: held at once");
        brokerCount.set(6);
        p.tick(List.of(entry(Protocol.layout(T, 6, 200, false, 0, "test"))), true);
        assertEquals(Placement.partitionFor("k0148", 6), first.get());
    }

    @Test
    void staleLayoutsAreIgnored() {
        ControlledPartitioner p = partitioner(Protocol.layout(T, 4, 100, false, 0, "test"));
        send(p, "k1", cluster(6));
        brokerCount.set(6);
        p.tick(List.of(entry(Protocol.layout(T, 6, 90, false, 0, "test")), entry(Protocol.layout(T, 6, 100, false, 0, "test"))), true);
        assertEquals(4, p.livePartitions(T));
        assertEquals(List.of("layout 100 4"), acks());
    }
}
