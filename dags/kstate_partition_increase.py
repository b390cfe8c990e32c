"""
### Safe Kafka partition increase (KAFKA-12261)

Grows a topic without letting `auto.offset.reset=latest` consumers skip the messages producers write to
the new partitions before the consumers discover them.

**Runbook** (each step idempotent; a cleared task continues from where the cluster stands):

Services in any language: a group whose live members do not run the kstate client piece is stopped and
started by a **driver** (a stop/start/ready command pair: `kubectl scale`, `systemctl`, `docker`; or a Kafka
Connect connector by its REST API, kind `connect`), named per group in `group_drivers` from the `kstate_drivers` Variable
(`{"billing-k8s": {"kind": "command", "stop": "...", "start": "...", "ready": "..."}}`); without one the plan
refuses it before anything is paused.

0. `check_broker`: the broker doctor. The broker must serve every API the run needs and keep the promises
   it relies on (ListOffsets against a real fetch, group states against live and never-seen groups, an
   offset read back, LogAppendTime); the behavioural checks are cached per cluster for a day
   (`refresh_broker_check` re-runs them). A broken promise fails the run here, before anything is paused,
   naming it; `allow_broker_deviation` accepts a named one as a risk.
1. `plan`: validates the topic and target, discovers every group at risk (committed offsets on the topic,
   or live members assigned its partitions), checks them against the named `consumer_groups` (a group at
   risk that is not named fails the plan unless it is in `exclude_groups`; an unknown name fails as a
   likely typo), classifies them (active / empty / spark / excluded) and their types (classic, consumer-protocol, share,
   Kafka Streams, Connect sink: share groups and unacknowledged Streams applications fail the plan with what
   to do), asks the broker to validate the increase, takes the topic's lease. With
   `dry_run` it stops here. A target equal to the current count is a **repair**: nothing is created, every
   gap (a protected group without an offset on a partition) is seeded: it finishes a crashed run, or a
   topic grown outside the tool.
   With `require_approval`, `approve_plan` then asks a human to approve the plan (the run's **Required
   actions**): the prompt shows the partitions, each group with its class, driver, key order and what the
   run will do to it, the broker check and the downtime of earlier runs. Approve: the cluster is checked
   against the plan again (a changed partition count or a new group at risk fails the run before anyone is
   paused). Reject: nothing changes, the rest is skipped. No answer by `approval_timeout`: nothing changes,
   the run fails. Either way the lease is released.
2. `pause_window`: the steps during which consumers are out of their groups, back-to-back in one task so
   that their downtime is the work itself and not the scheduler's latency between tasks:
   - pause: services with the kstate client leave their groups; it waits until the broker reports every
     group EMPTY (naming members still present on timeout);
   - increase: `validate_only`, then create (a no-op when the topic already has the target);
   - seed: commits the log start of every partition on which a group has no offset, live groups first;
   - scale: producers with the kstate client start writing to the new partitions;
   - resume: live groups rejoin as soon as they are seeded; groups without members are seeded next and
     resumed after (nobody waits on them). Requests per group go out concurrently.
3. `wait_groups_stable` (deferrable): groups active at plan time come back STABLE with all partitions
   assigned (a group with no members is named in the log at once).
4. `wait_groups_drained` (deferrable) and `start_producers`: when a group is drained (it cannot hold at the
   key-order barrier, and its producers were stopped before the create), wait until it consumed the old
   partitions up to where the producers stopped, then start them on the new layout; a no-op otherwise.
5. `verify`: every partition of the topic, for every protected group, from the cluster and the seed
   report: fails if any message would be skipped; releases the lease.

**Several co-partitioned topics** (`topics`, in both DAGs): a join's inputs grow with the
topic to the same count in one run: one plan naming every topic and every group at risk on any of them,
every topic's lease (taken in name order; another run on any of them is refused), one `pause_window` (the
groups leave once, every topic is created, each group is seeded on every topic it reads, the groups
rejoin once), and `verify` on every partition of every topic. Unequal counts are refused before anything
is paused, naming each topic's count. Seed and verify reports: one per topic, in each topic's report folder.
In `kstate_partition_increase_per_step` each step does the same over the set (one pause of every group,
every topic created, every group seeded on each topic it reads, each topic's producers switched, one
resume).

Logs have one line per group with partition ranges; the per-group, per-partition evidence is in the seed
and verify reports (gzip JSON Lines under `$AIRFLOW_HOME/kstate-reports`, or `report_uri`); XCom holds
summaries and the reports' URIs.

`failure_guard` runs if a step fails: before the create step it resumes consumers; after it, it resumes
each group that holds an offset on every partition and **refuses** to resume the others, saying what to
do next.

`kstate_partition_increase_per_step` is the same with one task per step (`pause_consumers`,
`wait_groups_empty`, `increase_partitions`, `seed_offsets`, `scale_producers`, `resume_consumers`): the
layout to start from when a step must be your own task, such as a `kubectl scale` in place of the pause.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.task_groups.partition_increase import (
    ApprovalConfig,
    BrokerCheckConfig,
    ConnectionConfig,
    FleetConfig,
    GroupsConfig,
    KeyOrderConfig,
    StayConfig,
    StepsConfig,
    safe_partition_increase,
)


def _params() -> dict[str, Param]:
    """The Params of both DAGs (each DAG gets its own objects)."""
    several = {
        "topics": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1, "maxLength": 249, "pattern": "^[A-Za-z0-9._-]+$"},
            uniqueItems=True,
            title="More co-partitioned topics",
            description="Topics co-partitioned with the topic (a join's inputs), grown with it to the same count in one run: one plan, every topic's lease, each group paused once. Their counts must be equal now. Empty: the topic alone.",
        )
    }
    return {
        "topic": Param(
            type="string",
            minLength=1,
            maxLength=249,
            pattern="^[A-Za-z0-9._-]+$",
            title="Topic",
            description="The topic to grow (the first of a co-partitioned set). Internal topics (__consumer_offsets, ...) are refused.",
        ),
        **several,
        "partitions": Param(
            type="integer",
            minimum=1,
            maximum=100000,
            title="Target partition count",
            description="The total number of partitions after the increase. The current count repairs: seeds every gap a crashed run or an outside increase left.",
        ),
        "consumer_groups": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Consumer groups",
            description="Groups to protect. Empty: every group at risk (committed offsets on the topic, or members assigned it). A group at risk that is not named fails the plan.",
        ),
        "exclude_groups": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Excluded groups (risk accepted)",
            description="Groups that read the topic but are left alone: not paused, not seeded. Each is logged as a risk accepted.",
        ),
        "acknowledge_streams_groups": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Kafka Streams applications acknowledged",
            description="Streams applications (group ids) that may be paused and seeded. A Streams app on the topic is refused otherwise: its co-partitioned topics and its state, partitioned by the input, must grow with it.",
        ),
        "allow_broker_deviation": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Broker deviations accepted (risk accepted)",
            description="Promises the broker may break, by name (e.g. config_defaults): each is logged as RISK ACCEPTED. See kstate doctor.",
        ),
        "refresh_broker_check": Param(
            False,
            type="boolean",
            title="Re-check the broker now",
            description="Re-run the broker's behavioural checks instead of using the verdict cached for a day.",
        ),
        "group_drivers": Param(
            {},
            type="object",
            additionalProperties={"type": "string", "minLength": 1},
            title="Group drivers",
            description="How each group is stopped and started when its services do not run the kstate client: group -> the name of a driver in the kstate_drivers Variable (a stop/start/ready command pair, or a Kafka Connect connector's REST API: kind connect), or 'control'. A live group without the client piece and without a driver fails the plan. The form names drivers; it never carries a command.",
        ),
        "producer_drivers": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Producer drivers",
            description="The producer services the run may stop to drain a group that cannot hold at the key-order barrier: names of drivers in the kstate_drivers Variable ('control' for producers with the kstate client).",
        ),
        "key_order": Param(
            "preserve",
            type="string",
            enum=["preserve", "drain", "relax"],
            title="Per-key order",
            description="preserve: producers switch through a barrier, so consumers using the kstate client process every key's records in the order they were written (producers pause about one control round trip); a group without the client is drained when its producers are named. drain: producers stop before the create and start once every live group consumed what was written before. relax: switch at once; keys that move may be processed out of order.",
        ),
        "consumers_stay": Param(
            "never",
            type="string",
            enum=["never", "auto", "always"],
            title="Consumers stay in their groups",
            description="never: every live group is paused and seeded (the pause window). auto: each live group that gives evidence of its position stays in its group (its consumers run the kstate client, or it is named below), the producers are held on the old layout until every such group has a position on every new partition; the others pause. always: a live group without evidence fails the plan. Staying needs the producers named in Producer drivers.",
        ),
        "committing_groups": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Groups that commit their positions",
            description="Groups whose consumers commit the position of every partition they are assigned (the Java client with enable.auto.commit=true): the evidence that lets them stay in their groups.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Plan only: show what would happen, change nothing.",
        ),
        "require_approval": Param(
            False,
            type="boolean",
            title="Require approval",
            description="Ask a human to approve the plan (Required actions in the UI, or the REST API) before anyone is paused. Approve: the run goes on, unless the cluster changed since the plan. Reject, or no answer in time: nothing is changed.",
        ),
        "approval_timeout": Param(
            3600,
            type="integer",
            minimum=5,
            maximum=604800,
            title="Approval deadline (seconds)",
            description="How long the approval request waits for an answer; none by then: nothing is changed, the lease is released and the run fails.",
        ),
    }


for dag_id, single_window in (
    ("kstate_partition_increase", True),
    ("kstate_partition_increase_per_step", False),
):
    with DAG(
        dag_id=dag_id,
        description="Grow a Kafka topic without losing messages on the new partitions (KAFKA-12261)",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=4,
        render_template_as_native_obj=True,
        doc_md=__doc__,
        tags=["kafka", "kstate"],
        params=_params(),
    ):
        # Every field below is templated: the DAG's Params reach the config objects as they reach an operator.
        safe_partition_increase(
            topic="{{ params.topic }}",
            topics="{{ params.topics }}",
            partitions="{{ params.partitions }}",
            dry_run="{{ params.dry_run }}",
            connection=ConnectionConfig(kafka_config_id="kafka_default"),
            groups=GroupsConfig(
                consumer_groups="{{ params.consumer_groups }}",
                exclude_groups="{{ params.exclude_groups }}",
                acknowledge_streams_groups="{{ params.acknowledge_streams_groups }}",
            ),
            fleet=FleetConfig(
                group_drivers="{{ params.group_drivers }}",
                producer_drivers="{{ params.producer_drivers }}",
                # The commands behind the names: an Airflow Variable, set by whoever deploys the DAG.
                drivers="{{ var.json.get('kstate_drivers', {}) }}",
            ),
            broker_check=BrokerCheckConfig(
                allow_broker_deviation="{{ params.allow_broker_deviation }}",
                refresh_broker_check="{{ params.refresh_broker_check }}",
            ),
            ordering=KeyOrderConfig(key_order="{{ params.key_order }}"),
            stay=StayConfig(
                consumers_stay="{{ params.consumers_stay }}",
                committing_groups="{{ params.committing_groups }}",
            ),
            steps=StepsConfig(single_window=single_window),
            approval=ApprovalConfig(
                require_approval="{{ params.require_approval }}",
                approval_timeout="{{ params.approval_timeout }}",
            ),
        )
