'use strict'
// Unit tests without a broker: murmur2, the records this client writes (validated against
// docs/schemas/control with ajv), what a reader ignores, the barrier bookkeeping, and the decisions of
// rules 4.7 and 4.8 (a position on every partition assigned; new partitions at once).

const test = require('node:test')
const assert = require('node:assert/strict')
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2')
const { murmur2, partitionFor } = require('../src/murmur2')
const protocol = require('../src/protocol')
const { Barriers, passed } = require('../src/barrier')
const { Growth, seeds } = require('../src/growth')
const { ControlledConsumer } = require('../src/consumer')
const { ControlledProducer } = require('../src/producer')

// Kafka's org.apache.kafka.common.utils.UtilsTest#testMurmur2
const KAFKA_VECTORS = {
  21: -973932308,
  foobar: -790332482,
  'a-little-bit-long-string': -985981536,
  'a-little-bit-longer-string': -1486304829,
  lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8: -58897971,
  abc: 479470107
}

test('murmur2 is Kafka Utils.murmur2', () => {
  for (const [key, expected] of Object.entries(KAFKA_VECTORS)) assert.equal(murmur2(key), expected, key)
})

test('partitionFor over the full count equals KafkaJS DefaultPartitioner', () => {
  for (let i = 0; i < 2000; i++) {
    const key = Buffer.from(`order-${i}-ключ`)
    assert.equal(partitionFor(key, 7), (kafkajsMurmur2(key) & 0x7fffffff) % 7)
  }
  assert.throws(() => partitionFor('k', 0), RangeError)
})

/** Capture what a client would publish on the control topic. */
function recorder () {
  const records = []
  return { records, publish: async (...r) => { records.push(...r) } }
}

test('every acknowledgement the consumer and the producer write validates', async () => {
  const channel = recorder()
  const consumer = { clientId: 'svc-0', group: 'g1', epoch: 0, channel, log: () => {} }
  const ack = ControlledConsumer.prototype._ack
  await ack.call(consumer, 'running') // presence, before any command
  consumer.epoch = 1700000000001
  await ack.call(consumer, 'left') // closed, its commit still to land (once EMPTY)
  await ack.call(consumer, 'paused')
  await ack.call(consumer, 'running')
  for (const state of ['pending', 'barrier', 'released']) await ack.call(consumer, state, 1700000000002, 'orders')
  const producer = { clientId: 'api-0', channel, log: () => {} }
  const layout = protocol.layout({ topic: 'orders', partitions: 4, epoch: 1700000000003 })
  for (const state of ['layout', 'held']) await ControlledProducer.prototype._ack.call(producer, layout, state)
  assert.deepEqual(channel.records.map(r => [protocol.recordKey(r), r.state, r.epoch]), [
    ['ack/g1/svc-0', 'running', 0],
    ['ack/g1/svc-0', 'left', 1700000000001],
    ['ack/g1/svc-0', 'paused', 1700000000001],
    ['ack/g1/svc-0', 'running', 1700000000001],
    ['ack-barrier/orders/g1/svc-0', 'pending', 1700000000002],
    ['ack-barrier/orders/g1/svc-0', 'barrier', 1700000000002],
    ['ack-barrier/orders/g1/svc-0', 'released', 1700000000002],
    ['ack-layout/orders/api-0', 'layout', 1700000000003],
    ['ack-layout/orders/api-0', 'held', 1700000000003]
  ])
  for (const record of channel.records) {
    assert.equal(protocol.errors(record), null, JSON.stringify(record))
    assert.deepEqual(protocol.decode(protocol.encode(record)), record)
  }
})

test('every record builder writes a valid record', () => {
  const records = [
    protocol.command({ group: 'g', command: 'pause', epoch: 1 }),
    protocol.layout({ topic: 't', partitions: 2, epoch: 1, hold: true, holdUntil: 5 }),
    protocol.barrier({ topic: 't', epoch: 1, offsets: [3, 0], groups: ['g'] }),
    protocol.barrier({ topic: 't', epoch: 2, state: 'pending', groups: ['g'], partitions: 8 }),
    protocol.barrier({ topic: 't', epoch: 3, state: 'pending', groups: ['g'], partitions: 8, grownFrom: 4 }),
    protocol.release({ topic: 't', group: 'g', epoch: 1 })
  ]
  for (const record of records) assert.equal(protocol.errors(record), null, JSON.stringify(record))
})

test('a reader ignores what it must ignore and keeps unknown fields', () => {
  const valid = { v: 1, kind: 'command', group: 'g', command: 'pause', epoch: 5 }
  const ignored = [
    null,
    'not json',
    '[1, 2]',
    JSON.stringify({ ...valid, v: 2 }),
    JSON.stringify({ ...valid, kind: 'shout' }),
    JSON.stringify({ ...valid, command: 'stop' }),
    JSON.stringify({ ...valid, epoch: '5' }),
    JSON.stringify({ v: 1, kind: 'command', group: 'g', command: 'pause' }),
    JSON.stringify({ v: 1, kind: 'layout', topic: 't', partitions: 0, epoch: 1 }),
    JSON.stringify({ v: 1, kind: 'barrier', topic: 't', epoch: 1, offsets: [-1] })
  ]
  for (const value of ignored) assert.equal(protocol.decode(value === null ? null : Buffer.from(value)), null, value)
  const read = protocol.decode(Buffer.from(JSON.stringify({ ...valid, future: { x: 1 } })))
  assert.deepEqual(read, { ...valid, topic: '', issued_at: 0, issuer: '', future: { x: 1 } })
  const barrier = protocol.decode(Buffer.from(JSON.stringify({ v: 1, kind: 'barrier', topic: 't', epoch: 3 })))
  assert.deepEqual([barrier.state, barrier.offsets, barrier.groups, barrier.partitions, barrier.grown_from], ['hold', [], [], 0, 0])
  assert.equal(protocol.decode(Buffer.from(JSON.stringify({ v: 1, kind: 'barrier', topic: 't', epoch: 3, partitions: -1 }))), null)
})

test('barriers: hold, limits, newer records, releases', () => {
  const b = new Barriers('g', ['t'])
  const hold = protocol.barrier({ topic: 't', epoch: 10, offsets: [5, 7], groups: ['g'] })
  assert.equal(b.onBarrier(protocol.barrier({ topic: 't', epoch: 9, state: 'pending', groups: ['g'] })).action, 'pending')
  assert.equal(b.onBarrier(hold).action, 'hold')
  assert.equal(b.onBarrier(hold).action, '', 'not newer: ignored')
  assert.equal(b.onBarrier({ ...hold, topic: 'other', epoch: 11 }).action, '', 'another topic')
  assert.deepEqual([b.limit('t', 0), b.limit('t', 1), b.limit('t', 2), b.limit('u', 0)], [5, 7, 0, Infinity])
  assert.deepEqual(b.hold('t', [2, 0]), [2, 0])
  assert.deepEqual(b.hold('t', [0]), [])
  assert.equal(passed(hold, { 0: 5, 1: 6 }), false)
  assert.equal(passed(hold, { 0: 5, 1: 7 }), true)
  assert.equal(passed(hold, { 1: 7 }), false, 'no committed offset is not past')
  assert.equal(b.onRelease(protocol.release({ topic: 't', group: 'other', epoch: 10 })), false)
  assert.equal(b.onRelease(protocol.release({ topic: 't', group: 'g', epoch: 9 })), false, 'an older release')
  assert.equal(b.onRelease(protocol.release({ topic: 't', group: 'g', epoch: 10 })), true)
  assert.deepEqual(b.end('t', 'controller').held, [0, 2])
  assert.equal(b.limit('t', 0), Infinity)

  const c = new Barriers('g', ['t'])
  c.onRelease(protocol.release({ topic: 't', group: 'g', epoch: 20 }))
  assert.equal(c.onBarrier({ ...hold, epoch: 20 }).action, 'off', 'released before it arrived')
  assert.equal(c.onBarrier({ ...hold, epoch: 21 }).action, 'hold')
  const ended = c.onBarrier(protocol.barrier({ topic: 't', epoch: 22, groups: ['someone-else'] }))
  assert.equal(ended.action, 'off', 'a newer barrier that does not name the group ends its hold')
  assert.equal(ended.ended.barrier.epoch, 21)
})

const key = (topic, partition) => `${topic}/${partition}`

test('rule 4.7: the start is committed only where the group has no offset', () => {
  const assigned = [0, 1, 2, 3].map(partition => ({ topic: 't', partition }))
  const committed = new Map([['t/0', 17], ['t/1', -1]]) // OffsetFetch: -1 where none
  const starts = new Map([['t/0', 40], ['t/1', 0], ['t/2', 5]])
  assert.deepEqual(seeds(assigned, committed, starts, key), [
    { topic: 't', partition: 1, offset: 0 },
    { topic: 't', partition: 2, offset: 5 }
  ], 'never over a committed offset (0 keeps 17); a partition without a start yet waits (3)')
})

test('rule 4.8: a pending barrier with more partitions than the metadata makes a target, bounded', () => {
  const g = new Growth('g', ['t'])
  const pending = (epoch, groups, partitions, extra = {}) => protocol.barrier({ topic: 't', epoch, state: 'pending', groups, partitions, ...extra })
  assert.equal(g.onPending(pending(1, ['g'], 0), 4, 0, 1000), false, 'partitions not said')
  assert.equal(g.onPending(pending(2, ['g'], 4), 4, 0, 1000), false, 'the metadata shows them already')
  assert.equal(g.onPending(pending(3, ['other'], 8), 4, 0, 1000), false, "another group's")
  assert.equal(g.onPending(pending(4, ['g'], 8, { topic: 'u' }), 4, 0, 1000), false, 'a topic it does not read')
  assert.equal(g.onPending(pending(5, ['g'], 8, { state: 'hold', offsets: [1] }), 4, 0, 1000), false, 'only pending')
  assert.equal(g.targets.size, 0)
  const decoded = protocol.decode(protocol.encode(pending(6, ['g'], 8)))
  assert.equal(g.onPending(decoded, 4, 100, 1000), true)
  assert.deepEqual([...g.targets], [['t', { partitions: 8, deadline: 1100 }]])
  assert.equal(g.check('t', 6, 500), '', 'not yet: look again')
  assert.equal(g.check('t', 8, 600), 'reached')
  assert.equal(g.targets.size, 0)
  assert.equal(g.onPending(pending(7, ['g'], 12), 8, 2000, 1000), true)
  assert.equal(g.check('t', 8, 3000), 'expired', 'bounded')
  assert.equal(g.targets.size, 0)
})

// A ControlledConsumer of group g on topic t seeding ``partitions``, over a fake cluster: partition 0 holds a
// committed offset (17), the others none; while ``state.leaderLoading`` the log's start and end cannot be read
// (LEADER_NOT_AVAILABLE), then they are 0 and 40. Each ListOffsets's partitions are in ``calls.asked``.
function seedingConsumer (partitions, extra = {}) {
  const calls = { commits: [], resumed: [], asked: [] }
  const state = { leaderLoading: true }
  const cluster = {
    findGroupCoordinator: async () => ({
      offsetFetch: async ({ topics }) => ({
        responses: topics.map(({ topic, partitions }) => ({
          topic, partitions: partitions.map(({ partition }) => ({ partition, offset: partition === 0 ? '17' : '-1' }))
        }))
      })
    }),
    fetchTopicsOffset: async topics => {
      calls.asked.push(topics.flatMap(({ partitions }) => partitions.map(({ partition }) => partition)))
      if (state.leaderLoading) throw new Error('LEADER_NOT_AVAILABLE')
      return topics.map(({ topic, partitions, fromBeginning }) => ({
        topic, partitions: partitions.map(({ partition }) => ({ partition, offset: fromBeginning ? '0' : '40' }))
      }))
    },
    refreshMetadata: async () => {}
  }
  const inner = {
    commitOffsets: async offsets => { calls.commits.push(...offsets) },
    resume: topics => { calls.resumed.push(...topics) },
    pause: () => {}
  }
  const consumer = Object.assign(Object.create(ControlledConsumer.prototype), {
    group: 'g', inner, _innerCluster: cluster, cluster, fromBeginning: false, _generation: 3,
    _seeding: new Set(partitions.map(p => `t\u0000${p}`)), _committed: new Map(), _seedRun: null,
    _seedAgain: false, barriers: new Barriers('g', ['t']), growth: new Growth('g', ['t']), log: () => {},
    ...extra
  })
  return { consumer, inner, calls, state }
}

test('rule 4.7 in the consumer: paused until committed, retried at the next look, never over an offset', async () => {
  const { consumer, inner, calls, state } = seedingConsumer([0, 1])
  await consumer._seed(inner)
  assert.deepEqual(calls.commits, [], 'nothing committed while the start cannot be read')
  assert.deepEqual([...consumer._seeding], ['t\u00000', 't\u00001'], 'both stay paused for the next look')
  state.leaderLoading = false
  await consumer._seed(inner)
  assert.deepEqual(calls.commits, [{ topic: 't', partition: 1, offset: '40' }], 'the log end, only where none')
  assert.deepEqual(calls.resumed, [{ topic: 't', partitions: [0, 1] }])
  assert.equal(consumer._seeding.size, 0)
  assert.deepEqual([...consumer._committed], [['t\u00000', 17], ['t\u00001', 40]])
})

const grew = (from, to, extra = {}) => protocol.barrier({ topic: 't', epoch: 1, state: 'pending', groups: ['g'], partitions: to, grownFrom: from, ...extra })

test('rule 4.7 after a grow: only a pending barrier saying which partitions are new skips the ListOffsets', () => {
  const g = new Growth('g', ['t'])
  assert.equal(g.onGrown(grew(0, 8)), false, 'grown_from not said')
  assert.equal(g.onGrown(grew(8, 8)), false, 'not a grow')
  assert.equal(g.onGrown(grew(9, 8)), false, 'inconsistent')
  assert.equal(g.onGrown(grew(4, 8, { groups: ['other'] })), false, "another group's")
  assert.equal(g.onGrown(grew(4, 8, { topic: 'u' })), false, 'a topic it does not read')
  assert.equal(g.onGrown(grew(4, 8, { state: 'hold', offsets: [1] })), false, 'only pending')
  const bare = [1, 4, 7, 8].map(partition => ({ topic: 't', partition }))
  assert.deepEqual(g.split(bare), { fresh: [], asked: bare }, 'without a grow announced every partition is asked')
  assert.equal(g.onGrown(protocol.decode(protocol.encode(grew(4, 8)))), true)
  assert.deepEqual(g.split(bare), { fresh: [bare[1], bare[2]], asked: [bare[0], bare[3]] }, '8: beyond the grow')
  g.clear()
  assert.equal(g.isNew('t', 5), true, 'a new membership keeps the grow: it is about the topic')
  assert.equal(g.onGrown(grew(8, 12)), true)
  assert.deepEqual([g.isNew('t', 4), g.isNew('t', 8), g.isNew('t', 11), g.isNew('t', 12)], [false, true, true, false],
    'a later grow replaces the earlier one')
})

test('rule 4.7 in the consumer after a grow: the new partitions are committed at 0 without a ListOffsets', async () => {
  const { consumer, inner, calls, state } = seedingConsumer([0, 1, 4, 5], { follower: { hurry: () => {} }, _ack: async () => {} })
  await consumer._barrierRecord(grew(4, 8), true)
  await consumer._seed(inner)
  assert.deepEqual(calls.asked, [[1]], 'one ListOffsets, of the old partition without an offset only')
  assert.deepEqual(calls.commits, [{ topic: 't', partition: 4, offset: '0' }, { topic: 't', partition: 5, offset: '0' }],
    "the new ones at 0 although the old one's start cannot be read")
  assert.deepEqual(calls.resumed, [{ topic: 't', partitions: [4, 5] }])
  assert.deepEqual([...consumer._seeding], ['t\u00000', 't\u00001'], 'the old ones keep their path: the next look')
  state.leaderLoading = false
  await consumer._seed(inner)
  assert.deepEqual(calls.asked, [[1], [1]])
  assert.deepEqual(calls.commits.slice(2), [{ topic: 't', partition: 1, offset: '40' }], 'the log end, only where none')
  assert.equal(consumer._seeding.size, 0)
  assert.deepEqual(new Map(consumer._committed), new Map([['t\u00004', 0], ['t\u00005', 0], ['t\u00000', 17], ['t\u00001', 40]]))
})
