"""Unit tests of increase/verification.py's judging of one topic (:class:`TopicVerification`): the leaders'
wait, the barrier, the drained groups, the seed evidence, the group loop with its lines and report rows,
and the verdict over topics. The verify step only gathers the inputs and calls it (issue 40 item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_kstate.increase.model import GroupInfo
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
from airflow_provider_kstate.increase.report import read_report, write_report
from airflow_provider_kstate.increase.verification import (
    TopicVerification,
    failure,
    overall,
    passed_groups,
)


def _plan(*, drained: str = "") -> Plan:
    def seeded(mark: str) -> GroupPlan:
        return GroupPlan(
            cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True, key_order=mark
        )  # type: ignore[arg-type]

    groups = {"billing": seeded("barrier"), "audit": seeded("drained" if drained else "offline")}
    return Plan("orders", 2, 4, groups, owner="dag/run-1")


class _Replicas:
    def leaderless(self, wanted: list[int]) -> list[int]:
        return []


class _Admin:
    """A topic grown 2 -> 4: every partition holds 10 records from offset 0 (2 on partition 1)."""

    def __init__(self, offsets: dict[str, dict[int, int]]) -> None:
        self.offsets = offsets
        self.waited: list[list[int]] = []

    def topic_replicas(self, topic: str, leaders_only: bool = False) -> _Replicas:
        return _Replicas()

    def unloaded(self, topic: str, partitions: Any) -> list[int]:
        self.waited.append(list(partitions))
        return []

    def partition_count(self, topic: str) -> int:
        return 4

    def watermarks(self, topic: str, partitions: Any) -> dict[int, tuple[int, int]]:
        return {p: (2 if p == 1 else 0, 10) for p in partitions}

    def committed_offsets_many(self, groups: list[str], topic: str, count: int) -> Any:
        return iter([(g, self.offsets.get(g, {})) for g in groups])

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {}


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    warning = info


class _Watch:
    state: dict[str, Any] = {}

    def close(self) -> None:
        pass


class _Control:
    def __init__(self) -> None:
        self.closed = 0

    def watch(self) -> _Watch:
        return _Watch()

    def close(self) -> None:
        self.closed += 1


def _seed_report(path: Path) -> str:
    uri = str(path / "seed.jsonl.gz")
    with write_report(uri, evidence=True) as report:
        for p in (2, 3):
            report.write(
                {"group": "billing", "partition": p, "seeded": True, "committed": 0, "log_start_at_seed": 0}
            )
        report.note_seeded("billing", [2, 3])
    return uri


def test_a_topic_every_group_of_which_holds_a_safe_offset_passes_with_its_report_and_lines(
    tmp_path: Path,
) -> None:
    admin, log, calls = (
        _Admin({"billing": {0: 4, 1: 3, 2: 0, 3: 0}, "audit": {0: 10, 1: 10, 2: 0, 3: 0}}),
        _Log(),
        [],
    )
    judge = TopicVerification(admin, log, after_group=lambda: calls.append(1))  # type: ignore[arg-type]
    uri = str(tmp_path / "verify.jsonl.gz")
    out = judge.verify(_plan(), uri, _seed_report(tmp_path))
    assert admin.waited == [[2, 3]]  # the new partitions' leaders were waited for
    assert out == {
        "ok": True, "partitions": 4, "groups": 2, "problems": 0, "cautions": 0, "lag_total": 33 + 20,
        "report_uri": uri, "report_rows": 8, "seed_report_uri": str(tmp_path / "seed.jsonl.gz"), "key_order": {},
    }  # fmt: skip
    assert len(calls) == 2  # the failpoint's hook, once per group
    rows = list(read_report(uri))
    assert [(r["group"], r["partition"], r["seeded"], r["new"]) for r in rows[:4]] == [
        ("billing", 0, False, False), ("billing", 1, False, False), ("billing", 2, True, True), ("billing", 3, True, True),
    ]  # fmt: skip
    assert f"VERIFY read the seed report {tmp_path / 'seed.jsonl.gz'} (2 rows)" in log.lines
    assert (
        "VERIFY group billing: 4 partitions, every one holds an offset from which no message is skipped; "
        "2 seeded by this run at the log start; lag 33 (max 10 on partition 2)"
    ) in log.lines


def test_a_group_without_an_offset_on_a_new_partition_fails_the_topic_and_is_logged(tmp_path: Path) -> None:
    admin, log = _Admin({"billing": {0: 4, 1: 1, 2: 0}, "audit": {0: 10, 1: 10, 2: 0, 3: 0}}), _Log()
    uri = str(tmp_path / "verify.jsonl.gz")
    out = TopicVerification(admin, log).verify(_plan(), uri, str(tmp_path / "none.jsonl.gz"))  # type: ignore[arg-type]
    assert (out["ok"], out["problems"], out["cautions"], out["seed_report_uri"]) == (False, 1, 1, "")
    assert any(line.startswith("VERIFY no seed report (") for line in log.lines)
    assert (
        "VERIFY group billing partition 3: SKIP: no committed offset: a latest-reset consumer would start at the log end"
        in log.lines
    )
    assert any(
        line.startswith("VERIFY caution: group billing partition 1: committed 1") for line in log.lines
    )
    assert any("billing: 4 partitions, 1 partitions WOULD SKIP messages: 3;" in line for line in log.lines)
    assert "would have messages skipped" in failure({"orders": out})


def test_drained_groups_are_reported_with_the_producers_cost_and_the_barrier_channel_is_closed(
    tmp_path: Path,
) -> None:
    admin, log, control = _Admin({}), _Log(), _Control()
    judge = TopicVerification(admin, log, control=control, owner="dag/run-1")  # type: ignore[arg-type]
    started = {"producer_downtime_s": 1.5, "backlog_at_switch": 42}
    out = judge.verify(_plan(drained="audit"), str(tmp_path / "v.jsonl.gz"), str(tmp_path / "s"), started)
    assert control.closed == 1  # no barrier of this run: nothing released, the channel closed
    assert out["key_order"]["groups"]["audit"] == {
        "drained": "the producers started once it had consumed every record written before they stopped",
        "plan": "drained", "producer_downtime_s": 1.5, "backlog_at_switch": 42,
    }  # fmt: skip
    assert any(
        line.startswith("VERIFY group audit was drained before the producers started") for line in log.lines
    )
    assert passed_groups({"orders": out}) == ["audit"]


def test_the_verdict_over_topics_sums_them_and_names_each_failed_one() -> None:
    a = {"ok": True, "partitions": 4, "cautions": 1, "lag_total": 3, "problems": 0, "report_uri": "/a"}
    b = {"ok": False, "partitions": 8, "cautions": 0, "lag_total": 5, "problems": 1234, "report_uri": "/b"}
    assert failure({"a": a}) == ""
    assert failure({"a": a, "b": b}) == (
        "1,234 partitions of 'b' would have messages skipped (report /b). "
        "See the lines above. The lease of every topic stays held."
    )
    assert overall({"a": a, "b": {**b, "ok": True}}, 3) == {
        "topics": {"a": a, "b": {**b, "ok": True}}, "ok": True, "partitions": 8, "groups": 3, "problems": 0,
        "cautions": 1, "lag_total": 8,
    }  # fmt: skip
