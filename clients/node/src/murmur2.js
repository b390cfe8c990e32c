'use strict'
// Kafka's Java default partitioner: Utils.murmur2 (seed 0x9747b28c) and toPositive(murmur2(key)) % n.
// KafkaJS's DefaultPartitioner is the same hash over the topic's *full* partition count; a pinned layout
// needs it over n, so it is computed here.

const M = 0x5bd1e995
const SEED = 0x9747b28c

/** Utils.murmur2 of a Buffer (or a string, as UTF-8) as a signed 32-bit integer. */
function murmur2 (key) {
  const data = Buffer.isBuffer(key) ? key : Buffer.from(String(key), 'utf8')
  const length = data.length
  let h = (SEED ^ length) | 0
  const whole = length - (length % 4)
  for (let i = 0; i < whole; i += 4) {
    let k = data.readInt32LE(i)
    k = Math.imul(k, M)
    k ^= k >>> 24
    k = Math.imul(k, M)
    h = Math.imul(h, M) ^ k
  }
  const rest = length % 4
  if (rest >= 3) h ^= data[whole + 2] << 16
  if (rest >= 2) h ^= data[whole + 1] << 8
  if (rest >= 1) {
    h ^= data[whole]
    h = Math.imul(h, M)
  }
  h ^= h >>> 13
  h = Math.imul(h, M)
  h ^= h >>> 15
  return h | 0
}

/** The partition the Java default partitioner picks for a keyed record over `partitions` partitions. */
function partitionFor (key, partitions) {
  if (!(partitions > 0)) throw new RangeError(`partitions must be positive, got ${partitions}`)
  return (murmur2(key) & 0x7fffffff) % partitions
}

module.exports = { murmur2, partitionFor }
