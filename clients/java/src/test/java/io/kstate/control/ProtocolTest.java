package io.kstate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.networknt.schema.Schema;
import io.kstate.control.Protocol.Ack;
import io.kstate.control.Protocol.Barrier;
import io.kstate.control.Protocol.Command;
import io.kstate.control.Protocol.ControlRecord;
import io.kstate.control.Protocol.Kind;
import io.kstate.control.Protocol.Layout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** What this client writes validates against docs/schemas/control; what a reader must ignore decodes to null. */
class ProtocolTest {
    /** The schemas of the document itself (surefire sets kstate.schema.dir to docs/schemas/control). */
    static Map<Kind, Schema> docSchemas() {
        String dir = System.getProperty("kstate.schema.dir");
        assertTrue(dir != null && Files.isDirectory(Path.of(dir)), "kstate.schema.dir names docs/schemas/control: " + dir);
        return Protocol.loadSchemas(Path.of(dir));
    }

    static void assertValid(ControlRecord record) {
        JsonNode json = Protocol.toJson(record);
        List<String> errors = new ArrayList<>();
        docSchemas().get(record.kind()).validate(json).forEach(e -> errors.add(e.toString()));
        assertEquals(List.of(), errors, json.toString());
        assertEquals(List.of(), Protocol.errors(record), "the bundled schemas agree: " + json);
        assertEquals(record, Protocol.decode(Protocol.encode(record)), "round trip");
    }

    @Test
    void theBundledSchemasAreTheDocumentsSchemas() throws Exception {
        Path dir = Path.of(System.getProperty("kstate.schema.dir"));
        for (Kind kind : Kind.values()) {
            String name = kind.value + ".schema.json";
            try (var in = Protocol.class.getClassLoader().getResourceAsStream("kstate/schemas/control/" + name)) {
                assertEquals(Files.readString(dir.resolve(name)), new String(in.readAllBytes(), "UTF-8"), name);
            }
        }
    }

    @Test
    void everyAcknowledgementTheConsumerAndTheProducerWriteValidates() {
        List<Ack> written = List.of(
                ControlledConsumer.ackRecord("svc-0", "g1", 0, "running", ""), // presence, before any command
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000001L, "left", ""), // its commit once EMPTY
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000001L, "paused", ""),
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000001L, "running", ""),
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000002L, "pending", "orders"),
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000002L, "barrier", "orders"),
                ControlledConsumer.ackRecord("svc-0", "g1", 1700000000002L, "released", "orders"),
                ControlledPartitioner.ackRecord("api-0", Protocol.layout("orders", 4, 1700000000003L, false, 0, ""), "layout"),
                ControlledPartitioner.ackRecord("api-0", Protocol.layout("orders", 4, 1700000000003L, true, 0, ""), "held"));
        List<String> keys = new ArrayList<>();
        for (Ack a : written) {
            assertValid(a);
            keys.add(a.key() + " " + a.state() + " " + a.epoch());
        }
        assertEquals(List.of(
                "ack/g1/svc-0 running 0",
                "ack/g1/svc-0 left 1700000000001",
                "ack/g1/svc-0 paused 1700000000001",
                "ack/g1/svc-0 running 1700000000001",
                "ack-barrier/orders/g1/svc-0 pending 1700000000002",
                "ack-barrier/orders/g1/svc-0 barrier 1700000000002",
                "ack-barrier/orders/g1/svc-0 released 1700000000002",
                "ack-layout/orders/api-0 layout 1700000000003",
                "ack-layout/orders/api-0 held 1700000000003"), keys);
        assertEquals(4, written.get(8).partitions());
    }

    @Test
    void everyRecordBuilderWritesAValidRecord() {
        assertValid(Protocol.command("g", "pause", 1, "t", "test"));
        assertValid(Protocol.layout("t", 2, 1, true, 5, "test"));
        assertValid(Protocol.barrier("t", 1, "hold", List.of(3L, 0L), List.of("g"), "test"));
        assertValid(Protocol.barrier("t", 1, "pending", List.of(), List.of("g"), 8, "test"));
        assertValid(Protocol.barrier("t", 1, "pending", List.of(), List.of("g"), 8, 4, "test"));
        assertValid(Protocol.release("t", "g", 1, "test"));
    }

    @Test
    void aPendingBarrierCarriesThePartitionCount() {
        Barrier sent = Protocol.barrier("t", 7, "pending", List.of(), List.of("g"), 8, "test");
        assertEquals(8, sent.partitions());
        assertEquals(sent, Protocol.decode(Protocol.encode(sent)));
        Barrier old = assertInstanceOf(Barrier.class,
                Protocol.decode("{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":3,\"state\":\"pending\"}"));
        assertEquals(0, old.partitions(), "not said: 0");
        assertEquals(0, old.grownFrom(), "not said: 0");
        assertNull(Protocol.decode("{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":3,\"partitions\":-1}"));
    }

    @Test
    void aGrowsPendingBarrierCarriesTheCountBefore() {
        Barrier sent = Protocol.barrier("t", 7, "pending", List.of(), List.of("g"), 8, 4, "test");
        assertEquals(4, sent.grownFrom());
        assertEquals(4, Protocol.toJson(sent).get("grown_from").asInt());
        assertEquals(sent, Protocol.decode(Protocol.encode(sent)));
        Barrier read = assertInstanceOf(Barrier.class, Protocol.decode(
                "{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":3,\"state\":\"pending\",\"partitions\":8,"
                        + "\"grown_from\":4}"));
        assertEquals(List.of(8, 4), List.of(read.partitions(), read.grownFrom()));
        assertNull(Protocol.decode("{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":3,\"grown_from\":-1}"));
    }

    @Test
    void aReaderIgnoresWhatItMustIgnoreAndTheUnknownFields() {
        String valid = "\"v\":1,\"kind\":\"command\",\"group\":\"g\",\"command\":\"pause\"";
        List<String> ignored = List.of(
                "not json",
                "[1, 2]",
                "{" + valid.replace("\"v\":1", "\"v\":2") + ",\"epoch\":5}",
                "{" + valid.replace("command\",\"group", "shout\",\"group") + ",\"epoch\":5}",
                "{" + valid.replace("\"pause\"", "\"stop\"") + ",\"epoch\":5}",
                "{" + valid + ",\"epoch\":\"5\"}",
                "{" + valid + "}",
                "{" + valid.replace("\"v\":1,", "") + ",\"epoch\":5}",
                "{\"v\":1,\"kind\":\"command\",\"group\":\"\",\"command\":\"pause\",\"epoch\":5}",
                "{\"v\":1,\"kind\":\"layout\",\"topic\":\"t\",\"partitions\":0,\"epoch\":1}",
                "{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":1,\"offsets\":[-1]}",
                "{\"v\":1,\"kind\":\"ack\",\"client\":\"c\",\"epoch\":1,\"state\":\"asleep\"}");
        assertNull(Protocol.decode((byte[]) null), "a tombstone");
        for (String value : ignored) {
            assertNull(Protocol.decode(value), value);
        }
        ControlRecord read = Protocol.decode("{" + valid + ",\"epoch\":5,\"future\":{\"x\":1}}");
        assertEquals(new Command("g", "pause", 5, "", 0, ""), read);
        Barrier barrier = assertInstanceOf(Barrier.class, Protocol.decode("{\"v\":1,\"kind\":\"barrier\",\"topic\":\"t\",\"epoch\":3}"));
        assertEquals("hold", barrier.state());
        assertEquals(List.of(), barrier.offsets());
        assertEquals(List.of(), barrier.groups());
        assertEquals(0L, barrier.offset(7), "a partition beyond the list: 0");
        Layout layout = assertInstanceOf(Layout.class, Protocol.decode("{\"v\":1,\"kind\":\"layout\",\"topic\":\"t\",\"partitions\":3,\"epoch\":9}"));
        assertFalse(layout.hold());
        assertEquals(0L, layout.holdUntil());
    }

    @Test
    void keysPlaceTheRecords() {
        assertEquals("cmd/g", Protocol.command("g", "resume", 1, "", "").key());
        assertEquals("layout/t", Protocol.layout("t", 1, 1, false, 0, "").key());
        assertEquals("barrier/t", Protocol.barrier("t", 1, "off", List.of(), List.of(), "").key());
        assertEquals("release/t/g", Protocol.release("t", "g", 1, "").key());
    }
}
