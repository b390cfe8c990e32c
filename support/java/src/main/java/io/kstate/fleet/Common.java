package io.kstate.fleet;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import sun.misc.Signal;

/**
 * What the foreign Java services share, the same as {@code support/node/common.js}: options (flags, else
 * environment), their files, the clock of the output lines, the pidfile and one clean-shutdown path. Nothing
 * here knows about kstate: these services stand in for services no one here wrote, driven only from outside
 * (signals, commands).
 */
final class Common {
    private Common() {}

    /** {@code --name NAME --run-dir DIR ...}; every flag also reads {@code KSTATE_FLEET_<FLAG>} (upper, _). */
    static Map<String, String> options(String[] argv, Map<String, String> defaults) {
        Map<String, String> out = new LinkedHashMap<>(defaults);
        for (String key : defaults.keySet()) {
            String env = System.getenv("KSTATE_FLEET_" + key.replace('-', '_').toUpperCase(Locale.ROOT));
            if (env != null) {
                out.put(key, env);
            }
        }
        for (int i = 0; i < argv.length; i++) {
            String flag = argv[i];
            if (!flag.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + flag);
            }
            int eq = flag.indexOf('=');
            String key = eq > 0 ? flag.substring(2, eq) : flag.substring(2);
            if (!defaults.containsKey(key)) {
                throw new IllegalArgumentException("unknown option --" + key);
            }
            String value = eq > 0 ? flag.substring(eq + 1) : (i + 1 < argv.length ? argv[++i] : null);
            if (value == null) {
                throw new IllegalArgumentException("--" + key + " needs a value");
            }
            out.put(key, value);
        }
        for (Map.Entry<String, String> e : out.entrySet()) {
            if (e.getValue() == null) {
                throw new IllegalArgumentException("--" + e.getKey() + " is required");
            }
        }
        return out;
    }

    /** A map of option defaults: pairs of key and value, null for a required option. */
    static Map<String, String> defaults(String... pairs) {
        Map<String, String> out = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            out.put(pairs[i], pairs[i + 1]);
        }
        return out;
    }

    /** The files of service NAME in the run directory (the names fleet.py and svc.sh use). */
    static final class ServiceFiles {
        final Path pid;
        final Path ready;
        final Path out;
        final Path events;

        ServiceFiles(String runDir, String name) {
            Path dir = Path.of(runDir);
            pid = dir.resolve(name + ".pid");
            ready = dir.resolve(name + ".ready");
            out = dir.resolve(name + ".jsonl");
            events = dir.resolve(name + ".events.jsonl");
        }
    }

    /**
     * Wall-clock milliseconds with microsecond resolution: comparable across the processes of one host (the
     * Node services use the same clock), fine enough to order two members' processing of one key's records.
     */
    static double now() {
        Instant t = Instant.now();
        long micros = t.getEpochSecond() * 1_000_000L + t.getNano() / 1_000;
        return micros / 1000.0;
    }

    /**
     * An append-only JSON-lines file written with one write(2) per line: a line is in the file (the page
     * cache) when the call returns, so even a SIGKILL loses no processed record, and a reader never sees half
     * a line.
     */
    static final class Lines implements AutoCloseable {
        private final FileOutputStream stream;

        Lines(Path file) {
            try {
                Files.createDirectories(file.getParent());
                stream = new FileOutputStream(file.toFile(), true);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** Append one object: alternating keys and values (String, Number, Boolean, Collection, null). */
        synchronized void write(Object... pairs) {
            try {
                stream.write((json(pairs) + "\n").getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public synchronized void close() {
            try {
                stream.close();
            } catch (IOException e) {
                // the lines are written: nothing left to lose
            }
        }
    }

    /** A JSON object of alternating keys and values. */
    static String json(Object... pairs) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < pairs.length; i += 2) {
            if (i > 0) {
                b.append(',');
            }
            b.append(quote(String.valueOf(pairs[i]))).append(':').append(value(pairs[i + 1]));
        }
        return b.append('}').toString();
    }

    private static String value(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            return java.math.BigDecimal.valueOf(d).stripTrailingZeros().toPlainString();
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Collection<?>) {
            return ((Collection<?>) v).stream().map(Common::value).collect(Collectors.joining(",", "[", "]"));
        }
        return quote(v.toString());
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static final Pattern KEY = Pattern.compile("\"key\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
    private static final Pattern SEQ = Pattern.compile("\"seq\"\\s*:\\s*(-?\\d+)");

    /** The {@code key} of a record value {@code {"key": "k0042", "seq": 7}}, or null. */
    static String keyOf(String value) {
        Matcher m = value == null ? null : KEY.matcher(value);
        return m != null && m.find() ? m.group(1) : null;
    }

    /** The {@code seq} of a record value {@code {"key": "k0042", "seq": 7}}, or null. */
    static Long seqOf(String value) {
        Matcher m = value == null ? null : SEQ.matcher(value);
        return m != null && m.find() ? Long.valueOf(m.group(1)) : null;
    }

    static void writeFile(Path file, String text) {
        try {
            Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
            Files.writeString(tmp, text);
            Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                    java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void remove(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            // a marker that cannot go is reported by the next reader, not here
        }
    }

    /** Sleep a (fractional) number of milliseconds. */
    static void sleepMs(double ms) {
        if (ms <= 0) {
            return;
        }
        try {
            TimeUnit.NANOSECONDS.sleep((long) (ms * 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The service's life: the pidfile and a start event at once; SIGTERM/SIGINT run {@code onStop} once (it
     * makes the main loop end) and start a watchdog: the main thread calls {@link #finish} when it has stopped
     * cleanly (exit 0), the watchdog exits 1 when that took longer than {@code graceMs}.
     */
    static final class Lifecycle {
        private final ServiceFiles files;
        private final Lines events;
        private final AtomicBoolean stopping = new AtomicBoolean();
        private final CountDownLatch finished = new CountDownLatch(1);

        Lifecycle(ServiceFiles files, Lines events, Runnable onStop, long graceMs) {
            this.files = files;
            this.events = events;
            try {
                Files.createDirectories(files.pid.getParent());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            long pid = ProcessHandle.current().pid();
            writeFile(files.pid, pid + "\n");
            events.write("ev", "start", "t", now(), "pid", pid);
            for (String name : new String[] {"TERM", "INT"}) {
                Signal.handle(new Signal(name), signal -> {
                    if (!stopping.compareAndSet(false, true)) {
                        return;
                    }
                    remove(files.ready);
                    events.write("ev", "stop", "t", now(), "signal", "SIG" + signal.getName());
                    Thread watchdog = new Thread(() -> {
                        try {
                            if (!finished.await(graceMs, TimeUnit.MILLISECONDS)) {
                                System.err.println("stop did not finish within " + graceMs + " ms");
                                finish(1);
                            }
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }, "stop-watchdog");
                    watchdog.setDaemon(true);
                    watchdog.start();
                    onStop.run();
                });
            }
        }

        boolean stopping() {
            return stopping.get();
        }

        /** Log the exit, remove the ready marker and the pidfile, and end the process with {@code code}. */
        void finish(int code) {
            synchronized (this) {
                events.write("ev", "exit", "t", now(), "code", code);
                remove(files.ready);
                remove(files.pid);
                finished.countDown();
                System.out.flush();
                System.err.flush();
                Runtime.getRuntime().halt(code);
            }
        }
    }

    /** Point the SLF4J simple binding at stderr with {@code level} (read at the first logger, so call first). */
    static void logLevel(String level) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level.toLowerCase(Locale.ROOT));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
    }
}
