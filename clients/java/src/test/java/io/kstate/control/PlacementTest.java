package io.kstate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** murmur2 and the placement over n: the vectors of clients/node/test/unit.test.js and tests/unit/client_piece. */
class PlacementTest {
    /** Kafka's org.apache.kafka.common.utils.UtilsTest#testMurmur2 (KAFKA_MURMUR2_VECTORS in the Python tests). */
    static final Map<String, Integer> KAFKA_VECTORS = Map.of(
            "21", -973932308,
            "foobar", -790332482,
            "a-little-bit-long-string", -985981536,
            "a-little-bit-longer-string", -1486304829,
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971,
            "abc", 479470107);

    /**
     * Computed with the Python client piece ({@code airflow_provider_kstate.client_piece.murmur2}): key,
     * murmur2, partition_for(key, 4), partition_for(key, 6).
     */
    static final Object[][] PYTHON = {
        {"k0000", -2077814501, 3, 3},
        {"k0037", -1880552165, 3, 3},
        {"k0074", 1284487910, 2, 2},
        {"k0111", 1279437735, 3, 3},
        {"k0148", -1231723979, 1, 3},
        {"k0185", 390426102, 2, 0},
        {"order-7-ключ", -1658833684, 0, 4},
        {"", 275646681, 1, 3},
    };

    @Test
    void murmur2IsKafkaUtilsMurmur2() {
        KAFKA_VECTORS.forEach((key, expected) -> assertEquals(expected, Placement.murmur2(key), key));
    }

    @Test
    void placementEqualsThePythonClient() {
        for (Object[] row : PYTHON) {
            String key = (String) row[0];
            assertEquals(row[1], Placement.murmur2(key), key);
            assertEquals(row[2], Placement.partitionFor(key, 4), key + " % 4");
            assertEquals(row[3], Placement.partitionFor(key, 6), key + " % 6");
        }
    }

    @Test
    void partitionForIsToPositiveModN() {
        for (Map.Entry<String, Integer> e : KAFKA_VECTORS.entrySet()) {
            for (int n : new int[] {1, 2, 3, 7, 12, 64}) {
                assertEquals((e.getValue() & 0x7fffffff) % n, Placement.partitionFor(e.getKey(), n));
            }
        }
        assertThrows(IllegalArgumentException.class, () -> Placement.partitionFor("k", 0));
    }

    @Test
    void pinningNKeepsKeysWhereTheyWere() {
        int moved = 0;
        for (int i = 0; i < 2000; i++) {
            byte[] key = ("key-" + i).getBytes(StandardCharsets.UTF_8);
            int p6 = Placement.partitionFor(key, 6);
            assertTrue(p6 >= 0 && p6 < 6);
            moved += Placement.partitionFor(key, 4) != p6 ? 1 : 0;
        }
        assertTrue(moved > 500, "raising n really moves keys, so pinning it matters: " + moved);
    }
}
