"""Unit tests of task_groups/partition_increase.py: the factory builds its layouts without touching anything."""

from __future__ import annotations

import pytest


def test_constructors_touch_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building every step against a connection that does not exist must not fail: nothing is looked up."""
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import safe_partition_increase

    monkeypatch.setattr(
        "socket.socket.connect", lambda *a: (_ for _ in ()).throw(AssertionError("network at parse time"))
    )
    with DAG("unit_parse", schedule=None):
        window = safe_partition_increase(topic="t", partitions=3, kafka_config_id="does_not_exist")
        per_step = safe_partition_increase(
            topic="t", partitions=3, kafka_config_id="does_not_exist", single_window=False, group_id="steps"
        )
    assert {t.split(".")[-1] for t in window.children} == {
        "check_broker",
        "plan",
        "stop_if_dry_run",
        "pause_window",
        "wait_groups_stable",
        "verify",
        "failure_guard",
    }
    assert len(per_step.children) == 12


def test_single_window_is_the_default_only_with_the_built_in_signals() -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    from airflow_provider_kstate.task_groups.partition_increase import safe_partition_increase

    with DAG("unit_layouts", schedule=None):
        custom = safe_partition_increase(
            topic="t", partitions=3, pause_consumers=EmptyOperator(task_id="scale_down"), group_id="custom"
        )
        assert "custom.pause_window" not in custom.children and "custom.seed_offsets" in custom.children
        with pytest.raises(ValueError, match="single_window=False"):
            safe_partition_increase(topic="t", partitions=3, wait_for_writes=True, single_window=True)
