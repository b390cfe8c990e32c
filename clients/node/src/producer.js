'use strict'
// ControlledProducer: a KafkaJS producer that places every record itself over the topic's *live*
// partition count (docs/control-protocol.md, section 5): the latest layout/<topic> record when there is
// one, else the count in the metadata at first use. Keyed records: Java's default partitioner restricted to
// that count, murmur2(key) % n (KafkaJS's own DefaultPartitioner uses the full count); keyless records:
// round-robin. A layout with `hold` flushes, blocks send() for the topic and acknowledges `held`; the next
// layout (or hold_until) releases it.

const { Partitioners } = require('kafkajs')
const { ControlChannel, ControlTail, Follower } = require('./control')
const { createKafka, defaultLog, metadataCount } = require('./kafka')
const { partitionFor } = require('./murmur2')
const protocol = require('./protocol')

const LAYOUT_PREFIX = 'layout/'
const NO_HOLD_UNTIL_FAST_MS = 60000

class ControlledProducer {
  /**
   * @param {object} options
   * @param {object} options.kafka the options of `new Kafka(...)` (brokers, ssl, sasl, clientId, ...)
   * @param {string[]} [options.topics] topics to resolve (and acknowledge layouts of) at start
   * @param {string} [options.clientId] the id acknowledgements are keyed by (default kafka.clientId, else
   *   host-pid)
   * @param {object} [options.producer] further options of `kafka.producer(...)` (idempotent, ...)
   * @param {string} [options.controlTopic='_kstate_control']
   * @param {number} [options.checkIntervalMs=200] look at the control topic this often (wall clock)
   * @param {number} [options.heldCheckIntervalMs=10] ... while held
   * @param {boolean} [options.ensureControlTopic=true]
   * @param {number} [options.timeoutMs=30000] bound for start-up reads
   * @param {(level: string, message: string) => void} [options.log]
   */
  constructor (options) {
    const { kafka: kafkaConfig = {} } = options
    this.clientId = options.clientId || kafkaConfig.clientId || `${require('os').hostname()}-${process.pid}`
    this.topics = [...(options.topics || [])]
    this.controlTopic = options.controlTopic || protocol.DEFAULT_CONTROL_TOPIC
    this.checkIntervalMs = options.checkIntervalMs || 200
    this.ensureControlTopic = options.ensureControlTopic !== false
    this.timeoutMs = options.timeoutMs || 30000
    this.log = options.log || defaultLog
    const { kafka, clusters, newCluster } = createKafka({ clientId: this.clientId, ...kafkaConfig })
    this.kafka = kafka
    const before = clusters.length
    this.inner = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, ...(options.producer || {}) })
    this.cluster = clusters[before] // the inner producer's: its metadata decides which partitions it can reach
    this.channel = new ControlChannel(kafka, this.controlTopic)
    this.follower = new Follower({
      tail: new ControlTail(newCluster({ metadataMaxAge: 60000 }), this.controlTopic, this.timeoutMs),
      intervalMs: this.checkIntervalMs,
      fastIntervalMs: options.heldCheckIntervalMs || 10,
      onRecords: records => this._absorb(records),
      onTick: () => this._retryWaiting(),
      log: this.log
    })
    this.layouts = new Map() // topic -> newest layout record seen
    this.live = new Map() // topic -> partition count in use
    this.epochs = new Map() // topic -> epoch of the layout applied (absent: metadata count)
    this.heldTopics = new Map() // topic -> {layout, promise, resolve, timer}
    this.holds = [] // every hold applied: {topic, epoch, started, ended, blockedMs, expired}
    this._roundRobin = new Map()
    this._inflight = new Set()
    this._nextRetry = 0
    this._closed = false
  }

  /** Read the control topic to its end, connect, resolve `topics`, follow the control topic. */
  async start () {
    if (this.ensureControlTopic) await this.channel.ensure()
    const records = await this.follower.tail.catchUp()
    await this.inner.connect()
    await this._absorb(records)
    for (const topic of this.topics) await this.partitions(topic)
    this.follower.start()
    return this
  }

  /** The live partition count of `topic` (resolved on first use). */
  async partitions (topic) {
    return this.live.has(topic) ? this.live.get(topic) : this._resolve(topic)
  }

  /** The epoch of the layout in use for `topic` (0: none, the metadata count). */
  layoutEpoch (topic) {
    return this.epochs.get(topic) || 0
  }

  /** True while send() for `topic` is blocked by a hold. */
  held (topic) {
    return this.heldTopics.has(topic)
  }

  /**
   * Like KafkaJS `producer.send({topic, messages, acks, timeout, compression})`; each message without a
   * `partition` gets one from the live layout. Blocks while the topic is held. Resolves to KafkaJS's
   * RecordMetadata[] with two more properties: `partitions` (the partition of each message, in order) and
   * `livePartitions` (the count they were placed over).
   */
  async send (record) {
    const { topic } = record
    for (;;) {
      await this._waitReleased(topic)
      if (this.live.has(topic)) break
      await this._resolve(topic)
    }
    const n = this.live.get(topic)
    const messages = record.messages.map(m => (m.partition != null && m.partition >= 0 ? m : { ...m, partition: this._place(topic, m.key, n) }))
    const sending = this.inner.send({ ...record, messages })
    this._inflight.add(sending)
    try {
      const result = await sending
      const reached = new Set(result.map(r => r.partition))
      const missed = [...new Set(messages.map(m => m.partition))].filter(p => !reached.has(p))
      if (missed.length) throw new Error(`topic ${topic}: partitions ${missed} are not in the producer's metadata: not sent`)
      return Object.assign(result, { partitions: messages.map(m => m.partition), livePartitions: n })
    } finally {
      this._inflight.delete(sending)
    }
  }

  /** Wait until every send() in progress has finished (KafkaJS has no client-side buffer). */
  async flush () {
    while (this._inflight.size) await Promise.allSettled([...this._inflight])
  }

  async close () {
    if (this._closed) return
    this._closed = true
    await this.follower.stop()
    for (const topic of [...this.heldTopics.keys()]) this._unhold(topic, false)
    await this.flush()
    await this.inner.disconnect()
    await this.channel.close()
  }

  // -- placement -----------------------------------------------------------------------------------------

  _place (topic, key, n) {
    if (key === null || key === undefined) {
      const next = this._roundRobin.get(topic) || 0
      this._roundRobin.set(topic, next + 1)
      return next % n
    }
    return partitionFor(key, n)
  }

  // -- layouts -------------------------------------------------------------------------------------------

  async _resolve (topic) {
    const layout = this.layouts.get(topic)
    if (layout !== undefined && (await this._switch(layout))) return this.live.get(topic)
    let n = await metadataCount(this.cluster, topic)
    if (n <= 0) throw new Error(`topic ${topic} has no partitions in the metadata`)
    if (layout !== undefined) n = Math.min(n, layout.partitions) // not all visible yet: retried on each look
    this.live.set(topic, n)
    return n
  }

  /** Keep the newest layout per topic; apply it at once for topics in use. */
  async _absorb (records) {
    for (const [key, record] of records) {
      if (!key.startsWith(LAYOUT_PREFIX) || record === null || record.kind !== 'layout') continue
      const known = this.layouts.get(record.topic)
      if (known !== undefined && record.epoch <= known.epoch) continue
      this.layouts.set(record.topic, record)
      if (this.live.has(record.topic)) await this._switch(record)
    }
  }

  /** A layout whose partitions were not in the producer's metadata yet: retried every checkIntervalMs. */
  async _retryWaiting () {
    const waiting = [...this.layouts.values()].filter(l => this.live.has(l.topic) && l.epoch > this.layoutEpoch(l.topic))
    if (waiting.length === 0 || Date.now() < this._nextRetry) return
    this._nextRetry = Date.now() + this.checkIntervalMs
    for (const layout of waiting) await this._switch(layout)
  }

  /**
   * Apply a layout: make the producer's metadata show its partitions (else false: retried), then hold
   * (a layout with hold) or switch, release a hold and acknowledge `layout`.
   */
  async _switch (layout) {
    const { topic } = layout
    if (layout.epoch <= this.layoutEpoch(topic)) return this.live.has(topic)
    if ((await metadataCount(this.cluster, topic, true)) < layout.partitions) {
      this.log('warn', `topic ${topic}: metadata lacks partitions of the layout of ${layout.partitions}; retrying`)
      return false
    }
    this.live.set(topic, layout.partitions)
    this.epochs.set(topic, layout.epoch)
    if (layout.hold) {
      await this._hold(layout)
      return true
    }
    this._unhold(topic, false)
    await this._ack(layout, 'layout')
    return true
  }

  /** Flush what was sent, block send() for the topic, acknowledge `held`. */
  async _hold (layout) {
    const { topic } = layout
    const current = this.heldTopics.get(topic)
    const entry = current || {}
    if (!current) {
      entry.promise = new Promise(resolve => { entry.resolve = resolve })
      this.heldTopics.set(topic, entry)
      this.holds.push({ topic, epoch: layout.epoch, started: Date.now(), ended: null, blockedMs: 0, expired: false })
    }
    clearTimeout(entry.timer)
    entry.layout = layout
    const wait = layout.hold_until ? layout.hold_until - Date.now() : NO_HOLD_UNTIL_FAST_MS
    if (layout.hold_until) entry.timer = setTimeout(() => this._unhold(topic, true), Math.max(wait, 0))
    this.follower.hurry(Math.max(wait, 1000)) // the release comes within a control round trip
    await this.flush()
    await this._ack(layout, 'held')
    this.log('info', `topic ${topic}: producer held (epoch ${layout.epoch})`)
  }

  _unhold (topic, expired) {
    const entry = this.heldTopics.get(topic)
    if (entry === undefined) return
    this.heldTopics.delete(topic)
    clearTimeout(entry.timer)
    const hold = this.holds.filter(h => h.topic === topic).pop()
    Object.assign(hold, { ended: Date.now(), expired })
    this.follower.hurry(0)
    if (expired) this.log('warn', `topic ${topic}: the hold outlived its hold_until: producing again on the held layout`)
    entry.resolve()
  }

  async _waitReleased (topic) {
    while (this.heldTopics.has(topic)) {
      const hold = this.holds.filter(h => h.topic === topic).pop()
      const began = Date.now()
      hold.blockedSince = began
      await this.heldTopics.get(topic).promise
      hold.blockedMs += Date.now() - began
      hold.blockedSince = null
    }
  }

  async _ack (layout, state) {
    const record = protocol.ack({ client: this.clientId, epoch: layout.epoch, state, topic: layout.topic, partitions: layout.partitions })
    try {
      await this.channel.publish(record)
    } catch (e) {
      this.log('warn', `topic ${layout.topic}: could not acknowledge ${state}: ${e.message}`)
    }
  }
}

module.exports = { ControlledProducer }
