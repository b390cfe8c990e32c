'use strict'
// Shared by the test apps: JSON-line events on stdout, line commands on stdin, the range assignor.

const fs = require('fs')
const readline = require('readline')
const { AssignerProtocol } = require('kafkajs')

/** Wall-clock milliseconds with a sub-millisecond fraction (one clock for every app on the host). */
const now = () => performance.timeOrigin + performance.now()

function emit (event) {
  process.stdout.write(JSON.stringify({ t: now(), ...event }) + '\n')
}

/** Call `handler(line)` for each line on stdin; `onEnd` when stdin closes (the test went away). */
function commands (handler, onEnd) {
  const rl = readline.createInterface({ input: process.stdin })
  rl.on('line', line => handler(line.trim()))
  rl.on('close', onEnd)
}

/**
 * Java's RangeAssignor: per topic, members sorted by member id (client id first) take contiguous ranges,
 * the first ones one partition more. With two members the first (client id ...-0) takes the low half.
 */
const RangeAssigner = ({ cluster }) => ({
  name: 'range',
  version: 0,
  async assign ({ members, topics }) {
    const sorted = [...members].sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0))
    const plan = Object.fromEntries(sorted.map(m => [m.memberId, {}]))
    for (const topic of topics) {
      const partitions = cluster.findTopicPartitionMetadata(topic).map(p => p.partitionId).sort((a, b) => a - b)
      const per = Math.floor(partitions.length / sorted.length)
      const extra = partitions.length % sorted.length
      sorted.forEach((m, i) => {
        const start = i * per + Math.min(i, extra)
        plan[m.memberId][topic] = partitions.slice(start, start + per + (i < extra ? 1 : 0))
      })
    }
    return sorted.map(m => ({
      memberId: m.memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 0, assignment: plan[m.memberId], userData: Buffer.alloc(0) })
    }))
  },
  protocol ({ topics }) {
    return { name: 'range', metadata: AssignerProtocol.MemberMetadata.encode({ version: 0, topics, userData: Buffer.alloc(0) }) }
  }
})

function parseValue (value) {
  try {
    return JSON.parse(value.toString('utf8'))
  } catch (_) {
    return { raw: value === null ? null : value.toString('utf8') }
  }
}

/**
 * An unsecured JWS (`alg: none`, no signature) for SASL/OAUTHBEARER: what Apache Kafka's default
 * OAUTHBEARER server callback (the unsecured validator: tests only) accepts, as librdkafka's
 * `enable.sasl.oauthbearer.unsecure.jwt` makes it. `sub` is the principal; valid for an hour.
 */
function unsecuredJwt (principal, lifetimeS = 3600) {
  const b64 = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url')
  const iat = Math.floor(Date.now() / 1000)
  return `${b64({ alg: 'none' })}.${b64({ sub: principal, iat, exp: iat + lifetimeS })}.`
}

/**
 * The options of `new Kafka(...)` for `config.brokers` and, for a secured cluster, `config.security`:
 * `{"ca": path, "cert": path, "key": path, "sasl": {"mechanism": "scram-sha-512", "username", "password"}}`
 * (PEM files, read here: KafkaJS takes their contents), or, for SASL/OAUTHBEARER with unsecured tokens,
 * `"sasl": {"mechanism": "oauthbearer", "principal": name}`: KafkaJS's `oauthBearerProvider` then hands out
 * an unsecured JWS for `principal` (a fresh one at each authentication).
 */
function kafkaOptions (config, clientId) {
  const security = config.security || {}
  const options = { brokers: config.brokers, clientId }
  if (security.ca || security.cert) {
    options.ssl = {}
    if (security.ca) options.ssl.ca = [fs.readFileSync(security.ca, 'utf8')]
    if (security.cert) {
      options.ssl.cert = fs.readFileSync(security.cert, 'utf8')
      options.ssl.key = fs.readFileSync(security.key, 'utf8')
    }
  }
  if (security.sasl && security.sasl.mechanism === 'oauthbearer') {
    const principal = security.sasl.principal
    options.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: unsecuredJwt(principal) }) }
  } else if (security.sasl) {
    options.sasl = security.sasl
  }
  return options
}

module.exports = { now, emit, commands, RangeAssigner, parseValue, kafkaOptions, unsecuredJwt }
