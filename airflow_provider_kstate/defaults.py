"""The provider's default names and numbers, in one light module: the operators' and the task group's
constructors take them as defaults while a DAG file is parsed, so this module imports nothing but the
string enum (no pydantic model, no Kafka client). The domain modules that own each value import it from here
and keep their names for it."""

from __future__ import annotations

from airflow_provider_kstate.enums import StrEnum

#: The Airflow connection (``kafka`` type) every hook and operator uses unless told otherwise.
DEFAULT_CONN_ID = "kafka_default"
#: The topic that holds the per-topic leases of increase and snapshot runs.
DEFAULT_LEASE_TOPIC = "_kstate_leases"
#: Seconds a lease (a topic's, or a snapshot's during a rebuild) lives without renewal. Running steps and
#: rebuilds renew it; a crashed run frees the topic or the snapshot after it.
DEFAULT_LEASE_TTL = 900.0
#: The control topic the client piece's services watch.
DEFAULT_CONTROL_TOPIC = "_kstate_control"
#: The topic of the broker doctor's cached verdicts.
DEFAULT_CACHE_TOPIC = "_kstate_doctor"
#: Seconds a behavioural verdict stays valid: a broker upgrade is the usual reason it changes.
DEFAULT_TTL = 24 * 3600.0
#: Seconds an approval request waits for an answer by default.
DEFAULT_APPROVAL_TIMEOUT = 3600.0
#: Earlier runs of the topic whose progress documents the approval prompt reads, at most (the newest).
DEFAULT_HISTORY_RUNS = 20
#: Seconds between two progress lines of a Spark application unless told otherwise (``--progress-interval``).
DEFAULT_INTERVAL = 10.0
#: How many snapshot versions a rebuild keeps (the current one included) unless told otherwise.
DEFAULT_KEEP_VERSIONS = 3
#: Group id prefixes of Spark's Kafka source (a query's offsets live in its checkpoint, not in its group).
DEFAULT_SPARK_PREFIXES = ("spark-kafka-source-", "spark-kafka-relation-")


class KeyOrder(StrEnum):
    """``key_order`` of an increase: ``preserve`` holds post-switch records until the pre-switch ones are
    processed (at the barrier, or by draining the groups that cannot hold); ``drain`` stops the producers
    before the create and starts them once every live group has consumed what was written before;
    ``relax`` switches at once."""

    PRESERVE = "preserve"
    RELAX = "relax"
    DRAIN = "drain"


PRESERVE = KeyOrder.PRESERVE
RELAX = KeyOrder.RELAX
DRAIN = KeyOrder.DRAIN


class ConsumersStay(StrEnum):
    """``consumers_stay`` of an increase: whether live consumer groups stay in their groups while the topic
    grows (:mod:`~airflow_provider_kstate.increase.stay`). ``never``: every live group is paused and seeded
    (the pause window); ``auto``: each live group that gives evidence of its position stays, the others are
    paused; ``always``: a live group without evidence refuses the plan."""

    NEVER = "never"
    AUTO = "auto"
    ALWAYS = "always"
