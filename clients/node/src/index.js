'use strict'
// kstate-control: the kstate control protocol (docs/control-protocol.md) for KafkaJS.

const { ControlledConsumer } = require('./consumer')
const { ControlledProducer } = require('./producer')
const { ControlChannel, ControlTail } = require('./control')
const { murmur2, partitionFor } = require('./murmur2')
const protocol = require('./protocol')

module.exports = { ControlledConsumer, ControlledProducer, ControlChannel, ControlTail, murmur2, partitionFor, protocol }
