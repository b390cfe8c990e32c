package io.kstate.control.apps;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/** Shared by the test apps: JSON-line events on stdout, line commands on stdin. */
final class Common {
    static final ObjectMapper JSON = new ObjectMapper();

    private Common() {}

    /** Wall-clock milliseconds with a sub-millisecond fraction (one clock for every app on the host). */
    static double now() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1000.0 + i.getNano() / 1e6;
    }

    static Map<String, Object> event(String name, Object... kv) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("t", now());
        e.put("event", name);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            e.put((String) kv[i], kv[i + 1]);
        }
        return e;
    }

    static synchronized void emit(Map<String, Object> event) {
        try {
            System.out.println(JSON.writeValueAsString(event));
            System.out.flush();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static void emit(String name, Object... kv) {
        emit(event(name, kv));
    }

    static JsonNode config(String[] args) throws Exception {
        return JSON.readTree(args[0]);
    }

    static String brokers(JsonNode config) {
        JsonNode b = config.get("brokers");
        if (b.isArray()) {
            StringBuilder s = new StringBuilder();
            b.forEach(n -> s.append(s.length() == 0 ? "" : ",").append(n.asText()));
            return s.toString();
        }
        return b.asText();
    }

    /** Run {@code onLine} for each stdin line and {@code onEnd} when stdin closes, on a daemon thread. */
    static void commands(java.util.function.Consumer<String> onLine, Runnable onEnd) {
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    onLine.accept(line.trim());
                }
            } catch (Exception e) {
                // stdin gone: the test went away
            }
            onEnd.run();
        }, "stdin");
        t.setDaemon(true);
        t.start();
    }

    /** {"key": ..., "seq": ...} of a record value, or the raw text. */
    static Map<String, Object> parseValue(String value) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            JsonNode v = JSON.readTree(value);
            out.put("key", v.path("key").asText(null));
            out.put("seq", v.path("seq").isMissingNode() ? null : v.path("seq").asLong());
        } catch (Exception e) {
            out.put("key", null);
            out.put("seq", null);
        }
        return out;
    }
}
