'use strict'
// A plain KafkaJS consumer-group member: the "foreign" service of issue 25 (no kstate control protocol).
//
//   node consumer.js --name NAME --run-dir DIR --brokers HOST:PORT --topic T --group G [--delay-ms 5]
//
// It subscribes with fromBeginning: false, so a partition without a committed offset starts at the log end
// (auto.offset.reset=latest: the KAFKA-12261 danger when partitions are added under it), sleeps --delay-ms
// per record (a processing time, to build a backlog), then appends {"p","o","key","seq","t"} to
// DIR/NAME.jsonl; the offset is resolved after that line is written and committed every
// --commit-interval-ms and at the end of every batch (at least once). Its metadata is refreshed every
// --metadata-max-age-ms, so it sees new partitions (and makes its group rebalance) within about that.
//
// DIR/NAME.pid holds its pid while it runs; DIR/NAME.ready exists while it is a member of a settled
// generation (written at each join with the assignment, removed when a rebalance starts and at SIGTERM);
// DIR/NAME.events.jsonl logs start/join/rebalancing/stop/exit with times. SIGTERM stops it cleanly:
// the record in hand is finished, processed offsets are committed, the member leaves the group
// (LeaveGroup), and the process exits 0 (1 when that did not finish within --grace-ms).

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
const { options, files, now, lines, sleep, lifecycle } = require('./common')

const opt = options({
  name: null,
  'run-dir': null,
  brokers: null,
  topic: null,
  group: null,
  'client-id': '',
  'delay-ms': 0,
  'session-timeout-ms': 6000,
  'heartbeat-interval-ms': 500,
  'rebalance-timeout-ms': 10000,
  'max-wait-ms': 100,
  'metadata-max-age-ms': 500,
  'commit-interval-ms': 200,
  'max-bytes-per-partition': 65536,
  'grace-ms': 15000,
  'log-level': 'WARN',
})

const f = files(opt['run-dir'], opt.name)
const out = lines(f.out)
const events = lines(f.events)

const kafka = new Kafka({
  clientId: opt['client-id'] || opt.name,
  brokers: opt.brokers.split(','),
  logLevel: logLevel[opt['log-level']],
  retry: { initialRetryTime: 100, retries: 8 },
})
const consumer = kafka.consumer({
  groupId: opt.group,
  sessionTimeout: opt['session-timeout-ms'],
  heartbeatInterval: opt['heartbeat-interval-ms'],
  rebalanceTimeout: opt['rebalance-timeout-ms'],
  maxWaitTimeInMs: opt['max-wait-ms'],
  metadataMaxAge: opt['metadata-max-age-ms'],
  maxBytesPerPartition: opt['max-bytes-per-partition'],
  allowAutoTopicCreation: false,
})

const life = lifecycle(
  f,
  events,
  async () => {
    await consumer.disconnect()
    out.close()
  },
  opt['grace-ms']
)

const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
consumer.on(GROUP_JOIN, ({ payload }) => {
  const assigned = payload.memberAssignment[opt.topic] || []
  const t = now()
  events.write({ ev: 'join', t, member: payload.memberId, assigned })
  if (!life.stopping()) {
    fs.writeFileSync(f.ready, JSON.stringify({ t, member: payload.memberId, assigned }) + '\n')
  }
})
consumer.on(REBALANCING, () => {
  fs.rmSync(f.ready, { force: true })
  events.write({ ev: 'rebalancing', t: now() })
})
consumer.on(CRASH, ({ payload }) => {
  events.write({ ev: 'crash', t: now(), error: String(payload.error), restart: payload.restart })
  if (!payload.restart && !life.stopping()) {
    console.error(`consumer crashed and will not restart: ${payload.error}`)
    life.finish(1)
  }
})

async function main() {
  await consumer.connect()
  await consumer.subscribe({ topics: [opt.topic], fromBeginning: false })
  await consumer.run({
    autoCommit: true,
    autoCommitInterval: opt['commit-interval-ms'],
    eachMessage: async ({ partition, message }) => {
      if (opt['delay-ms'] > 0) await sleep(opt['delay-ms'])
      let record = {}
      try {
        record = JSON.parse(message.value.toString())
      } catch (e) {}
      out.write({
        p: partition,
        o: Number(message.offset),
        key: record.key === undefined ? (message.key && message.key.toString()) : record.key,
        seq: record.seq === undefined ? null : record.seq,
        t: now(),
      })
    },
  })
}

main().catch(err => {
  console.error(`consumer failed to start: ${err && err.stack}`)
  if (!life.stopping()) life.finish(1)
})
