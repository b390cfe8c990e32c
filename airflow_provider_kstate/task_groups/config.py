"""The options of :func:`~airflow_provider_kstate.task_groups.partition_increase.safe_partition_increase`,
grouped into a few typed, frozen config objects (as astronomer-cosmos groups its ``ProjectConfig``,
``ProfileConfig`` and ``ExecutionConfig``).

The config objects are the one way to give them. Fields marked *templated* accept Jinja
(``"{{ params.x }}"``), so a DAG's Params reach them as they reach an operator's argument (``dags/`` does
so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import (
    DEFAULT_APPROVAL_TIMEOUT,
    DEFAULT_CONN_ID,
    DEFAULT_CONTROL_TOPIC,
    DEFAULT_LEASE_TOPIC,
    DEFAULT_LEASE_TTL,
    KeyOrder,
)

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator

#: Retries of the steps: transient broker errors are retried; errors a retry cannot fix (bad input, a held
#: lease, an unsafe resume) are ``AirflowFailException`` subclasses and fail at once.
DEFAULT_RETRIES = 2
#: Delay between two tries: a broker failover or a coordinator move settles within seconds.
DEFAULT_RETRY_DELAY = timedelta(seconds=20)


@dataclass(frozen=True)
class ConnectionConfig:
    """Where the run talks to and writes to.

    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param control_topic: the control topic of services that use the client piece.
    :param lease_topic: the topic that holds per-topic leases.
    :param lease_ttl: seconds the topic's lease lives without renewal (running steps renew it).
    :param report_uri: where the per-group, per-partition seed and verify reports go (a local folder or an
        ``ObjectStoragePath`` URI such as ``s3://bucket/kstate``); empty: ``$AIRFLOW_HOME/kstate-reports``.
    :param storage_conn_id: the connection whose credentials reach ``report_uri``.
    """

    kafka_config_id: str = DEFAULT_CONN_ID
    control_topic: str = DEFAULT_CONTROL_TOPIC
    lease_topic: str = DEFAULT_LEASE_TOPIC
    lease_ttl: float = DEFAULT_LEASE_TTL
    report_uri: str = ""
    storage_conn_id: str | None = None


@dataclass(frozen=True)
class GroupsConfig:
    """Which consumer groups the run protects, and the risks accepted explicitly (all templated).

    :param consumer_groups: groups to protect; empty means every group at risk. Discovery always runs: a
        group at risk that is not named fails the plan.
    :param exclude_groups: groups at risk to leave alone, a risk accepted explicitly.
    :param allow_unknown_groups: accept named groups the cluster does not know.
    :param acknowledge_streams_groups: Kafka Streams applications the run may pause and seed.
    """

    consumer_groups: list[str] | str | None = None
    exclude_groups: list[str] | str | None = None
    allow_unknown_groups: bool | str = False
    acknowledge_streams_groups: list[str] | str | None = None


@dataclass(frozen=True)
class FleetConfig:
    """How the run stops and starts each protected group and the producers
    (:mod:`airflow_provider_kstate.increase.drivers`; all templated).

    :param group_drivers: ``{group: driver}``: a :class:`~airflow_provider_kstate.increase.drivers.CommandDriver`
        (stop / start / ready commands: ``kubectl scale``, ``systemctl``, ``docker``, Kafka Connect's REST
        stop / resume) or the name of a driver in ``drivers``; every other group is driven by the control
        protocol. A live group whose members do not run the client piece needs one, or the plan refuses it.
    :param producer_drivers: ``{service: driver}`` or a list of driver names: the producer services the
        run stops to drain a group that cannot hold at the key-order barrier (``control``: the
        ControlledProducers).
    :param drivers: named drivers that ``group_drivers`` and ``producer_drivers`` refer to (``{name:
        driver or its dict form}``): where a DAG's params name drivers, the commands are defined here (in
        code, or an Airflow Variable rendered as JSON), never in the params.
    """

    group_drivers: Mapping[str, Any] | str | None = None
    producer_drivers: Mapping[str, Any] | list[str] | str | None = None
    drivers: Mapping[str, Any] | str | None = None


@dataclass(frozen=True)
class BrokerCheckConfig:
    """The broker doctor that runs first (``check_broker``; templated).

    :param allow_broker_deviation: broken broker promises to accept by name, logged as RISK ACCEPTED.
    :param refresh_broker_check: re-run the broker's behavioural checks now, not from the cache.
    """

    allow_broker_deviation: list[str] | str | None = None
    refresh_broker_check: bool | str = False


@dataclass(frozen=True)
class WaitConfig:
    """How the run waits for the groups and the producers.

    :param deferrable: run the sensors in the triggerer. Default True whatever Airflow's ``[operators]
        default_deferrable`` says (the sensors used alone follow it): the waits last up to the timeouts, and a
        deferred wait holds no worker slot while consumers are paused. Pass False where no triggerer runs.
    :param poke_interval: seconds between sensor checks.
    :param empty_timeout: seconds to wait for the groups to become EMPTY.
    :param stable_timeout: seconds to wait for the groups to come back STABLE.
    :param wait_for_writes: after the scale signal, wait until producers write to every new partition.
    :param writes_timeout: seconds to wait for those writes.
    :param drain_timeout: seconds to wait for drained groups to consume what was written before the
        producers stopped (then the producers start anyway, and the run fails naming the groups behind).
    """

    deferrable: bool = True
    poke_interval: float = 2.0
    empty_timeout: float = 600.0
    stable_timeout: float = 600.0
    wait_for_writes: bool = False
    writes_timeout: float = 600.0
    drain_timeout: float = 600.0


@dataclass(frozen=True)
class KeyOrderConfig:
    """Per-key order at the producers' switch.

    :param key_order: ``preserve`` (default): producers switch through the key-order barrier, so every
        key's records are processed in the order they were written by groups whose consumers use the client
        piece; a group that cannot hold is drained when its producers can be stopped (``producer_drivers``),
        else relaxed (named in the plan, with the reason, and in the log); ``drain``: the producers stop
        before the create and start once every live group consumed what was written before; ``relax``:
        they switch at once (templated).
    :param barrier_timeout: seconds ``verify`` waits for each live group to pass the key-order barrier.
    """

    key_order: KeyOrder | str = KeyOrder.PRESERVE
    barrier_timeout: float = 300.0


@dataclass(frozen=True)
class StayConfig:
    """Whether consumers stay in their groups while the topics grow (:mod:`~airflow_provider_kstate.increase.stay`).

    :param consumers_stay: ``never`` (default: every live group is paused and seeded), ``auto`` (each live
        group that gives evidence of its position stays, the others are paused; the plan says which and
        why) or ``always`` (a live group without evidence refuses the plan). Staying needs the topics'
        producers named in ``FleetConfig.producer_drivers`` (templated).
    :param committing_groups: groups whose consumers commit the position of every partition they are
        assigned (Java ``enable.auto.commit=true``): the evidence that lets them stay (templated).
    :param positions_timeout: seconds the staying groups have to hold a committed offset on every
        partition; those without one then are paused and seeded alone.
    """

    consumers_stay: str = "never"
    committing_groups: list[str] | str | None = None
    positions_timeout: float = 330.0


@dataclass(frozen=True)
class ApprovalConfig:
    """A human approves the plan before anyone is paused (plan, approve, apply): the ``approve_plan`` task,
    between ``stop_if_dry_run`` and the pause, built on the standard provider's HITL ``ApprovalOperator``.

    :param require_approval: ``False`` (the default) adds no task; ``True`` or a template (a DAG param)
        adds ``approve_plan``, which returns at once when it renders false (templated).
    :param approval_timeout: seconds (or a ``timedelta``) the request waits for an answer; none by then:
        nothing is changed, the lease is released and the task fails (templated).
    """

    require_approval: bool | str = False
    approval_timeout: float | str | timedelta = DEFAULT_APPROVAL_TIMEOUT


@dataclass(frozen=True)
class StepsConfig:
    """How the steps are laid out, and your own tasks in place of the built-in signals.

    :param single_window: run pause .. resume as one task (:class:`KStatePauseWindowOperator`): the same
        steps without the scheduler's latency between them, for the shortest consumer downtime. Needs the
        built-in pause, resume and scale signals. Default (None): one window unless custom tasks or
        ``wait_for_writes`` are given; False: one task per step.
    :param retries: retries of each step for transient errors.
    :param pause_consumers: your own task in place of the built-in pause signal (e.g. a scale-down).
    :param resume_consumers: your own task in place of the built-in resume signal (it must run only after
        seeding, which its place in the chain guarantees).
    :param scale_producers: your own task in place of the built-in layout signal.
    """

    single_window: bool | None = None
    retries: int = DEFAULT_RETRIES
    pause_consumers: BaseOperator | None = None
    resume_consumers: BaseOperator | None = None
    scale_producers: BaseOperator | None = None

    @property
    def custom(self) -> bool:
        """Whether any built-in signal is replaced by your own task."""
        return bool(self.pause_consumers or self.resume_consumers or self.scale_producers)

    @property
    def own_consumer_tasks(self) -> bool:
        """Whether your own tasks pause or resume the consumers (they drive every group without a driver)."""
        return bool(self.pause_consumers or self.resume_consumers)


@dataclass(frozen=True)
class IncreaseOptions:
    """Every option of the factory, one config object per concern."""

    connection: ConnectionConfig = ConnectionConfig()
    groups: GroupsConfig = GroupsConfig()
    fleet: FleetConfig = FleetConfig()
    broker_check: BrokerCheckConfig = BrokerCheckConfig()
    waits: WaitConfig = WaitConfig()
    ordering: KeyOrderConfig = KeyOrderConfig()
    stay: StayConfig = StayConfig()
    steps: StepsConfig = StepsConfig()
    approval: ApprovalConfig = ApprovalConfig()

    @classmethod
    def build(cls, **configs: Any) -> IncreaseOptions:
        """Return the options of the config objects given (None: defaults)."""
        return cls(**{name: config for name, config in configs.items() if config is not None})

    def single_window(self) -> bool:
        """Whether pause .. resume runs as one task; raises ``ValueError`` when asked with custom tasks."""
        custom = self.steps.custom or self.waits.wait_for_writes
        if self.steps.single_window and custom:
            raise ValueError(
                "single_window=True runs the built-in pause, scale and resume signals: drop the custom tasks"
                " and wait_for_writes, or pass single_window=False"
            )
        return not custom if self.steps.single_window is None else self.steps.single_window
