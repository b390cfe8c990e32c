package io.kstate.control;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Utils;

/**
 * Where a producer places a keyed record over the live partition count {@code n} (section 5): Kafka's Java
 * default partitioner restricted to {@code n}, {@code Utils.toPositive(Utils.murmur2(keyBytes)) % n}.
 */
public final class Placement {
    private Placement() {}

    /** Kafka's {@code Utils.murmur2} (seed 0x9747b28c) as a signed 32-bit integer. */
    public static int murmur2(byte[] key) {
        return Utils.murmur2(key);
    }

    public static int murmur2(String key) {
        return murmur2(key.getBytes(StandardCharsets.UTF_8));
    }

    /** The partition of a keyed record over {@code partitions} partitions. */
    public static int partitionFor(byte[] key, int partitions) {
        if (partitions <= 0) {
            throw new IllegalArgumentException("partitions must be positive, got " + partitions);
        }
        return Utils.toPositive(Utils.murmur2(key)) % partitions;
    }

    public static int partitionFor(String key, int partitions) {
        return partitionFor(key.getBytes(StandardCharsets.UTF_8), partitions);
    }
}
