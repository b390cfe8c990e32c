"""The in-window steps in one task, for the shortest consumer downtime."""

from __future__ import annotations

import time
from typing import Any

from airflow_provider_kstate.client.protocol import PRESERVE
from airflow_provider_kstate.increase.key_order import check_key_order
from airflow_provider_kstate.increase.plan import GroupClass, PlanMode
from airflow_provider_kstate.increase.report import write_report
from airflow_provider_kstate.increase.steps import SafeIncreaseSteps, SeedResult
from airflow_provider_kstate.operators.base import KStateStepOperator
from airflow_provider_kstate.utils.failpoints import failpoint


class KStatePauseWindowOperator(KStateStepOperator):
    """Pause, wait for EMPTY, increase, seed, resume and scale back-to-back in one task.

    The same idempotent steps as the per-step operators, without the scheduler's latency between them.
    Live consumers are out of their groups only for the leave, the create, the seed of *their* groups and
    the rejoin: groups with live members (``active``) are seeded and resumed first, while producers stay on
    the old layout; groups without members (``empty``: nobody is down) are seeded right after, and each
    group is resumed only once it has an offset on every partition. Producers switch to the new layout only
    after the last group is seeded (with ``key_order="preserve"`` through the key-order barrier: see
    :mod:`airflow_provider_kstate.increase.key_order`). If it fails midway, the failure guard decides from
    the cluster exactly as in the per-step layout.

    Returns a summary (per group: partitions seeded and kept) with the URI of the seed report, the
    per-group, per-partition evidence that :class:`KStateVerifyOperator` reads.

    :param empty_timeout: seconds to wait for the paused groups to become EMPTY.
    :param key_order: ``preserve`` (producers switch through the key-order barrier) or ``relax``
        (templated).
    """

    template_fields: tuple[str, ...] = ("plan", "key_order")

    def __init__(self, *, empty_timeout: float = 600.0, key_order: str = PRESERVE, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.empty_timeout = empty_timeout
        self.key_order = key_order

    def execute(self, context: Any) -> dict[str, Any]:
        steps = self.steps(context)
        steps.key_order = check_key_order(self.key_order)
        uri = self.report_uri(context, "seed")
        timings: dict[str, float] = {}
        try:
            with write_report(uri, self.report_storage, evidence=True) as report:
                live, offline = self._split(steps)
                started = time.monotonic()
                steps.pause()
                failpoint("after_pause")
                steps.wait_empty(self.empty_timeout)
                failpoint("after_empty")
                steps.increase(self.request_timeout)
                failpoint("after_create")
                first = steps.seed(live, report)
                failpoint("mid_seed")
                steps.resume(live)
                timings["live_window_s"] = round(time.monotonic() - started, 3)
                failpoint(
                    "after_live_resume"
                )  # live groups run, offline ones unseeded, producers on the old layout
                later = steps.seed(offline, report)
                failpoint("after_seed")
                steps.resume(offline)
                failpoint("after_resume")
                timings["whole_window_s"] = round(time.monotonic() - started, 3)
                switch = steps.scale(live=live)
                failpoint("after_scale")
                timings["switch_s"] = round(time.monotonic() - started - timings["whole_window_s"], 3)
                rows = report.rows
        finally:
            self.control.close()
        self.log.info(
            "WINDOW %s: live groups out for %.3f s; every group seeded and resumed after %.3f s; report %s (%s rows)",
            self.topic,
            timings["live_window_s"],
            timings["whole_window_s"],
            uri,
            f"{rows:,}",
        )
        summary = {**_summary(steps, first, later, uri, rows, timings), "switch": switch}
        if steps.plan.mode == PlanMode.REPAIR and not summary["seeded"]:
            self.log.info(
                "REPAIR %s: nothing to do: every protected group holds an offset on every partition",
                self.topic,
            )
        return summary

    @staticmethod
    def _split(steps: SafeIncreaseSteps) -> tuple[list[str], list[str]]:
        seeded = steps.plan.where("seed")
        live = [g for g in seeded if steps.plan.groups[g].cls == GroupClass.ACTIVE]
        return live, [g for g in seeded if g not in live]


def _summary(
    steps: SafeIncreaseSteps,
    first: SeedResult,
    later: SeedResult,
    uri: str,
    rows: int,
    timings: dict[str, float],
) -> dict[str, Any]:
    merged = SeedResult(max(first.partitions, later.partitions), {**first.groups, **later.groups})
    return {
        "topic": steps.topic,
        "mode": str(steps.plan.mode),  # XCom keeps plain strings
        "created": steps.created_from is not None,
        **merged.summary(),
        "report_uri": uri,
        "report_rows": rows,
        "timings": timings,
    }
