'use strict'
// A service of one or more ControlledConsumer members of a group, for the integration tests.
//
//   node consume.js '{"brokers": [...], "groupId": "g", "topics": ["t"], "members": [{"clientId": "g-0",
//                     "workMs": 5}], "controlTopic": "_kstate_control", "range": true}'
//
// A secured cluster: "security": {"ca", "cert", "key", "sasl"} (see kafkaOptions in common.js).
// Each member processes a record in `workMs` (a sleep), then the wrapper commits it (at least once).
// Events on stdout, one JSON object a line: started, state, assigned, record {c, p, o, key, seq}, closed.
// "close" on stdin (or its end, or SIGTERM) closes every member and exits.

const { ControlledConsumer } = require('../../src')
const { emit, commands, RangeAssigner, parseValue, kafkaOptions } = require('./common')

const config = JSON.parse(process.argv[2])
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function member ({ clientId, workMs = 0 }) {
  const c = { clientId }
  return new ControlledConsumer({
    kafka: kafkaOptions(config, clientId),
    groupId: config.groupId,
    topics: config.topics,
    controlTopic: config.controlTopic,
    fromBeginning: config.fromBeginning !== false,
    checkIntervalMs: config.checkIntervalMs || 100,
    autoCommitInterval: config.autoCommitInterval ?? 200,
    consumer: {
      sessionTimeout: 6000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 50,
      rebalanceTimeout: 10000,
      ...(config.range ? { partitionAssigners: [RangeAssigner] } : {})
    },
    onStateChange: state => emit({ event: 'state', c: c.clientId, state }),
    onAssign: assignment => emit({ event: 'assigned', c: c.clientId, assignment }),
    eachMessage: async ({ partition, message }) => {
      if (workMs > 0) await sleep(workMs)
      const value = parseValue(message.value)
      emit({ event: 'record', c: clientId, p: partition, o: Number(message.offset), key: value.key, seq: value.seq })
    }
  })
}

async function main () {
  const members = config.members.map(member)
  await Promise.all(members.map(m => m.start()))
  for (const m of members) emit({ event: 'started', c: m.clientId, state: m.state, epoch: m.epoch })
  let closing = null
  const close = () => {
    if (closing === null) {
      closing = Promise.all(members.map(m => m.close())).then(() => {
        for (const m of members) emit({ event: 'closed', c: m.clientId, passages: m.passages })
        process.exit(0)
      })
    }
    return closing
  }
  commands(line => { if (line === 'close') close() }, close)
  process.on('SIGTERM', close)
}

main().catch(e => {
  process.stderr.write(`consume.js: ${e.stack}\n`)
  process.exit(1)
})
