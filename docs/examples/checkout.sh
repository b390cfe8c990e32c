# Commands of a checkout (docs: working on the provider, a production-shaped deployment). tests/docs/
# test_docs_examples.py checks each `make` target exists and parses each broker-helper command with the
# helper's own parser (without starting a broker).

# [START broker]
.venv/bin/python -m kstate_support.broker up              # Apache Kafka 4.4.0, one KRaft node: prints 127.0.0.1:PORT
.venv/bin/python -m kstate_support.broker up --nodes 3 --data-dir .kstate/cluster   # three nodes, RF 3, min ISR 2
.venv/bin/python -m kstate_support.broker down --data-dir .kstate/cluster          # without --data-dir: the default one
KSTATE_KAFKA_VERSION=4.2.0 .venv/bin/python -m kstate_support.broker up   # another release Maven Central serves
KSTATE_BROKER=noida .venv/bin/python -m kstate_support.broker up          # the emulator instead
# [END broker]

# [START real_cluster]
KSTATE_BOOTSTRAP_SERVERS=broker1:9092,broker2:9092 \
KSTATE_KAFKA_CONFIG='{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "...", "sasl.password": "..."}' \
make test
# [END real_cluster]

# [START deploy_local]
make deploy-local      # installs postgresql and redis-server from Debian's packages when missing (root or sudo)
# [END deploy_local]
