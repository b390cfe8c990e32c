"""The pause window: every step from the pause to the switch back-to-back in one task, for the shortest
consumer downtime (the operator is :class:`~airflow_provider_kstate.operators.window.KStatePauseWindowOperator`).

The groups leave once (command-driven ones stopped first), every topic is created, the live groups are
seeded and resumed first while producers stay on the old layout, then the offline groups; the producers
switch only after the last group is seeded (through the key-order barrier under ``preserve``); groups that
stay in their groups are neither paused nor seeded: the switch waits for their positions
(:meth:`IncreaseRun.wait_positions`). Each step is tried again inside the task after a retryable error
(:meth:`IncreaseRun.again`). A failure before the create resumes every paused group at once; after it, the
failure guard decides from the cluster.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.failpoints import failpoint
from airflow_provider_kstate.increase import served
from airflow_provider_kstate.increase.plan import GroupClass, Plan, PlanMode
from airflow_provider_kstate.increase.steps import SeedResult

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.report import ReportWriter
    from airflow_provider_kstate.increase.run import IncreaseRun


#: Seconds the window waits for drained groups to consume the old partitions before it leaves the drain to
#: its deferred sensor and start step, by default (the operator passes its ``drain_timeout``: the producers
#: are stopped meanwhile, and started here they are not held across Airflow's scheduling of those two tasks).
DRAIN_WITHIN = 30.0


def run_window(
    run: IncreaseRun,
    reports: dict[str, ReportWriter],
    empty_timeout: float,
    request_timeout: float,
    drain_within: float = DRAIN_WITHIN,
) -> dict[str, Any]:
    """Run the window over every topic of ``run``'s plan; return its XCom (each topic's summary under
    ``topics``, the run's totals, timings, retries and drivers).

    :param reports: each topic's seed report.
    :param empty_timeout: seconds the paused groups have to become EMPTY.
    :param request_timeout: seconds one request to the cluster may take (the create's metadata wait).
    :param drain_within: seconds to wait in this task for drained groups before starting the producers.
    """
    live, offline = split(run.plan)
    timings: dict[str, float] = {}
    started = time.monotonic()
    before_create(run, empty_timeout, request_timeout)
    first = run.again("seed", lambda: run.seed(live, reports))
    failpoint("mid_seed")
    services = served.watch(run, live)  # beside the rest: held again and processing, from the broker
    resumed = run.again("resume", lambda: run.resume(live))
    # the groups resumed by the control record are back about when it is sent (their downtime); the
    # command-driven ones when their start and readiness commands are done (command_*_s). With no live
    # group nothing was resumed: the window is the time so far, as before the drivers; 0 when every live
    # group stays in its group (nobody was out).
    back = run.resumed_at if run.resumed_at is not None else time.monotonic()
    out = back - (run.paused_at or started) if live or not run.plan.staying() else 0.0
    timings["live_window_s"] = round(out, 3)
    failpoint("after_live_resume")  # live groups run, offline ones unseeded, producers on the old layout
    later = run.again("seed", lambda: run.seed(offline, reports))
    failpoint("after_seed")
    run.again("resume", lambda: run.resume(offline))
    failpoint("after_resume")
    timings["whole_window_s"] = round(time.monotonic() - started, 3)
    switch = run.again("scale", lambda: run.scale(live))["topics"]
    failpoint("after_scale")
    timings["switch_s"] = round(time.monotonic() - started - timings["whole_window_s"], 3)
    producers_started = run.start_when_drained(switch, drain_within) if run.drains else None
    if run.stop_s is not None:
        timings["command_stop_s"] = run.stop_s
    if run.start_s is not None:
        timings["command_start_s"] = run.start_s
    if run.stayed:
        timings["positions_s"] = run.stayed["positioned_after_s"]
    ways_back = served.report(run, services)
    if ways_back:
        timings["services_out_s"] = max(s["out_s"] for s in ways_back.values())
    topics = {
        s.topic: {
            "mode": str(s.plan.mode),  # XCom keeps plain strings
            "created": s.created_from is not None,
            **merged(first[s.topic], later[s.topic]).summary(),
            **switch[s.topic],
        }
        for s in run.topics
    }
    return {
        "topics": topics,
        "stayed": run.stayed,
        "served": ways_back,
        "mode": str(run.plan.mode),
        "created": any(t["created"] for t in topics.values()),
        "seeded": sum(t["seeded"] for t in topics.values()),
        "kept": sum(t["kept"] for t in topics.values()),
        "timings": timings,
        "retried": [{"step": s, "error": e, "after_s": t} for s, e, t in run.retried],
        "producers_started": producers_started,
        "drivers": {
            "stopped_groups": run.stopped_groups,
            "started_groups": resumed.get("started_groups", []),
            "producers_stopped": run.producers_stopped,
            "start_failures": [r.describe() for r in run.start_failures],
        },
    }


def before_create(run: IncreaseRun, empty_timeout: float, request_timeout: float) -> None:
    """Pause, wait EMPTY and create; a failure before the partitions exist resumes every paused group at
    once (the run changed nothing: :func:`undo`), then is raised."""
    try:
        run.again("pause", run.pause)
        failpoint("after_pause")
        run.again("wait_empty", lambda: run.wait_empty(empty_timeout))
        failpoint("after_empty")
        run.again("increase", lambda: run.increase(request_timeout))
        failpoint("after_create")
    except Exception:
        undo(run)
        raise


def undo(run: IncreaseRun) -> None:
    """Resume every paused group when no topic was grown; an error here is logged (the step's own error is
    the one to report, and the failure guard undoes again from the cluster)."""
    topics = ", ".join(run.plan.topic_names)
    if run.create_unknown:
        run.log.warning(
            "UNDO %s: not now: a create got no answer and may still be applied; the groups stay paused "
            "(the retry continues, or the failure guard decides from the cluster)",
            topics,
        )
        return
    try:
        # each topic's count: never fewer than the run saw (a lagging broker may answer the old count)
        if run.plan.mode == PlanMode.INCREASE and run.created_nothing():
            run.undo_before_create()
    except Exception as exc:  # noqa: BLE001 - the original error is raised; the guard undoes again
        run.log.error("UNDO %s failed (%s): the failure guard resumes the groups", topics, exc)


def split(plan: Plan) -> tuple[list[str], list[str]]:
    """The groups the run seeds: those with live members (seeded and resumed first), and the others (the
    groups that stay in their groups are neither: the switch waits for their positions)."""
    seeded = plan.seeded_by_run()
    live = [g for g in seeded if plan.groups[g].cls == GroupClass.ACTIVE]
    return live, [g for g in seeded if g not in live]


def merged(first: SeedResult, later: SeedResult) -> SeedResult:
    """The two seed passes of a window (live groups, then the others) as one."""
    return SeedResult(max(first.partitions, later.partitions), {**first.groups, **later.groups})
