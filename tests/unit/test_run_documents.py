"""The run's wire documents as models (documents.py): the control records, the lease records, the doctor's
verdict, the run's progress document and the plan. Each round-trips, names what is wrong on read, reads
what earlier versions wrote, and validates against its generated, committed schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from kstate_support.fakes import PLAN

from airflow_provider_kstate import documents
from airflow_provider_kstate.client_piece.protocol import (
    Ack,
    Barrier,
    Command,
    Layout,
    Record,
    Release,
    decode,
    encode,
)
from airflow_provider_kstate.doctor import promises as P
from airflow_provider_kstate.doctor.cache import VerdictCache
from airflow_provider_kstate.doctor.verdict import CheckResult, Verdict
from airflow_provider_kstate.errors import ControlRecordError, LeaseRecordError, ReportError, VerdictError
from airflow_provider_kstate.increase.drivers import CommandDriver
from airflow_provider_kstate.increase.events import GroupProgress, RunProgress
from airflow_provider_kstate.increase.plan import GroupPlan, InvalidPlanError, Plan
from airflow_provider_kstate.lease_rules import LeaseRecord, replay

ROOT = Path(__file__).resolve().parents[2]
MINE = (
    "control/command",
    "control/layout",
    "control/ack",
    "control/barrier",
    "control/release",
    "lease/record",
    "doctor/verdict",
    "increase/progress",
    "increase/plan",
)


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((documents.SCHEMA_DIR / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def valid(name: str, doc: dict[str, Any]) -> bool:
    return bool(validator(name).is_valid(doc))


# --- the schemas ----------------------------------------------------------------------------------------------


def test_the_committed_schemas_are_the_models() -> None:
    """The CI check: ``python -m airflow_provider_kstate.documents --check`` passes on the committed files."""
    names = {cls.schema_name for cls in documents.documents()}
    assert set(MINE) <= names
    assert documents.main(["--check"]) == 0, "run: python -m airflow_provider_kstate.documents"
    for name in MINE:
        schema = validator(name).schema
        assert (
            schema["$id"].endswith(f"/{name}.schema.json") and schema["title"] and "v" in schema["properties"]
        )


def test_the_schemas_readme_has_a_row_for_every_published_document() -> None:
    """Another language finds each document from ``docs/schemas/README.md``: one row per schema file."""
    readme = (documents.SCHEMA_DIR / "README.md").read_text()
    for model in documents.documents():
        assert f"[`{model.schema_name}`]({model.schema_name}.schema.json)" in readme, model.schema_name


def test_python_m_writes_and_checks_the_schemas(tmp_path: Path) -> None:
    """Run as a module (``__main__``), it sees the documents the package defines."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "airflow_provider_kstate.documents", "--dir", str(tmp_path), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)

    stale = run("--check")
    assert stale.returncode == 1 and "control/command.schema.json" in stale.stderr
    assert run().returncode == 0 and run("--check").returncode == 0
    assert (tmp_path / "increase" / "plan.schema.json").read_text() == (
        documents.SCHEMA_DIR / "increase" / "plan.schema.json"
    ).read_text()


# --- control records ------------------------------------------------------------------------------------------

RECORDS: list[Record] = [
    Command(group="g", command="pause", epoch=5, topic="t", issued_at=5, issuer="x"),
    Layout(topic="t", partitions=4, epoch=6, hold=True, hold_until=9, issued_at=6),
    Ack(client="c", epoch=6, state="held", topic="t", partitions=4, at=7),
    Barrier(topic="t", epoch=8, offsets=[3, 0, 9], groups=["g"], issued_at=8),
    Release(topic="t", group="g", epoch=8, at=9),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.kind)
def test_a_control_record_round_trips_and_encodes_as_before(record: Record) -> None:
    assert type(record).from_dict(record.to_dict()) == record
    assert type(record).from_json(record.to_json()) == record
    assert decode(encode(record)) == record
    # the bytes of the dataclass version: compact JSON, sorted keys, every field
    assert encode(record) == json.dumps(record.to_dict(), separators=(",", ":"), sort_keys=True).encode()
    assert valid(record.schema_name, record.to_dict())


def test_the_exact_bytes_of_a_command_are_unchanged() -> None:
    command = Command(group="g", command="resume", epoch=42, topic="t", issued_at=42, issuer="j")
    assert encode(command) == (
        b'{"command":"resume","epoch":42,"group":"g","issued_at":42,"issuer":"j","kind":"command",'
        b'"topic":"t","v":1}'
    )


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"v": 1, "kind": "command", "group": "g", "command": "pause", "epoch": "5"}, "epoch"),
        ({"v": 1, "kind": "layout", "topic": "t", "partitions": 2, "epoch": 1, "hold": "yes"}, "hold"),
        ({"v": 1, "kind": "ack", "client": "c", "epoch": 1, "state": "done"}, "state"),
        ({"v": 1, "kind": "barrier", "topic": "t", "epoch": 1, "offsets": [1, -2]}, "offsets.1"),
        ({"v": 1, "kind": "release", "topic": "t", "group": None, "epoch": 1}, "group"),
        ({"kind": "command", "group": "g", "command": "pause", "epoch": 1}, "v"),
    ],
)
def test_a_bad_control_record_is_named_on_read_ignored_by_decode_and_invalid_by_schema(
    value: dict[str, Any], field: str
) -> None:
    """The Python reader now checks types as the schema does (a string epoch used to slip through)."""
    cls = {"command": Command, "layout": Layout, "ack": Ack, "barrier": Barrier, "release": Release}
    with pytest.raises(ControlRecordError, match=rf"{field}: "):
        cls[value["kind"]].from_dict(value)
    assert decode(json.dumps(value).encode()) is None
    assert not valid(f"control/{value['kind']}", value)


@pytest.mark.parametrize(
    "value",
    [
        b"[]",
        b"3",
        b'{"kind": ["command"], "v": 1}',
        b'{"kind": "command", "v": true}',
        b"\xff",
        b"{" * 100_000,
    ],
)
def test_decode_never_raises(value: bytes) -> None:
    assert decode(value) is None


# --- lease records --------------------------------------------------------------------------------------------


def test_lease_records_are_written_as_before_plus_their_version() -> None:
    acquire = LeaseRecord(op="acquire", topic="t", owner="d/r", ttl_ms=1000, plan={"topic": "t"})
    assert acquire.to_dict() == {
        "v": 1,
        "op": "acquire",
        "topic": "t",
        "owner": "d/r",
        "ttl_ms": 1000,
        "plan": {"topic": "t"},
    }
    takeover = LeaseRecord(op="takeover", topic="t", owner="d/r2", from_owner="d/r", ttl_ms=5)
    assert set(takeover.to_dict()) == {"v", "op", "topic", "owner", "from_owner", "ttl_ms", "plan"}
    release = LeaseRecord(op="release", topic="t", owner="d/r")
    assert release.to_dict() == {"v": 1, "op": "release", "topic": "t", "owner": "d/r"}  # no TTL, no plan
    for record in (acquire, takeover, release):
        assert LeaseRecord.from_json(record.to_json()) == record and valid("lease/record", record.to_dict())


def test_a_lease_log_written_before_the_version_still_replays() -> None:
    old = [
        (0, {"op": "acquire", "topic": "t", "owner": "a", "ttl_ms": 100, "plan": {"k": 1}}),
        (10, {"op": "release", "topic": "t", "owner": "a"}),
        (20, {"op": "acquire", "topic": "t", "owner": "b", "ttl_ms": 100, "plan": {}}),
        (30, LeaseRecord(op="acquire", topic="t", owner="b", ttl_ms=100)),  # a renewal, written now
    ]
    holder = replay(old)
    assert holder is not None and (holder.owner, holder.since, holder.expires) == ("b", 20, 130)
    assert all(valid("lease/record", r if isinstance(r, dict) else r.to_dict()) for _, r in old)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"v": 2, "op": "acquire", "topic": "t", "owner": "a"}, "v"),
        ({"op": "steal", "topic": "t", "owner": "a"}, "op"),
        ({"op": "acquire", "topic": "t", "owner": "a", "ttl_ms": "soon"}, "ttl_ms"),
        ({"op": "acquire", "topic": "t"}, "owner"),
    ],
)
def test_a_lease_record_that_cannot_be_read_stops_the_replay_naming_it(
    record: dict[str, Any], field: str
) -> None:
    """A record of a newer version (or malformed) cannot be decided safely: the lease verb fails, changing
    nothing, instead of guessing."""
    with pytest.raises(LeaseRecordError, match=rf"timestamp 7\): .*{field}: "):
        replay([(7, record)])


# --- the doctor's verdict -------------------------------------------------------------------------------------


def _verdict() -> Verdict:
    return Verdict(
        "cluster-1",
        1_700_000_000.5,
        {
            P.LATEST_OFFSET: CheckResult(False, "latest 3"),
            P.GROUP_MEMBERS: CheckResult(None, "no assignment"),
        },
    )


def test_a_verdict_round_trips_with_its_version_and_its_broken_promises() -> None:
    verdict = _verdict()
    data = verdict.to_dict()
    assert data["v"] == 1 and data["broken"] == [P.LATEST_OFFSET]
    assert Verdict.from_dict(data) == verdict and Verdict.from_json(verdict.to_json()) == verdict
    assert valid("doctor/verdict", data)


def test_a_verdict_cached_before_the_version_still_loads() -> None:
    """What ``VerdictCache.save`` wrote before (no ``v``; a promise a newer doctor knows is dropped)."""
    cached = {
        "cluster": "cluster-1",
        "checked_at": 1_700_000_000.5,
        "results": {
            P.LATEST_OFFSET: {"ok": False, "detail": "latest 3"},
            P.GROUP_MEMBERS: {"ok": None, "detail": "no assignment"},
            "a_promise_of_a_newer_doctor": {"ok": True, "detail": ""},
        },
        "broken": [P.LATEST_OFFSET],
    }
    assert valid("doctor/verdict", cached)
    assert Verdict.from_dict(cached) == _verdict()


def test_an_unreadable_cached_verdict_is_absent_so_the_doctor_checks_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = VerdictCache({"bootstrap.servers": "127.0.0.1:1"})
    newer = {**_verdict().to_dict(), "v": 2}
    with pytest.raises(VerdictError, match="v: "):
        Verdict.from_dict(newer)
    monkeypatch.setattr(
        cache, "_records", lambda: [("cluster-1", _verdict().to_dict()), ("cluster-1", newer)]
    )
    assert cache.load("cluster-1") is None  # the newest record decides: unreadable, so none
    monkeypatch.setattr(cache, "_records", lambda: [("cluster-1", [1, 2])])
    assert cache.load("cluster-1") is None
    monkeypatch.setattr(cache, "_records", lambda: [("cluster-1", _verdict().to_dict())])
    assert cache.load("cluster-1") == _verdict()


def test_a_verdict_with_a_wrong_type_names_the_field() -> None:
    with pytest.raises(VerdictError, match="checked_at: "):
        Verdict.from_dict({"cluster": "c", "checked_at": "yesterday"})


# --- the run's progress document ------------------------------------------------------------------------------


def _progress() -> RunProgress:
    return RunProgress(
        topic="orders",
        run="dag/run-1",
        original_partitions=4,
        target_partitions=8,
        started_at=1000,
        updated_at=2000,
        producers_since=1000,
        groups={"billing": GroupProgress(state="resumed", driver="control", out_since=1100, back_at=1900)},
    )


def test_the_progress_document_keeps_its_bytes() -> None:
    """Compact JSON with sorted keys, as the dataclass version wrote it (the kstate page reads it)."""
    assert _progress().to_json() == (
        '{"groups":{"billing":{"back_at":1900,"driver":"control","key_order":"","out_since":1100,'
        '"state":"resumed"}},"kind":"kstate-increase-progress","original_partitions":4,"outcome":"",'
        '"producers":"running","producers_since":1000,"run":"dag/run-1","started_at":1000,"step":"plan",'
        '"target_partitions":8,"topic":"orders","updated_at":2000,"v":1}'
    )
    assert RunProgress.from_json(_progress().to_json()) == _progress()
    assert valid("increase/progress", _progress().to_dict())


@pytest.mark.parametrize(
    ("change", "field"),
    [({"v": 2}, "v"), ({"kind": None}, "kind"), ({"groups": {"g": {"out_since": "soon"}}}, "out_since")],
)
def test_a_bad_progress_document_is_a_report_error_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    doc = {**_progress().to_dict(), **change}
    if change.get("kind", "") is None:
        del doc["kind"]
    with pytest.raises(ReportError, match=rf"not a run progress document .*{field}"):
        RunProgress.from_json(json.dumps(doc))
    assert not valid("increase/progress", doc)


# --- the plan -------------------------------------------------------------------------------------------------


def _plan() -> Plan:
    k8s = CommandDriver(
        name="k8s", stop="kubectl scale --replicas=0", start="kubectl scale --replicas=1", timeout=30
    )
    return Plan(
        topic="orders",
        original_partitions=2,
        target_partitions=4,
        groups={
            "live": GroupPlan(
                cls="active",
                state="STABLE",
                member_count=1,
                members=("c@h",),
                pause=True,
                seed=True,
                wait=True,
                key_order="relaxed",
                key_order_reason="never acknowledged",
                driver=k8s,
            ),  # type: ignore[arg-type]
            "idle": GroupPlan(cls="empty", state="EMPTY", pause=True, seed=True),  # type: ignore[arg-type]
            "spark-kafka-source-1": GroupPlan(cls="spark", state="EMPTY"),  # type: ignore[arg-type]
        },
        planned_at="2024-01-01T00:00:00Z",
        producers={"api": k8s},
    )


def test_the_plan_s_dict_is_as_before_plus_its_version() -> None:
    assert _plan().to_dict() == {
        "topic": "orders",
        "original_partitions": 2,
        "target_partitions": 4,
        "groups_discovered": True,
        "planned_at": "2024-01-01T00:00:00Z",
        "owner": "",
        "dry_run": False,
        "control_topic": "",
        "lease_topic": "",
        "report_uri": "",
        "groups": {
            "live": {
                "class": "active",
                "state": "STABLE",
                "member_count": 1,
                "members": ["c@h"],
                "key_order": "relaxed",
                "key_order_reason": "never acknowledged",
                "driver": {
                    "kind": "command",
                    "name": "k8s",
                    "stop": "kubectl scale --replicas=0",
                    "start": "kubectl scale --replicas=1",
                    "timeout": 30,
                },
            },
            "idle": {"class": "empty", "state": "EMPTY", "member_count": 0, "driver": {"kind": "control"}},
            "spark-kafka-source-1": {"class": "spark", "state": "EMPTY", "member_count": 0},
        },
        "producers": {"api": _plan().producers["api"].to_dict()},
        "v": 1,
        "mode": "increase",
    }
    assert '"timeout": 30}' in json.dumps(_plan().to_dict())  # an int stays an int
    assert "producers" not in Plan.from_dict({**_plan().to_dict(), "producers": {}}).to_dict()


def test_the_plan_round_trips_through_dict_and_json_and_validates() -> None:
    plan = _plan()
    assert Plan.from_dict(plan.to_dict()) == plan and Plan.from_json(plan.to_json()) == plan
    assert valid("increase/plan", plan.to_dict())
    assert valid("increase/plan", PLAN)  # written by an earlier version: new_partitions, no mode, no v
    assert Plan.from_dict(PLAN).to_dict()["v"] == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v": 2}, "v"),
        ({"target_partitions": "many"}, "target_partitions"),
        ({"groups": {"g": {"state": "STABLE"}}}, "groups.g.class"),
        ({"groups": {"g": {"class": "active", "pause": "perhaps"}}}, "groups.g.pause"),
    ],
)
def test_a_bad_plan_is_an_invalid_plan_error_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPlanError, match=rf"{field}: "):
        Plan.from_dict({**PLAN, **change})
    assert not valid("increase/plan", {**PLAN, **change})
