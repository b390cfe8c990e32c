'use strict'
// The control topic: publish records (ControlChannel), read partition 0 without a group (ControlTail) and
// look at it on the multiples of an interval on the wall clock (Follower).

const { Partitioners } = require('kafkajs')
const { CONTROL_TOPIC_CONFIG, decode, encode, recordKey } = require('./protocol')
const { sleep } = require('./kafka')

const FETCH_MAX_BYTES = 1 << 20

class ControlChannel {
  /**
   * @param {import('kafkajs').Kafka} kafka
   * @param {string} topic the control topic
   */
  constructor (kafka, topic) {
    this.kafka = kafka
    this.topic = topic
    this.producer = null
  }

  /** Create the control topic (one partition, compacted, LogAppendTime) unless it exists. */
  async ensure () {
    const admin = this.kafka.admin()
    await admin.connect()
    try {
      if ((await admin.listTopics()).includes(this.topic)) return
      const configEntries = Object.entries(CONTROL_TOPIC_CONFIG).map(([name, value]) => ({ name, value }))
      await admin.createTopics({ topics: [{ topic: this.topic, numPartitions: 1, configEntries }], waitForLeaders: true })
    } catch (e) {
      if (e.type !== 'TOPIC_ALREADY_EXISTS') throw e
    } finally {
      await admin.disconnect()
    }
  }

  /** Write records (acks=all, idempotent) and wait until the broker has them all. */
  async publish (...records) {
    if (this.producer === null) {
      this.producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner
      })
      await this.producer.connect()
    }
    const messages = records.map(r => ({ key: recordKey(r), value: encode(r), partition: 0 }))
    await this.producer.send({ topic: this.topic, acks: -1, messages })
  }

  async close () {
    if (this.producer !== null) {
      await this.producer.disconnect()
      this.producer = null
    }
  }
}

class ControlTail {
  /**
   * Follows partition 0 of the control topic: one ListOffsets per look, a Fetch only when the end moved.
   * @param {object} cluster a KafkaJS Cluster (see kafka.js)
   * @param {string} topic
   * @param {number} timeoutMs bound for a read to the end
   */
  constructor (cluster, topic, timeoutMs = 30000) {
    this.cluster = cluster
    this.topic = topic
    this.timeoutMs = timeoutMs
    this.position = 0
    this.connected = false
  }

  async _connect () {
    if (this.connected) return
    await this.cluster.connect()
    const deadline = Date.now() + this.timeoutMs
    for (;;) { // a just-created topic may take a moment to appear in the metadata
      try {
        await this.cluster.addTargetTopic(this.topic)
        if (this.cluster.findTopicPartitionMetadata(this.topic).length > 0) break
      } catch (e) {
        if (Date.now() > deadline) throw e
      }
      if (Date.now() > deadline) throw new Error(`control topic ${this.topic} not found`)
      await this.cluster.refreshMetadata().catch(() => {})
      await sleep(100)
    }
    this.connected = true
  }

  async end () {
    await this._connect()
    const [t] = await this.cluster.fetchTopicsOffset([
      { topic: this.topic, partitions: [{ partition: 0 }], fromBeginning: false }
    ])
    return Number(t.partitions[0].offset)
  }

  /** Read from offset 0 to the current end: [[key, record|null], ...] in log order. */
  async catchUp () {
    this.position = 0
    return this._readTo(await this.end())
  }

  /** The records appended since the last read ([] after one ListOffsets when nothing is new). */
  async fetchNew () {
    const high = await this.end()
    return high > this.position ? this._readTo(high) : []
  }

  async _readTo (high) {
    const out = []
    const deadline = Date.now() + this.timeoutMs
    while (this.position < high) {
      if (Date.now() > deadline) throw new Error(`control topic ${this.topic}: read timed out at ${this.position}/${high}`)
      const messages = await this._fetch(this.position)
      const fresh = messages.filter(m => Number(m.offset) >= this.position)
      for (const m of fresh) {
        this.position = Math.max(this.position, Number(m.offset) + 1)
        if (m.isControlRecord) continue
        out.push([m.key === null ? '' : m.key.toString('utf8'), decode(m.value)])
      }
      // nothing readable below the end (compaction can leave an empty batch): the end is reached
      if (fresh.length === 0) this.position = high
    }
    return out
  }

  async _fetch (offset) {
    const leaders = this.cluster.findLeaderForPartitions(this.topic, [0])
    const [nodeId] = Object.keys(leaders)
    if (nodeId === undefined) {
      await this.cluster.refreshMetadata()
      return []
    }
    const broker = await this.cluster.findBroker({ nodeId })
    const { responses } = await broker.fetch({
      maxWaitTime: 0,
      minBytes: 1,
      maxBytes: FETCH_MAX_BYTES,
      isolationLevel: 1,
      topics: [{ topic: this.topic, partitions: [{ partition: 0, fetchOffset: String(offset), maxBytes: FETCH_MAX_BYTES }] }]
    })
    return responses.flatMap(r => r.partitions.flatMap(p => p.messages || []))
  }

  async close () {
    if (this.connected) await this.cluster.disconnect()
    this.connected = false
  }
}

class Follower {
  /**
   * Looks at the control topic on the multiples of `intervalMs` on the wall clock (so every member of a
   * group, in every process, sees a command at the same instant), every `fastIntervalMs` while hurried.
   * `onRecords(records)` and `onTick()` run in the follower's chain: one look at a time, in order.
   */
  constructor ({ tail, intervalMs, fastIntervalMs = 10, onRecords, onTick = async () => {}, log }) {
    this.tail = tail
    this.intervalMs = intervalMs
    this.fastIntervalMs = Math.min(fastIntervalMs, intervalMs)
    this.fastUntil = 0
    this.onRecords = onRecords
    this.onTick = onTick
    this.log = log
    this.timer = null
    this.stopped = true
    this.running = null
  }

  start () {
    this.stopped = false
    this._schedule()
  }

  _schedule () {
    if (this.stopped) return
    const interval = Date.now() < this.fastUntil ? this.fastIntervalMs : this.intervalMs
    this.timer = setTimeout(() => { this.running = this._tick() }, interval - (Date.now() % interval))
  }

  async _tick () {
    this.timer = null
    try {
      const records = await this.tail.fetchNew()
      if (records.length && !this.stopped) await this.onRecords(records)
      if (!this.stopped) await this.onTick()
    } catch (e) {
      this.log('warn', `control topic ${this.tail.topic}: ${e.message}`)
    } finally {
      this.running = null
      this._schedule()
    }
  }

  /** Look every fastIntervalMs for the next `ms` (0: back to intervalMs). */
  hurry (ms) {
    this.fastUntil = ms > 0 ? Date.now() + ms : 0
    if (ms > 0 && this.timer !== null) {
      clearTimeout(this.timer)
      this._schedule()
    }
  }

  async stop () {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    if (this.running !== null) await this.running.catch(() => {})
    await this.tail.close()
  }
}

module.exports = { ControlChannel, ControlTail, Follower }
