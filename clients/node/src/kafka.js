'use strict'
// The KafkaJS client of a controlled consumer or producer, and the three things the protocol needs that
// KafkaJS 2.2.4 has no public API for. They use KafkaJS's Cluster (its private factory on the Kafka
// instance), which is why package.json pins kafkajs exactly:
//
// 1. reading the control topic's partition 0 *without a consumer group* (KafkaJS has no assign()):
//    ListOffsets and Fetch on the partition leader;
// 2. committing offsets *without membership* (generation -1) after a member left a rebalancing group;
// 3. the producer's own metadata: a KafkaJS producer silently drops a message for a partition its
//    metadata does not know yet (sendMessages.js groups messages by leader), so a switch to more
//    partitions waits until that metadata shows them.
//
// It also waits out maxWaitTime on an empty fetch that came back early: Kafka holds a fetch up to
// fetch.max.wait.ms, a broker without long-poll answers at once, and KafkaJS then fetches in a busy loop
// (about 25,000 fetches/s and 60% of a core per idle consumer on the embedded test broker). On Kafka the
// broker has already waited and nothing changes.

const { Kafka, logLevel } = require('kafkajs')

const CREATE_CLUSTER = 'private:Kafka:createCluster'
const PATCHED = Symbol('kstate:idleFetchWait')

function clusterFactory (kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === CREATE_CLUSTER)
  if (sym === undefined) throw new Error('kstate-control needs kafkajs 2.2.x (its private cluster factory)')
  return sym
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function isEmptyFetch (response) {
  return (response.responses || []).every(t => t.partitions.every(p => (p.messages || []).length === 0))
}

function patchBroker (broker) {
  if (broker[PATCHED]) return broker
  const fetch = broker.fetch.bind(broker)
  broker.fetch = async request => {
    const started = Date.now()
    const response = await fetch(request)
    const left = (request.maxWaitTime == null ? 5000 : request.maxWaitTime) - (Date.now() - started)
    if (left > 0 && isEmptyFetch(response)) await sleep(left)
    return response
  }
  broker[PATCHED] = true
  return broker
}

function patchCluster (cluster) {
  const findBroker = cluster.findBroker.bind(cluster)
  cluster.findBroker = async args => patchBroker(await findBroker(args))
  return cluster
}

/** A log creator writing JSON lines to stderr (KafkaJS's default writes to stdout). */
function stderrLogCreator () {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(JSON.stringify({ level: label, namespace, message, ...extra }) + '\n')
  }
}

/**
 * A KafkaJS client for `config` (the options of `new Kafka(...)`) whose clusters are patched as above;
 * `client.clusters` lists every cluster it created (the newest last).
 */
function createKafka (config) {
  const kafka = new Kafka({ logLevel: logLevel.WARN, logCreator: stderrLogCreator, ...config })
  const sym = clusterFactory(kafka)
  const create = kafka[sym]
  const clusters = []
  kafka[sym] = options => {
    const cluster = patchCluster(create(options))
    clusters.push(cluster)
    return cluster
  }
  return { kafka, clusters, newCluster: options => kafka[sym](options) }
}

/** [{topic, partition, offset}] as KafkaJS's commit body: [{topic, partitions: [{partition, offset}]}]. */
function byTopic (entries) {
  const out = new Map()
  for (const { topic, partition, offset } of entries) {
    if (!out.has(topic)) out.set(topic, [])
    out.get(topic).push({ partition, offset: String(offset) })
  }
  return [...out].map(([topic, partitions]) => ({ topic, partitions }))
}

/** Commit `offsets` ([{topic, partition, offset}]) for `groupId` without membership (generation -1). */
async function commitWithoutMembership (cluster, groupId, offsets) {
  const coordinator = await cluster.findGroupCoordinator({ groupId })
  await coordinator.offsetCommit({ groupId, groupGenerationId: -1, memberId: '', topics: byTopic(offsets) })
}

/**
 * The group's committed offsets of `entries` ([{topic, partition}]): a Map `key(topic, partition)` -> offset
 * (-1: none). One OffsetFetch naming the partitions (KafkaJS's admin.fetchOffsets lists a topic's partitions
 * from its own metadata, which may not know new ones yet).
 */
async function fetchCommitted (cluster, groupId, entries, key) {
  const coordinator = await cluster.findGroupCoordinator({ groupId })
  const topics = byTopic(entries.map(e => ({ ...e, offset: 0 }))).map(({ topic, partitions }) => ({
    topic, partitions: partitions.map(({ partition }) => ({ partition }))
  }))
  const { responses } = await coordinator.offsetFetch({ groupId, topics })
  const out = new Map()
  for (const { topic, partitions } of responses) {
    for (const { partition, offset } of partitions) out.set(key(topic, partition), Number(offset))
  }
  return out
}

/**
 * Where a consumer without a committed offset starts on `entries` ([{topic, partition}]): the log start
 * (`fromBeginning`) or end, one ListOffsets per leader; a Map `key(topic, partition)` -> offset. A partition
 * the cluster's metadata does not know (or whose leader it does not know) is absent.
 */
async function startOffsets (cluster, entries, fromBeginning, key) {
  const topics = byTopic(entries.map(e => ({ ...e, offset: 0 }))).map(({ topic, partitions }) => ({
    topic, fromBeginning, partitions: partitions.map(({ partition }) => ({ partition }))
  }))
  const out = new Map()
  for (const { topic, partitions } of await cluster.fetchTopicsOffset(topics)) {
    for (const { partition, offset } of partitions) out.set(key(topic, partition), Number(offset))
  }
  return out
}

/** The client piece's default log: stderr, without debug lines. */
function defaultLog (level, message) {
  if (level !== 'debug') process.stderr.write(`kstate-control ${level}: ${message}\n`)
}

/** The partition count of `topic` in `cluster`'s metadata, refreshed first when `refresh`. */
async function metadataCount (cluster, topic, refresh = false) {
  await cluster.addTargetTopic(topic)
  if (refresh) await cluster.refreshMetadata()
  return cluster.findTopicPartitionMetadata(topic).length
}

module.exports = {
  byTopic,
  createKafka,
  commitWithoutMembership,
  defaultLog,
  fetchCommitted,
  metadataCount,
  sleep,
  startOffsets,
  stderrLogCreator,
  logLevel
}
