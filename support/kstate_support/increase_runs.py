"""What the tests that run ``kstate_partition_increase`` against a fleet of services share: the naive
increase (a plain ``CreatePartitions``), the ``kstate_drivers`` Variable that names the services' command
pairs, and reading a finished ``dag.test()`` run (its tasks' states and return values).

Test modules cannot import one another (``tests/unit/support/test_support_imports.py``), so helpers that
more than one of them needs live here.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kstate_support.fleet import CommandPair

#: The single-window DAG of the increase, and the task group its tasks sit in.
DAG_ID = "kstate_partition_increase"
PREFIX = "safe_partition_increase."


def grow(admin: Any, topic: str, partitions: int) -> None:
    """The naive increase: a plain ``CreatePartitions`` of ``topic`` to ``partitions`` (confluent-kafka's
    AdminClient ``admin``), nothing paused, nothing seeded."""
    from confluent_kafka.admin import NewPartitions

    for future in admin.create_partitions([NewPartitions(topic, partitions)]).values():
        future.result(timeout=30)


def drivers_variable(**drivers: CommandPair) -> str:
    """The value of the ``kstate_drivers`` Variable (as whoever deploys the DAG sets it): name -> a command
    pair; set it as ``AIRFLOW_VAR_KSTATE_DRIVERS``."""
    return json.dumps({name: {"kind": "command", **asdict(pair)} for name, pair in drivers.items()})


def xcom(dr: Any, task: str) -> Any:
    """The return value of task ``task`` (without :data:`PREFIX`) of the finished run ``dr``."""
    return dr.get_task_instance(PREFIX + task).xcom_pull(task_ids=PREFIX + task)


def states(dr: Any) -> dict[str, str]:
    """The state of every task of the run ``dr``, by task id without :data:`PREFIX`."""
    return {ti.task_id.removeprefix(PREFIX): ti.state for ti in dr.get_task_instances()}
