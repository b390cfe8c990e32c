'use strict'
// The consumer's side of the key-order barrier (docs/control-protocol.md, section 5a): which barrier is
// active per topic, which partitions this consumer holds, and the bookkeeping of each passage. No I/O:
// ControlledConsumer pauses, commits and reads offsets.

/** B[p]: the barrier offset of partition p (0 for a partition the barrier does not list: a new one). */
function barrierOffset (barrier, partition) {
  return partition >= 0 && partition < barrier.offsets.length ? barrier.offsets[partition] : 0
}

/** True when `committed` ({partition: offset}) is at or past the barrier on every partition it lists. */
function passed (barrier, committed) {
  return barrier.offsets.every((b, p) => (committed[p] === undefined ? -1 : committed[p]) >= b)
}

class Barriers {
  /**
   * @param {string} group the consumer's group
   * @param {string[]} topics the topics it consumes
   */
  constructor (group, topics) {
    this.group = group
    this.topics = new Set(topics)
    this.active = new Map() // topic -> barrier record in force
    this.held = new Map() // topic -> Set of partitions paused here
    this.seen = new Map() // topic -> highest barrier epoch seen
    this.released = new Map() // topic -> highest release epoch seen
    this.passages = []
  }

  /**
   * Apply a barrier record; return {action, ended}. action: 'pending' (acknowledge, look often), 'hold' (a
   * new barrier to hold at), 'off' (a newer record that does not hold this group: the topic's barrier, if
   * any, ends) or '' (ignored: another topic, or not newer than the last barrier seen for the topic).
   * ended: the barrier this record ended and the partitions held at it ({barrier, held}), or null.
   */
  onBarrier (barrier) {
    const { topic, epoch } = barrier
    if (!this.topics.has(topic) || epoch <= (this.seen.get(topic) || 0)) return { action: '', ended: null }
    this.seen.set(topic, epoch)
    const named = barrier.groups.includes(this.group)
    if (barrier.state === 'pending' && named) return { action: 'pending', ended: null }
    if (barrier.state !== 'hold' || !named || (this.released.get(topic) || 0) >= epoch) {
      return { action: 'off', ended: this.end(topic, 'off') }
    }
    const ended = this.end(topic, 'replaced')
    this.active.set(topic, barrier)
    this.held.set(topic, new Set())
    this.passages.push({ topic, epoch, seen: Date.now(), firstHold: null, released: null, by: '', heldPartitions: [] })
    return { action: 'hold', ended }
  }

  /** Apply a release record; true when it ends the barrier this consumer keeps for the topic. */
  onRelease (release) {
    if (release.group !== this.group || !this.topics.has(release.topic)) return false
    this.released.set(release.topic, Math.max(this.released.get(release.topic) || 0, release.epoch))
    const barrier = this.active.get(release.topic)
    return barrier !== undefined && release.epoch >= barrier.epoch
  }

  /** The first offset of `topic`/`partition` this consumer must not hand out (Infinity: none). */
  limit (topic, partition) {
    const barrier = this.active.get(topic)
    return barrier === undefined ? Infinity : barrierOffset(barrier, partition)
  }

  isHeld (topic, partition) {
    const held = this.held.get(topic)
    return held !== undefined && held.has(partition)
  }

  /** Record `partitions` of `topic` as held; return those newly held. */
  hold (topic, partitions) {
    const held = this.held.get(topic)
    if (held === undefined) return []
    const fresh = partitions.filter(p => !held.has(p))
    fresh.forEach(p => held.add(p))
    const passage = this.passage(topic)
    if (fresh.length && passage) {
      passage.heldPartitions = [...new Set([...passage.heldPartitions, ...fresh])].sort((a, b) => a - b)
      if (passage.firstHold === null) passage.firstHold = Date.now()
    }
    return fresh
  }

  /** Stop keeping `topic`'s barrier; return {barrier, held} (the partitions to resume) or null. */
  end (topic, by) {
    const barrier = this.active.get(topic)
    const held = [...(this.held.get(topic) || [])].sort((a, b) => a - b)
    this.active.delete(topic)
    this.held.delete(topic)
    if (barrier === undefined) return null
    this.released.set(topic, Math.max(this.released.get(topic) || 0, barrier.epoch))
    const passage = this.passage(topic, barrier.epoch)
    if (passage) Object.assign(passage, { released: Date.now(), by })
    return { barrier, held }
  }

  /** The consumer left its group: it holds nothing (the barriers stay). */
  forgetHeld () {
    for (const held of this.held.values()) held.clear()
  }

  passage (topic, epoch) {
    for (let i = this.passages.length - 1; i >= 0; i--) {
      const p = this.passages[i]
      if (p.topic === topic && (epoch === undefined || p.epoch === epoch)) return p
    }
    return null
  }
}

module.exports = { Barriers, barrierOffset, passed }
