"""Cluster conditions the sensors poke for and the trigger polls for: one implementation for both modes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.increase.ghosts import GhostRemoval
from airflow_provider_kstate.increase.model import DEAD, EMPTY, STABLE
from airflow_provider_kstate.increase.report import ranges

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.model import GroupInfo
    from airflow_provider_kstate.increase.ports import AdminPort, ControlPort


@dataclass(frozen=True)
class CheckResult:
    """Whether the condition holds, and what still stands in its way (JSON-safe)."""

    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


def groups_empty(
    hook: AdminPort,
    topic: str,
    groups: list[str],
    pause_epoch: int | None = None,
    *,
    control: ControlPort | None = None,
) -> CheckResult:
    """Hold when every group is EMPTY (or unknown to the broker); name the members still present. With the
    pause's epoch and the control channel, remove the ghosts of the groups still listed with members
    (:mod:`~airflow_provider_kstate.increase.ghosts`, the rule the pause window's wait follows too), named
    under ``ghosts_removed``: the next look finds their group EMPTY.

    :param topic: the topic whose assignments are described.
    :param groups: the groups waited for.
    :param pause_epoch: the pause record's epoch (None: no ghost is removed).
    :param control: the control channel the pause's acknowledgements are read from (None: none removed).
    """
    described = hook.describe_groups(groups, topic)
    result = empty_of(described)
    if result.ok or pause_epoch is None or control is None:
        return result
    removed = GhostRemoval(hook, control, pause_epoch).remove(described)
    for group, members in removed.items():
        result.detail[group]["ghosts_removed"] = members
    return result


def empty_of(described: Mapping[str, GroupInfo]) -> CheckResult:
    """:func:`groups_empty` of groups already described (``{group: GroupInfo}``)."""
    blockers: dict[str, Any] = {}
    for group, info in described.items():
        if info.state not in (EMPTY, DEAD) or info.members:
            blockers[group] = {
                "state": info.state,
                "members": [f"{m.client_id}@{m.host} ({m.member_id})" for m in info.members],
            }
    return CheckResult(not blockers, blockers)


def on_topics(found: dict[str, dict[str, Any]]) -> CheckResult:
    """One result of a check made on each topic (``{topic: {group or partition: detail}}``): what is
    behind is named as is for one topic, ``<name> on <topic>`` for several."""
    several = len(found) > 1
    detail = {f"{k} on {t}" if several else k: d for t, each in found.items() for k, d in each.items()}
    return CheckResult(not detail, detail)


def groups_stable(hook: AdminPort, topics: dict[str, list[str]], partitions: int) -> CheckResult:
    """Hold when every group is STABLE with all ``partitions`` of every topic it reads assigned to its
    members.

    :param topics: ``{topic: the groups waited for on it}``.
    """
    return on_topics({topic: _unstable(hook, topic, groups, partitions) for topic, groups in topics.items()})


def _unstable(hook: AdminPort, topic: str, groups: list[str], partitions: int) -> dict[str, Any]:
    problems: dict[str, Any] = {}
    expected = set(range(partitions))
    for group, info in hook.describe_groups(groups, topic).items():
        unassigned = sorted(expected - info.assigned())
        if info.state != STABLE or unassigned:
            problems[group] = {
                "state": info.state,
                "members": len(info.members),
                "unassigned": ranges(unassigned),
            }
            if not info.members:
                problems[group]["hint"] = (
                    "no members: its consumers have not come back (stopped for good, crashed, or not "
                    "resumed); offsets are seeded, so restarting them is safe"
                )
    return problems


def partitions_written(hook: AdminPort, baselines: dict[str, dict[str, int]]) -> CheckResult:
    """Hold when each partition of each topic in ``baselines`` (``{topic: {"p": end offset}}``) has grown
    past its end offset there."""
    waiting: dict[str, dict[str, Any]] = {}
    for topic, baseline in baselines.items():
        ends = hook.watermarks(topic, [int(p) for p in baseline])
        behind = {str(p): ends[p][1] for p in ends if ends[p][1] <= int(baseline[str(p)])}
        waiting[topic] = {"not_yet_written": behind} if behind else {}
    return on_topics(waiting)


def groups_drained(hook: AdminPort, drains: dict[str, dict[str, Any]]) -> CheckResult:
    """Hold when every drained group has committed offsets at or past the old partitions' end offsets when
    the producers stopped, on each topic it reads (``{topic: {"groups": [...], "offsets": [...]}}``): it
    consumed everything written before the switch, so the producers may start on the new layout without
    reordering its keys."""
    behind: dict[str, dict[str, Any]] = {}
    for topic, drain in drains.items():
        offsets, each = list(drain["offsets"]), behind.setdefault(topic, {})
        for group, committed in hook.committed_offsets_many(list(drain["groups"]), topic, len(offsets)):
            lag = {p: b - committed.get(p, 0) for p, b in enumerate(offsets) if committed.get(p, -1) < b}
            if lag:
                each[group] = {"records_behind": sum(lag.values()), "partitions": ranges(sorted(lag))}
    return on_topics(behind)


CHECKS: dict[str, Callable[..., CheckResult]] = {
    "groups_empty": groups_empty,
    "groups_stable": groups_stable,
    "partitions_written": partitions_written,
    "groups_drained": groups_drained,
}
