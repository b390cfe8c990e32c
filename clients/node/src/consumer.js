'use strict'
// ControlledConsumer: a KafkaJS consumer that honours the kstate control protocol
// (docs/control-protocol.md, sections 4 and 5a).
//
// The application supplies `eachMessage`; the wrapper runs the inner KafkaJS consumer with `eachBatch` and
// hands the batch's records to it one at a time, so every record is checked against the key-order barrier
// *before* it reaches the application, and the offset of a record is resolved (and later committed) only
// after the application has processed it. Commands are applied by the control follower, serially: a pause
// waits for the record in progress, commits, and leaves the group by disconnecting the inner consumer; a
// resume creates a new inner consumer.
//
// Rule 4.7 (a position on every partition it is assigned): at each join, the partitions whose committed offset
// this member does not know are paused before anything is fetched; one OffsetFetch finds those on which the
// group has none, one ListOffsets where the consumer starts there (fromBeginning: the log start, else the end),
// and that offset is committed (never over a committed one) before the partition is resumed; a partition whose
// start cannot be read yet stays paused and is tried again at each look. After a grow's `pending` barrier
// carrying `grown_from`, a new partition's start is offset 0, committed without a ListOffsets (it is empty
// until the producers switch; its leader may still be loading).
// Rule 4.8 (take new partitions at once): a `pending` barrier naming the group with a `partitions` count the
// inner consumer's metadata lacks: refresh that metadata (its Cluster) at each look until it shows the count
// (bounded by timeoutMs); KafkaJS's next fetch then sees the topic changed (KafkaJSStaleTopicMetadataAssignment)
// and the member rejoins; the leader refreshes its metadata when it assigns, so the new partitions are assigned.

const os = require('os')
const { Barriers, barrierOffset, passed } = require('./barrier')
const { ControlChannel, ControlTail, Follower } = require('./control')
const { Growth, seeds } = require('./growth')
const { byTopic, createKafka, commitWithoutMembership, defaultLog, fetchCommitted, sleep, startOffsets } = require('./kafka')
const protocol = require('./protocol')

const PAUSED_FAST_MS = 10000 // look every pausedCheckIntervalMs for this long after a pause
const PENDING_FAST_MS = 30000 // ... and after a barrier is announced
const REBALANCE_ERRORS = new Set(['REBALANCE_IN_PROGRESS', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID'])

/** The client id: the option, else the KafkaJS clientId, else host-pid; the two must not differ. */
function resolveClientId (clientId, kafkaConfig) {
  if (clientId && kafkaConfig.clientId && clientId !== kafkaConfig.clientId) {
    throw new Error(`clientId ${clientId} differs from the KafkaJS clientId ${kafkaConfig.clientId}: the plan matches members by it`)
  }
  return clientId || kafkaConfig.clientId || `${os.hostname()}-${process.pid}`
}

const tpKey = (topic, partition) => `${topic}\u0000${partition}`
const splitKey = key => {
  const [topic, partition] = key.split('\u0000')
  return { topic, partition: Number(partition) }
}
/** [{topic, partition}] as KafkaJS's pause()/resume() argument: [{topic, partitions: [p, ...]}]. */
const toPause = entries => {
  const out = new Map()
  for (const { topic, partition } of entries) out.set(topic, [...(out.get(topic) || []), partition])
  return [...out].map(([topic, partitions]) => ({ topic, partitions }))
}

class ControlledConsumer {
  /**
   * @param {object} options
   * @param {object} options.kafka the options of `new Kafka(...)` (brokers, ssl, sasl, clientId, ...)
   * @param {string} options.groupId the controlled group
   * @param {string[]} options.topics the topics to subscribe to
   * @param {(payload: {topic, partition, message, heartbeat}) => Promise<void>} options.eachMessage
   * @param {string} [options.clientId] the id acknowledgements are keyed by; also the KafkaJS clientId
   *   (default: kafka.clientId, else host-pid)
   * @param {object} [options.consumer] further options of `kafka.consumer(...)` (sessionTimeout, ...)
   * @param {boolean} [options.fromBeginning=false] where a partition without a committed offset starts
   * @param {string} [options.controlTopic='_kstate_control']
   * @param {number} [options.checkIntervalMs=200] look at the control topic this often (wall clock)
   * @param {number} [options.pausedCheckIntervalMs=10] ... while paused or a barrier is announced
   * @param {number} [options.autoCommitInterval=1000] commit processed offsets at least this often (ms);
   *   also at the end of every batch, at a barrier and before leaving the group
   * @param {boolean} [options.ensureControlTopic=true] create the control topic if it is missing
   * @param {number} [options.timeoutMs=30000] bound for start-up reads and the commit after leaving
   * @param {(state: string) => void} [options.onStateChange] called with 'running' / 'paused'
   * @param {(consumer: ControlledConsumer) => Promise<void>} [options.onPause] called on a pause before
   *   the commit (flush a batch the application keeps)
   * @param {(assignment: Object<string, number[]>) => void} [options.onAssign] called with
   *   {topic: partitions} after every join of the group
   * @param {(level: string, message: string) => void} [options.log]
   */
  constructor (options) {
    const { kafka: kafkaConfig = {}, groupId, topics, eachMessage } = options
    if (!groupId) throw new Error('ControlledConsumer needs a groupId')
    if (!Array.isArray(topics) || topics.length === 0) throw new Error('ControlledConsumer needs topics')
    if (typeof eachMessage !== 'function') throw new Error('ControlledConsumer needs eachMessage')
    this.group = groupId
    this.topics = [...topics]
    this.clientId = resolveClientId(options.clientId, kafkaConfig)
    this.eachMessage = eachMessage
    this.consumerOptions = { ...(options.consumer || {}) }
    delete this.consumerOptions.groupId
    this.fromBeginning = Boolean(options.fromBeginning)
    this.controlTopic = options.controlTopic || protocol.DEFAULT_CONTROL_TOPIC
    this.checkIntervalMs = options.checkIntervalMs || 200
    this.autoCommitInterval = options.autoCommitInterval == null ? 1000 : options.autoCommitInterval
    this.ensureControlTopic = options.ensureControlTopic !== false
    this.timeoutMs = options.timeoutMs || 30000
    this.onStateChange = options.onStateChange || (() => {})
    this.onPause = options.onPause || null
    this.onAssign = options.onAssign || (() => {})
    this.log = options.log || defaultLog

    const { kafka, clusters, newCluster } = createKafka({ ...kafkaConfig, clientId: this.clientId })
    this.kafka = kafka
    this._clusters = clusters // every cluster the client created: the inner consumer's is the newest at _join
    this._innerCluster = null
    this.cluster = newCluster({ metadataMaxAge: 60000 }) // the tail's, and the commit without membership
    this.channel = new ControlChannel(kafka, this.controlTopic)
    this.admin = kafka.admin()
    this.barriers = new Barriers(this.group, this.topics)
    this.growth = new Growth(this.group, this.topics)
    this.follower = new Follower({
      tail: new ControlTail(this.cluster, this.controlTopic, this.timeoutMs),
      intervalMs: this.checkIntervalMs,
      fastIntervalMs: options.pausedCheckIntervalMs || 10,
      onRecords: records => this._onRecords(records),
      onTick: async () => {
        await this._reconcile()
        await this._seed(this.inner)
        await this._takeNewPartitions()
        await this._releaseCheck()
      },
      log: this.log
    })
    this.epoch = 0
    this.inner = null
    this.assignment = new Map() // topic -> partitions, from the latest join
    this._key = protocol.keys.command(this.group)
    this._next = new Map() // tpKey -> the offset after the last record processed (partitions held now)
    this._committed = new Map() // tpKey -> the offset committed last (partitions held now)
    this._moved = new Map() // tpKey -> processed here, not committed, the partition went to another member
    this._generation = 0 // counts the joins of the group (GROUP_JOIN): a batch of an older one is stale
    this._memberId = null
    this._lastCommit = 0
    this._leaving = false
    this._busy = 0
    this._idleWaiters = []
    this._nextReleaseCheck = 0
    this._seeding = new Set() // tpKey: assigned, the group's committed offset not known here yet (paused)
    this._seedRun = null
    this._seedAgain = false
    this._wanted = null // 'paused' / 'running' until the last command is applied
    this._closed = false
  }

  get state () {
    return this.inner === null ? 'paused' : 'running'
  }

  get paused () {
    return this.inner === null
  }

  /** The key-order barriers this consumer went through (or keeps now), oldest first. */
  get passages () {
    return this.barriers.passages
  }

  /** {topic: [partitions]} held here at a key-order barrier. */
  heldPartitions () {
    const out = {}
    for (const [topic, held] of this.barriers.held) if (held.size) out[topic] = [...held].sort((a, b) => a - b)
    return out
  }

  // -- start and stop ------------------------------------------------------------------------------------

  /** Read the control topic to its end, then join the group unless its latest command is pause. */
  async start () {
    if (this.ensureControlTopic) await this.channel.ensure()
    await this.admin.connect()
    let latest = null
    for (const [key, record] of await this.follower.tail.catchUp()) {
      if (record !== null && (record.kind === 'barrier' || record.kind === 'release')) {
        await this._barrierRecord(record, false)
      } else if (key === this._key) {
        if (record === null) latest = null // a tombstone deletes the instruction
        else if (record.kind === 'command' && record.group === this.group) {
          latest = latest === null || record.epoch > latest.epoch ? record : latest
        }
      }
    }
    this.epoch = latest === null ? 0 : latest.epoch
    if (latest !== null && latest.command === 'pause') {
      this.log('info', `group ${this.group} is paused (epoch ${latest.epoch}): starting without joining`)
      this.follower.hurry(PAUSED_FAST_MS)
      this.onStateChange('paused')
      await this._ack('paused')
    } else {
      await this._join()
      await this._ack('running') // the presence acknowledgement, also without any command (epoch 0)
    }
    this.follower.start()
    return this
  }

  /** Stop following the control topic, commit what was processed and leave the group. */
  async close () {
    if (this._closed) return
    this._closed = true
    await this.follower.stop()
    if (this.inner !== null) await this._leave(false)
    await this.channel.close()
    await this.admin.disconnect()
  }

  // -- control records -----------------------------------------------------------------------------------

  async _onRecords (records) {
    for (const [key, record] of records) {
      if (record === null) continue
      if (key === this._key && record.kind === 'command') await this._apply(record)
      else if (record.kind === 'barrier' || record.kind === 'release') await this._barrierRecord(record, true)
    }
  }

  async _apply (command) {
    if (command.group !== this.group || command.epoch <= this.epoch) {
      this.log('debug', `ignoring stale command ${JSON.stringify(command)} (applied epoch ${this.epoch})`)
      return
    }
    this.epoch = command.epoch
    this._wanted = command.command === 'pause' ? 'paused' : 'running'
    await this._reconcile()
  }

  /** Bring the membership to the last command applied (again on every look, after a failure), then ack. */
  async _reconcile () {
    if (this._wanted === null) return
    try {
      if (this._wanted === 'paused' && this.inner !== null) await this._leave(true)
      if (this._wanted === 'running' && this.inner === null) await this._join()
    } catch (e) {
      this.log('warn', `group ${this.group}: could not apply ${this._wanted} (epoch ${this.epoch}), retrying: ${e.message}`)
      return
    }
    const state = this._wanted
    this._wanted = null
    await this._ack(state)
  }

  async _barrierRecord (record, ack) {
    if (record.kind === 'release') {
      if (!this.barriers.onRelease(record)) return
      this._resume(this.barriers.end(record.topic, 'controller'))
      if (ack) await this._ack('released', record.epoch, record.topic)
      return
    }
    const { action, ended } = this.barriers.onBarrier(record)
    this._resume(ended)
    if (action === 'pending') {
      this.follower.hurry(PENDING_FAST_MS)
      if (ack && this.growth.onGrown(record)) {
        this.log('info', `group ${this.group}: ${record.topic} grew from ${record.grown_from} to ${record.partitions} partitions: the new ones start at 0`)
      }
      if (ack && this.inner !== null && (record.partitions || 0) > 0) {
        const count = this._metadataCount(record.topic)
        if (this.growth.onPending(record, count, Date.now(), this.timeoutMs)) {
          this.log('info', `group ${this.group}: ${record.topic} has ${record.partitions} partitions, the consumer's metadata ${count}: taking the new ones now`)
        }
      }
      if (ack) await this._ack('pending', record.epoch, record.topic)
    } else if (action === 'hold') {
      this.log('info', `group ${this.group}: key-order barrier of ${record.topic} (epoch ${record.epoch}): holding at ${JSON.stringify(record.offsets)}`)
      this._nextReleaseCheck = 0
      if (this.inner !== null) await this._holdReached(this.inner, record.topic, this.assignment.get(record.topic) || [])
      if (ack) await this._ack('barrier', record.epoch, record.topic)
    }
  }

  /** Resume the partitions a barrier held here ({barrier, held} from Barriers.end, or null). */
  _resume (ended) {
    if (ended === null || ended.held.length === 0 || this.inner === null) return
    const partitions = ended.held.filter(p => !this._seeding.has(tpKey(ended.barrier.topic, p)))
    if (partitions.length) this.inner.resume([{ topic: ended.barrier.topic, partitions }])
    this.log('info', `group ${this.group}: passed the key-order barrier of ${ended.barrier.topic} (epoch ${ended.barrier.epoch})`)
  }

  /** Every checkIntervalMs while a barrier is kept: release it once the group committed past it. */
  async _releaseCheck () {
    if (this.barriers.active.size === 0 || this.inner === null || Date.now() < this._nextReleaseCheck) return
    this._nextReleaseCheck = Date.now() + this.checkIntervalMs
    for (const [topic, barrier] of [...this.barriers.active]) {
      const committed = await this._committedOffsets(topic)
      if (committed !== null && passed(barrier, committed)) {
        this._resume(this.barriers.end(topic, 'committed'))
        await this._ack('released', barrier.epoch, topic)
      }
    }
  }

  async _committedOffsets (topic) {
    try {
      const [t] = await this.admin.fetchOffsets({ groupId: this.group, topics: [topic] })
      const out = {}
      for (const { partition, offset } of t.partitions) if (Number(offset) >= 0) out[partition] = Number(offset)
      return out
    } catch (e) {
      this.log('debug', `committed offsets of ${this.group}: ${e.message}`)
      return null
    }
  }

  async _ack (state, epoch = this.epoch, topic = '') {
    const record = protocol.ack({ client: this.clientId, epoch, state, group: this.group, topic })
    try {
      await this.channel.publish(record)
    } catch (e) {
      this.log('warn', `group ${this.group}: could not acknowledge ${state}: ${e.message}`)
    }
  }

  // -- membership ----------------------------------------------------------------------------------------

  async _join () {
    this._next.clear()
    this._committed.clear()
    this._moved.clear()
    this._memberId = null
    this._lastCommit = Date.now()
    this._seeding.clear()
    this.growth.clear() // a new membership reads fresh metadata
    const created = this._clusters.length
    const inner = this.kafka.consumer({ ...this.consumerOptions, groupId: this.group })
    this._innerCluster = this._clusters.length === created + 1 ? this._clusters[created] : null
    inner.on(inner.events.GROUP_JOIN, event => this._onGroupJoin(inner, event.payload))
    try {
      await inner.connect()
      await inner.subscribe({ topics: this.topics, fromBeginning: this.fromBeginning })
      this.inner = inner
      await inner.run({
        autoCommit: false, // the wrapper commits what the application processed (see _eachBatch)
        eachBatchAutoResolve: false,
        eachBatch: payload => this._eachBatch(inner, payload)
      })
    } catch (e) {
      this.inner = null
      await inner.disconnect().catch(() => {})
      throw e
    }
    this.follower.hurry(0)
    this.onStateChange('running')
  }

  /**
   * Leave the group: stop handing out records, wait for the one in progress, commit what was processed
   * (in the batch, as a member), disconnect (LeaveGroup). If that commit failed (the group was
   * rebalancing: another member left first), commit the same offsets without membership once the broker
   * accepts it (the group is EMPTY), with what was processed here of partitions that moved to another
   * member since: each only where it is ahead of the group's committed offset.
   */
  async _leave (pausing) {
    this._leaving = true
    try {
      if (pausing && this.onPause !== null) await this.onPause(this)
      await this._idle()
      const inner = this.inner
      const leftover = [...this._uncommitted(), ...this._movedAway()]
      this.inner = null
      this.assignment = new Map()
      this._seeding.clear()
      this.barriers.forgetHeld()
      await inner.disconnect().catch(e => this.log('warn', `group ${this.group}: disconnect: ${e.message}`))
      if (leftover.length) {
        // out of the group, the commit still to land (once EMPTY): 'left' lets the controller remove a member
        // the coordinator still lists (its LeaveGroup lost in a broker fault) instead of the commit and the
        // group waiting for each other until the session ends (rule 4.3)
        if (pausing) await this._ack('left')
        await this._commitAfterLeaving(leftover)
      }
    } finally {
      this._leaving = false
    }
    if (pausing) {
      this.follower.hurry(PAUSED_FAST_MS)
      this.onStateChange('paused')
    }
  }

  _idle () {
    return this._busy === 0 ? Promise.resolve() : new Promise(resolve => this._idleWaiters.push(resolve))
  }

  /** The processed offsets of the partitions held now that are not committed yet. */
  _uncommitted () {
    const out = []
    for (const [key, offset] of this._next) {
      if (offset > (this._committed.get(key) ?? -1)) out.push({ ...splitKey(key), offset })
    }
    return out
  }

  /** The processed, uncommitted offsets of partitions that moved to another member (except one held again
   * now, where this membership's own offset is ahead of it). */
  _movedAway () {
    const out = []
    for (const [key, offset] of this._moved) {
      if (offset > (this._next.get(key) ?? -1)) out.push({ ...splitKey(key), offset })
    }
    return out
  }

  /** A record of `key` processed up to `offset` (exclusive) in a generation that is over: kept apart. */
  _processedBefore (key, offset) {
    if (offset > (this._moved.get(key) ?? -1)) this._moved.set(key, offset)
  }

  async _commitAfterLeaving (offsets) {
    const deadline = Date.now() + this.timeoutMs
    for (;;) {
      try {
        const ahead = []
        for (const topic of new Set(offsets.map(o => o.topic))) {
          const committed = (await this._committedOffsets(topic)) || {}
          ahead.push(...offsets.filter(o => o.topic === topic && o.offset > (committed[o.partition] ?? -1)))
        }
        if (ahead.length) await commitWithoutMembership(this.cluster, this.group, ahead)
        this.log('info', `group ${this.group}: committed ${JSON.stringify(ahead)} after leaving`)
        return
      } catch (e) {
        if (Date.now() > deadline) {
          this.log('warn', `group ${this.group}: could not commit ${JSON.stringify(offsets)} after leaving: ${e.message}`)
          return
        }
        await sleep(5) // the broker takes it once the group is EMPTY: within milliseconds of the last leave
      }
    }
  }

  // -- records -------------------------------------------------------------------------------------------

  async _eachBatch (inner, payload) {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale } = payload
    const { topic, partition } = batch
    const generation = this._generation // the batch's; a join of the group while it runs makes it stale
    const current = () => generation === this._generation
    const commit = swallow => current() ? this._commit(commitOffsetsIfNecessary, swallow) : undefined
    const next = tpKey(topic, partition) // the batch's partition: its key once, not per record
    this._busy++
    try {
      for (const message of batch.messages) {
        if (this._leaving || inner !== this.inner || !isRunning() || isStale() || !current()) break
        if (this.barriers.isHeld(topic, partition)) break
        const offset = Number(message.offset)
        const limit = this.barriers.limit(topic, partition)
        if (offset >= limit) { // never hand out a record at or past the barrier
          this._hold(inner, topic, [partition])
          break
        }
        await this.eachMessage({ topic, partition, message, heartbeat })
        resolveOffset(message.offset)
        if (!current()) { // the group rebalanced while the application had it
          this._processedBefore(next, offset + 1)
          break
        }
        if (offset + 1 > (this._next.get(next) ?? -1)) this._next.set(next, offset + 1)
        if (offset + 1 >= limit) { // the last record before the barrier: hold, commit
          this._hold(inner, topic, [partition])
          await commit(false)
          break
        }
        if (Date.now() - this._lastCommit >= this.autoCommitInterval) await commit(false)
        await heartbeat()
      }
      await commit(this._leaving)
    } catch (e) {
      if (!REBALANCE_ERRORS.has(e.type)) await commit(true) // keep what was processed before the error
      throw e
    } finally {
      this._busy--
      if (this._busy === 0) this._idleWaiters.splice(0).forEach(resolve => resolve())
    }
  }

  /** Commit the processed offsets this membership has not committed; with `swallow`, one attempt. */
  async _commit (commitOffsets, swallow) {
    const offsets = this._uncommitted()
    if (offsets.length === 0) return
    const generation = this._generation
    try {
      await commitOffsets({ topics: byTopic(offsets) })
      if (generation !== this._generation) return // the group rejoined meanwhile: its maps start afresh
      for (const { topic, partition, offset } of offsets) this._committed.set(tpKey(topic, partition), offset)
      this._lastCommit = Date.now()
    } catch (e) {
      if (!swallow) throw e
      this.log('info', `group ${this.group}: commit before leaving failed (${e.type || e.message}); committing once EMPTY`)
    }
  }

  _hold (inner, topic, partitions) {
    const fresh = this.barriers.hold(topic, partitions)
    if (fresh.length) inner.pause([{ topic, partitions: fresh }])
  }

  // -- assignment ----------------------------------------------------------------------------------------

  _onGroupJoin (inner, { memberId, memberAssignment }) {
    if (inner !== this.inner) return
    // A new generation. A partition held before and now (this member in every generation between: the same
    // member id) keeps what was processed of it: nobody else had it. Any other partition's processed,
    // uncommitted offsets go apart (_moved), never committed as a member again: the broker takes a member's
    // commit for any partition of its generation, so one of a partition that moved would move its new
    // owner's committed offset back for good (the owner fetches from the committed offset, commits past it,
    // and stops once it caught up). They are committed after leaving, where still ahead (_leave).
    const assignment = new Map(Object.entries(memberAssignment || {}).map(([t, ps]) => [t, [...ps]]))
    const held = new Set([...assignment].flatMap(([t, ps]) => ps.map(p => tpKey(t, p))))
    const same = memberId === this._memberId
    for (const [key, offset] of this._next) {
      if (same && held.has(key)) continue
      if (offset > (this._committed.get(key) ?? -1)) this._processedBefore(key, offset)
      this._next.delete(key)
      this._committed.delete(key)
    }
    this._memberId = memberId
    this._generation++
    this.assignment = assignment
    // rule 4.7: a partition whose committed offset this member does not know waits (paused) for it
    for (const key of [...this._seeding]) if (!held.has(key)) this._seeding.delete(key)
    for (const key of [...this._committed.keys()]) if (!held.has(key)) this._committed.delete(key)
    const unknown = []
    for (const key of held) {
      // (one processed here in this membership has a position: its own commits follow)
      if (!this._committed.has(key) && !this._next.has(key) && !this._seeding.has(key)) {
        this._seeding.add(key)
        unknown.push(splitKey(key))
      }
    }
    if (unknown.length) inner.pause(toPause(unknown))
    if (this._seeding.size) setImmediate(() => this._seed(inner).catch(e => this.log('warn', `seed: ${e.message}`)))
    this.onAssign(Object.fromEntries(this.assignment))
    for (const [topic, partitions] of this.assignment) {
      const barrier = this.barriers.active.get(topic)
      if (barrier === undefined) continue
      // new partitions (B = 0) at once; the others once their committed offsets are known
      this._hold(inner, topic, partitions.filter(p => barrierOffset(barrier, p) === 0))
      setImmediate(() => this._holdReached(inner, topic, partitions).catch(e => this.log('warn', `barrier: ${e.message}`)))
    }
  }

  // -- rule 4.7: a position on every partition it is assigned ------------------------------------------

  /** Seed what waits: one run at a time; a call during a run (a new join) makes it go once more. */
  _seed (inner) {
    if (inner === null || inner !== this.inner || this._seeding.size === 0) return Promise.resolve()
    if (this._seedRun !== null) {
      this._seedAgain = true
      return this._seedRun
    }
    this._seedRun = (async () => {
      do {
        this._seedAgain = false
        if (this.inner !== null) await this._seedOnce(this.inner)
      } while (this._seedAgain && this.inner !== null && this._seeding.size > 0)
    })().finally(() => { this._seedRun = null })
    return this._seedRun
  }

  /**
   * Commit where the consumer starts (the log start with fromBeginning, else the end; 0 on a new partition of
   * an announced grow, without asking) on the partitions in `_seeding` on which the group has no committed
   * offset; resume each once its offset is known here (found or committed) unless a barrier holds it. What
   * fails stays for the next look; the new partitions do not wait for the others' ListOffsets.
   */
  async _seedOnce (inner) {
    const generation = this._generation
    const cluster = this._innerCluster || this.cluster
    let waiting = [...this._seeding].map(splitKey)
    let committed
    try {
      committed = await fetchCommitted(cluster, this.group, waiting, tpKey)
    } catch (e) {
      this.log('info', `group ${this.group}: starts of ${JSON.stringify(waiting)} not read yet (${e.message}); tried again`)
      return
    }
    const none = waiting.filter(({ topic, partition }) => !((committed.get(tpKey(topic, partition)) ?? -1) >= 0))
    const { fresh, asked } = this.growth.split(none)
    const starts = new Map(fresh.map(({ topic, partition }) => [tpKey(topic, partition), 0])) // empty until the switch
    if (asked.length) {
      const found = await this._resetOffsets(cluster, asked)
      if (found === null) {
        if (fresh.length === 0) return
        waiting = fresh // the new partitions do not wait for the others: those stay for the next look
      } else {
        for (const [key, offset] of found) starts.set(key, offset)
      }
    }
    if (inner !== this.inner || generation !== this._generation) return // the group rejoined: the join redoes it
    const offsets = seeds(waiting, committed, starts, tpKey)
    if (offsets.length) {
      try {
        await inner.commitOffsets(offsets.map(o => ({ ...o, offset: String(o.offset) })))
      } catch (e) {
        this.log('info', `group ${this.group}: commit of the start of ${JSON.stringify(offsets)} failed (${e.type || e.message}); tried again`)
        return
      }
      if (inner !== this.inner || generation !== this._generation) return
      this.log('info', `group ${this.group}: committed the start of ${JSON.stringify(offsets)} (rule 4.7)`)
    }
    const known = new Map([...committed].filter(([, offset]) => offset >= 0))
    for (const { topic, partition, offset } of offsets) known.set(tpKey(topic, partition), offset)
    const resume = []
    for (const { topic, partition } of waiting) {
      const key = tpKey(topic, partition)
      if (!known.has(key) || !this._seeding.has(key)) continue
      this._seeding.delete(key)
      if (!this._committed.has(key)) this._committed.set(key, known.get(key))
      if (!this.barriers.isHeld(topic, partition)) resume.push({ topic, partition })
    }
    if (resume.length) inner.resume(toPause(resume))
  }

  /**
   * Where the consumer starts on `entries` without a committed offset: one ListOffsets (the log start with
   * fromBeginning, else the end), a Map tpKey -> offset (a partition whose leader the metadata lacks is
   * absent: the metadata is refreshed for the next look); null when the request failed.
   */
  async _resetOffsets (cluster, entries) {
    try {
      const found = await startOffsets(cluster, entries, this.fromBeginning, tpKey)
      if (found.size < entries.length) await cluster.refreshMetadata() // its metadata lacks a new partition's leader
      return found
    } catch (e) {
      this.log('info', `group ${this.group}: starts of ${JSON.stringify(entries)} not read yet (${e.message}); tried again`)
      return null
    }
  }

  // -- rule 4.8: take new partitions at once ----------------------------------------------------------

  /** The partition count of `topic` in the inner consumer's metadata (0: not known). */
  _metadataCount (topic) {
    try {
      return this._innerCluster === null ? 0 : this._innerCluster.findTopicPartitionMetadata(topic).length
    } catch (_) {
      return 0
    }
  }

  /**
   * At each look while a topic is a target: refresh the inner consumer's metadata until it shows the count
   * (bounded); KafkaJS's next fetch finds the topic changed and the member rejoins the group.
   */
  async _takeNewPartitions () {
    if (this.growth.targets.size === 0 || this.inner === null || this._innerCluster === null) return
    try {
      await this._innerCluster.refreshMetadata()
    } catch (e) {
      this.log('debug', `group ${this.group}: metadata refresh: ${e.message}`)
    }
    for (const [topic, { partitions }] of [...this.growth.targets]) {
      const count = this._metadataCount(topic)
      const outcome = this.growth.check(topic, count, Date.now())
      if (outcome === 'reached') {
        this.log('info', `group ${this.group}: metadata shows ${count} partitions of ${topic}: the group rejoins at the next fetch`)
      } else if (outcome === 'expired') {
        this.log('warn', `group ${this.group}: the metadata of ${topic} still shows ${count} of ${partitions} partitions after ${this.timeoutMs} ms`)
      }
    }
  }

  /**
   * Pause those of `partitions` whose position (the offset after the last record processed, else the
   * committed offset) is at or past the barrier. A partition with neither starts where fromBeginning puts
   * it: when that is at the barrier it is paused and that offset committed, so the group can pass.
   */
  async _holdReached (inner, topic, partitions) {
    const barrier = this.barriers.active.get(topic)
    if (barrier === undefined || partitions.length === 0 || inner !== this.inner) return
    const committed = (await this._committedOffsets(topic)) || {}
    const position = p => this._next.get(tpKey(topic, p)) ?? committed[p]
    const unknown = partitions.filter(p => position(p) === undefined)
    const starts = {}
    if (unknown.length) {
      for (const { partition, low, high } of await this.admin.fetchTopicOffsets(topic)) {
        if (unknown.includes(partition)) starts[partition] = Number(this.fromBeginning ? low : high)
      }
    }
    const at = partitions.filter(p => (position(p) ?? starts[p]) >= barrierOffset(barrier, p))
    if (inner !== this.inner || this.barriers.active.get(topic) !== barrier) return
    this._hold(inner, topic, at)
    const seed = at.filter(p => position(p) === undefined && starts[p] !== undefined)
    if (seed.length) await inner.commitOffsets(seed.map(p => ({ topic, partition: p, offset: String(starts[p]) })))
  }
}

module.exports = { ControlledConsumer, resolveClientId }
