"""The approval of an increase, like a production change: the prompt an approver reads, and the check that
the cluster still matches the plan they approved.

* :func:`approval_prompt` renders a :class:`~airflow_provider_kstate.increase.plan.Plan` as Markdown: the
  partitions now and after, each group with its class, driver, key-order mark and what the run will do to
  it (the live and risky groups first, the rest summarized past ``cap`` rows), the broker doctor's last
  verdict (:meth:`BrokerCheck.read`) and the downtime this topic's earlier runs measured
  (:func:`downtime_history`; :func:`history_of` reads their progress documents).
  :func:`approval_text` is the request for any number of topics (a topic is a set of one): the subject
  and, for several topics, a heading naming each with its count now and after, before the prompt.
* :func:`plan_changes` compares the approved plan with a plan made again (a dry run) after the approval:
  a different partition count, a new group at risk, a group gone or handled differently
  (:class:`PlanChanges`); :meth:`PlanChanges.refuse` raises :class:`~airflow_provider_kstate.errors.PlanChangedError`
  naming each change. :func:`set_changes` compares each topic of the plan (:class:`SetChanges`: one topic
  changed raises its own error, several one error naming each). Nothing here reaches a cluster.

The step's other decisions (its timeout, the answer, what it records) are
:mod:`~airflow_provider_kstate.increase.approval_step`'s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_APPROVAL_TIMEOUT as DEFAULT_APPROVAL_TIMEOUT,
)
from airflow_provider_kstate.errors import PlanChangedError, ReportError
from airflow_provider_kstate.increase.events import RunProgress
from airflow_provider_kstate.increase.plan import (
    LEFT_ALONE,
    UNSUPPORTED,
    GroupClass,
    GroupPlan,
    KeyOrderMark,
    Plan,
    PlanMode,
    headline,
)

#: The run's step while it waits for an answer, and the steps and outcomes after one (``progress.json``).
AWAITING_APPROVAL = "awaiting_approval"
APPROVED = "approved"
REJECTED = "rejected"
EXPIRED = "expired"
PLAN_CHANGED = "plan_changed"
#: Seconds the topics' leases outlive the approval deadline while the run waits (an answer can land a little
#: after the deadline, before the scheduler's timeout sweep ends the request).
WAIT_LEASE_MARGIN = 300.0
#: Group rows the prompt shows, at most; the others are counted by class.
PROMPT_ROWS = 25
#: The classes of a group the run would have to pause and seed, or refuse: a group of these classes that
#: was not in the approved plan is a new group at risk.
AT_RISK = (GroupClass.ACTIVE, GroupClass.EMPTY, *UNSUPPORTED)
#: How the prompt orders groups: live groups first, then the risks accepted, then the rest.
_RANK = {GroupClass.ACTIVE: 0, GroupClass.EXCLUDED: 1, GroupClass.EMPTY: 2}
#: What the prompt says of each group the run leaves alone: the reader kinds' words, and the risk accepted.
_ALONE = {**LEFT_ALONE, GroupClass.EXCLUDED: "left alone: **RISK ACCEPTED** (excluded)"}


class _Verdict(Protocol):
    """What :meth:`BrokerCheck.of` reads of the broker doctor's verdict."""

    @property
    def cluster(self) -> str: ...

    @property
    def checked_at(self) -> float: ...

    def broken(self) -> Iterable[str]: ...


@dataclass(frozen=True)
class BrokerCheck:
    """The broker doctor's last verdict, as the prompt shows it.

    :param cluster: the cluster id.
    :param checked_at: when its behavioural checks ran (epoch seconds).
    :param broken: the promises the increase needs that the broker breaks (each accepted by name, or the
        run would have stopped at ``check_broker``).
    """

    cluster: str
    checked_at: float
    broken: tuple[str, ...] = ()

    @classmethod
    def of(cls, verdict: _Verdict | None, needed: Iterable[str]) -> BrokerCheck | None:
        """The check of the doctor's ``verdict``: the broken promises of those ``needed`` by the increase
        (None: no verdict)."""
        if verdict is None:
            return None
        needs = set(needed)
        broken = tuple(p for p in verdict.broken() if p in needs)
        return cls(verdict.cluster, verdict.checked_at, broken)

    @classmethod
    def read(
        cls, last_verdict: Callable[[], _Verdict | None], needed: Iterable[str], log: Any
    ) -> BrokerCheck | None:
        """The check of the doctor's cached verdict, which ``last_verdict`` reads (it never probes); None when
        there is none or it cannot be read (logged: the prompt goes out without it)."""
        try:
            verdict = last_verdict()
        except Exception as exc:  # noqa: BLE001 - the prompt goes out without it
            log.warning("APPROVE the broker doctor's verdict could not be read: %s", exc)
            return None
        return cls.of(verdict, needed)


@dataclass(frozen=True)
class Downtime:
    """Seconds out of the group, over earlier runs: the median, the last run's and how many runs."""

    median_s: float
    last_s: float
    runs: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Downtime:
        """``values`` oldest first."""
        return cls(round(statistics.median(values), 3), round(values[-1], 3), len(values))

    def describe(self) -> str:
        return (
            f"median {self.median_s:.2f} s, last {self.last_s:.2f} s ({self.runs} run{'s' * (self.runs > 1)})"
        )


@dataclass(frozen=True)
class DowntimeHistory:
    """What this topic's earlier successful runs measured (:func:`downtime_history`).

    :param runs: how many earlier runs were read.
    :param last_run: the newest one (``dag_id/run_id``).
    :param window: from the first group out to the last group back, per run.
    :param groups: per group, its own downtime (the prompt shows it for the groups with live members: a
        group without any has nobody to keep out).
    """

    runs: int = 0
    last_run: str = ""
    window: Downtime | None = None
    groups: dict[str, Downtime] = field(default_factory=dict)


def wait_lease_ttl(lease_ttl: float, timeout_s: float) -> float:
    """Seconds the topics' leases are held while the run waits for an answer: the steps' TTL, or until the
    deadline and :data:`WAIT_LEASE_MARGIN` past it when that is longer."""
    return max(lease_ttl, timeout_s + WAIT_LEASE_MARGIN)


def run_window_s(progress: RunProgress) -> float | None:
    """Seconds from the first group asked to leave to the last one back, as its service saw it (None: nobody
    was out)."""
    spans = [(g.out_since, g.served_at) for g in progress.groups.values() if g.out_since and g.served_at]
    if not spans:
        return None
    return round((max(b for _, b in spans) - min(o for o, _ in spans)) / 1000.0, 3)


def downtime_history(runs: Iterable[RunProgress]) -> DowntimeHistory:
    """Summarize the downtime of earlier runs of a topic: only the runs that succeeded count (a failed or
    rejected run's downtime says nothing of the next one)."""
    done = sorted((r for r in runs if r.outcome == "success"), key=lambda r: r.started_at)
    if not done:
        return DowntimeHistory()
    windows = [w for w in map(run_window_s, done) if w is not None]
    per_group: dict[str, list[float]] = {}
    for run in done:
        for name, group in run.groups.items():
            seconds = group.downtime_s(group.back_at) if group.back_at else None
            if seconds is not None:
                per_group.setdefault(name, []).append(seconds)
    return DowntimeHistory(
        runs=len(done),
        last_run=done[-1].run,
        window=Downtime.of(windows) if windows else None,
        groups={g: Downtime.of(v) for g, v in per_group.items()},
    )


def history_of(texts: Iterable[str | bytes]) -> DowntimeHistory:
    """:func:`downtime_history` of the progress documents ``texts``; a text that is not one (another version,
    a partial write) is not counted."""
    runs = []
    for text in texts:
        try:
            runs.append(RunProgress.from_json(text))
        except ReportError:
            continue
    return downtime_history(runs)


# ------------------------------------------------------------------------------------------- the prompt


@dataclass(frozen=True)
class ApprovalText:
    """What the approver reads: the request's subject (its headline) and its body (Markdown)."""

    subject: str
    body: str


def approval_text(
    plan: Plan,
    *,
    broker: BrokerCheck | None = None,
    history: DowntimeHistory | None = None,
    deadline: str = "",
    cap: int = PROMPT_ROWS,
) -> ApprovalText:
    """Return the approval request of ``plan``, for any number of topics (a topic is a set of one): the
    subject (:func:`approval_subject`) and the body, the set's heading (every topic with its count now and
    after; none for one topic) then :func:`approval_prompt` (the parameters are its own)."""
    prompt = approval_prompt(plan, broker=broker, history=history, deadline=deadline, cap=cap)
    return ApprovalText(approval_subject(plan), _set_heading(plan) + prompt)


def approval_subject(plan: Plan) -> str:
    """The prompt's headline: the topic's change, or every co-partitioned topic of the set and the one
    target."""
    if plan.several:
        counts = sorted(set(plan.topics.values()))
        was = counts[0] if len(counts) == 1 else "/".join(str(c) for c in counts)
        return (
            f"Approve {len(plan.topics)} co-partitioned topics ({', '.join(plan.topic_names)}): {was} -> "
            f"{plan.target_partitions} partitions in one run?"
        )
    if plan.mode == PlanMode.REPAIR:
        return f"Approve the repair of {plan.topic} ({plan.target_partitions} partitions)?"
    return f"Approve {plan.topic}: {plan.original_partitions} -> {plan.target_partitions} partitions?"


def _set_heading(plan: Plan) -> str:
    """The prompt's first lines for several topics (none for one): every topic with its count now and after,
    and what one run of them means."""
    if not plan.several:
        return ""
    rows = "\n".join(f"| `{t}` | {c} | {plan.target_partitions} |" for t, c in plan.topics.items())
    return (
        f"**Co-partitioned topics grown together** (one plan, every topic's lease, each group paused once):\n\n"
        f"| topic | partitions now | after |\n| --- | --- | --- |\n{rows}\n\n"
        "Each group below is paused once, seeded on every topic it reads and resumed once.\n\n"
    )


def what_happens(entry: GroupPlan) -> str:
    """What the run will do to one group, in a few words."""
    if not entry.seed:
        return _ALONE.get(entry.cls, "left alone")
    driver = entry.driver
    if entry.cls == GroupClass.ACTIVE:
        steps = f"{driver.leave_words}, wait EMPTY, seed, {driver.back_words}, wait STABLE"
    else:
        steps = "seed (no live members: nobody is stopped)"
    if entry.key_order == KeyOrderMark.DRAINED:
        steps += "; producers stopped until it has drained"
    return steps


def _row(name: str, entry: GroupPlan, history: DowntimeHistory) -> str:
    members = f" ({entry.member_count} member{'s' * (entry.member_count != 1)})" if entry.member_count else ""
    why = entry.key_order in (KeyOrderMark.RELAXED, KeyOrderMark.DRAINED) and entry.key_order_reason
    order = f"{entry.key_order}" + (f": {_cut(entry.key_order_reason, 100)}" if why else "")
    driver = entry.driver.describe() if entry.seed else "-"
    past = history.groups.get(name) if entry.cls == GroupClass.ACTIVE else None
    downtime = past.describe() if past else ("no earlier run" if entry.cls == GroupClass.ACTIVE else "-")
    cells = [f"`{name}`", f"{entry.cls}{members}", driver, order or "-", what_happens(entry), downtime]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _cell(text: str) -> str:
    """A table cell: no pipe, no newline, at most 160 characters."""
    return _cut(" ".join(text.replace("|", "/").split()), 160)


def _groups_table(plan: Plan, history: DowntimeHistory, cap: int) -> list[str]:
    ordered = sorted(plan.groups.items(), key=lambda kv: _RANK.get(kv[1].cls, 3))
    shown, rest = ordered[:cap], ordered[cap:]
    lines = [
        "| group | class | driver | key order | the run will | downtime in earlier runs |",
        "|---|---|---|---|---|---|",
        *(_row(name, entry, history) for name, entry in shown),
    ]
    if rest:
        counts: dict[str, int] = {}
        for _, entry in rest:
            counts[str(entry.cls)] = counts.get(str(entry.cls), 0) + 1
        summary = ", ".join(f"{n} {cls}" for cls, n in sorted(counts.items()))
        lines += [
            "",
            f"... and {len(rest)} more groups ({summary}): every group is in the `plan` task's log and XCom.",
        ]
    return lines


def _broker(check: BrokerCheck | None) -> str:
    if check is None:
        return "**Broker check:** no verdict cached for this cluster yet (`check_broker` ran the checks it needs)."
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(check.checked_at))
    if not check.broken:
        return f"**Broker check:** cluster `{check.cluster}`, checked {when}: every promise the increase needs holds."
    return (
        f"**Broker check:** cluster `{check.cluster}`, checked {when}: breaks {', '.join(check.broken)}, "
        "accepted by name (allow_broker_deviation): **RISK ACCEPTED**."
    )


def _downtime(history: DowntimeHistory) -> str:
    if not history.runs:
        return "**Expected downtime:** no earlier run of this topic."
    window = history.window.describe() if history.window else "no group was out"
    return (
        f"**Expected downtime** (from {history.runs} earlier successful run{'s' * (history.runs > 1)} of this "
        f"topic, the last `{history.last_run}`): the pause window, first group out to last group back, "
        f"{window}; per group in the table."
    )


def approval_prompt(
    plan: Plan,
    *,
    broker: BrokerCheck | None = None,
    history: DowntimeHistory | None = None,
    deadline: str = "",
    cap: int = PROMPT_ROWS,
) -> str:
    """Return the approval prompt's body: Markdown, bounded (at most ``cap`` group rows, then counts).

    :param broker: the broker doctor's last verdict (None: never checked).
    :param history: the downtime of this topic's earlier runs (None: none).
    :param deadline: when the request expires (shown as is).
    """
    history = history or DowntimeHistory()
    live = plan.of_class(GroupClass.ACTIVE)
    lines = [
        f"Topic `{plan.topic}`: {headline(plan, markdown=True)}. Planned {plan.planned_at or 'now'} by run `{plan.owner}`.",
        "",
        f"{len(plan.groups)} group{' reads' if len(plan.groups) == 1 else 's read'} the topic; "
        f"{len(plan.where('seed'))} protected (seeded), {len(live)} with live members (out of their group "
        f"from before the create until seeded), {len(plan.groups) - len(plan.where('seed'))} left alone.",
        "",
        *_groups_table(plan, history, cap),
    ]
    if plan.producers:
        services = ", ".join(f"`{s}` ({d.describe()})" for s, d in plan.producers.items())
        lines += ["", f"**Producers** stopped for a drain: {services}."]
    lines += ["", _broker(broker), "", _downtime(history), ""]
    lines.append(
        "**Approve**: the run checks the cluster again before anyone is paused and fails, changing nothing, if "
        "it no longer matches this plan (partition count, a new group at risk, a group handled differently). "
        f"**Reject**, or no answer{' by ' + deadline if deadline else ''}: nothing is changed and the topic's "
        "lease is released."
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the cluster since then


@dataclass(frozen=True)
class PlanChanges:
    """What differs between the approved plan and the cluster now (empty: nothing that matters).

    :param partitions: ``(at the plan, now)`` when the partition count changed.
    :param new_groups: groups at risk now that the plan did not have: ``{group: how it is now}``.
    :param changed: groups of the plan now handled differently: ``{group: what changed}``.
    :param refused: why the plan made again refused the topic as it stands (a share group appeared, ...).
    """

    partitions: tuple[int, int] | None = None
    new_groups: dict[str, str] = field(default_factory=dict)
    changed: dict[str, str] = field(default_factory=dict)
    refused: str = ""

    def __bool__(self) -> bool:
        return bool(self.partitions or self.new_groups or self.changed or self.refused)

    def lines(self) -> list[str]:
        """One line per change."""
        out = []
        if self.partitions:
            was, now = self.partitions
            out.append(f"partition count: {was} at the plan, {now} now")
        out += [f"new group at risk: {g} ({how})" for g, how in self.new_groups.items()]
        out += [f"group {g}: {what}" for g, what in self.changed.items()]
        if self.refused:
            out.append(f"the plan made again refuses the topic: {self.refused}")
        return out

    def refuse(self, topic: str) -> None:
        """Raise :class:`PlanChangedError` naming every change (a no-op when there is none)."""
        if not self:
            return
        raise PlanChangedError(
            f"the cluster changed since the plan of {topic!r} was made, so the approved plan no longer says what "
            f"this run would do: {'; '.join(self.lines())}. Nobody was paused and nothing was changed; the "
            "lease is released. Run again: plan and approve the change as the cluster stands now."
        )


def _how(entry: GroupPlan) -> str:
    return f"{entry.cls}, {entry.member_count} member{'s' * (entry.member_count != 1)}"


def _group_change(was: GroupPlan, now: GroupPlan) -> str:
    """What changed in one group that the run would handle differently ("" when nothing)."""
    if was.cls != now.cls:
        return f"was {_how(was)} at the plan, is {_how(now)} now"
    if now.driver_problem and not was.driver_problem:
        return f"can no longer be driven by {now.driver.describe()}: {now.driver_problem}"
    if was.key_order != now.key_order:
        return f"key order was {was.key_order}, would be {now.key_order} now ({now.key_order_reason})"
    return ""


def plan_changes(approved: Plan, now: Plan, refused: str = "") -> PlanChanges:
    """Compare the approved plan with the plan made again now (a dry run of the same request, discovery
    only): what would make the run do something its approver did not read.

    * the topic's partition count differs from the plan's original count;
    * a group at risk now (it would be paused and seeded, or refused) that the plan did not have;
    * a group the plan seeds that no longer reads the topic (the run would create offsets for it);
    * a group whose class changed (live members came or went), that cannot be driven any more (a member
      without the client piece joined a control-driven group), or whose key-order mark changed.

    Members joining or leaving a group that stays live, and new Spark source groups, change nothing.

    :param refused: why making the plan again failed (it refuses the topic as it stands), if it did.
    """
    partitions = (
        (approved.original_partitions, now.original_partitions)
        if now.original_partitions != approved.original_partitions
        else None
    )
    new_groups = {
        g: _how(entry)
        for g, entry in now.groups.items()
        if entry.cls in AT_RISK
        and (g not in approved.groups or approved.groups[g].cls not in (*AT_RISK, GroupClass.EXCLUDED))
    }
    changed: dict[str, str] = {}
    for g in approved.where("seed"):
        entry = now.groups.get(g)
        if entry is None or entry.cls == GroupClass.ABSENT:
            changed[g] = f"was {_how(approved.groups[g])} at the plan, no longer reads the topic now"
        elif what := _group_change(approved.groups[g], entry):
            changed[g] = what
    return PlanChanges(partitions, new_groups, changed, refused)


@dataclass(frozen=True)
class SetChanges:
    """What differs on each topic of the approved plan (a topic is a set of one): ``{topic: its changes}``,
    only the topics that changed (empty: nothing that matters)."""

    topics: dict[str, PlanChanges] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.topics)

    def lines(self) -> list[tuple[str, str]]:
        """``(topic, change)``, one per change, topic by topic."""
        return [(topic, line) for topic, changes in self.topics.items() for line in changes.lines()]

    def refuse(self, names: Sequence[str]) -> None:
        """Raise :class:`PlanChangedError` naming every change (a no-op when there is none): one topic
        changed, its own error (:meth:`PlanChanges.refuse`); several, each topic of the set ``names`` named."""
        if not self:
            return
        if len(self.topics) == 1:
            [(topic, changes)] = self.topics.items()
            changes.refuse(topic)
        raise PlanChangedError(
            f"the cluster changed since the plan of {list(names)} was made, so the approved plan no "
            "longer says what this run would do: "
            + "; ".join(f"{t}: {', '.join(c.lines())}" for t, c in self.topics.items())
            + ". Nobody was paused and nothing was changed on any topic; every topic's lease is released. "
            "Run again: plan and approve the change as the cluster stands now."
        )


def set_changes(approved: Plan, now: Plan, refused: str = "") -> SetChanges:
    """Compare each topic of the approved plan with its part of the plan made again ``now``
    (:func:`plan_changes`; ``refused``: why making it again failed, if it did)."""
    found = {view.topic: plan_changes(view, now.for_topic(view.topic), refused) for view in approved.views()}
    return SetChanges({topic: changes for topic, changes in found.items() if changes})
