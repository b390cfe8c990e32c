"""Cluster conditions the sensors poke for and the trigger polls for: one implementation for both modes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.increase.model import DEAD, EMPTY, STABLE
from airflow_provider_kstate.increase.report import ranges

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


@dataclass(frozen=True)
class CheckResult:
    """Whether the condition holds, and what still stands in its way (JSON-safe)."""

    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


def groups_empty(hook: AdminPort, topic: str, groups: list[str]) -> CheckResult:
    """Hold when every group is EMPTY (or unknown to the broker); name the members still present."""
    blockers: dict[str, Any] = {}
    for group, info in hook.describe_groups(groups, topic).items():
        if info.state not in (EMPTY, DEAD) or info.members:
            blockers[group] = {
                "state": info.state,
                "members": [f"{m.client_id}@{m.host} ({m.member_id})" for m in info.members],
            }
    return CheckResult(not blockers, blockers)


def groups_stable(
    hook: AdminPort,
    topic: str,
    groups: list[str],
    partitions: int,
    topics: dict[str, list[str]] | None = None,
) -> CheckResult:
    """Hold when every group is STABLE with all ``partitions`` of ``topic`` assigned to its members.

    :param topics: a run of several topics: ``{topic: groups}``, each group checked on every topic it reads
        (``topic`` and ``groups`` are then ignored); a problem is named ``<group> on <topic>``.
    """
    if topics:
        found: dict[str, Any] = {}
        for name, readers in topics.items():
            each = groups_stable(hook, name, readers, partitions)
            found.update({f"{g} on {name}": d for g, d in each.detail.items()})
        return CheckResult(not found, found)
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
    return CheckResult(not problems, problems)


def partitions_written(hook: AdminPort, topic: str, baseline: dict[str, int]) -> CheckResult:
    """Hold when each partition in ``baseline`` (``{"p": end offset}``) has grown past it."""
    ends = hook.watermarks(topic, [int(p) for p in baseline])
    waiting = {str(p): ends[p][1] for p in ends if ends[p][1] <= int(baseline[str(p)])}
    return CheckResult(not waiting, {"not_yet_written": waiting})


def groups_drained(hook: AdminPort, topic: str, groups: list[str], offsets: list[int]) -> CheckResult:
    """Hold when every group has committed offsets at or past ``offsets`` (the old partitions' end offsets
    when the producers stopped) on each of those partitions: it consumed everything written before the
    switch, so the producers may start on the new layout without reordering its keys."""
    behind: dict[str, Any] = {}
    for group, committed in hook.committed_offsets_many(groups, topic, len(offsets)):
        lag = {p: b - committed.get(p, 0) for p, b in enumerate(offsets) if committed.get(p, -1) < b}
        if lag:
            behind[group] = {"records_behind": sum(lag.values()), "partitions": ranges(sorted(lag))}
    return CheckResult(not behind, behind)


CHECKS: dict[str, Callable[..., CheckResult]] = {
    "groups_empty": groups_empty,
    "groups_stable": groups_stable,
    "partitions_written": partitions_written,
    "groups_drained": groups_drained,
}
