package io.kstate.streams;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

/**
 * A small Kafka Streams application with three topologies (issue 32), written as any team would write one:
 *
 * <ul>
 *   <li>{@code count}: {@code groupByKey().count()} of the input (a key-value store, its changelog topic),
 *       each new count to the output as a {@code long};</li>
 *   <li>{@code join}: an inner stream-stream join of two co-partitioned inputs within
 *       {@code JoinWindows.ofTimeDifferenceWithNoGrace(window)} (two window stores and their changelogs),
 *       {@code "a|b"} to the output;</li>
 *   <li>{@code filter}: stateless, the records whose value (an integer) is even.</li>
 * </ul>
 *
 * <p>What it does is written as JSON lines to {@code --events}: {@code start}, every {@code state} change
 * (with the tasks it runs when it reaches RUNNING), every uncaught {@code error} (the exception's class and
 * message and those of its causes), and {@code exit}. An uncaught exception shuts the client down
 * ({@code SHUTDOWN_CLIENT}): the process then exits with 1; SIGTERM closes it and it exits with 0.
 *
 * <pre>App --shape count|join|filter --bootstrap B --app-id ID --input T[,T2] --output O --state-dir D
 *     --events FILE [--protocol classic|streams] [--guarantee exactly_once_v2|at_least_once]
 *     [--commit-ms 200] [--metadata-ms 1000] [--window-ms 2000]</pre>
 */
public final class App {
    private App() {}

    private static Path events;

    public static void main(String[] argv) throws Exception {
        Map<String, String> opt = options(argv);
        events = Path.of(opt.get("events"));
        String shape = opt.get("shape");
        String[] inputs = opt.get("input").split(",");
        Topology topology = topology(shape, inputs, opt.get("output"), Long.parseLong(opt.get("window-ms")));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opt.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opt.get("state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opt.get("guarantee"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opt.get("commit-ms"));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opt.get("protocol"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // Test-sized: every client looks at the topics' metadata every second (default 5 minutes), so a new
        // partition is seen at once; the group's members leave quickly when a test stops them.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.METADATA_MAX_AGE_CONFIG), opt.get("metadata-ms"));
        props.put(StreamsConfig.producerPrefix(ProducerConfig.METADATA_MAX_AGE_CONFIG), opt.get("metadata-ms"));
        if (opt.get("protocol").equals("classic")) {
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        }

        event("start", "shape", shape, "protocol", opt.get("protocol"), "guarantee", opt.get("guarantee"),
            "topology", topology.describe().toString());
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch done = new CountDownLatch(1);
        int[] rc = {0};
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                event("state", "from", before.name(), "to", now.name(), "tasks", tasks(streams));
            } else {
                event("state", "from", before.name(), "to", now.name());
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exc -> {
            rc[0] = 1;
            error(exc);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        // SIGTERM: Streams closes (its state NOT_RUNNING), the app exits 0 (1 after an uncaught exception).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (done.getCount() > 0) {
                event("signal");
                streams.close(Duration.ofSeconds(15));
                event("exit", "rc", rc[0]);
                Runtime.getRuntime().halt(rc[0]);
            }
        }, "kstate-shutdown"));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(15));
        event("exit", "rc", rc[0]);
        Runtime.getRuntime().halt(rc[0]);
    }

    static Topology topology(String shape, String[] inputs, String output, long windowMs) {
        StreamsBuilder builder = new StreamsBuilder();
        Consumed<String, String> consumed = Consumed.with(Serdes.String(), Serdes.String());
        switch (shape) {
            case "count":
                builder.stream(inputs[0], consumed)
                    .groupByKey()
                    .count()
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            case "join": {
                if (inputs.length != 2) {
                    throw new IllegalArgumentException("join needs --input A,B");
                }
                KStream<String, String> left = builder.stream(inputs[0], consumed);
                KStream<String, String> right = builder.stream(inputs[1], consumed);
                left.join(right, (a, b) -> a + "|" + b,
                        JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(windowMs)),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
                break;
            }
            case "filter":
                builder.stream(inputs[0], consumed)
                    .filter((k, v) -> Long.parseLong(v) % 2 == 0)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
                break;
            default:
                throw new IllegalArgumentException("--shape is count, join or filter, not " + shape);
        }
        return builder.build();
    }

    private static List<String> tasks(KafkaStreams streams) {
        TreeSet<String> out = new TreeSet<>();
        try {
            for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : thread.activeTasks()) {
                    out.add(task.taskId().toString());
                }
            }
        } catch (RuntimeException e) {
            out.add("?" + e.getClass().getSimpleName());
        }
        return new ArrayList<>(out);
    }

    private static void error(Throwable exc) {
        List<Map<String, Object>> chain = new ArrayList<>();
        for (Throwable t = exc; t != null && chain.size() < 8; t = t.getCause()) {
            Map<String, Object> one = new LinkedHashMap<>();
            one.put("class", t.getClass().getName());
            one.put("message", String.valueOf(t.getMessage()));
            chain.add(one);
        }
        StringWriter trace = new StringWriter();
        exc.printStackTrace(new PrintWriter(trace));
        System.err.println(trace);
        event("error", "class", exc.getClass().getName(), "message", String.valueOf(exc.getMessage()),
            "causes", chain);
    }

    private static Map<String, String> options(String[] argv) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String key : new String[] {"shape", "bootstrap", "app-id", "input", "output", "state-dir", "events"}) {
            out.put(key, null);
        }
        out.put("protocol", "classic");
        out.put("guarantee", StreamsConfig.EXACTLY_ONCE_V2);
        out.put("commit-ms", "200");
        out.put("metadata-ms", "1000");
        out.put("window-ms", "2000");
        for (int i = 0; i < argv.length; i++) {
            String flag = argv[i];
            String key = flag.startsWith("--") ? flag.substring(2) : null;
            if (key == null || !out.containsKey(key) || i + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument " + flag);
            }
            out.put(key, argv[++i]);
        }
        for (Map.Entry<String, String> e : out.entrySet()) {
            if (e.getValue() == null) {
                throw new IllegalArgumentException("--" + e.getKey() + " is required");
            }
        }
        return out;
    }

    /** One JSON line: {"t": epoch ms, "ev": name, key: value...}; values are strings, numbers or lists. */
    static synchronized void event(String name, Object... pairs) {
        StringBuilder line = new StringBuilder();
        line.append("{\"t\":").append(System.currentTimeMillis()).append(",\"ev\":").append(json(name));
        for (int i = 0; i < pairs.length; i += 2) {
            line.append(',').append(json(pairs[i])).append(':').append(json(pairs[i + 1]));
        }
        line.append("}\n");
        try {
            Files.writeString(events, line, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof List<?> list) {
            StringBuilder out = new StringBuilder("[");
            for (Object item : list) {
                if (out.length() > 1) {
                    out.append(',');
                }
                out.append(json(item));
            }
            return out.append(']').toString();
        }
        if (value instanceof Map<?, ?> map) {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (out.length() > 1) {
                    out.append(',');
                }
                out.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return out.append('}').toString();
        }
        String s = value.toString();
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
