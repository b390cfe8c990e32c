'use strict'
// The consumer's side of rules 4.7 and 4.8 (docs/control-protocol.md), without I/O: which offsets a consumer
// commits on assignment (a position on every partition it is assigned, only where the group has none) and
// which topics it must take new partitions of now (a `pending` barrier naming its group with a `partitions`
// count its metadata lacks). After such a barrier carrying `grown_from`, the new partitions start at offset 0
// without a ListOffsets: nothing is written there before the producers switch, and their leaders may still be
// loading (seconds for thousands of new partitions). ControlledConsumer reads offsets, refreshes metadata and
// commits.

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
    this.grown = new Map() // topic -> {from, to}: the latest grow announced (kept across joins: it is the topic's)
  }

  /** A `pending` barrier of a topic it reads, naming its group. */
  _names (barrier) {
    return barrier.state === 'pending' && this.topics.has(barrier.topic) && barrier.groups.includes(this.group)
  }

  /**
   * Rule 4.8: a `pending` barrier of a topic it reads that names its group and carries `partitions` larger
   * than `metadataCount` makes the topic a target until `now + boundMs`; true when it does.
   */
  onPending (barrier, metadataCount, now, boundMs) {
    const partitions = barrier.partitions || 0
    if (!this._names(barrier) || partitions <= metadataCount) return false
    const have = this.targets.get(barrier.topic)
    this.targets.set(barrier.topic, { partitions: Math.max(partitions, have ? have.partitions : 0), deadline: now + boundMs })
    return true
  }

  /**
   * Rules 4.7 and 4.8: a `pending` barrier of a topic it reads that names its group and carries
   * `0 < grown_from < partitions` makes partitions `grown_from .. partitions-1` new (the producers are pinned
   * to the old count: they are empty); it replaces an earlier grow of the topic. True when it does; any other
   * barrier changes nothing (those partitions keep the ListOffsets).
   */
  onGrown (barrier) {
    const from = barrier.grown_from || 0
    const to = barrier.partitions || 0
    if (!this._names(barrier) || from <= 0 || from >= to) return false
    this.grown.set(barrier.topic, { from, to })
    return true
  }

  /** Whether `partition` of `topic` is a new partition of the latest grow announced for the topic. */
  isNew (topic, partition) {
    const grown = this.grown.get(topic)
    return grown !== undefined && partition >= grown.from && partition < grown.to
  }

  /**
   * Rule 4.7: `bare` ([{topic, partition}], assigned without a committed offset) as {fresh, asked}: the new
   * partitions of an announced grow, which start at 0 without asking, and the others, whose start a
   * ListOffsets resolves (the log start with fromBeginning, else the end).
   */
  split (bare) {
    const fresh = bare.filter(({ topic, partition }) => this.isNew(topic, partition))
    return { fresh, asked: bare.filter(e => !fresh.includes(e)) }
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

  /** Forget every target (a new membership reads fresh metadata); the grows announced stay. */
  clear () {
    this.targets.clear()
  }
}

module.exports = { Growth, seeds }
