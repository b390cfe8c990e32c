package io.kstate.control;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * The kstate control protocol, version 1 (docs/control-protocol.md): keys, the five record kinds, encode and
 * decode. Every value read is validated against docs/schemas/control/&lt;kind&gt;.schema.json (bundled in the
 * jar at kstate/schemas/control; the system property {@code kstate.schema.dir} or the environment variable
 * {@code KSTATE_CONTROL_SCHEMA_DIR} name another folder): a value that does not validate (or is not JSON,
 * has an unknown kind or another v) decodes to {@code null}, and the reader ignores it. Optional fields get
 * the schemas' defaults; unknown fields are ignored.
 */
public final class Protocol {
    public static final int VERSION = 1;
    public static final String DEFAULT_CONTROL_TOPIC = "_kstate_control";
    /** The control topic's settings besides one partition (section 1). */
    public static final Map<String, String> CONTROL_TOPIC_CONFIG = Map.of(
            "cleanup.policy", "compact",
            "message.timestamp.type", "LogAppendTime",
            "min.compaction.lag.ms", "0");

    static final ObjectMapper JSON = new ObjectMapper();

    private Protocol() {}

    /** The record kinds, by their {@code kind} value. */
    public enum Kind {
        COMMAND("command"), LAYOUT("layout"), ACK("ack"), BARRIER("barrier"), RELEASE("release");

        public final String value;

        Kind(String value) {
            this.value = value;
        }

        static Kind of(String value) {
            for (Kind k : values()) {
                if (k.value.equals(value)) {
                    return k;
                }
            }
            return null;
        }
    }

    /** A decoded control record. */
    public sealed interface ControlRecord permits Command, Layout, Ack, Barrier, Release {
        Kind kind();

        long epoch();

        /** The key this record is written under. */
        String key();
    }

    /** Pause or resume the consumers of one group (key {@code cmd/<group>}). */
    public record Command(String group, String command, long epoch, String topic, long issuedAt, String issuer)
            implements ControlRecord {
        public static final String PAUSE = "pause";
        public static final String RESUME = "resume";

        public Kind kind() {
            return Kind.COMMAND;
        }

        public String key() {
            return Keys.command(group);
        }

        public boolean pause() {
            return PAUSE.equals(command);
        }
    }

    /** How many partitions producers of a topic may use; with {@code hold}, producers flush and block. */
    public record Layout(String topic, int partitions, long epoch, boolean hold, long holdUntil, long issuedAt,
            String issuer) implements ControlRecord {
        public Kind kind() {
            return Kind.LAYOUT;
        }

        public String key() {
            return Keys.layout(topic);
        }
    }

    /** A client's acknowledgement (keys {@code ack/...}, {@code ack-layout/...}, {@code ack-barrier/...}). */
    public record Ack(String client, long epoch, String state, String group, String topic, int partitions, long at)
            implements ControlRecord {
        public Kind kind() {
            return Kind.ACK;
        }

        public String key() {
            if (!group.isEmpty() && !topic.isEmpty()) {
                return Keys.barrierAck(topic, group, client);
            }
            if (!group.isEmpty()) {
                return Keys.ack(group, client);
            }
            return Keys.layoutAck(topic, client);
        }
    }

    /**
     * The key-order barrier of a topic (key {@code barrier/<topic>}): {@code pending}, {@code hold} or {@code off}.
     * {@code partitions}: on a {@code pending} sent once the topic grew, its partition count now (0: not said);
     * a consumer whose metadata shows fewer takes the new partitions at once (rule 4.8). {@code grownFrom}
     * ({@code grown_from}): with it, the count before the grow; partitions {@code grownFrom .. partitions-1}
     * hold no record until the producers switch, so a consumer commits offset 0 there without asking where
     * they end (rule 4.7; 0: not said).
     */
    public record Barrier(String topic, long epoch, String state, List<Long> offsets, List<String> groups,
            int partitions, int grownFrom, long issuedAt, String issuer) implements ControlRecord {
        public static final String PENDING = "pending";
        public static final String HOLD = "hold";
        public static final String OFF = "off";

        public Barrier {
            offsets = List.copyOf(offsets);
            groups = List.copyOf(groups);
        }

        public Kind kind() {
            return Kind.BARRIER;
        }

        public String key() {
            return Keys.barrier(topic);
        }

        /** B[p]: the barrier offset of partition p (0 for a partition the barrier does not list: a new one). */
        public long offset(int partition) {
            return partition >= 0 && partition < offsets.size() ? offsets.get(partition) : 0L;
        }
    }

    /** The group passed the barrier of {@code epoch}: stop holding (key {@code release/<topic>/<group>}). */
    public record Release(String topic, String group, long epoch, long at, String issuer) implements ControlRecord {
        public Kind kind() {
            return Kind.RELEASE;
        }

        public String key() {
            return Keys.release(topic, group);
        }
    }

    /** The keys records are written under (a reader takes every field from the value, never the key). */
    public static final class Keys {
        private Keys() {}

        public static String command(String group) {
            return "cmd/" + group;
        }

        public static String layout(String topic) {
            return "layout/" + topic;
        }

        public static String barrier(String topic) {
            return "barrier/" + topic;
        }

        public static String release(String topic, String group) {
            return "release/" + topic + "/" + group;
        }

        public static String ack(String group, String client) {
            return "ack/" + group + "/" + client;
        }

        public static String barrierAck(String topic, String group, String client) {
            return "ack-barrier/" + topic + "/" + group + "/" + client;
        }

        public static String layoutAck(String topic, String client) {
            return "ack-layout/" + topic + "/" + client;
        }
    }

    // -- builders (what the client writes: every field) ------------------------------------------------------

    public static Ack ack(String client, long epoch, String state, String group, String topic, int partitions) {
        return new Ack(client, epoch, state, group, topic, partitions, System.currentTimeMillis());
    }

    public static Command command(String group, String command, long epoch, String topic, String issuer) {
        return new Command(group, command, epoch, topic, System.currentTimeMillis(), issuer);
    }

    public static Layout layout(String topic, int partitions, long epoch, boolean hold, long holdUntil, String issuer) {
        return new Layout(topic, partitions, epoch, hold, holdUntil, System.currentTimeMillis(), issuer);
    }

    public static Barrier barrier(String topic, long epoch, String state, List<Long> offsets, List<String> groups,
            String issuer) {
        return barrier(topic, epoch, state, offsets, groups, 0, issuer);
    }

    /** A barrier with {@code partitions} (a {@code pending} sent once the topic grew: its count now). */
    public static Barrier barrier(String topic, long epoch, String state, List<Long> offsets, List<String> groups,
            int partitions, String issuer) {
        return barrier(topic, epoch, state, offsets, groups, partitions, 0, issuer);
    }

    /** A grow's {@code pending} barrier: the count now ({@code partitions}) and before ({@code grownFrom}). */
    public static Barrier barrier(String topic, long epoch, String state, List<Long> offsets, List<String> groups,
            int partitions, int grownFrom, String issuer) {
        return new Barrier(topic, epoch, state, offsets, groups, partitions, grownFrom, System.currentTimeMillis(),
                issuer);
    }

    public static Release release(String topic, String group, long epoch, String issuer) {
        return new Release(topic, group, epoch, System.currentTimeMillis(), issuer);
    }

    // -- encode ------------------------------------------------------------------------------------------------

    /** The record as a JSON object, every field written (section 2: writers write every field). */
    public static ObjectNode toJson(ControlRecord record) {
        ObjectNode o = JSON.createObjectNode();
        o.put("v", VERSION);
        o.put("kind", record.kind().value);
        if (record instanceof Command c) {
            o.put("group", c.group()).put("command", c.command()).put("epoch", c.epoch()).put("topic", c.topic())
                    .put("issued_at", c.issuedAt()).put("issuer", c.issuer());
        } else if (record instanceof Layout l) {
            o.put("topic", l.topic()).put("partitions", l.partitions()).put("epoch", l.epoch())
                    .put("hold", l.hold()).put("hold_until", l.holdUntil()).put("issued_at", l.issuedAt())
                    .put("issuer", l.issuer());
        } else if (record instanceof Ack a) {
            o.put("client", a.client()).put("group", a.group()).put("topic", a.topic())
                    .put("partitions", a.partitions()).put("epoch", a.epoch()).put("state", a.state())
                    .put("at", a.at());
        } else if (record instanceof Barrier b) {
            o.put("topic", b.topic()).put("epoch", b.epoch()).put("state", b.state());
            ArrayNode offsets = o.putArray("offsets");
            b.offsets().forEach(offsets::add);
            ArrayNode groups = o.putArray("groups");
            b.groups().forEach(groups::add);
            o.put("partitions", b.partitions()).put("grown_from", b.grownFrom()).put("issued_at", b.issuedAt())
                    .put("issuer", b.issuer());
        } else if (record instanceof Release r) {
            o.put("topic", r.topic()).put("group", r.group()).put("epoch", r.epoch()).put("at", r.at())
                    .put("issuer", r.issuer());
        }
        return o;
    }

    /** The record's value: UTF-8 JSON. */
    public static String encode(ControlRecord record) {
        try {
            return JSON.writeValueAsString(toJson(record));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    // -- validate and decode -------------------------------------------------------------------------------

    private static volatile Map<Kind, Schema> schemas;

    private static Map<Kind, Schema> schemas() {
        Map<Kind, Schema> out = schemas;
        if (out == null) {
            synchronized (Protocol.class) {
                out = schemas;
                if (out == null) {
                    out = loadSchemas(schemaDir());
                    schemas = out;
                }
            }
        }
        return out;
    }

    private static Path schemaDir() {
        String dir = System.getProperty("kstate.schema.dir");
        if (dir == null || dir.isEmpty()) {
            dir = System.getenv("KSTATE_CONTROL_SCHEMA_DIR");
        }
        return dir == null || dir.isEmpty() ? null : Path.of(dir);
    }

    /** The validators of every kind, from {@code dir} (null: the schemas bundled in the jar). */
    static Map<Kind, Schema> loadSchemas(Path dir) {
        SchemaRegistry registry = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
        Map<Kind, Schema> out = new EnumMap<>(Kind.class);
        for (Kind kind : Kind.values()) {
            String name = kind.value + ".schema.json";
            try (InputStream in = dir != null ? Files.newInputStream(dir.resolve(name))
                    : Protocol.class.getClassLoader().getResourceAsStream("kstate/schemas/control/" + name)) {
                if (in == null) {
                    throw new IllegalStateException("schema " + name + " is not on the classpath (kstate/schemas/control)");
                }
                out.put(kind, registry.getSchema(in));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read schema " + name, e);
            }
        }
        return Collections.unmodifiableMap(out);
    }

    /** Validate a value against its kind's schema: the errors, empty when valid. */
    public static List<String> errors(JsonNode value) {
        List<String> out = new ArrayList<>();
        if (value == null || !value.isObject()) {
            out.add("not a JSON object");
            return out;
        }
        JsonNode kindNode = value.get("kind");
        Kind kind = kindNode != null && kindNode.isTextual() ? Kind.of(kindNode.asText()) : null;
        if (kind == null) {
            out.add("unknown kind " + kindNode);
            return out;
        }
        for (Error e : schemas().get(kind).validate(value)) {
            out.add(e.toString());
        }
        return out;
    }

    /** Validate a record this client writes (what the unit tests check of every record written). */
    public static List<String> errors(ControlRecord record) {
        return errors(toJson(record));
    }

    /**
     * Parse a control-topic value; {@code null} for a tombstone and for anything a reader must ignore (not
     * JSON, not an object, unknown kind, v other than 1, a missing or invalid field).
     */
    public static ControlRecord decode(byte[] value) {
        return value == null ? null : decode(new String(value, StandardCharsets.UTF_8));
    }

    /** See {@link #decode(byte[])}. */
    public static ControlRecord decode(String value) {
        if (value == null) {
            return null;
        }
        JsonNode o;
        try {
            o = JSON.readTree(value);
        } catch (JsonProcessingException e) {
            return null;
        }
        if (o == null || !errors(o).isEmpty()) {
            return null;
        }
        switch (Kind.of(o.get("kind").asText())) {
            case COMMAND:
                return new Command(o.get("group").asText(), o.get("command").asText(), o.get("epoch").asLong(),
                        text(o, "topic"), number(o, "issued_at"), text(o, "issuer"));
            case LAYOUT:
                return new Layout(o.get("topic").asText(), o.get("partitions").asInt(), o.get("epoch").asLong(),
                        o.path("hold").asBoolean(false), number(o, "hold_until"), number(o, "issued_at"),
                        text(o, "issuer"));
            case ACK:
                return new Ack(o.get("client").asText(), o.get("epoch").asLong(), o.get("state").asText(),
                        text(o, "group"), text(o, "topic"), (int) number(o, "partitions"), number(o, "at"));
            case BARRIER: {
                List<Long> offsets = new ArrayList<>();
                o.path("offsets").forEach(n -> offsets.add(n.asLong()));
                List<String> groups = new ArrayList<>();
                o.path("groups").forEach(n -> groups.add(n.asText()));
                String state = o.has("state") ? o.get("state").asText() : Barrier.HOLD;
                return new Barrier(o.get("topic").asText(), o.get("epoch").asLong(), state, offsets, groups,
                        (int) number(o, "partitions"), (int) number(o, "grown_from"), number(o, "issued_at"),
                        text(o, "issuer"));
            }
            case RELEASE:
                return new Release(o.get("topic").asText(), o.get("group").asText(), o.get("epoch").asLong(),
                        number(o, "at"), text(o, "issuer"));
            default:
                return null;
        }
    }

    private static String text(JsonNode o, String field) {
        JsonNode n = o.get(field);
        return n == null ? "" : n.asText();
    }

    private static long number(JsonNode o, String field) {
        JsonNode n = o.get(field);
        return n == null ? 0L : n.asLong();
    }
}
