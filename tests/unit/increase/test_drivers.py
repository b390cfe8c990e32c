"""Drivers per group (issue 25): their forms, the plan's refusal of what it cannot drive, the command pairs
run through bash, and the window's order (command-driven groups stop first; a failure before the create
resumes everyone), without a broker."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.errors import (
    DriverCommandError,
    GroupNeverLeftError,
    InvalidDriverError,
    UndrivableGroupError,
)
from airflow_provider_kstate.increase.drivers import (
    CONTROL,
    CommandDriver,
    CommandPairs,
    ConnectDriver,
    ControlDriver,
    Driver,
    DriverKind,
    ShellRunner,
    TaskDriver,
    as_driver,
)
from airflow_provider_kstate.increase.fleet import DriverChoice, assign_drivers, check_drivable
from airflow_provider_kstate.increase.key_order import mark_key_order
from airflow_provider_kstate.increase.model import GroupInfo, Member
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, KeyOrderMark, Plan
from airflow_provider_kstate.increase.request import PlanRequest
from airflow_provider_kstate.increase.run import IncreaseRun

LOG = logging.getLogger("test_drivers")
K8S = CommandDriver(
    name="billing-k8s",
    stop="kubectl scale deploy/billing --replicas=0",
    start="kubectl scale deploy/billing --replicas=2",
    ready="kubectl rollout status deploy/billing --timeout=5s",
)


def _info(group: str, *clients: str) -> GroupInfo:
    members = tuple(Member(f"m-{c}", c, "/10.0.0.1", (0,)) for c in clients)
    return GroupInfo(group, "STABLE" if clients else "EMPTY", "CLASSIC", "consumer", members)


def _plan(**groups: GroupInfo) -> Plan:
    plans = {
        g: GroupPlan(
            cls=GroupClass.ACTIVE if i.members else GroupClass.EMPTY,
            state=i.state,
            member_count=len(i.members),
            pause=True,
            seed=True,
            wait=bool(i.members),
        )
        for g, i in groups.items()
    }
    return Plan("orders", 2, 4, plans, planned_at="now", owner="run-1")


def test_driver_forms_round_trip_and_bad_ones_name_the_problem() -> None:
    assert Driver.from_dict(K8S.to_dict()) == K8S
    assert Driver.from_dict({"kind": "control"}) == ControlDriver()
    assert Driver.from_dict({"kind": "task"}) == TaskDriver()
    short = Driver.from_dict({"stop": "systemctl stop x", "start": "systemctl start x"}, "x-svc")
    assert short == CommandDriver(name="x-svc", stop="systemctl stop x", start="systemctl start x")
    assert short.describe() == "command x-svc" and CONTROL.describe() == "control"
    with pytest.raises(InvalidDriverError, match="needs both a stop and a start"):
        Driver.from_dict({"kind": "command", "stop": "docker stop x"}, "x")
    with pytest.raises(
        InvalidDriverError, match="kind must be one of control, command, connect, task, got 'k8s'"
    ):
        Driver.from_dict({"kind": "k8s"}, "x")
    with pytest.raises(InvalidDriverError, match=r"unknown fields \['stpo'\]"):
        Driver.from_dict({"kind": "command", "stop": "a", "start": "b", "stpo": "c"}, "x")
    with pytest.raises(InvalidDriverError, match="timeout must be positive"):
        Driver.from_dict({"stop": "a", "start": "b", "timeout": 0}, "x")
    with pytest.raises(InvalidDriverError, match=r"unknown fields \['stop'\] for a control driver"):
        Driver.from_dict({"kind": "control", "stop": "a"}, "x")


def test_each_driver_kind_is_one_class_that_carries_its_behaviour() -> None:
    """A kind is one registered subclass: how it reads, its words in the prompt, whether the run runs its
    commands and whether its members need the client piece; nothing dispatches on the kind elsewhere."""
    from airflow_provider_kstate.increase.drivers import DRIVER_KINDS

    assert {str(k): c for k, c in DRIVER_KINDS.items()} == {
        "control": ControlDriver,
        "task": TaskDriver,
        "command": CommandDriver,
        "connect": ConnectDriver,
    }
    assert K8S.commands() is K8S and CONTROL.commands() is None and TaskDriver().commands() is None
    assert CONTROL.needs_client_piece and not K8S.needs_client_piece and not TaskDriver.needs_client_piece
    assert (CONTROL.leave_words, K8S.leave_words, TaskDriver.leave_words) == (
        "pause record",
        "stop command",
        "your pause task",
    )


def test_a_run_names_drivers_of_the_registry_and_never_carries_a_command() -> None:
    registry = {"billing-k8s": K8S}
    assert as_driver("group 'b'", "billing-k8s", registry) is K8S
    assert as_driver("group 'b'", "control", registry) is CONTROL
    assert as_driver("group 'b'", K8S, {}) is K8S  # the Python API gives the driver itself
    with pytest.raises(InvalidDriverError, match=r"'bilin-k8s' is neither 'control' nor.*known: billing-k8s"):
        as_driver("group 'b'", "bilin-k8s", registry)
    inline = {"kind": "command", "stop": "rm -rf /", "start": "true"}
    with pytest.raises(InvalidDriverError, match="never carries|name drivers"):
        DriverChoice.build({"b": inline}, None, registry)
    choice = DriverChoice.build(
        {"b": "billing-k8s"}, ["control", "billing-k8s"], {"billing-k8s": K8S.to_dict()}
    )
    assert choice.groups["b"] == K8S and set(choice.producers) == {"control", "billing-k8s"}


def test_the_plan_refuses_a_live_group_it_cannot_drive_naming_the_three_ways_out() -> None:
    infos = {"svc": _info("svc", "cc-0", "cc-1"), "kjs": _info("kjs", "kjs-service"), "idle": _info("idle")}
    plan = _plan(**infos)
    present = {"svc": {"cc-0", "cc-1"}}
    assigned = assign_drivers(plan, infos, present, DriverChoice())
    assert assigned.groups["svc"].driver is CONTROL and not assigned.groups["svc"].driver_problem
    assert assigned.groups["idle"].driver_problem == ""  # no live members: nothing to make leave
    assert "client ids kjs-service" in assigned.groups["kjs"].driver_problem
    with pytest.raises(UndrivableGroupError) as refused:
        check_drivable(assigned)
    text = str(refused.value)
    assert "group 'kjs'" in text and "kjs-service" in text and "nothing was paused or changed" in text
    assert "give it a driver" in text and "exclude_groups=['kjs']" in text and "RISK ACCEPTED" in text
    assert "adopt the client piece" in text and "svc" not in text.split("Three ways")[0]
    driven = assign_drivers(plan, infos, present, DriverChoice(groups={"kjs": K8S}))
    check_drivable(driven)  # a driver given: the plan goes on
    assert driven.groups["kjs"].driver == K8S
    own = assign_drivers(plan, infos, present, DriverChoice(own_tasks=True))
    assert (
        own.groups["kjs"].driver.kind == DriverKind.TASK and own.groups["svc"].driver.kind == DriverKind.TASK
    )
    typo = assign_drivers(plan, infos, present, DriverChoice(groups={"typo": K8S, "kjs": K8S}))
    assert "typo" not in typo.groups  # left out here: the request is checked as a whole
    asked = typo.replace(request=PlanRequest(topics=("orders",), group_drivers={"typo": K8S, "kjs": K8S}))
    with pytest.raises(InvalidDriverError, match=r"do not read \['orders'\].*\['typo'\]"):
        check_drivable(asked)


def test_a_group_that_cannot_hold_is_drained_when_its_producers_can_be_stopped() -> None:
    infos = {"svc": _info("svc", "cc-0"), "kjs": _info("kjs", "kjs-service"), "idle": _info("idle")}
    present = {"svc": {"cc-0"}}
    plan = assign_drivers(_plan(**infos), infos, present, DriverChoice(groups={"kjs": K8S}))
    relaxed = mark_key_order(plan, infos, present, "preserve")
    assert relaxed.groups["kjs"].key_order == KeyOrderMark.RELAXED
    assert "producers cannot be stopped (no producer_drivers)" in relaxed.groups["kjs"].key_order_reason
    stoppable = plan.replace(producers={"kjs-producer": K8S})
    drained = mark_key_order(stoppable, infos, present, "preserve")
    assert [drained.groups[g].key_order for g in ("svc", "kjs", "idle")] == ["barrier", "drained", "offline"]
    assert drained.marked(KeyOrderMark.DRAINED) == ["kjs"]
    every = mark_key_order(stoppable, infos, present, "drain")
    assert every.marked(KeyOrderMark.DRAINED) == ["svc", "kjs"]
    back = Plan.from_dict(drained.to_dict())
    assert back.groups["kjs"].driver == K8S and back.producers == {"kjs-producer": K8S}
    assert back.groups["kjs"].key_order == KeyOrderMark.DRAINED


def test_command_pairs_run_through_bash_concurrently_bounded_and_with_the_run_s_names(tmp_path: Path) -> None:
    pairs = CommandPairs("orders", LOG, ShellRunner())
    out = tmp_path / "env"
    env_driver = CommandDriver(
        stop=f'echo "$KSTATE_ACTION $KSTATE_GROUP $KSTATE_TOPIC" > {out}', start="true"
    )
    # a and b each wait for the other's mark: both succeed only if they run at once (one after the other,
    # the first would wait until its timeout and fail); proved by order, not by a wall-clock bound
    meet = tmp_path / "meet"
    meet.mkdir()
    rendezvous = (
        f'touch {meet}/"$KSTATE_GROUP"; until [ -e {meet}/a ] && [ -e {meet}/b ]; do sleep 0.01; done'
    )
    slow = CommandDriver(stop=rendezvous, start="true", timeout=30)
    results = pairs.run("stop", {"billing": env_driver, "a": slow, "b": slow}, "group")
    assert [r.ok for r in results] == [True, True, True], "the stops ran one after the other"
    assert out.read_text().strip() == "stop billing orders"
    hung = CommandDriver(stop="sleep 30", start="true", timeout=0.5)
    failing = CommandDriver(stop="echo no such deployment >&2; exit 3", start="true")
    with pytest.raises(DriverCommandError) as error:
        pairs.stop({"hung": hung, "bad": failing}, "group")
    assert "stop of group hung timed out after" in str(error.value)
    assert "stop of group bad exited 3" in str(error.value) and "no such deployment" in str(error.value)


def test_readiness_is_polled_until_it_holds_or_its_timeout(tmp_path: Path) -> None:
    tries = tmp_path / "tries"
    ready = f"echo x >> {tries}; [ $(wc -l < {tries}) -ge 3 ]"
    pairs = CommandPairs("orders", LOG, ShellRunner())
    assert pairs.start({"g": CommandDriver(stop="true", start="true", ready=ready)}, "group") == []
    assert len(tries.read_text().split()) == 3
    never = CommandDriver(stop="true", start="true", ready="false", timeout=1.0)
    failures = pairs.start({"g": never}, "group")
    assert [f.action for f in failures] == ["ready"] and not failures[0].ok
    broken = CommandDriver(stop="true", start="exit 1", ready=f"touch {tmp_path / 'polled'}")
    assert [f.action for f in pairs.start({"g": broken}, "group")] == ["start"]
    assert not (tmp_path / "polled").exists(), "a service that failed to start is not polled for readiness"


class FleetCluster:
    """An admin hook, a control channel and a command runner over one in-memory fleet: a control group's
    members leave on a pause record, a command group's on its stop command; every call is recorded."""

    def __init__(self, groups: dict[str, tuple[str, ...]], stuck: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.members = dict(groups)
        self.running = dict(groups)
        self.stuck = stuck
        self.events: list[str] = []
        self.partitions = 2

    # admin
    def partition_count(self, topic: str) -> int:
        return self.partitions

    def describe_groups(self, groups: list[str], topic: str) -> dict[str, GroupInfo]:
        return {g: _info(g, *self.running.get(g, ())) for g in groups}

    def increase_partitions(self, topic: str, total: int, validate_only: bool = False) -> None:
        assert validate_only, "the pause only has the create validated"

    # control
    def follow(self) -> None:
        pass

    def pause(self, groups: list[str], topic: str, issuer: str) -> int:
        self.events.append(f"pause-record {sorted(groups)}")
        for g in groups:
            if g.startswith("cc") and g not in self.stuck:
                self.running[g] = ()
        return 1

    def resume(self, groups: list[str], topic: str, issuer: str) -> int:
        self.events.append(f"resume-record {sorted(groups)}")
        return 2

    def acks(self, epoch: int, group: str = "", topic: str = "", refresh: bool = True) -> list[Any]:
        return []  # every client's commit landed before it left (none acked ``left``)

    def set_layout(self, topic: str, partitions: int, issuer: str) -> int:
        self.events.append(f"layout {partitions}")
        return 3

    def announce_barrier(self, topic: str, groups: list[str], issuer: str) -> int:
        self.events.append("announce")
        return 4

    # command runner
    def run(self, command: str, timeout: float, env: Any) -> tuple[int | None, str]:
        action, group = command.split(":")
        self.events.append(f"{action} {group}")
        if action == "stop" and group not in self.stuck:
            self.running[group] = ()
        if action == "start":
            self.running[group] = self.members[group]
        return 0, ""


def _steps(cluster: FleetCluster, plan: Plan) -> IncreaseRun:
    return IncreaseRun(
        plan,
        cluster,  # type: ignore[arg-type]
        cluster,  # type: ignore[arg-type]
        LOG,
        "run-1",
        key_order="relax",
        empty_timeout=0.3,
        pairs=CommandPairs("orders", LOG, cluster),
    )


def _fleet_plan(cluster: FleetCluster) -> Plan:
    infos = {g: _info(g, *m) for g, m in cluster.members.items()}
    drivers = {g: CommandDriver(stop=f"stop:{g}", start=f"start:{g}") for g in infos if g.startswith("kjs")}
    present = {g: set(m) for g, m in cluster.members.items() if g.startswith("cc")}
    return assign_drivers(_plan(**infos), infos, present, DriverChoice(groups=drivers))


def test_command_groups_stop_and_leave_before_any_other_group_is_asked_to() -> None:
    cluster = FleetCluster({"cc-svc": ("cc-0",), "kjs-svc": ("kjs-0",), "cc-idle": ()})
    steps = _steps(cluster, _fleet_plan(cluster))
    out = steps.pause()
    steps.wait_empty(1.0)
    assert cluster.events[:2] == ["stop kjs-svc", "pause-record ['cc-idle', 'cc-svc', 'kjs-svc']"]
    assert out["stopped_groups"] == ["kjs-svc"] and steps.stop_s is not None
    cluster.partitions = 4
    steps.topics[0].known = {"cc-svc": 4, "kjs-svc": 4, "cc-idle": 4}
    resumed = steps.resume()
    assert cluster.events[-2:] == ["resume-record ['cc-idle', 'cc-svc', 'kjs-svc']", "start kjs-svc"]
    assert resumed["started_groups"] == ["kjs-svc"], "an offline command group is not started"
    assert cluster.running["kjs-svc"] == ("kjs-0",)


def test_a_stop_that_does_not_stop_keeps_everyone_else_in_their_group_and_is_undone() -> None:
    cluster = FleetCluster({"cc-svc": ("cc-0",), "kjs-svc": ("kjs-0",)}, stuck={"kjs-svc"})
    steps = _steps(cluster, _fleet_plan(cluster))
    with pytest.raises(GroupNeverLeftError, match="kjs-0"):
        steps.pause()
    assert not any(e.startswith("pause-record") for e in cluster.events), "the control group was paused"
    assert cluster.running["cc-svc"] == ("cc-0",)
    steps.undo_before_create()
    assert cluster.events[-3:] == ["resume-record ['cc-svc', 'kjs-svc']", "start kjs-svc", "layout 2"]


def test_a_wait_that_ran_out_is_not_retried_but_a_group_not_empty_yet_is() -> None:
    from airflow_provider_kstate import errors
    from airflow_provider_kstate.errors import GroupNotEmptyError

    never_left = GroupNeverLeftError("members still present")
    assert not never_left.retryable and isinstance(never_left, GroupNotEmptyError)
    assert errors.GroupNotEmptyError("seed: not EMPTY yet").retryable
