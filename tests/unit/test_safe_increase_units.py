"""Unit tests of the safe-increase pieces: pure logic, constructors, trigger. Fakes stand in for the cluster."""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_kstate.exceptions import (
    GroupNotEmptyError,
    GroupNotStableError,
    InternalTopicError,
    InvalidPartitionCountError,
    KStateConfigError,
    KStateError,
    KStateFatalError,
    UnknownGroupError,
    UnprotectedGroupError,
)
from airflow_provider_kstate.get_provider_info import get_provider_info
from airflow_provider_kstate.hooks.lease import replay
from airflow_provider_kstate.increase import checks
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import Plan, build_plan, check_topic_name, classify, groups_where
from airflow_provider_kstate.operators.verify import judge
from airflow_provider_kstate.triggers.groups import KStateConditionTrigger
from airflow_provider_kstate.utils.coerce import as_bool, as_int, as_str_list, as_topic

PLAN: dict[str, Any] = {
    "topic": "orders",
    "original_partitions": 2,
    "target_partitions": 4,
    "new_partitions": [2, 3],
    "groups": {
        "live": {
            "class": "active",
            "pause": True,
            "seed": True,
            "wait": True,
            "state": "STABLE",
            "members": ["c"],
        },
        "idle": {
            "class": "empty",
            "pause": True,
            "seed": True,
            "wait": False,
            "state": "EMPTY",
            "members": [],
        },
        "spark-kafka-source-1": {
            "class": "spark",
            "pause": False,
            "seed": False,
            "wait": False,
            "state": "EMPTY",
            "members": [],
        },
    },
}


class FakeHook:
    """Answers like KStateAdminHook from fixed data."""

    def __init__(self, partitions: int = 2, groups: dict[str, GroupInfo] | None = None) -> None:
        self.partitions = partitions
        self.groups = groups or {}

    def partition_count(self, topic: str) -> int:
        return self.partitions

    def groups_on_topic(self, topic: str, partitions: int | None = None) -> list[str]:
        return sorted(self.groups)

    def group_types(self) -> dict[str, str]:
        return {g: info.type for g, info in self.groups.items() if info.state != "DEAD"}

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {g: self.groups.get(g, GroupInfo(g, "DEAD", "CLASSIC", "")) for g in groups}


def _info(group: str, state: str, members: int = 0, parts: tuple[int, ...] = ()) -> GroupInfo:
    ms = tuple(Member(f"m{i}", f"c{i}", "/127.0.0.1", parts) for i in range(members))
    return GroupInfo(group, state, "CLASSIC", "consumer", ms)


# -- coercion ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value,expected", [(3, 3), ("4", 4), (" 5 ", 5)])
def test_as_int_accepts(value: Any, expected: int) -> None:
    assert as_int("partitions", value) == expected


@pytest.mark.parametrize("value", ["three", "2.5", True, 0, -1, None])
def test_as_int_names_the_argument(value: Any) -> None:
    with pytest.raises(KStateConfigError, match="partitions"):
        as_int("partitions", value)


def test_as_bool_and_lists_and_topics() -> None:
    assert (
        as_bool("dry_run", "True") is True
        and as_bool("dry_run", "false") is False
        and as_bool("d", False) is False
    )
    with pytest.raises(KStateConfigError, match="dry_run"):
        as_bool("dry_run", "maybe")
    assert (
        as_str_list("g", "['a', 'b']") == ["a", "b"]
        and as_str_list("g", "a,b") == ["a", "b"]
        and as_str_list("g", []) == []
    )
    with pytest.raises(KStateConfigError, match="empty names"):
        as_str_list("g", ["a", ""])
    with pytest.raises(KStateConfigError, match="legal"):
        as_topic("topic", "bad topic!")
    with pytest.raises(KStateConfigError, match="non-empty"):
        as_topic("topic", "")


# -- planning ---------------------------------------------------------------------------------------


def test_internal_topics_are_refused() -> None:
    for topic in ("__consumer_offsets", "__transaction_state", "_kstate_control"):
        with pytest.raises(InternalTopicError):
            check_topic_name(topic)
    check_topic_name("orders")


def test_classify_each_kind_of_group() -> None:
    prefixes = ("spark-kafka-source-",)
    assert classify(_info("a", "STABLE", 2), prefixes)["class"] == "active"
    assert classify(_info("a", "PREPARING_REBALANCE", 1), prefixes)["wait"] is True
    empty = classify(_info("b", "EMPTY"), prefixes)
    assert (empty["class"], empty["seed"], empty["wait"]) == ("empty", True, False)
    spark = classify(_info("spark-kafka-source-x", "STABLE", 1), prefixes)
    assert (spark["class"], spark["seed"], spark["pause"]) == ("spark", False, False)
    assert classify(_info("c", "DEAD"), prefixes)["class"] == "absent"


def test_build_plan_validates_and_discovers() -> None:
    hook = FakeHook(2, {"g1": _info("g1", "EMPTY"), "g2": _info("g2", "STABLE", 1, (0, 1))})
    plan = build_plan(hook, "orders", 5, [])  # type: ignore[arg-type]
    assert (
        list(plan.new_partitions) == [2, 3, 4] and plan.groups_discovered is True and plan.mode == "increase"
    )
    assert groups_where(plan, "wait") == ["g2"] and groups_where(plan, "seed") == ["g1", "g2"]
    explicit = build_plan(hook, "orders", 3, ["g2", "g2", "g1"])  # type: ignore[arg-type]
    assert list(explicit.groups) == ["g2", "g1"] and explicit.groups_discovered is False
    with pytest.raises(InvalidPartitionCountError, match="below"):
        build_plan(hook, "orders", 1, [])  # type: ignore[arg-type]
    repair = build_plan(hook, "orders", 2, [])  # type: ignore[arg-type]
    assert repair.mode == "repair" and list(repair.new_partitions) == [] and len(repair.groups) == 2


def test_plan_protects_every_group_at_risk() -> None:
    """KAFKA-12261 made by the tool itself: a named subset, or a typo, must not leave a group at risk."""
    hook = FakeHook(1, {"billing": _info("billing", "EMPTY"), "audit": _info("audit", "EMPTY")})
    with pytest.raises(UnprotectedGroupError, match=r"\['audit'\]"):
        build_plan(hook, "orders", 4, ["billing"])  # type: ignore[arg-type]
    with pytest.raises(UnknownGroupError, match="ghost-group.*typo"):
        build_plan(hook, "orders", 4, ["ghost-group", "billing", "audit"])  # type: ignore[arg-type]
    accepted = build_plan(hook, "orders", 4, ["billing"], exclude_groups=["audit"])  # type: ignore[arg-type]
    assert accepted.groups["audit"].cls == "excluded" and accepted.where("seed") == ["billing"]
    allowed = build_plan(hook, "orders", 4, ["ghost-group", "billing", "audit"], allow_unknown_groups=True)  # type: ignore[arg-type]
    assert allowed.groups["ghost-group"].cls == "absent" and allowed.where("seed") == ["billing", "audit"]
    # Errors a retry cannot fix are not retried.
    assert issubclass(UnprotectedGroupError, KStateFatalError) and issubclass(
        UnknownGroupError, KStateFatalError
    )


def test_plan_round_trips_and_stays_small() -> None:
    # The size: 4,096 partitions and 100 groups, each with 40 live members -> at most 64 KB.
    hook = FakeHook(64, {f"g{i}": _info(f"g{i}", "STABLE", 40, (0, 1)) for i in range(100)})
    plan = build_plan(hook, "orders", 4096, [])  # type: ignore[arg-type]
    data = plan.to_dict()
    assert Plan.from_dict(data) == plan and Plan.from_dict(json.loads(json.dumps(data))) == plan
    assert len(json.dumps(data)) < 64 * 1024, len(json.dumps(data))
    assert data["groups"]["g1"]["member_count"] == 40 and len(data["groups"]["g1"]["members"]) == 3
    assert Plan.from_dict(PLAN).where("seed") == ["live", "idle"]  # a plan written by an earlier version


# -- checks -----------------------------------------------------------------------------------------


def test_groups_empty_names_members_and_stable_needs_all_partitions() -> None:
    hook = FakeHook(4, {"live": _info("live", "STABLE", 1, (0, 1)), "idle": _info("idle", "EMPTY")})
    empty = checks.groups_empty(hook, "orders", ["live", "idle"])  # type: ignore[arg-type]
    assert (
        not empty.ok
        and list(empty.detail) == ["live"]
        and "c0@/127.0.0.1" in empty.detail["live"]["members"][0]
    )
    stable = checks.groups_stable(hook, "orders", ["live"], 4)  # type: ignore[arg-type]
    assert not stable.ok and stable.detail["live"]["unassigned"] == "2-3"  # ranges: small at 4,096 partitions
    hook.groups["live"] = _info("live", "STABLE", 2, (0, 1, 2, 3))
    assert checks.groups_stable(hook, "orders", ["live"], 4).ok  # type: ignore[arg-type]


# -- lease replay -----------------------------------------------------------------------------------


def test_lease_replay_orders_contenders_and_honours_expiry() -> None:
    acq = lambda owner, ttl=1000: {"op": "acquire", "owner": owner, "ttl_ms": ttl, "topic": "t"}  # noqa: E731
    assert replay([(0, acq("a")), (1, acq("b"))]).owner == "a"
    assert replay([(0, acq("a")), (1, acq("b")), (2, {"op": "release", "owner": "b"})]).owner == "a"
    assert replay([(0, acq("a")), (1, {"op": "release", "owner": "a"}), (2, acq("b"))]).owner == "b"
    assert replay([(0, acq("a", 10)), (20, acq("b"))]).owner == "b"
    renewed = replay([(0, acq("a", 10)), (5, acq("a", 100)), (50, acq("b"))])
    assert renewed.owner == "a" and renewed.expires == 105 and renewed.since == 0
    assert replay([]) is None


# -- verification -----------------------------------------------------------------------------------


def test_judge_flags_every_way_to_skip() -> None:
    ok = {"committed": 10, "log_start": 0, "seeded_offset": 0, "seed_log_start": 0}
    assert judge(ok) == ""
    assert "no committed offset" in judge({**ok, "committed": None})
    assert "past the log start" in judge({**ok, "seeded_offset": 5})
    assert "deleted unread" in judge({**ok, "committed": 3, "log_start": 7})
    # An offset the group already had is safe whatever its value (a re-run after a crash past the resume).
    kept = {"committed": 892, "log_start": 0, "new": True, "seeded": False, "seeded_offset": None}
    assert judge(kept) == ""


# -- trigger ----------------------------------------------------------------------------------------


def _trigger(deadline: float) -> KStateConditionTrigger:
    return KStateConditionTrigger(
        check="groups_empty",
        kafka_config_id="kafka_default",
        arguments={"topic": "t", "groups": ["g"]},
        poke_interval=0.01,
        deadline=deadline,
    )


def test_trigger_serializes_to_its_own_arguments() -> None:
    trigger = _trigger(123.0)
    path, kwargs = trigger.serialize()
    module, name = path.rsplit(".", 1)
    assert getattr(importlib.import_module(module), name)(**kwargs).serialize() == (path, kwargs)
    with pytest.raises(ValueError, match="unknown check"):
        KStateConditionTrigger(check="nope", kafka_config_id="k", arguments={}, poke_interval=1, deadline=0)


def _events(trigger: KStateConditionTrigger) -> list[dict[str, Any]]:
    async def collect() -> list[dict[str, Any]]:
        return [event.payload async for event in trigger.run()]

    return asyncio.run(collect())


def test_trigger_yields_success_timeout_and_error(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([checks.CheckResult(False, {"g": 1}), checks.CheckResult(True, {})])
    monkeypatch.setattr("airflow_provider_kstate.triggers.groups.run_check", lambda *a: next(answers))
    [event] = _events(_trigger(time.time() + 60))
    assert event["status"] == "success" and event["polls"] == 2
    monkeypatch.setattr(
        "airflow_provider_kstate.triggers.groups.run_check", lambda *a: checks.CheckResult(False, {"g": 1})
    )
    [event] = _events(_trigger(time.time() - 1))
    assert event["status"] == "timeout" and event["detail"] == {"g": 1}

    def boom(*_a: Any) -> None:
        raise RuntimeError("broker gone")

    monkeypatch.setattr("airflow_provider_kstate.triggers.groups.run_check", boom)
    [event] = _events(_trigger(time.time() + 60))
    assert event["status"] == "error" and "broker gone" in event["message"]


# -- operators and sensors --------------------------------------------------------------------------


def _all_operator_classes() -> list[type]:
    from airflow_provider_kstate.operators import consumers, guard, partitions, plan, producers, seed, verify
    from airflow_provider_kstate.sensors import groups
    from airflow_provider_kstate.sensors import partitions as psensors

    mods = [consumers, guard, partitions, plan, producers, seed, verify, groups, psensors]
    return [
        obj
        for m in mods
        for name, obj in vars(m).items()
        if name.startswith("KState") and isinstance(obj, type)
    ]


def test_template_fields_are_tuples_and_constructors_are_keyword_only() -> None:
    classes = [c for c in _all_operator_classes() if hasattr(c, "template_fields")]
    assert len(classes) >= 10
    for cls in classes:
        assert isinstance(cls.template_fields, tuple), cls
        with pytest.raises(TypeError):
            cls("positional")  # type: ignore[call-arg]


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


def test_sensor_timeouts_name_what_is_left() -> None:
    from airflow_provider_kstate.sensors.groups import KStateGroupsEmptySensor, KStateGroupsStableSensor

    empty = KStateGroupsEmptySensor(task_id="e", plan=PLAN, timeout=5)
    with pytest.raises(GroupNotEmptyError, match="c1@host"):
        empty.execute_complete({}, {"status": "timeout", "detail": {"live": {"members": ["c1@host"]}}})
    assert empty.check_arguments() == {"topic": "orders", "groups": ["live", "idle"]}
    stable = KStateGroupsStableSensor(task_id="s", plan=PLAN, timeout=5)
    assert stable.check_arguments() == {"topic": "orders", "groups": ["live"], "partitions": 4}
    with pytest.raises(GroupNotStableError, match="unassigned"):
        stable.execute_complete({}, {"status": "timeout", "detail": {"live": {"unassigned": [3]}}})
    with pytest.raises(KStateError, match="triggerer"):
        stable.execute_complete({}, {"status": "error", "message": "x"})
    assert stable.execute_complete({}, {"status": "success", "detail": {}}) == {}


def test_provider_info_points_at_real_modules() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-kstate"
    for section in ("hooks", "operators", "sensors", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    assert "connection-types" not in info, "the kafka connection type is the Kafka provider's"
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    assert KStateAdminHook.conn_type == "kafka" and KStateAdminHook.default_conn_name == "kafka_default"


def test_pause_window_stops_at_a_failed_seed_and_never_resumes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """In one window, a seed failure ends the task before scale and resume (the guard decides next)."""
    from airflow_provider_kstate.exceptions import SeedError
    from airflow_provider_kstate.operators.window import KStatePauseWindowOperator

    calls: list[str] = []

    class Steps:
        plan = Plan.from_dict(PLAN)

        def __getattr__(self, name: str) -> Any:
            def step(*_args: Any) -> Any:
                calls.append(name)
                if name == "seed":
                    raise SeedError("broker went away while seeding")
                return {}

            return step

    closed: list[bool] = []
    window = KStatePauseWindowOperator(task_id="w", plan=PLAN)
    monkeypatch.setattr(KStatePauseWindowOperator, "steps", lambda self, context: Steps())
    report = tmp_path / "seed.jsonl.gz"
    monkeypatch.setattr(KStatePauseWindowOperator, "report_uri", lambda self, context, step: str(report))
    window.__dict__["control"] = SimpleNamespace(close=lambda: closed.append(True))
    with pytest.raises(SeedError):
        window.execute({})
    assert calls == ["pause", "wait_empty", "increase", "seed"], calls
    assert closed == [True]
    assert list(tmp_path.iterdir()) == [], "a failed window leaves no report (nor a partial one) behind"


def test_a_seed_report_carries_an_index_of_what_was_seeded_and_verify_reads_it(tmp_path: Any) -> None:
    from airflow_provider_kstate.exceptions import ReportError
    from airflow_provider_kstate.increase.report import (
        evidence_uri,
        expand,
        read_evidence,
        read_report,
        write_report,
    )
    from airflow_provider_kstate.operators.verify import SeedEvidence

    assert list(expand("0-2,5,7-8")) == [0, 1, 2, 5, 7, 8] and list(expand("none")) == []
    uri = str(tmp_path / "t" / "seed.jsonl.gz")
    assert evidence_uri(uri).endswith("/seed.evidence.json") and read_evidence(uri) is None
    with write_report(uri, evidence=True) as report:
        report.write_lines(
            ['{"group":"g","partition":0,"committed":3,"seeded":false,"log_start_at_seed":null}\n']
        )
        report.write_lines(
            [
                f'{{"group":"g","partition":{p},"committed":0,"seeded":true,"log_start_at_seed":0}}\n'
                for p in (1, 2, 3, 9)
            ]
        )
        report.note_seeded("g", [1, 2, 3, 9])
    index = read_evidence(uri)
    assert index is not None and index["seeded"] == {"g": "1-3,9"} and index["rows"] == 5
    # the index says what the rows say
    from_rows, from_index = SeedEvidence(10), SeedEvidence(10)
    from_rows.read(read_report(uri))
    from_index.read_index(index)
    assert from_rows.seeded == from_index.seeded and from_index.rows == from_rows.rows == 5
    # a new seed report removes the old index first: a crash before the new one is written leaves none
    with pytest.raises(RuntimeError), write_report(uri, evidence=True):
        raise RuntimeError("killed mid-seed")
    assert read_evidence(uri) is None
    (tmp_path / "t" / "seed.evidence.json").write_text('{"format": "other"}')
    with pytest.raises(ReportError, match="not kstate-seed-evidence/1"):
        read_evidence(uri)
