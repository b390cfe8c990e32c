'use strict'
// The consumer's side of rules 4.7 and 4.8 (docs/control-protocol.md), without I/O: which offsets a consumer
// commits on assignment (a position on every partition it is assigned, only where the group has none) and
// which topics it must take new partitions of now (a `pending` barrier naming its group with a `partitions`
// count its metadata lacks). ControlledConsumer reads offsets, refreshes metadata and commits.

/**
 * Rule 4.7: the offsets to commit, [{topic, partition, offset}]: each of `assigned` ([{topic, partition}])
 * where `committed` (Map key -> offset, a key absent or < 0: none) has no offset and `starts` (Map key ->
 * offset, where the consumer starts: the log start or end) has one. Never over a committed offset; a
 * partition without a start yet is left out (tried again at the next look).
 */
function seeds (assigned, committed, starts, key) {
  const out = []
  for (const { topic, partition } of assigned) {
    const k = key(topic, partition)
    const have = committed.get(k)
    const start = starts.get(k)
    if ((have === undefined || have < 0) && start !== undefined && start >= 0) out.push({ topic, partition, offset: start })
  }
  return out
}

class Growth {
  /**
   * @param {string} group the consumer's group
   * @param {string[]} topics the topics it consumes
   */
  constructor (group, topics) {
    this.group = group
    this.topics = new Set(topics)
    this.targets = new Map() // topic -> {partitions, deadline}
  }

  /**
   * Rule 4.8: a `pending` barrier of a topic it reads that names its group and carries `partitions` larger
   * than `metadataCount` makes the topic a target until `now + boundMs`; true when it does.
   */
  onPending (barrier, metadataCount, now, boundMs) {
    const partitions = barrier.partitions || 0
    if (barrier.state !== 'pending' || !this.topics.has(barrier.topic) || !barrier.groups.includes(this.group) ||
        partitions <= metadataCount) return false
    const have = this.targets.get(barrier.topic)
    this.targets.set(barrier.topic, { partitions: Math.max(partitions, have ? have.partitions : 0), deadline: now + boundMs })
    return true
  }

  /** After a metadata refresh showing `count`: 'reached', 'expired' (the bound passed) or '' (look again). */
  check (topic, count, now) {
    const target = this.targets.get(topic)
    if (target === undefined) return ''
    if (count >= target.partitions) {
      this.targets.delete(topic)
      return 'reached'
    }
    if (now >= target.deadline) {
      this.targets.delete(topic)
      return 'expired'
    }
    return ''
  }

  clear () {
    this.targets.clear()
  }
}

module.exports = { Growth, seeds }
