"""The steps of the safe partition increase, each idempotent, shared by the step operators and the window operator.

Each step reads the cluster, changes what it must, logs a runbook line per group or partition and returns a
JSON-safe result for XCom.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.exceptions import GroupNotEmptyError, KStateError, SeedError, UnsafeResumeError
from airflow_provider_kstate.utils.checks import groups_empty
from airflow_provider_kstate.utils.plan import groups_where
from airflow_provider_kstate.utils.safety import partial_increase_runbook, unseeded

if TYPE_CHECKING:
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.hooks.control import KStateControlHook

#: Seconds between two looks at the cluster while consumers are out of their groups.
FAST_POLL = 0.005


def not_empty_error(plan: dict[str, Any], detail: dict[str, Any], waited: float) -> GroupNotEmptyError:
    """Return the error for groups that did not leave within ``waited`` seconds, naming their members."""
    return GroupNotEmptyError(
        f"timed out after {waited}s waiting for consumer groups to leave topic {plan['topic']!r}; "
        f"members still present: {detail}. Stop those consumers (or make them honour the pause signal), "
        "then clear this task. Partitions were NOT changed."
    )


@dataclass
class SafeIncreaseSteps:
    """The steps for one plan, with the hooks and the logger of the task that runs them."""

    plan: dict[str, Any]
    admin: KStateAdminHook
    control: KStateControlHook
    log: Any
    owner: str

    @property
    def topic(self) -> str:
        return str(self.plan["topic"])

    def pause(self) -> dict[str, Any]:
        """Send pause to every group at risk and pin producers to the current partition count."""
        groups = groups_where(self.plan, "pause")
        epoch = self.control.pause(groups, self.topic, issuer=self.owner)
        for group in groups:
            self.log.info("PAUSE group %s: pause command sent (epoch %s)", group, epoch)
        original = int(self.plan["original_partitions"])
        layout = self.control.set_layout(self.topic, original, issuer=self.owner)
        self.log.info(
            "PAUSE producers of %s pinned to the current %s partitions (epoch %s)",
            self.topic,
            original,
            layout,
        )
        return {"epoch": epoch, "groups": groups}

    def wait_empty(self, timeout: float, max_interval: float = 1.0) -> dict[str, Any]:
        """Block until every seeded group is EMPTY: polls every 5 ms for the first 2 s (paused consumers
        leave within milliseconds of each other, and every millisecond of this wait is consumer downtime;
        one DescribeGroups request costs well under a millisecond), then backs off to ``max_interval``."""
        groups = groups_where(self.plan, "seed")
        started = time.monotonic()
        deadline = started + timeout
        interval = FAST_POLL
        while True:
            result = groups_empty(self.admin, self.topic, groups)
            if result.ok:
                self.log.info("WAIT groups %s are EMPTY", groups)
                return {"groups": groups}
            if time.monotonic() > deadline:
                raise not_empty_error(self.plan, result.detail, timeout)
            time.sleep(interval)
            if time.monotonic() - started > 2.0:
                interval = min(max_interval, interval * 2)

    def increase(self, timeout: float) -> dict[str, Any]:
        """Grow the topic to the target (validate first); a no-op when it is already there."""
        original = int(self.plan["original_partitions"])
        target = int(self.plan["target_partitions"])
        current = self.admin.partition_count(self.topic)
        if current == target:
            self.log.info("INCREASE topic %s already has %s partitions: nothing to do", self.topic, target)
            return {"created": False, "partitions": target}
        if current != original:
            raise KStateError(
                f"topic {self.topic!r} has {current} partitions; the plan expected {original} (or {target}). "
                "Someone else changed it: nothing was done here. Plan again."
            )
        self.admin.increase_partitions(self.topic, target, validate_only=True)
        self.log.info("INCREASE topic %s: the broker validated %s -> %s", self.topic, original, target)
        self.admin.increase_partitions(self.topic, target)
        deadline = time.monotonic() + timeout
        while self.admin.partition_count(self.topic) != target:
            if time.monotonic() > deadline:
                raise KStateError(f"topic {self.topic!r}: metadata did not show {target} partitions in time")
            time.sleep(FAST_POLL)
        for partition in self.plan["new_partitions"]:
            self.log.info("INCREASE topic %s: created partition %s", self.topic, partition)
        return {"created": True, "partitions": target}

    def seed(self) -> dict[str, Any]:
        """Commit the log start of each new partition for every group without an offset there."""
        groups = groups_where(self.plan, "seed")
        blockers = groups_empty(self.admin, self.topic, groups)
        if not blockers.ok:
            raise GroupNotEmptyError(
                f"cannot seed {self.topic!r}: these groups are not EMPTY: {blockers.detail}. Nothing was written; "
                "consumers stay paused. Stop those members, then clear this task."
            )
        new = [int(p) for p in self.plan["new_partitions"]]
        marks = self.admin.watermarks(self.topic, new)
        return {"topic": self.topic, "groups": {g: self._seed_group(g, new, marks) for g in groups}}

    def _seed_group(self, group: str, new: list[int], marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
        before = self.admin.committed_offsets(group, self.topic)
        wanted = {p: marks[p][0] for p in new if p not in before}
        self.admin.seed_offsets(group, self.topic, wanted)
        after = self.admin.committed_offsets(group, self.topic)
        rows: dict[str, Any] = {}
        for p in new:
            if p not in after:
                raise SeedError(f"group {group!r}: partition {p} has no committed offset after seeding")
            start, end = marks[p]
            rows[str(p)] = {"committed": after[p], "log_start": start, "log_end": end, "seeded": p in wanted}
            action = "seeded to log start" if p in wanted else "kept existing offset"
            self.log.info(
                "SEED group %s partition %s: %s %s (log start %s, end %s)",
                group,
                p,
                action,
                after[p],
                start,
                end,
            )
        return rows

    def scale(self) -> dict[str, Any]:
        """Publish the target layout; return the new partitions' end offsets as a baseline."""
        target = int(self.plan["target_partitions"])
        epoch = self.control.set_layout(self.topic, target, issuer=self.owner)
        self.log.info(
            "SCALE producers of %s: layout of %s partitions is live (epoch %s)", self.topic, target, epoch
        )
        marks = self.admin.watermarks(self.topic, [int(p) for p in self.plan["new_partitions"]])
        return {
            "epoch": epoch,
            "partitions": target,
            "baseline": {str(p): end for p, (_s, end) in marks.items()},
        }

    def resume(self) -> dict[str, Any]:
        """Send resume, but only once every seeded group has an offset on every new partition."""
        missing = unseeded(self.admin, self.plan)
        if missing:
            raise UnsafeResumeError(partial_increase_runbook(self.plan, missing))
        groups = groups_where(self.plan, "pause")
        epoch = self.control.resume(groups, self.topic, issuer=self.owner)
        for group in groups:
            self.log.info(
                "RESUME group %s: every new partition has a committed offset; resume sent (epoch %s)",
                group,
                epoch,
            )
        return {"epoch": epoch, "groups": groups}
