"""The fleet as a run sees it: which driver stops and starts each protected group and producer service,
and the refusal, before anything is paused, of a live group the run cannot drive
(:mod:`airflow_provider_kstate.increase.drivers` says what each driver does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.errors import InvalidDriverError, UndrivableGroupError
from airflow_provider_kstate.increase.drivers import (
    CONTROL,
    TASK,
    ActionDriver,
    Driver,
    as_driver,
    as_registry,
)
from airflow_provider_kstate.increase.key_order import mark_key_order, without_client_piece
from airflow_provider_kstate.increase.plan import GroupClass, Plan

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.model import GroupInfo
    from airflow_provider_kstate.increase.ports import AdminPort


@dataclass(frozen=True)
class DriverChoice:
    """The drivers a run was given.

    :param groups: ``{group: driver}``: every other group is driven by the control protocol (or by your own
        tasks, ``own_tasks``).
    :param producers: ``{service: driver}``: the producer services of the topic that the run may stop and
        start (``control`` stands for the ControlledProducers). Empty: producers cannot be stopped, so a
        group that cannot hold at the barrier cannot be drained either.
    :param own_tasks: your own pause and resume tasks drive every group without a driver of its own.
    """

    groups: Mapping[str, Driver] = field(default_factory=dict)
    producers: Mapping[str, Driver] = field(default_factory=dict)
    own_tasks: bool = False

    @classmethod
    def build(
        cls, groups: Any, producers: Any, registry: Any = None, own_tasks: bool = False
    ) -> DriverChoice:
        """Resolve ``{group: driver or name}`` and ``{service: driver or name}`` (or a list of names)
        against ``registry``; :class:`InvalidDriverError` names the first that is not a driver."""
        named = as_registry(registry)
        if isinstance(producers, (list, tuple)):
            producers = {str(p): p for p in producers}
        for what, value in (("group_drivers", groups), ("producer_drivers", producers)):
            if value not in (None, "") and not isinstance(value, Mapping):
                raise InvalidDriverError(f"{what} must be a mapping, got {value!r}")
        return cls(
            groups={str(g): as_driver(f"group {g!r}", d, named) for g, d in dict(groups or {}).items()},
            producers={
                str(s): as_driver(f"producer service {s!r}", d, named)
                for s, d in dict(producers or {}).items()
            },
            own_tasks=own_tasks,
        )


def assign_drivers(
    plan: Plan, infos: Mapping[str, GroupInfo], present: Mapping[str, set[str]], choice: DriverChoice
) -> Plan:
    """Return ``plan`` with every seeded group's driver, and the producer services the run may stop.

    A live group whose members do not all run the client piece, and for which no driver is given, gets
    ``driver_problem``: the run cannot drive it (:func:`check_drivable` refuses the plan). A driver given
    for a group the plan does not have is left out here and refused by :func:`check_drivable` (a re-plan
    names the group gone instead).

    :param infos: the seeded groups as the broker describes them now (their live members).
    :param present: ``{group: client ids}`` of the consumers that acknowledged on the control topic.
    """
    groups = dict(plan.groups)
    for group in plan.where("seed"):
        info = infos.get(group)
        clients = [m.client_id for m in info.members] if info is not None else []
        driver = choice.groups.get(group) or (TASK if choice.own_tasks else CONTROL)
        problem = _problem(group, driver, clients, present.get(group, set()))
        piece = bool(clients) and not without_client_piece(clients, present.get(group, set()), 0)[0]
        groups[group] = groups[group].replace(driver=driver, driver_problem=problem, client_piece=piece)
    return plan.replace(groups=groups, producers=dict(choice.producers))


def drive(
    plan: Plan, admin: AdminPort, present: Mapping[str, set[str]], choice: DriverChoice, key_order: str
) -> Plan:
    """Return ``plan`` with each seeded group's driver and key-order mark, from its live members now.

    :param present: ``{group: client ids}`` of the consumers that acknowledged on the control topic.
    """
    infos = admin.describe_groups(plan.where("seed"), plan.topic)
    return mark_key_order(assign_drivers(plan, infos, present, choice), infos, present, key_order)


def _problem(group: str, driver: Driver, clients: list[str], present: set[str]) -> str:
    """Why the run cannot drive ``group`` with ``driver`` ("" when it can)."""
    behind, shown = without_client_piece(clients, present, 5)
    if not driver.needs_client_piece or not behind:
        return ""
    return (
        f"{behind} of {len(clients)} live members do not run the kstate "
        f"client piece (client ids {shown}: they never acknowledged on the control topic), so a pause record "
        "would not make them leave"
    )


def check_drivable(plan: Plan) -> None:
    """Refuse the plan, before anything is paused, when its request gives a driver to a group that does not
    read the topics (a likely typo), or when a live group cannot be driven; name the ways out."""
    unknown = sorted(set(plan.request.group_drivers) - set(plan.groups)) if plan.request else []
    if unknown:
        raise InvalidDriverError(
            f"group_drivers names groups that do not read {plan.topic_names} (not at risk, not named): "
            f"{unknown}. Groups of this run: {sorted(plan.where('seed'))}. Nothing was changed."
        )
    stuck = plan.undrivable()
    if not stuck:
        return
    lines = [f"group {g!r}: {why}." for g, why in stuck.items()]
    first = next(iter(stuck))
    raise UndrivableGroupError(
        " ".join(lines) + f" The run would pause every group, wait for these to leave, and time out with the "
        f"others out of their groups: nothing was paused or changed. Three ways out for each: (1) give it a "
        f"driver, a stop/start command pair (kubectl scale, systemctl, docker: the drivers guide), e.g. "
        f"group_drivers={{{first!r}: CommandDriver(stop=..., start=..., ready=...)}}, or for a Kafka Connect "
        f"sink ConnectDriver(url=..., connector=...), or a driver of the kstate_drivers registry by name in "
        f"the DAG's group_drivers param; (2) exclude "
        f"it with exclude_groups=[{first!r}] (RISK ACCEPTED: not paused, not seeded: its latest-reset "
        "consumers may skip what producers write to the new partitions); (3) adopt the client piece in its "
        "services (ControlledConsumer, or an implementation of docs/control-protocol.md such as clients/node)."
    )


def commanded_live(plan: Plan, among: Iterable[str] | None = None) -> list[str]:
    """The seeded groups with live members at plan time (class ``active``) whose driver's actions the run
    performs (an :class:`~airflow_provider_kstate.increase.drivers.ActionDriver`: a command pair, a Connect
    connector; it stops them first and starts them), in plan order; only those of ``among`` when given."""
    wanted = None if among is None else set(among)
    return [
        g
        for g in plan.where("seed")
        if plan.groups[g].cls == GroupClass.ACTIVE
        and plan.groups[g].driver.commands() is not None
        and (wanted is None or g in wanted)
    ]


def commands_of(plan: Plan, groups: list[str]) -> dict[str, ActionDriver]:
    """``{group: its action driver}`` of those ``groups`` whose driver's actions the run performs."""
    return {g: c for g in groups if (c := plan.groups[g].driver.commands()) is not None}


def producer_commands(plan: Plan) -> dict[str, ActionDriver]:
    """``{service: action driver}`` of the producer services the run stops itself (commands, a Connect
    source connector)."""
    return {s: c for s, d in plan.producers.items() if (c := d.commands()) is not None}
