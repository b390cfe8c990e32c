"""`make demo`: the main job, end to end, on Apache Kafka (the broker helper's default; KSTATE_BROKER=noida for the emulator).

1. KAFKA-12261: a live producer and latest-reset consumers; the naive partition increase loses messages.
2. The same traffic through the provider's safe order (the ``kstate_partition_increase`` DAG): none lost.
3. State: the example stateful pipeline builds a store; it is corrupted; ``kstate_state_maintenance``
   detects the damage and repairs it.

The terminal shows the steps with their progress, then the report, and nothing else: task logs, Spark's
and librdkafka's output go to ``artifacts/demo-tasks.log``. The report (with a chart,
``artifacts/demo-traffic.png``) is written to ``artifacts/demo-report.md``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from kstate_support import ROOT, airflow_env, quiet
from kstate_support import broker as broker_helper
from kstate_support.topics import create_topic, unique_name

quiet.filter_known_warnings()  # before anything imports Airflow

#: Where the demo keeps its state and writes its artifacts (the Tansu test points both elsewhere).
STATE = Path(os.environ.get("KSTATE_DEMO_STATE") or ROOT / ".kstate" / "demo")
ARTIFACTS = Path(os.environ.get("KSTATE_DEMO_ARTIFACTS") or ROOT / "artifacts")
REPORT = ARTIFACTS / "demo-report.md"
CHART = ARTIFACTS / "demo-traffic.png"
TASK_LOG = ARTIFACTS / "demo-tasks.log"
_STARTED = time.monotonic()
_TERMINAL: list[IO[str]] = []


def _shown(path: Path) -> Path:
    """``path`` relative to the checkout when it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def say(text: str) -> None:
    """Print one progress line on the terminal (never into the task log), with the time since the start.

    :param text: the line.
    """
    out = _TERMINAL[-1] if _TERMINAL else sys.stdout
    out.write(f"[demo {time.monotonic() - _STARTED:5.0f}s] {text}\n")
    out.flush()


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """Send everything written to file descriptors 1 and 2 (Python, Airflow's task logs, the JVM, librdkafka)
    to ``log`` for the duration of the block; :func:`say` keeps writing to the terminal.

    :param log: the log file, truncated.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(1), "w", buffering=1)
    _TERMINAL.append(terminal)
    with open(log, "w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            _TERMINAL.pop()
            terminal.close()


def _create_topic(config: dict[str, Any], name: str, partitions: int) -> str:
    """Create a topic named after ``name``, unique on the cluster (the demo may run against a shared one)."""
    return create_topic(config, unique_name(name), partitions)


def _traffic(producer: Any, fleet: Any, since: int, lost: dict[int, int]) -> dict[str, Any]:
    """Per partition: messages produced (from ``since``) and consumed; the fleet's consumer timeline."""
    produced: dict[int, int] = {}
    consumed: dict[int, int] = {}
    for seq, part in producer.placed.items():
        if seq >= since:
            produced[part] = produced.get(part, 0) + 1
            if seq not in lost:
                consumed[part] = consumed.get(part, 0) + 1
    return {
        "produced": produced,
        "consumed": consumed,
        "events": list(fleet.timeline.events),
        "members": list(fleet.members),
    }


def naive_increase(config: dict[str, Any]) -> dict[str, Any]:
    """Grow 1 -> 2 partitions under live traffic with plain latest-reset consumers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions
    from demo_plot import discovered
    from kstate_support.traffic import live_traffic, loss, warm_up

    topic = _create_topic(config, "demo-naive", 1)
    with live_traffic(config, topic, "demo-naive-consumers", n=2) as (producer, fleet):
        since = warm_up(producer, fleet)
        say("    live traffic flowing; adding a partition the plain way (CreatePartitions only)")
        admin = AdminClient(config)  # kept alive until its futures resolve
        started = time.monotonic()
        try:
            for future in admin.create_partitions([NewPartitions(topic, 2)]).values():
                future.result(timeout=30)
        except KafkaException as exc:  # e.g. Tansu: no CreatePartitions at all
            return {"topic": topic, "refused": f"the broker refused CreatePartitions: {exc.args[0].str()}"}
        finally:
            del admin
        time.sleep(8)
        traffic_end = time.monotonic()
        producer.stop()
        say("    waiting for the consumers to drain")
        lost = loss(producer, fleet, since, drain_timeout=20)
    seen = discovered(fleet.timeline.events, 1, started)
    return {
        "topic": topic,
        "partitions": "1 -> 2",
        "produced": len([s for s in producer.produced if s >= since]),
        "lost": len(lost),
        "lost_on": sorted(set(lost.values())),
        "traffic": _traffic(producer, fleet, since, lost),
        "marks": [(started, started, "partition added")],
        "traffic_end": traffic_end,
        "unseen": (started, seen or traffic_end),
    }


def _increase(bag: Any, topic: str, group: str, target: int) -> tuple[dict[str, Any], Any]:
    started = time.monotonic()
    dr = bag.get_dag("kstate_partition_increase").test(
        run_conf={"topic": topic, "partitions": target, "consumer_groups": [group], "dry_run": False}
    )
    ended = time.monotonic()
    failed = sorted(ti.task_id.split(".")[-1] for ti in dr.get_task_instances() if str(ti.state) == "failed")
    run = {"target": target, "state": str(dr.state), "seconds": round(ended - started, 1), "failed": failed}
    say(
        f"    -> {target} partitions: run {run['state']} in {run['seconds']} s{f' (failed: {failed})' if failed else ''}"
    )
    if os.environ.get("KSTATE_DEMO_TIMINGS"):
        for ti in sorted(dr.get_task_instances(), key=lambda t: t.start_date or dr.start_date):
            if ti.start_date and ti.end_date:
                seconds = (ti.end_date - ti.start_date).total_seconds()
                say(f"       {ti.task_id.split('.')[-1]:24s} {seconds:6.1f}s")
    return run, (started, ended, f"-> {target}")


def safe_increase(config: dict[str, Any], bag: Any) -> dict[str, Any]:
    """Grow 1 -> 2 -> 4 -> 8 through the DAG under the same traffic, with the client piece."""
    from kstate_support.traffic import live_traffic, loss, warm_up

    topic = _create_topic(config, "demo-safe", 1)
    group = "demo-safe-consumers"
    with live_traffic(config, topic, group, n=2, controlled=True) as (producer, fleet):
        since = warm_up(producer, fleet)
        say("    live traffic flowing; running kstate_partition_increase three times")
        runs, marks = [], []
        for target in (2, 4, 8):
            run, mark = _increase(bag, topic, group, target)
            runs.append(run)
            marks.append(mark)
            if run["state"] != "success":
                break
        time.sleep(3)
        traffic_end = time.monotonic()
        producer.stop()
        say("    waiting for the consumers to drain")
        lost = loss(producer, fleet, since, drain_timeout=30)
    return {
        "topic": topic,
        "runs": runs,
        "produced": len([s for s in producer.produced if s >= since]),
        "lost": len(lost),
        "partitions_written": sorted(set(producer.placed.values())),
        "pauses": fleet.transitions.count("paused"),
        "traffic": _traffic(producer, fleet, since, lost),
        "marks": marks,
        "traffic_end": traffic_end,
    }


def state_story(config: dict[str, Any], bag: Any, trusted: bool = True) -> dict[str, Any]:
    """Build a store with the example pipeline, corrupt it, let the maintenance DAG detect and repair it
    (on a broker that breaks the state side's promises: check that nothing is published)."""
    try:
        import demo_state
    except ImportError:
        return {"skipped": "the state maintenance story is not available in this build"}
    return demo_state.run(config, bag, STATE, say=say, trusted=trusted)


def doctor() -> dict[str, Any]:
    """Ask the broker doctor (refreshed) which promises the broker keeps; say what it breaks.

    :returns: ``broken`` (promise names), ``lines`` (the verdict) and whether the increase and the state
        side can trust the broker.
    """
    from airflow_provider_kstate.doctor.promises import INCREASE_NEEDS, STATE_NEEDS
    from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

    verdict = KStateDoctorHook("kafka_default").verdict(refresh=True)
    broken = verdict.broken()
    for line in verdict.lines()[1:]:
        if "BROKEN" in line:
            say(f"   {line.strip()}")
    say(f"    broker doctor: {len(broken)} of {len(verdict.results)} promises broken {broken or ''}")
    return {
        "broken": broken,
        "lines": verdict.lines(),
        "increase_trusted": not set(broken) & set(INCREASE_NEEDS),
        "state_trusted": not set(broken) & set(STATE_NEEDS),
    }


def guarded(name: str, story: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run one story; an error becomes a line of the report (its traceback goes to the task log), never
    the end of the demo."""
    try:
        return dict(story(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - reported, and the next story runs
        import traceback

        traceback.print_exc()  # into artifacts/demo-tasks.log
        say(f"    {name} stopped: {type(exc).__name__}: {str(exc)[:300]}")
        return {"error": f"{type(exc).__name__}: {exc}"}


def _chart(naive: dict[str, Any], safe: dict[str, Any]) -> str:
    """Draw the traffic chart; return its Markdown line (or why there is none)."""
    try:
        import demo_plot
    except ImportError as exc:  # matplotlib is in the demo extra
        return f"(no chart: {exc})"
    demo_plot.traffic_chart(naive, safe, CHART)
    return f"![Produced vs consumed per partition, and consumer downtime]({CHART.name})"


def _naive_lines(naive: dict[str, Any]) -> list[str]:
    if "lost" not in naive:
        return [f"- {naive.get('refused') or naive.get('error')}"]
    return [
        f"- topic `{naive['topic']}` grown {naive['partitions']} under a 200 msg/s producer, 2 latest-reset consumers",
        f"- produced {naive['produced']}, **lost {naive['lost']}** (on partitions {naive['lost_on']})",
    ]


def _safe_lines(safe: dict[str, Any]) -> list[str]:
    if "runs" not in safe:
        return [f"- {safe.get('error')}"]
    runs = ", ".join(
        f"-> {r['target']}: {r['state']} in {r['seconds']} s"
        + (f" (failed: {r['failed']})" if r.get("failed") else "")
        for r in safe["runs"]
    )
    grown = all(r["state"] == "success" for r in safe["runs"]) and len(safe["runs"]) == 3
    what = "grown 1 -> 2 -> 4 -> 8" if grown else "NOT grown (the DAG refused; see the doctor above)"
    return [
        f"- topic `{safe['topic']}` {what} under the same traffic; runs: {runs}",
        f"- produced {safe['produced']}, **lost {safe['lost']}**; producers wrote to partitions {safe['partitions_written']};"
        f" consumers paused {safe['pauses']} times",
    ]


def _report(
    naive: dict[str, Any], safe: dict[str, Any], state: dict[str, Any], seconds: float, checks: dict[str, Any]
) -> str:
    lines = ["# airflow-provider-kstate demo", "", "## 0. The broker doctor", ""]
    lines += [f"    {line}" for line in checks.get("lines", [checks.get("error", "not run")])]
    lines += ["", "## 1. Naive partition increase (KAFKA-12261)", *_naive_lines(naive), ""]
    lines += ["## 2. The provider's safe order (`kstate_partition_increase`)", *_safe_lines(safe), ""]
    if "lost" in naive and "runs" in safe:
        lines += [_chart(naive, safe), ""]
    lines += ["## 3. State store integrity (`kstate_state_maintenance`)"]
    lines += [f"- {key}: {value}" for key, value in state.items()]
    lines += [
        "",
        f"Total demo time: {seconds:.0f} s. Task logs (Airflow, Spark, librdkafka): `{_shown(TASK_LOG)}`.",
        "",
    ]
    return "\n".join(lines)


def _run_stories(
    config: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    airflow_env.prepare(STATE / "airflow", config)
    from airflow.dag_processing.dagbag import DagBag

    quiet.filter_known_warnings()  # again: Airflow's settings put their filters in front
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    if bag.import_errors:
        raise SystemExit(f"DAG import errors: {bag.import_errors}")
    say("0/3 broker doctor: does this broker keep the promises the provider relies on? ...")
    checks = guarded("the doctor", doctor)
    say("1/3 naive partition increase under live traffic ...")
    naive = guarded("story 1", naive_increase, config)
    if "lost" in naive:
        say(f"    lost {naive['lost']} of {naive['produced']} messages")
    else:
        say(f"    {naive.get('refused') or naive.get('error')}")
    say("2/3 safe partition increase 1 -> 2 -> 4 -> 8 through the DAG ...")
    safe = guarded("story 2", safe_increase, config, bag)
    if "lost" in safe:
        say(
            f"    lost {safe['lost']} of {safe['produced']} messages; consumers paused {safe['pauses']} times"
        )
    say("3/3 state store: build, corrupt, detect, repair ...")
    state = guarded("story 3", state_story, config, bag, bool(checks.get("state_trusted", True)))
    del bag  # its operators' hooks may hold Kafka clients: close them while the broker still answers
    gc.collect()
    return checks, naive, safe, state


def outcome(
    checks: dict[str, Any], naive: dict[str, Any], safe: dict[str, Any], state: dict[str, Any]
) -> bool:
    """Whether every story did what it must: on a trusted broker, the naive increase loses and the safe one
    does not; on a broker the doctor does not trust for the increase, no run succeeds and no consumer is
    paused for it; the state story says itself (``failed``)."""
    if "error" in checks or "error" in safe or state.get("failed") or "error" in state:
        return False
    runs = safe["runs"]
    if not checks.get("increase_trusted", True):
        return safe["lost"] == 0 and safe["pauses"] == 0 and all(r["state"] != "success" for r in runs)
    return naive.get("lost", 0) > 0 and safe["lost"] == 0 and all(r["state"] == "success" for r in runs)


def main() -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    say(f"task logs go to {_shown(TASK_LOG)}")
    with output_to(TASK_LOG):
        say(
            f"starting the broker (KSTATE_BOOTSTRAP_SERVERS, else {broker_helper.describe()}) and a fresh Airflow home ..."
        )
        with broker_helper.cluster(STATE / "broker") as config:
            say(f"    broker at {config['bootstrap.servers']}")
            checks, naive, safe, state = _run_stories(config)
            gc.collect()
        say("broker stopped; writing the report")
        report = _report(naive, safe, state, time.monotonic() - _STARTED, checks)
        REPORT.write_text(report)
    print("\n" + report)
    print(f"(report written to {_shown(REPORT)})")
    return 0 if outcome(checks, naive, safe, state) else 1


if __name__ == "__main__":
    raise SystemExit(main())
