"""A task-group factory wiring the safe partition increase in its one safe order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, TaskGroup, chain

from airflow_provider_kstate.assets import topic_alias
from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.operators.approval import KStateApprovalOperator
from airflow_provider_kstate.operators.consumers import (
    KStatePauseConsumersOperator,
    KStateResumeConsumersOperator,
)
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.dry_run_gate import KStateDryRunGateOperator
from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator
from airflow_provider_kstate.operators.partitions import KStateIncreasePartitionsOperator
from airflow_provider_kstate.operators.plan import KStatePlanOperator
from airflow_provider_kstate.operators.producers import (
    KStateScaleProducersOperator,
    KStateStartProducersOperator,
)
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.operators.window import KStatePauseWindowOperator
from airflow_provider_kstate.sensors.groups import (
    KStateGroupsDrainedSensor,
    KStateGroupsEmptySensor,
    KStateGroupsStableSensor,
)
from airflow_provider_kstate.sensors.partitions import KStateNewPartitionsWrittenSensor
from airflow_provider_kstate.task_groups.config import (
    DEFAULT_RETRIES,
    DEFAULT_RETRY_DELAY,
    ApprovalConfig,
    BrokerCheckConfig,
    ConnectionConfig,
    FleetConfig,
    GroupsConfig,
    IncreaseOptions,
    KeyOrderConfig,
    StayConfig,
    StepsConfig,
    WaitConfig,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_DELAY",
    "ApprovalConfig",
    "BrokerCheckConfig",
    "ConnectionConfig",
    "FleetConfig",
    "GroupsConfig",
    "KeyOrderConfig",
    "StayConfig",
    "StepsConfig",
    "WaitConfig",
    "safe_partition_increase",
]


def safe_partition_increase(
    *,
    topic: str = "",
    topics: list[str] | str | None = None,
    partitions: int | str,
    dry_run: bool | str = False,
    group_id: str = "safe_partition_increase",
    connection: ConnectionConfig | None = None,
    groups: GroupsConfig | None = None,
    fleet: FleetConfig | None = None,
    broker_check: BrokerCheckConfig | None = None,
    waits: WaitConfig | None = None,
    ordering: KeyOrderConfig | None = None,
    stay: StayConfig | None = None,
    steps: StepsConfig | None = None,
    approval: ApprovalConfig | None = None,
) -> TaskGroup:
    """Build the task group: check the broker, plan, pause, wait EMPTY, increase, seed, scale, resume, wait
    STABLE, verify.

    ``check_broker`` runs the broker doctor first: a broker that breaks a promise the increase relies on
    (it cannot create partitions, its ListOffsets or group states lie, ...) fails the run before anything
    is paused, naming the promise (:class:`~airflow_provider_kstate.operators.doctor.KStateBrokerDoctorOperator`).

    By default the steps from pause to resume run back-to-back in one task (``pause_window``), so
    consumers are out of their groups only for the leave, the create, the seed and the rejoin, not for the
    scheduler's latency between tasks. With your own pause/resume/scale tasks (or ``wait_for_writes``) each
    step is its own task (``pause_consumers``, ``wait_groups_empty``, ``increase_partitions``,
    ``seed_offsets``, ``scale_producers``, ``resume_consumers``). Either way ``wait_groups_stable`` and
    ``verify`` follow. A verified increase emits an event of the topic's Asset in the Kafka provider's
    scheme, ``kafka://<first bootstrap server>/<topic>``, through ``verify``'s outlet alias
    ``kstate-topic-increased``: a DAG scheduled on that Asset runs once the topic has grown safely.

    With ``require_approval``, ``approve_plan`` (after ``stop_if_dry_run``, before the pause) asks a human
    to approve the plan through Airflow's human-in-the-loop UI and API, and checks the cluster still matches
    it before anyone is paused (:class:`~airflow_provider_kstate.operators.approval.KStateApprovalOperator`).

    A guard task runs when any step fails: it resumes consumers when that is safe and otherwise fails
    loudly, leaving them paused (see :class:`KStateFailureGuardOperator`).

    Several co-partitioned topics (a join's inputs) grow together with ``topics`` (``topic`` first when
    both are given): one plan naming every topic and every group at risk on any of them, every topic's
    lease taken as one set, one ``pause_window`` (the groups leave once, every topic is created and each
    group seeded on every topic it reads, the groups rejoin once), and ``verify`` judges every partition of
    every topic (see :mod:`airflow_provider_kstate.increase.topic_set`). The layout of one task per step
    takes them the same way: ``pause_consumers`` pauses every group once, ``increase_partitions`` grows every
    topic, ``seed_offsets`` seeds each group on every topic it reads (a report per topic),
    ``scale_producers`` switches each topic's producers and ``resume_consumers`` resumes every group once;
    only ``wait_for_writes`` (one topic's new partitions) is refused with them. ``require_approval`` shows
    the approver every topic and checks every topic again before anyone is paused.

    :param topic: the topic to grow (templated); may be left out when ``topics`` names the set.
    :param topics: co-partitioned topics to grow with ``topic`` to the same count in the same run
        (templated: a list, or a JSON list).
    :param partitions: the target partition count (templated).
    :param dry_run: stop after the plan (templated).
    :param group_id: the task group's id.
    :param connection: where the run talks to and writes to (:class:`ConnectionConfig`).
    :param groups: which consumer groups the run protects (:class:`GroupsConfig`).
    :param fleet: how each group and the producers are stopped and started: their drivers
        (:class:`FleetConfig`).
    :param broker_check: the broker doctor that runs first (:class:`BrokerCheckConfig`).
    :param waits: how the run waits for the groups and the producers (:class:`WaitConfig`).
    :param ordering: per-key order at the producers' switch (:class:`KeyOrderConfig`).
    :param stay: whether live consumers stay in their groups while the topics grow (:class:`StayConfig`).
    :param steps: the layout of the steps and your own tasks in their place (:class:`StepsConfig`).
    :param approval: a human approves the plan before anyone is paused (:class:`ApprovalConfig`).
    """
    options = IncreaseOptions.build(
        connection=connection,
        groups=groups,
        fleet=fleet,
        broker_check=broker_check,
        waits=waits,
        ordering=ordering,
        stay=stay,
        steps=steps,
        approval=approval,
    )
    single_window = options.single_window()
    if not topic and not topics:
        raise KStateConfigError("safe_partition_increase needs topic, or topics (a non-empty list)")
    if topics and options.waits.wait_for_writes and options.steps.scale_producers is None:
        raise KStateConfigError(
            f"wait_for_writes waits for the new partitions of one topic; with topics ({topics!r}) give your "
            "own scale_producers task, or leave wait_for_writes off. Nothing was built."
        )
    with TaskGroup(group_id=group_id, tooltip="Safe Kafka partition increase (KAFKA-12261)") as group:
        doctor = _check_broker(options)
        plan = _plan(options, topic=topic, topics=topics, partitions=partitions, dry_run=dry_run)
        gate = KStateDryRunGateOperator(task_id="stop_if_dry_run", plan=plan.output)
        approve = _approve(options, plan)
        middle, seed_report, switch = _window(options, plan) if single_window else _per_step(options, plan)
        stable = KStateGroupsStableSensor(
            task_id="wait_groups_stable",
            plan=plan.output,
            timeout=options.waits.stable_timeout,
            **_sensing(options),
        )
        drained = KStateGroupsDrainedSensor(
            task_id="wait_groups_drained",
            plan=plan.output,
            switch=switch,
            timeout=options.waits.drain_timeout,
            **_sensing(options),
        )
        start = KStateStartProducersOperator(
            task_id="start_producers", plan=plan.output, switch=switch, **_common(options)
        )
        verify = KStateVerifyOperator(
            task_id="verify",
            plan=plan.output,
            seed_report=seed_report,
            key_order=options.ordering.key_order,
            barrier_timeout=options.ordering.barrier_timeout,
            producers_started=start.output,
            outlets=[topic_alias()],  # resolves to kafka://<server>/<topic> once the topic grew
            **_stepping(options),
        )
        guard = KStateFailureGuardOperator(
            task_id="failure_guard",
            plan_task_id=plan.task_id,
            approval_task_id=approve.task_id if approve else None,
            **{**_common(options), "retries": 0},
        )
        chain(doctor, plan, gate, *([approve] if approve else []), *middle, stable, drained, start, verify)
        # verify stays a leaf beside the guard, so a failure anywhere fails the run; by verify's turn
        # consumers are resumed and seeded, so a failing verify has nothing left for the guard to decide.
        for step in [*middle, stable, drained, start]:
            step >> guard
    return group


def _common(options: IncreaseOptions) -> dict[str, Any]:
    """The arguments of every step that takes the lease."""
    connection = options.connection
    return {
        "kafka_config_id": connection.kafka_config_id,
        "control_topic": connection.control_topic,
        "lease_topic": connection.lease_topic,
        "lease_ttl": connection.lease_ttl,
        "retries": options.steps.retries,
        "retry_delay": DEFAULT_RETRY_DELAY,
    }


def _stepping(options: IncreaseOptions) -> dict[str, Any]:
    """The arguments of the steps that write a report."""
    return {**_common(options), "storage_conn_id": options.connection.storage_conn_id}


def _sensing(options: IncreaseOptions) -> dict[str, Any]:
    """The arguments of the sensors."""
    return {
        "retries": options.steps.retries,
        "retry_delay": DEFAULT_RETRY_DELAY,
        "kafka_config_id": options.connection.kafka_config_id,
        "deferrable": options.waits.deferrable,
        "poke_interval": options.waits.poke_interval,
    }


def _check_broker(options: IncreaseOptions) -> BaseOperator:
    from airflow_provider_kstate.doctor.promises import Needs

    return KStateBrokerDoctorOperator(
        task_id="check_broker",
        needs=Needs.INCREASE,
        allow_broker_deviation=options.broker_check.allow_broker_deviation,
        refresh_broker_check=options.broker_check.refresh_broker_check,
        kafka_config_id=options.connection.kafka_config_id,
        retries=options.steps.retries,
        retry_delay=DEFAULT_RETRY_DELAY,
    )


def _plan(
    options: IncreaseOptions,
    *,
    topic: str,
    topics: list[str] | str | None,
    partitions: int | str,
    dry_run: bool | str,
) -> BaseOperator:
    groups = options.groups
    return KStatePlanOperator(
        task_id="plan",
        topic=topic,
        topics=topics,
        partitions=partitions,
        consumer_groups=groups.consumer_groups,
        exclude_groups=groups.exclude_groups,
        allow_unknown_groups=groups.allow_unknown_groups,
        acknowledge_streams_groups=groups.acknowledge_streams_groups,
        allow_broker_deviation=options.broker_check.allow_broker_deviation,
        key_order=options.ordering.key_order,
        group_drivers=options.fleet.group_drivers,
        producer_drivers=options.fleet.producer_drivers,
        drivers=options.fleet.drivers,
        consumers_stay=options.stay.consumers_stay,
        committing_groups=options.stay.committing_groups,
        own_tasks=options.steps.own_consumer_tasks,
        dry_run=dry_run,
        report_uri=options.connection.report_uri,
        storage_conn_id=options.connection.storage_conn_id,
        **_common(options),
    )


def _approve(options: IncreaseOptions, plan: BaseOperator) -> BaseOperator | None:
    """The approval step, or None when ``require_approval`` is the literal False (no task, no cost)."""
    if options.approval.require_approval is False:
        return None
    return KStateApprovalOperator(
        task_id="approve_plan",
        plan=plan.output,
        require_approval=options.approval.require_approval,
        approval_timeout=options.approval.approval_timeout,
        **{**_stepping(options), "retries": 0},
    )


def _window(options: IncreaseOptions, plan: BaseOperator) -> tuple[list[BaseOperator], Any, Any]:
    """Pause .. resume as one task; returns the steps, the seed report's XCom and the switch's XCom."""
    window = KStatePauseWindowOperator(
        task_id="pause_window",
        plan=plan.output,
        empty_timeout=options.waits.empty_timeout,
        key_order=options.ordering.key_order,
        drain_timeout=options.waits.drain_timeout,
        positions_timeout=options.stay.positions_timeout,
        **_stepping(options),
    )
    return [window], window.output, window.output


def _per_step(options: IncreaseOptions, plan: BaseOperator) -> tuple[list[BaseOperator], Any, Any]:
    """Pause .. resume one task per step (your own tasks in place of the built-in signals); returns the
    steps, the seed report's XCom and the switch's XCom (the built-in scale step's; None with your own)."""
    common, custom, key_order = _common(options), options.steps, options.ordering.key_order
    pause = custom.pause_consumers or KStatePauseConsumersOperator(
        task_id="pause_consumers",
        plan=plan.output,
        key_order=key_order,
        empty_timeout=options.waits.empty_timeout,
        drain_timeout=options.waits.drain_timeout,
        **common,
    )
    steps: list[BaseOperator] = [
        pause,
        KStateGroupsEmptySensor(
            task_id="wait_groups_empty",
            plan=plan.output,
            # the pause record's epoch: its acknowledgements tell the ghosts (your own pause task has none)
            pause=None if custom.pause_consumers else pause.output,
            control_topic=options.connection.control_topic,
            timeout=options.waits.empty_timeout,
            **_sensing(options),
        ),
        KStateIncreasePartitionsOperator(task_id="increase_partitions", plan=plan.output, **common),
    ]
    seed = KStateSeedOffsetsOperator(task_id="seed_offsets", plan=plan.output, **_stepping(options))
    scale = custom.scale_producers or KStateScaleProducersOperator(
        task_id="scale_producers", plan=plan.output, key_order=key_order, **common
    )
    steps += [seed, scale]
    if options.waits.wait_for_writes and custom.scale_producers is None:
        steps.append(
            KStateNewPartitionsWrittenSensor(
                task_id="wait_new_partitions_written",
                plan=plan.output,
                baseline=scale.output,
                timeout=options.waits.writes_timeout,
                **_sensing(options),
            )
        )
    steps.append(
        custom.resume_consumers
        or KStateResumeConsumersOperator(task_id="resume_consumers", plan=plan.output, **common)
    )
    return steps, seed.output, None if custom.scale_producers else scale.output
