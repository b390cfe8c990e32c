"""
### Resize a stateful Kafka Streams application (issue 32)

Grows the input topic of a Kafka Streams application, and everything partitioned with it, in one window:
its co-partitioned source topics, its repartition topics and its changelogs grow together, each changelog's
keys move to `murmur2(key) % N` (so every task finds its state on restart), and the application restarts on
the new layout. No reset, no reprocessing from the start.

**Runbook** (one task, `resize`, holding the topic's lease so that two runs cannot overlap):

1. plan: the application (`application_id`) must read `topic` as a Kafka Streams application (classic
   protocol with the `stream` assignor, or a KIP-1071 streams group); its sources, changelogs (with their
   store types) and repartition topics are named in the log, with every other reader of its sources.
   Refused before anything is stopped: a target below the current count, an unknown application, a missing
   driver, a topology it cannot resize, another reader the run cannot drive (give it a driver in
   `group_drivers`, or `exclude_groups`: a risk accepted).
2. drain: the producers of its sources (`producer_drivers`) stop; the run waits until the application has
   consumed every record of its sources and repartition topics.
3. stop the application by its driver (`app_driver`), wait until its group is EMPTY; the other readers of
   its sources leave their groups (the client piece's pause record, or their drivers' stop commands).
4. grow every source, repartition topic and changelog to `partitions`.
5. re-place each changelog (`replacer`: `spark` runs `spark-submit replace_changelog.py`; `local` runs the
   same tasks in the worker, for small changelogs), then deep-check that every live key sits in
   `murmur2(key) % partitions` and the live rows are those of before.
6. seed the application's group at offset 0 on the new partitions, and every other reader on each new
   partition of the topics it reads; the other readers come back; start the application (its ready
   check); once the other readers have consumed the old partitions, start the producers.

**Run it again** (same params) after a failure past step 4 (a failed deep check, a seed refused, a lost
worker): the application is stopped with its topics grown. The new run sees the sources at the target and
recognizes the interrupted resize (the application's group EMPTY, and a topic below the target, offsets
missing on its partitions, or a changelog key outside `murmur2(key) % partitions`); it grows what is left,
re-places every changelog (idempotent: the keys already at home stay), deep-checks, seeds, and starts the
application and the producers. Its report says `continued`. On an application already resized and healthy
the run changes nothing (`resized` false).

Drivers are command pairs (stop/start/ready: `kubectl scale`, `systemctl`, a script) defined by whoever
deploys the DAG in the `kstate_drivers` Variable (`{"orders-streams": {"kind": "command", "stop": "...",
"start": "...", "ready": "..."}}`); the form names them, it never carries a command.

The task's XCom is the report: the application's downtime, the keys each changelog moved, the re-placement
rate (records/s), the deep check, each step's seconds, and whether it continued an interrupted resize.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kstate.operators.streams_resize import KStateStreamsResizeOperator

with DAG(
    dag_id="kstate_streams_resize",
    description="Grow a Kafka Streams application's input topics; its state moves with its keys",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=4,
    render_template_as_native_obj=True,
    doc_md=__doc__,
    tags=["kafka", "kstate", "streams"],
    params={
        "topic": Param(
            type="string",
            minLength=1,
            maxLength=249,
            pattern="^[A-Za-z0-9._-]+$",
            title="Topic",
            description="An input topic of the application. Its other co-partitioned inputs grow with it.",
        ),
        "partitions": Param(
            type="integer",
            minimum=1,
            maximum=100000,
            title="Target partition count",
            description="The partition count of every source, repartition topic and changelog after the run: above the current one (equal: continue a resize that did not finish).",
        ),
        "application_id": Param(
            type="string",
            minLength=1,
            title="Application id",
            description="The Kafka Streams application's application.id (its group id).",
        ),
        "app_driver": Param(
            type="string",
            minLength=1,
            title="Application driver",
            description="The name of the application's driver in the kstate_drivers Variable: a stop/start/ready command pair.",
        ),
        "producer_drivers": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Producer drivers",
            description="The producer services of its sources, stopped for the drain: names of command drivers in the kstate_drivers Variable. Every producer must be named: the run refuses to grow while records still arrive.",
        ),
        "replacer": Param(
            "spark",
            type="string",
            enum=["spark", "local"],
            title="Changelog re-placement",
            description="spark: spark-submit replace_changelog.py (any size). local: the same tasks and check in the worker (small changelogs: no Spark start-up in the downtime).",
        ),
        "exclude_groups": Param(
            [],
            type="array",
            items={"type": "string", "minLength": 1},
            title="Excluded groups (risk accepted)",
            description="Other groups reading the topic that the run leaves alone (not paused, not seeded).",
        ),
        "group_drivers": Param(
            {},
            type="object",
            additionalProperties={"type": "string", "minLength": 1},
            title="Drivers of the other readers",
            description="The other consumer groups of its sources that are not driven by the control protocol (the kstate client piece): {group: name of a driver in the kstate_drivers Variable}. Each is taken out of its group before the topics grow and back after, in this run.",
        ),
    },
):
    KStateStreamsResizeOperator(
        task_id="resize",
        topic="{{ params.topic }}",
        partitions="{{ params.partitions }}",
        application_id="{{ params.application_id }}",
        app_driver="{{ params.app_driver }}",
        producer_drivers="{{ params.producer_drivers }}",
        # The commands behind the names: an Airflow Variable, set by whoever deploys the DAG.
        drivers="{{ var.json.get('kstate_drivers', {}) }}",
        replacer="{{ params.replacer }}",
        exclude_groups="{{ params.exclude_groups }}",
        group_drivers="{{ params.group_drivers }}",
    )
