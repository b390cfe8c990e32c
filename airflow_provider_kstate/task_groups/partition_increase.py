"""A task-group factory wiring the safe partition increase in its one safe order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, TaskGroup, chain

from airflow_provider_kstate.assets import topic_alias
from airflow_provider_kstate.client.protocol import DEFAULT_CONTROL_TOPIC
from airflow_provider_kstate.increase.model import DEFAULT_LEASE_TOPIC, DEFAULT_LEASE_TTL
from airflow_provider_kstate.operators.consumers import (
    KStatePauseConsumersOperator,
    KStateResumeConsumersOperator,
)
from airflow_provider_kstate.operators.doctor import KStateBrokerDoctorOperator
from airflow_provider_kstate.operators.guard import KStateFailureGuardOperator
from airflow_provider_kstate.operators.partitions import KStateIncreasePartitionsOperator
from airflow_provider_kstate.operators.plan import KStateDryRunGateOperator, KStatePlanOperator
from airflow_provider_kstate.operators.producers import KStateScaleProducersOperator
from airflow_provider_kstate.operators.seed import KStateSeedOffsetsOperator
from airflow_provider_kstate.operators.verify import KStateVerifyOperator
from airflow_provider_kstate.operators.window import KStatePauseWindowOperator
from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor, KStateGroupsStableSensor
from airflow_provider_kstate.sensors.partitions import KStateNewPartitionsWrittenSensor

#: Retries of the steps: transient broker errors are retried; errors a retry cannot fix (bad input, a held
#: lease, an unsafe resume) are ``AirflowFailException`` subclasses and fail at once.
DEFAULT_RETRIES = 2
#: Delay between two tries: a broker failover or a coordinator move settles within seconds.
DEFAULT_RETRY_DELAY = timedelta(seconds=20)


def safe_partition_increase(
    *,
    topic: str,
    partitions: int | str,
    consumer_groups: list[str] | str | None = None,
    exclude_groups: list[str] | str | None = None,
    allow_unknown_groups: bool | str = False,
    acknowledge_streams_groups: list[str] | str | None = None,
    allow_broker_deviation: list[str] | str | None = None,
    refresh_broker_check: bool | str = False,
    dry_run: bool | str = False,
    group_id: str = "safe_partition_increase",
    kafka_config_id: str = "kafka_default",
    control_topic: str = DEFAULT_CONTROL_TOPIC,
    lease_topic: str = DEFAULT_LEASE_TOPIC,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    report_uri: str = "",
    report_conn_id: str | None = None,
    retries: int = DEFAULT_RETRIES,
    deferrable: bool = True,
    poke_interval: float = 2.0,
    empty_timeout: float = 600.0,
    stable_timeout: float = 600.0,
    wait_for_writes: bool = False,
    writes_timeout: float = 600.0,
    pause_consumers: BaseOperator | None = None,
    resume_consumers: BaseOperator | None = None,
    scale_producers: BaseOperator | None = None,
    single_window: bool | None = None,
    key_order: str = "preserve",
    barrier_timeout: float = 300.0,
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

    A guard task runs when any step fails: it resumes consumers when that is safe and otherwise fails
    loudly, leaving them paused (see :class:`KStateFailureGuardOperator`).

    :param topic: the topic to grow (templated).
    :param partitions: the target partition count (templated).
    :param consumer_groups: groups to protect; empty means every group at risk (templated). Discovery
        always runs: a group at risk that is not named fails the plan.
    :param exclude_groups: groups at risk to leave alone, a risk accepted explicitly (templated).
    :param allow_unknown_groups: accept named groups the cluster does not know (templated).
    :param acknowledge_streams_groups: Kafka Streams applications the run may pause and seed (templated).
    :param allow_broker_deviation: broken broker promises to accept by name, logged as RISK ACCEPTED
        (templated).
    :param refresh_broker_check: re-run the broker's behavioural checks now, not from the cache (templated).
    :param dry_run: stop after the plan (templated).
    :param group_id: the task group's id.
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param control_topic: the control topic of services that use the client piece.
    :param lease_topic: the topic that holds per-topic leases.
    :param lease_ttl: seconds the topic's lease lives without renewal (running steps renew it).
    :param report_uri: where the per-group, per-partition seed and verify reports go (a local folder or an
        ``ObjectStoragePath`` URI such as ``s3://bucket/kstate``); empty: ``$AIRFLOW_HOME/kstate-reports``.
    :param report_conn_id: the connection whose credentials reach ``report_uri``.
    :param retries: retries of each step for transient errors.
    :param deferrable: run the sensors in the triggerer. Default True whatever Airflow's ``[operators]
        default_deferrable`` says (the sensors used alone follow it): the waits last up to the timeouts, and a
        deferred wait holds no worker slot while consumers are paused. Pass False where no triggerer runs.
    :param poke_interval: seconds between sensor checks.
    :param empty_timeout: seconds to wait for the groups to become EMPTY.
    :param stable_timeout: seconds to wait for the groups to come back STABLE.
    :param wait_for_writes: after the scale signal, wait until producers write to every new partition.
    :param writes_timeout: seconds to wait for those writes.
    :param pause_consumers: your own task in place of the built-in pause signal (e.g. a scale-down).
    :param resume_consumers: your own task in place of the built-in resume signal (it must run only after
        seeding, which its place in the chain guarantees).
    :param scale_producers: your own task in place of the built-in layout signal.
    :param key_order: ``preserve`` (default): producers switch through the key-order barrier, so every
        key's records are processed in the order they were written by groups whose consumers use the client
        piece (others are relaxed: named in the plan, with the reason, and in the log); ``relax``: they
        switch at once (templated).
    :param barrier_timeout: seconds ``verify`` waits for each live group to pass the key-order barrier.
    :param single_window: run pause .. resume as one task (:class:`KStatePauseWindowOperator`): the same
        steps without the scheduler's latency between them, for the shortest consumer downtime. Needs the
        built-in pause, resume and scale signals. Default (None): one window unless custom tasks or
        ``wait_for_writes`` are given; False: one task per step.
    """
    custom = bool(pause_consumers or resume_consumers or scale_producers or wait_for_writes)
    if single_window and custom:
        raise ValueError(
            "single_window=True runs the built-in pause, scale and resume signals: drop the custom tasks"
            " and wait_for_writes, or pass single_window=False"
        )
    if single_window is None:
        single_window = not custom
    common: dict[str, Any] = {
        "kafka_config_id": kafka_config_id,
        "control_topic": control_topic,
        "lease_topic": lease_topic,
        "lease_ttl": lease_ttl,
        "retries": retries,
        "retry_delay": DEFAULT_RETRY_DELAY,
    }
    stepping = {**common, "report_conn_id": report_conn_id}
    sensing: dict[str, Any] = {
        "retries": retries,
        "retry_delay": DEFAULT_RETRY_DELAY,
        "kafka_config_id": kafka_config_id,
        "deferrable": deferrable,
        "poke_interval": poke_interval,
    }
    with TaskGroup(group_id=group_id, tooltip="Safe Kafka partition increase (KAFKA-12261)") as group:
        doctor = KStateBrokerDoctorOperator(
            task_id="check_broker",
            needs="increase",
            allow_broker_deviation=allow_broker_deviation,
            refresh=refresh_broker_check,
            kafka_config_id=kafka_config_id,
            retries=retries,
            retry_delay=DEFAULT_RETRY_DELAY,
        )
        plan = KStatePlanOperator(
            task_id="plan",
            topic=topic,
            partitions=partitions,
            consumer_groups=consumer_groups,
            exclude_groups=exclude_groups,
            allow_unknown_groups=allow_unknown_groups,
            acknowledge_streams_groups=acknowledge_streams_groups,
            allow_broker_deviation=allow_broker_deviation,
            key_order=key_order,
            dry_run=dry_run,
            report_uri=report_uri,
            **common,
        )
        gate = KStateDryRunGateOperator(task_id="stop_if_dry_run", plan=plan.output)
        if single_window:
            window = KStatePauseWindowOperator(
                task_id="pause_window",
                plan=plan.output,
                empty_timeout=empty_timeout,
                key_order=key_order,
                **stepping,
            )
            steps: list[BaseOperator] = [window]
            seed_report = window.output
        else:
            steps = [
                pause_consumers
                or KStatePauseConsumersOperator(
                    task_id="pause_consumers", plan=plan.output, key_order=key_order, **common
                ),
                KStateGroupsEmptySensor(
                    task_id="wait_groups_empty", plan=plan.output, timeout=empty_timeout, **sensing
                ),
                KStateIncreasePartitionsOperator(task_id="increase_partitions", plan=plan.output, **common),
            ]
            seed = KStateSeedOffsetsOperator(task_id="seed_offsets", plan=plan.output, **stepping)
            scale = scale_producers or KStateScaleProducersOperator(
                task_id="scale_producers", plan=plan.output, key_order=key_order, **common
            )
            steps += [seed, scale]
            if wait_for_writes and scale_producers is None:
                steps.append(
                    KStateNewPartitionsWrittenSensor(
                        task_id="wait_new_partitions_written",
                        plan=plan.output,
                        baseline=scale.output,
                        timeout=writes_timeout,
                        **sensing,
                    )
                )
            steps.append(
                resume_consumers
                or KStateResumeConsumersOperator(task_id="resume_consumers", plan=plan.output, **common)
            )
            seed_report = seed.output
        steps += [
            KStateGroupsStableSensor(
                task_id="wait_groups_stable", plan=plan.output, timeout=stable_timeout, **sensing
            ),
            KStateVerifyOperator(
                task_id="verify",
                plan=plan.output,
                seed_report=seed_report,
                key_order=key_order,
                barrier_timeout=barrier_timeout,
                outlets=[topic_alias()],  # resolves to kafka://<server>/<topic> once the topic grew
                **stepping,
            ),
        ]
        guard = KStateFailureGuardOperator(
            task_id="failure_guard", plan_task_id=plan.task_id, **{**common, "retries": 0}
        )
        chain(doctor, plan, gate, *steps)
        # verify stays a leaf beside the guard, so a failure anywhere fails the run; by verify's turn
        # consumers are resumed and seeded, so a failing verify has nothing left for the guard to decide.
        for step in steps[:-1]:
            step >> guard
    return group
