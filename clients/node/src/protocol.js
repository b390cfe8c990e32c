'use strict'
// The kstate control protocol, version 1 (docs/control-protocol.md): keys, records, encode and decode.
// Every value is validated against docs/schemas/control/<kind>.schema.json; a value that does not validate
// (or is not JSON, has an unknown kind or another v) decodes to null: the reader ignores it.

const fs = require('fs')
const path = require('path')
const Ajv2020 = require('ajv/dist/2020')

const PROTOCOL_VERSION = 1
const DEFAULT_CONTROL_TOPIC = '_kstate_control'
const CONTROL_TOPIC_CONFIG = {
  'cleanup.policy': 'compact',
  'message.timestamp.type': 'LogAppendTime',
  'min.compaction.lag.ms': '0'
}
const KINDS = ['command', 'layout', 'ack', 'barrier', 'release']
// The schemas live with the document, in the repository: one source for every implementation.
const SCHEMA_DIR = process.env.KSTATE_CONTROL_SCHEMA_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'docs', 'schemas', 'control')

// Field defaults of optional fields (the schemas' "default" keywords), applied after validation.
const DEFAULTS = {
  command: { topic: '', issued_at: 0, issuer: '' },
  layout: { hold: false, hold_until: 0, issued_at: 0, issuer: '' },
  ack: { group: '', topic: '', partitions: 0, at: 0 },
  barrier: { state: 'hold', offsets: [], groups: [], partitions: 0, grown_from: 0, issued_at: 0, issuer: '' },
  release: { at: 0, issuer: '' }
}

function loadValidators (dir = SCHEMA_DIR) {
  const ajv = new Ajv2020({ allErrors: false, strict: true })
  const out = {}
  for (const kind of KINDS) {
    const schema = JSON.parse(fs.readFileSync(path.join(dir, `${kind}.schema.json`), 'utf8'))
    out[kind] = ajv.compile(schema)
  }
  return out
}

let validators = null
function validator (kind) {
  if (validators === null) validators = loadValidators()
  return validators[kind]
}

const nowMs = () => Date.now()

const keys = {
  command: group => `cmd/${group}`,
  layout: topic => `layout/${topic}`,
  barrier: topic => `barrier/${topic}`,
  release: (topic, group) => `release/${topic}/${group}`,
  ack: (group, client) => `ack/${group}/${client}`,
  barrierAck: (topic, group, client) => `ack-barrier/${topic}/${group}/${client}`,
  layoutAck: (topic, client) => `ack-layout/${topic}/${client}`
}

/** The key an acknowledgement is written under (section 2.3 / 5a). */
function ackKey (ack) {
  if (ack.group && ack.topic) return keys.barrierAck(ack.topic, ack.group, ack.client)
  if (ack.group) return keys.ack(ack.group, ack.client)
  return keys.layoutAck(ack.topic, ack.client)
}

function ack ({ client, epoch, state, group = '', topic = '', partitions = 0 }) {
  return { v: PROTOCOL_VERSION, kind: 'ack', client, epoch, state, group, topic, partitions, at: nowMs() }
}

function command ({ group, command, epoch, topic = '', issuer = '' }) {
  return { v: PROTOCOL_VERSION, kind: 'command', group, command, epoch, topic, issued_at: nowMs(), issuer }
}

function layout ({ topic, partitions, epoch, hold = false, holdUntil = 0, issuer = '' }) {
  return {
    v: PROTOCOL_VERSION, kind: 'layout', topic, partitions, epoch, hold, hold_until: holdUntil,
    issued_at: nowMs(), issuer
  }
}

function barrier ({ topic, epoch, state = 'hold', offsets = [], groups = [], partitions = 0, grownFrom = 0, issuer = '' }) {
  return {
    v: PROTOCOL_VERSION, kind: 'barrier', topic, epoch, state, offsets, groups, partitions, grown_from: grownFrom,
    issued_at: nowMs(), issuer
  }
}

function release ({ topic, group, epoch, issuer = '' }) {
  return { v: PROTOCOL_VERSION, kind: 'release', topic, group, epoch, at: nowMs(), issuer }
}

/** The key a record (other than an ack) is written under. */
function recordKey (record) {
  switch (record.kind) {
    case 'command': return keys.command(record.group)
    case 'layout': return keys.layout(record.topic)
    case 'barrier': return keys.barrier(record.topic)
    case 'release': return keys.release(record.topic, record.group)
    case 'ack': return ackKey(record)
    default: throw new Error(`unknown record kind ${record.kind}`)
  }
}

/** Validate a record against its kind's schema: returns null when valid, else the errors. */
function errors (record) {
  const kind = record && typeof record === 'object' && !Array.isArray(record) ? record.kind : undefined
  if (!KINDS.includes(kind)) return [{ message: `unknown kind ${JSON.stringify(kind)}` }]
  const validate = validator(kind)
  return validate(record) ? null : validate.errors
}

function encode (record) {
  return Buffer.from(JSON.stringify(record), 'utf8')
}

/**
 * Parse a control-topic value; null for a tombstone and for anything a reader must ignore (not JSON, not
 * an object, unknown kind, v other than 1, a missing or invalid field). Optional fields get their defaults.
 * Integers are safe in JavaScript numbers: epochs and offsets are far below 2^53.
 */
function decode (value) {
  if (value === null || value === undefined) return null
  let raw
  try {
    raw = JSON.parse(Buffer.isBuffer(value) ? value.toString('utf8') : String(value))
  } catch (_) {
    return null
  }
  if (errors(raw) !== null) return null
  return { ...DEFAULTS[raw.kind], ...raw }
}

module.exports = {
  PROTOCOL_VERSION,
  DEFAULT_CONTROL_TOPIC,
  CONTROL_TOPIC_CONFIG,
  KINDS,
  SCHEMA_DIR,
  keys,
  ackKey,
  recordKey,
  ack,
  command,
  layout,
  barrier,
  release,
  errors,
  encode,
  decode,
  nowMs,
  loadValidators
}
