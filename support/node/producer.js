'use strict'
// A plain KafkaJS keyed producer: the "foreign" producer of issue 25 (no kstate control protocol).
//
//   node producer.js --name NAME --run-dir DIR --brokers HOST:PORT --topic T [--keys 200] [--rate 200]
//
// It writes {"key": "k0042", "seq": n} with key "k0042", round-robin over --keys keys at --rate records per
// second; per key, seq increases by one (a restart continues from DIR/NAME.jsonl). The partition is
// KafkaJS's default partitioner (the Java-compatible murmur2 of the key), computed on metadata at most
// --metadata-max-age-ms old, so it writes to new partitions within about that after an increase.
// Records are sent in small batches (what is due at the rate), one batch in flight at a time with acks=-1,
// so a key's records are appended in seq order; each delivered record is logged to DIR/NAME.jsonl as
// {"key","seq","p","o","t"} (the offset from the batch's base offset on its partition).
//
// DIR/NAME.pid while it runs, DIR/NAME.ready after its first delivered batch; SIGTERM finishes the batch
// in flight, disconnects and exits 0.

const fs = require('fs')
const { Kafka, Partitioners, logLevel } = require('kafkajs')
const { options, files, now, lines, sleep, lifecycle } = require('./common')

const opt = options({
  name: null,
  'run-dir': null,
  brokers: null,
  topic: null,
  'client-id': '',
  keys: 200,
  rate: 200,
  'metadata-max-age-ms': 500,
  'max-batch': 500,
  'grace-ms': 15000,
  'log-level': 'WARN',
})

const f = files(opt['run-dir'], opt.name)
const keys = Array.from({ length: opt.keys }, (_, i) => `k${String(i).padStart(4, '0')}`)
const nextSeq = new Map(keys.map(k => [k, 0]))
let written = 0
if (fs.existsSync(f.out)) {
  for (const line of fs.readFileSync(f.out, 'utf8').split('\n')) {
    if (!line) continue
    const { key, seq } = JSON.parse(line)
    if (nextSeq.has(key) && seq >= nextSeq.get(key)) nextSeq.set(key, seq + 1)
    written += 1
  }
}
const out = lines(f.out)
const events = lines(f.events)

// The default partitioner, observed: the partition it chose last for each message (a retry re-partitions
// the whole request, so the last choice is the one that was sent).
const chosen = new WeakMap()
const observed = () => {
  const partition = Partitioners.DefaultPartitioner()
  return args => {
    const p = partition(args)
    chosen.set(args.message, p)
    return p
  }
}

const kafka = new Kafka({
  clientId: opt['client-id'] || opt.name,
  brokers: opt.brokers.split(','),
  logLevel: logLevel[opt['log-level']],
  retry: { initialRetryTime: 100, retries: 8 },
})
const producer = kafka.producer({
  createPartitioner: observed,
  metadataMaxAge: opt['metadata-max-age-ms'],
  allowAutoTopicCreation: false,
})

let halt = false
let loop = Promise.resolve()
const life = lifecycle(
  f,
  events,
  async () => {
    halt = true
    await loop
    await producer.disconnect()
    out.close()
  },
  opt['grace-ms']
)

async function sendBatch(n) {
  const messages = []
  for (let i = 0; i < n; i++) {
    const key = keys[(written + i) % keys.length]
    const seq = nextSeq.get(key)
    nextSeq.set(key, seq + 1)
    messages.push({ key, value: JSON.stringify({ key, seq }), seq })
  }
  written += n
  let result
  try {
    result = await producer.send({ topic: opt.topic, acks: -1, messages })
  } catch (err) {
    events.write({ ev: 'error', t: now(), records: n, error: String(err) })
    return false
  }
  const t = now()
  const base = new Map(result.map(r => [r.partition, Number(r.baseOffset)]))
  const next = new Map()
  for (const m of messages) {
    const p = chosen.get(m)
    const i = next.get(p) || 0
    next.set(p, i + 1)
    out.write({ key: m.key, seq: m.seq, p, o: base.get(p) + i, t })
  }
  return true
}

async function run() {
  const start = Date.now()
  let sent = 0
  let ready = false
  while (!halt) {
    const due = Math.floor(((Date.now() - start) / 1000) * opt.rate) - sent
    if (due <= 0) {
      await sleep(Math.max(1, Math.min(20, 1000 / opt.rate)))
      continue
    }
    const n = Math.min(due, opt['max-batch'])
    sent += n
    if ((await sendBatch(n)) && !ready) {
      ready = true
      fs.writeFileSync(f.ready, JSON.stringify({ t: now() }) + '\n')
      events.write({ ev: 'ready', t: now() })
    }
  }
}

async function main() {
  await producer.connect()
  if (halt) return
  loop = run()
  await loop
}

main().catch(err => {
  console.error(`producer failed: ${err && err.stack}`)
  if (!life.stopping()) life.finish(1)
})
