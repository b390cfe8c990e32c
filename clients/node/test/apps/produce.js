'use strict'
// A keyed producer on a ControlledProducer, for the integration tests.
//
//   node produce.js '{"brokers": [...], "topic": "t", "clientId": "p", "keys": 200, "rate": 300,
//                     "burst": 600, "controlTopic": "_kstate_control"}'
//
// A secured cluster: "security": {"ca", "cert", "key", "sasl"} (see kafkaOptions in common.js).
// Writes {"key": k, "seq": n} round-robin over `keys` keys at `rate` records
// per second after an initial `burst`; per key, seq increases by one with every record. Each send() carries
// the records due so far, in order, and the next waits for it (so a key's records are written in order).
// Events on stdout: started, layout {n, epoch} (each change), sent {key, seq, p, o, n} per delivered
// record, closed {holds}. "stop" on stdin (or its end, or SIGTERM) stops, flushes, closes and exits.

const { ControlledProducer } = require('../../src')
const { emit, commands, kafkaOptions } = require('./common')

const config = JSON.parse(process.argv[2])
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const keys = Array.from({ length: config.keys || 200 }, (_, i) => `k${String(i).padStart(4, '0')}`)

async function main () {
  const producer = new ControlledProducer({
    kafka: kafkaOptions(config, config.clientId),
    topics: [config.topic],
    controlTopic: config.controlTopic,
    checkIntervalMs: config.checkIntervalMs || 100,
    producer: { metadataMaxAge: 500, allowAutoTopicCreation: false }
  })
  await producer.start()
  emit({ event: 'started', n: await producer.partitions(config.topic), epoch: producer.layoutEpoch(config.topic) })
  let stopping = false
  commands(line => { if (line === 'stop') stopping = true }, () => { stopping = true })
  process.on('SIGTERM', () => { stopping = true })

  const nextSeq = new Map()
  let written = 0
  let layout = null
  const record = () => {
    const key = keys[written % keys.length]
    const seq = nextSeq.get(key) || 0
    nextSeq.set(key, seq + 1)
    written++
    return { key, seq }
  }
  const send = async due => {
    const batch = Array.from({ length: due }, record)
    const messages = batch.map(r => ({ key: r.key, value: JSON.stringify(r) }))
    const result = await producer.send({ topic: config.topic, acks: -1, messages })
    const n = result.livePartitions
    const epoch = producer.layoutEpoch(config.topic)
    if (layout === null || layout.n !== n || layout.epoch !== epoch) {
      layout = { n, epoch }
      emit({ event: 'layout', ...layout })
    }
    const next = new Map(result.map(r => [r.partition, Number(r.baseOffset)]))
    batch.forEach((r, i) => {
      const p = result.partitions[i]
      const o = next.get(p)
      next.set(p, o + 1)
      emit({ event: 'sent', key: r.key, seq: r.seq, p, o, n })
    })
  }

  if (config.burst) await send(config.burst)
  const started = Date.now()
  let sent = 0
  while (!stopping) {
    const due = Math.floor(((Date.now() - started) / 1000) * config.rate) - sent
    if (due > 0) {
      await send(due)
      sent += due
    } else {
      await sleep(2)
    }
  }
  await producer.close()
  emit({ event: 'closed', written, holds: producer.holds })
  process.exit(0)
}

main().catch(e => {
  process.stderr.write(`produce.js: ${e.stack}\n`)
  process.exit(1)
})
