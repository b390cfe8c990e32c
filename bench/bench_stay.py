"""Benchmark the three ways a topic's live consumers live through a partition increase: they **stay** in
their groups (``consumers_stay=auto``, issue 41), today's pause **window** (``consumers_stay=never``), and a
plain **restart** of the same consumers (not a timed test).

    .venv/bin/python bench/bench_stay.py                       # 8x1 and 512x24, loopback, 3 rounds
    .venv/bin/python bench/bench_stay.py --cells 4096x100 --rounds 2
    .venv/bin/python bench/bench_stay.py --rtt only            # the same behind the delaying proxy
    .venv/bin/python bench/bench_stay.py --markdown bench/results/stay.json   # the tables, as markdown

Each cell ``NxG`` is the cell of ``bench_increase_scale.py``: a topic grown from ``max(1, N // 64)`` to ``N``
partitions by the project's DAG ``kstate_partition_increase`` (``dag.test()`` in a fresh subprocess with its
own ``AIRFLOW_HOME``, groups discovered), ``G`` groups with committed offsets, of which ``G - 2`` (0 when
``G == 1``) are OFFLINE and 2 (1) are LIVE: 2 ``ControlledConsumer``s each, ``auto.offset.reset=latest``;
the first live group on the classic protocol with the ``cooperative-sticky`` assignor, the second on
KIP-848 (``group.protocol=consumer``). The topic's one producer is a **ControlledProducer** (the client
piece's producer, keyed, 200 records/s) in every mode: a plain producer writing to the new partitions is
detected by the stay mode and makes the staying groups fall back to the pause.

Per round and cell, each mode on a FRESH topic (same set-up), the order of stay and window alternating
from round to round so that the machine's load falls on both alike:

* **stay** — DAG conf ``{"topic", "partitions", "consumers_stay": "auto", "producer_drivers": ["control"]}``;
* **window** — DAG conf ``{"topic", "partitions"}`` (today's default, the pause window);
* **restart** — after each run, on the same topic at ``N`` partitions: every live consumer ``close()``s,
  new ControlledConsumers of the same groups subscribe (all groups at once).

Measured per sample:

* **gap** — each live consumer's longest time without a message (``ConsumerFleet.largest_gaps``, stamped in
  the consumer threads) from the start of the DAG subprocess (or of the restart) to 1 s after the later of
  its end and the live groups' return; ``gap_before_s`` the same over the 3 s before (the traffic's own).
  A consumer that received nothing in those 3 s held no partition (at 8 x 1 one of the two consumers of the
  1 original partition) and has no gap (None); ``gap_spans`` says where each largest gap lies and
  ``events`` lists the live groups' stops, subscribes, assignments and revocations;
* **window** — the downtime definition of ``traffic.Timeline.window``: first live consumer stops -> every
  live group's consumers hold again every partition they held before (the original ones; each consumer one
  when there are enough); None in the stay mode, where nobody stops. ``all_held_after_s``, in both modes:
  from the run's start to the moment the live groups hold all ``N``. The two differ for the KIP-848 group:
  Apache Kafka's broker gives it the created partitions only once their leaders serve them, at 4,096
  partitions tens of seconds after the create (``probe_new_partitions.py``), while no record is written
  there until the producers' switch, which waits for the same leaders (until session eleven the window
  ran to all ``N``: at 4,096 x 100 it measured that wait, 24-52 s, not the consumers' downtime);
* **producer hold** — from the ControlledProducer itself: its ``holds`` (each layout hold's length and the
  time ``produce()`` was blocked in it), and the longest time between two ``produce()`` calls returning in
  the producer thread (the producer's own gap; 5 ms nominal at 200 records/s); ``switched_after_s``: from the
  run's start to the producer's first record placed over ``N`` partitions;
* **run** — ``dag.test()`` wall time in the fresh process (with its start-up, ``first_task_start_s``) and
  the ``pause_window`` task's XCom timings (``live_window_s``, ``positions_s``) and ``stayed``;
* **lost** — records of the live consumers produced after warm-up and never received (must be 0), per run
  and per restart.

Ratios per cell: median stay gap / median restart gap, median window gap / median restart gap (and the
same for the window's downtime definition). Writes ``bench/results/stay.json`` (``stay-rtt.json`` with
``--rtt only``) and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bench_increase_scale as scale
from kstate_support import bench
from kstate_support.bench import Column, progress

ROOT = Path(__file__).resolve().parent.parent
RESULTS = bench.results_path("stay")
RTT_RESULTS = bench.results_path("stay-rtt")
DAG_ID = "kstate_partition_increase"
CELLS = ["8x1", "512x24"]
MODES = ("stay", "window")
RATE = 200.0
#: The traffic's own gaps are measured over this many seconds before each run / restart.
BEFORE_S = 3.0
#: The gap's interval ends this long after the run (or restart) and the live groups' return.
SETTLE_S = 1.0
STAY_CONF = {"consumers_stay": "auto", "producer_drivers": ["control"]}
#: Group settings of the live groups, in order (the first is the only one when G == 1).
LIVE_KINDS = [
    {"protocol": "classic", "assignor": "cooperative-sticky"},
    {"protocol": "consumer"},
]


# ---------------------------------------------------------------------------------------------------
# The child: one DAG run in a fresh process, with a conf.


def child_run(conf: dict[str, Any], out: Path) -> int:
    from airflow.dag_processing.dagbag import DagBag
    from kstate_support.increase_runs import xcom

    began = time.monotonic()
    bag = DagBag(dag_folder=str(ROOT / "dags" / "kstate_partition_increase.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.get_dag(DAG_ID)
    loaded = time.monotonic()
    dr = dag.test(run_conf=conf)
    ended = time.monotonic()
    result: dict[str, Any] = {
        "state": str(dr.state),
        "run_id": dr.run_id,
        "import_s": loaded - began,
        "dag_test_s": ended - loaded,
        "dagrun_s": (dr.end_date - dr.start_date).total_seconds() if dr.end_date and dr.start_date else None,
        "task_states": scale._task_states(dr),
        "peak_rss_mb": scale._peak_rss_mb(),
    }
    with contextlib.suppress(Exception):
        plan = xcom(dr, "plan") or {}
        result["plan_stay"] = {
            g: {"stay": e.get("stay"), "reason": e.get("stay_reason"), "pause": e.get("pause")}
            for g, e in (plan.get("groups") or {}).items()
            if "-off" not in g
        }
    with contextlib.suppress(Exception):
        window = xcom(dr, "pause_window") or {}
        result["window_timings"] = window.get("timings")
        result["stayed"] = window.get("stayed")
        result["drivers"] = window.get("drivers")
    out.write_text(json.dumps(result, default=str))
    return 0


def run_dag(
    home: Path, db: Path, config: dict[str, Any], conf: dict[str, Any], timeout: float
) -> dict[str, Any]:
    home.mkdir(parents=True)
    shutil.copy(db, home / "airflow.db")
    out = home / "result.json"
    command = [sys.executable, __file__, "--child", json.dumps(conf), str(out)]
    with (home / "child-output.log").open("w") as sink:
        try:
            proc = subprocess.run(
                command,
                env=scale._airflow_env(home, config),
                stdout=sink,
                stderr=sink,
                timeout=timeout,
                check=False,
            )
            returncode: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = f"timeout after {timeout:.0f} s"
    result: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {"state": "no result"}
    result["returncode"] = returncode
    result["task_seconds"] = scale.task_seconds(home / "child-output.log")
    return result


# ---------------------------------------------------------------------------------------------------
# Traffic: a ControlledProducer that stamps its produce() calls; live groups of two kinds.


def _hold(hold: Any) -> dict[str, Any]:
    """One ``ControlledProducer.holds`` entry, as JSON."""
    return {
        "epoch": hold.epoch,
        "started": hold.started,
        "held_s": hold.held_s,
        "blocked_s": hold.blocked_s,
        "expired": hold.expired,
    }


class TimedProducer:
    """``traffic.SeqProducer`` with the client piece's producer, stamping each ``produce()`` return in the
    producer thread and the first record placed over the topic's target count."""

    def __init__(self, config: dict[str, Any], topic: str, target: int) -> None:
        from kstate_support.traffic import SeqProducer

        self.target = target
        outer = self

        class _Seq(SeqProducer):
            def run(self) -> None:  # SeqProducer.run, with the stamps
                seq = 0
                start = time.monotonic()
                while not self._halt.is_set():
                    self.producer.produce(
                        self.topic,
                        value=str(seq).encode(),
                        key=f"key-{seq}".encode(),
                        on_delivery=self._delivered,
                    )
                    now = time.monotonic()
                    outer.stamps.append(now)
                    if outer.switched_at is None and self.producer.partitions(self.topic) >= outer.target:
                        outer.switched_at = now
                    self.producer.poll(0)
                    seq += 1
                    delay = start + seq / self.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                self.producer.flush(30)
                outer.holds = [_hold(h) for h in self.producer.holds]
                self.producer.close()
                self.producer = None

        self.stamps: list[float] = []
        self.switched_at: float | None = None
        self.holds: list[dict[str, Any]] = []
        self.seq = _Seq(config, topic, rate=RATE, controlled=True)

    def live_holds(self) -> list[dict[str, Any]]:
        """The holds so far, read while the producer runs (its thread appends; a copy of the list)."""
        producer = self.seq.producer
        if producer is None:
            return self.holds
        return [_hold(h) for h in list(producer.holds)]

    def largest_gap(self, start: float, end: float) -> float:
        stamps = [start, *(t for t in list(self.stamps) if start <= t <= end), end]
        return max(b - a for a, b in zip(stamps, stamps[1:], strict=False))


class MixedLiveGroups(scale.LiveGroups):
    """``bench_increase_scale.LiveGroups`` with the group kinds of :data:`LIVE_KINDS`."""

    def _start(self, group: str) -> Any:
        from kstate_support.traffic import ConsumerFleet

        kind = LIVE_KINDS[self.groups.index(group) % len(LIVE_KINDS)]
        return ConsumerFleet(
            self.config,
            self.topic,
            group,
            n=scale.CONSUMERS_PER_GROUP,
            controlled=True,
            check_interval=scale.CHECK_INTERVAL,
            timeline=self.timelines[group],
            name=f"gen{self.generation}-",
            **kind,
        )

    def gaps(
        self, start: float, end: float, active: tuple[float, float] | None = None
    ) -> dict[str, list[float | None]]:
        """Each live consumer's largest gap in processing between ``start`` and ``end`` (as
        ``ConsumerFleet.largest_gaps``); with ``active = (a, b)``, None for a consumer that received nothing
        between ``a`` and ``b`` (it held no partition: 2 consumers of 1 partition at 8 x 1)."""
        out: dict[str, list[float | None]] = {}
        for group, fleet in self.fleets.items():
            with fleet._lock:
                arrivals = list(fleet.arrivals)
            row: list[float | None] = []
            for i, gap in enumerate(fleet.largest_gaps(start, end)):
                busy = active is None or any(m == i and active[0] <= t <= active[1] for t, m in arrivals)
                row.append(round(gap, 3) if busy else None)
            out[group] = row
        return out

    def gap_spans(self, start: float, end: float) -> dict[str, list[list[float]]]:
        """Where each live consumer's largest gap lies: [seconds from ``start`` to its beginning, its
        length]."""
        out = {}
        for group, fleet in self.fleets.items():
            with fleet._lock:
                arrivals = list(fleet.arrivals)
            row = []
            for i in range(len(fleet.members)):
                times = [start, *sorted(t for t, m in arrivals if m == i and start <= t <= end), end]
                length, begin = max((b - a, a) for a, b in zip(times, times[1:], strict=False))
                row.append([round(begin - start, 3), round(length, 3)])
            out[group] = row
        return out

    def events(self, start: float, end: float) -> dict[str, list[list[Any]]]:
        """The live groups' timeline events between ``start`` and ``end``: [seconds from ``start``, member,
        kind, partitions held by the event (count)]."""
        out = {}
        for group, timeline in self.timelines.items():
            with timeline._lock:
                events = list(timeline.events)
            out[group] = [
                [round(t - start, 3), member, kind, len(parts)]
                for t, member, kind, parts in events
                if start <= t <= end
            ]
        return out

    def all_held_at(self, after: float, partitions: int) -> float | None:
        """The first moment after ``after`` at which every live group's current members hold all
        ``partitions`` (assignment callbacks), None if not (yet)."""
        from kstate_support.traffic import _apply_event, _covers

        latest = after
        for group, fleet in self.fleets.items():
            with self.timelines[group]._lock:
                events = list(self.timelines[group].events)
            held: dict[str, frozenset[int]] = {}
            found = None
            for t, member, kind, parts in events:
                _apply_event(held, member, kind, parts)
                if t >= after and _covers(held, set(fleet.members), partitions):
                    found = t
                    break
            if found is None:
                return None
            latest = max(latest, found)
        return latest


@contextlib.contextmanager
def traffic(config: dict[str, Any], partitions: int, groups: int) -> Iterator[dict[str, Any]]:
    """A fresh topic at its original count, the offline groups' offsets, the producer and the live groups."""
    original = max(1, partitions // 64)
    with bench.scratch_topic(config, f"stay{partitions}x{groups}", original) as topic:
        n_live = 1 if groups == 1 else 2
        offline = [f"{topic}-off{i}" for i in range(groups - n_live)]
        scale.commit_offline_offsets(config, topic, offline, original)
        producer = TimedProducer(config, topic, partitions)
        producer.seq.start()
        live = MixedLiveGroups(config, topic, [f"{topic}-live{i}" for i in range(n_live)])
        try:
            yield {"topic": topic, "producer": producer, "live": live, "original": original}
        finally:
            with contextlib.suppress(TimeoutError):
                live.stop()
            producer.seq.stop()


def _warm(live: MixedLiveGroups, timeout: float = 120.0) -> tuple[float, dict[str, int]]:
    """Wait for traffic in every live group, then :data:`BEFORE_S`; return the quiet interval's start and
    the loss marks."""
    from kstate_support.traffic import wait_until

    for fleet in live.fleets.values():
        if not wait_until(lambda f=fleet: len(f.received) >= 20, timeout):
            raise RuntimeError(f"live group {fleet.group} received nothing within {timeout} s")
    quiet = time.monotonic()
    time.sleep(BEFORE_S)  # auto-commit records positions, and the traffic's own gaps
    return quiet, scale._since(live)


def _gap_summary(gaps: dict[str, list[float | None]]) -> float | None:
    values = [x for v in gaps.values() for x in v if x is not None]
    return round(max(values), 3) if values else None


def _holds_in(holds: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    inside = [h for h in holds if start <= h["started"] <= end]
    return {
        "holds": len(inside),
        "held_s": round(sum(h["held_s"] or 0.0 for h in inside), 3),
        "blocked_s": round(sum(h["blocked_s"] or 0.0 for h in inside), 3),
        "expired": sum(bool(h["expired"]) for h in inside),
    }


def measure_run(
    ctx: dict[str, Any],
    config: dict[str, Any],
    mode: str,
    home: Path,
    db: Path,
    partitions: int,
    timeout: float,
) -> dict[str, Any]:
    live: MixedLiveGroups = ctx["live"]
    producer: TimedProducer = ctx["producer"]
    quiet, since = _warm(live)
    started = time.monotonic()
    gaps_before = live.gaps(quiet, started, active=(quiet, started))
    conf = {"topic": ctx["topic"], "partitions": partitions, **(STAY_CONF if mode == "stay" else {})}
    run = run_dag(home, db, config, conf, timeout)
    ended = time.monotonic()
    sample: dict[str, Any] = {"mode": mode, "topic": ctx["topic"], "conf": conf, "run": run}
    back = ended
    if mode == "window":
        try:
            # to every partition held before the stop held again; the created ones in ``all_held_after_s``
            # (a KIP-848 group is given them once their leaders serve them: probe_new_partitions.py)
            original = ctx["original"]
            timeout = 120 if run["state"] == "success" else 15
            w = live.window(started, original, timeout=timeout, each=original >= scale.CONSUMERS_PER_GROUP)
            sample["window_s"] = round(w["window"], 3)
            back = max(back, w["end"])
        except TimeoutError as exc:
            sample["window_s"] = None
            sample["window_error"] = str(exc)
    held = live.all_held_at(started, partitions)
    if held is None:
        from kstate_support.traffic import wait_until

        wait_until(lambda: live.all_held_at(started, partitions) is not None, 60)
        held = live.all_held_at(started, partitions)
    sample["all_held_after_s"] = round(held - started, 3) if held is not None else None
    if held is not None:
        back = max(back, held)
    until = back + SETTLE_S
    time.sleep(max(0.0, until - time.monotonic()))
    sample["gaps"] = live.gaps(started, until, active=(quiet, started))
    sample["gap_spans"] = live.gap_spans(started, until)
    sample["gap_s"] = _gap_summary(sample["gaps"])
    sample["events"] = live.events(started - 0.5, until)
    sample["gaps_before"] = gaps_before
    sample["gap_before_s"] = _gap_summary(gaps_before)
    sample["producer_gap_s"] = round(producer.largest_gap(started, until), 3)
    sample["producer_gap_before_s"] = round(producer.largest_gap(quiet, started), 3)
    sample["producer"] = _holds_in(producer.live_holds(), started, until)
    sample["switched_after_s"] = (
        round(producer.switched_at - started, 3) if producer.switched_at is not None else None
    )
    sample["run_s"] = run.get("dag_test_s")
    sample["startup_s"] = run.get("task_seconds", {}).get("first_task_start_s")
    sample["state"] = run.get("state")
    lost = scale._lost(producer.seq, live, since)
    sample["lost"] = sum(lost.values())
    sample["lost_by_group"] = lost
    sample["paused"] = {g: "paused" in f.transitions for g, f in live.fleets.items()}
    return sample


def measure_restart(ctx: dict[str, Any], partitions: int) -> dict[str, Any]:
    live: MixedLiveGroups = ctx["live"]
    producer: TimedProducer = ctx["producer"]
    quiet, since = _warm(live, timeout=60)
    started = time.monotonic()
    gaps_before = live.gaps(quiet, started, active=(quiet, started))
    sample: dict[str, Any] = {"mode": "restart", "topic": ctx["topic"], "partitions": partitions}
    try:
        old = live.fleets
        live.restart()
        w = live.window(started, partitions, timeout=90)
        sample["window_s"] = round(w["window"], 3)
        until = w["end"] + SETTLE_S
        time.sleep(max(0.0, until - time.monotonic()))
        # each consumer slot's gap: from the restart (the old consumer closing) to the new one's messages
        sample["gaps"] = live.gaps(started, until)
        sample["gap_spans"] = live.gap_spans(started, until)
        sample["gap_s"] = _gap_summary(sample["gaps"])
        sample["events"] = live.events(started - 0.5, until)
        sample["producer_gap_s"] = round(producer.largest_gap(started, until), 3)
        sample["producer"] = _holds_in(producer.live_holds(), started, until)
        # loss across the restart: produced after the warm-up mark, received by neither the old consumers
        # nor the new ones
        for group, fleet in live.fleets.items():
            with old[group]._lock, fleet._lock:
                fleet.received |= {s for s in old[group].received if s >= since[group]}
        lost = scale._lost(producer.seq, live, since)
        sample["lost"] = sum(lost.values())
        sample["lost_by_group"] = lost
    except (TimeoutError, RuntimeError) as exc:
        progress(f"restart at {partitions} partitions failed: {exc}")
        sample["error"] = str(exc)
    sample["gaps_before"] = gaps_before
    sample["gap_before_s"] = _gap_summary(gaps_before)
    return sample


def measure_cell(
    config: dict[str, Any], cell: str, rounds: int, base: Path, db: Path, timeout: float, tag: str
) -> dict[str, Any]:
    partitions, groups = scale.parse_cell(cell)
    row: dict[str, Any] = {"cell": cell, "partitions": partitions, "groups": groups, "samples": []}
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for mode in order:
            progress(f"[{tag}] {cell} round {r + 1}/{rounds}: {mode}")
            try:
                with traffic(config, partitions, groups) as ctx:
                    home = base / f"{tag}-{cell}-{r}-{mode}"
                    sample = measure_run(ctx, config, mode, home, db, partitions, timeout)
                    sample["round"] = r
                    row["samples"].append(sample)
                    progress(
                        f"[{tag}] {cell} {mode}: {sample['state']}, gap {sample['gap_s']} s, window"
                        f" {sample.get('window_s')}, producer gap {sample['producer_gap_s']} s held"
                        f" {sample['producer']['held_s']} s, run {_short(sample['run_s'])} s, lost {sample['lost']}"
                    )
                    now = scale.partition_count(config, ctx["topic"])
                    restart = measure_restart(ctx, now)
                    restart["round"], restart["after"] = r, mode
                    row["samples"].append(restart)
                    progress(
                        f"[{tag}] {cell} restart after {mode}: gap {restart.get('gap_s')} s, window"
                        f" {restart.get('window_s')}, lost {restart.get('lost')}"
                    )
            except Exception as exc:  # noqa: BLE001 - a failed sample is reported, the bench goes on
                progress(f"[{tag}] {cell} {mode} FAILED: {exc!r}")
                row["samples"].append({"mode": mode, "round": r, "error": repr(exc)})
    return summarize(row)


def _short(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _med(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 3) if kept else None


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    by_mode: dict[str, list[dict[str, Any]]] = {"stay": [], "window": [], "restart": []}
    for s in row["samples"]:
        if "error" not in s:
            by_mode[s["mode"]].append(s)
    for mode, samples in by_mode.items():
        row[mode] = {
            "n": len(samples),
            "gap_s": _med([s.get("gap_s") for s in samples]),
            "gaps_all": [s.get("gap_s") for s in samples],
            "gap_before_s": _med([s.get("gap_before_s") for s in samples]),
            "window_s": _med([s.get("window_s") for s in samples]),
            "windows_all": [s.get("window_s") for s in samples],
            "producer_gap_s": _med([s.get("producer_gap_s") for s in samples]),
            "producer_gaps_all": [s.get("producer_gap_s") for s in samples],
            "producer_held_s": _med([s.get("producer", {}).get("held_s") for s in samples]),
            "producer_blocked_s": _med([s.get("producer", {}).get("blocked_s") for s in samples]),
            "run_s": _med([s.get("run_s") for s in samples]),
            "runs_all": [s.get("run_s") for s in samples],
            "all_held_after_s": _med([s.get("all_held_after_s") for s in samples]),
            "lost": sum(s.get("lost") or 0 for s in samples),
            "lost_checked": sum(s.get("lost") is not None for s in samples),
            "ok": sum(s.get("state", "success") == "success" for s in samples),
            "paused": sum(any(s.get("paused", {}).values()) for s in samples),
            "gap_by_group_s": {
                kind: _med([_group_gap(s, kind) for s in samples]) for kind in ("live0", "live1")
            },
        }
    row["failed_samples"] = sum("error" in s for s in row["samples"])
    restart = row["restart"]["gap_s"]
    row["ratios"] = {
        "stay_gap_over_restart_gap": _ratio(row["stay"]["gap_s"], restart),
        "window_gap_over_restart_gap": _ratio(row["window"]["gap_s"], restart),
        "window_downtime_over_restart_downtime": _ratio(
            row["window"]["window_s"], row["restart"]["window_s"]
        ),
    }
    return row


def _group_gap(sample: dict[str, Any], suffix: str) -> float | None:
    """The largest gap of the sample's live group named ``...-<suffix>`` (None: no such group)."""
    for group, gaps in sample.get("gaps", {}).items():
        if group.endswith(f"-{suffix}"):
            kept = [g for g in gaps if g is not None]
            return max(kept) if kept else None
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


# ---------------------------------------------------------------------------------------------------
# Output.


def table_rows(grid: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for cell in grid["cells"]:
        for mode in ("stay", "window", "restart"):
            m = cell.get(mode, {})
            rows.append(
                {
                    "cell": cell["cell"],
                    "mode": mode,
                    "n": m.get("n"),
                    "gap": m.get("gap_s"),
                    "gaps": " ".join("-" if g is None else f"{g:.2f}" for g in m.get("gaps_all", [])),
                    "before": m.get("gap_before_s"),
                    "window": m.get("window_s"),
                    "pgap": m.get("producer_gap_s"),
                    "held": m.get("producer_held_s"),
                    "blocked": m.get("producer_blocked_s"),
                    "run": m.get("run_s"),
                    "ratio": None if mode == "restart" else cell["ratios"][f"{mode}_gap_over_restart_gap"],
                    "lost": f"{m.get('lost')}/{m.get('lost_checked')}",
                    "paused": m.get("paused"),
                    "ok": f"{m.get('ok')}/{m.get('n')}"
                    if mode != "restart"
                    else f"{m.get('n')}/{m.get('n')}",
                }
            )
    return rows


COLUMNS = [
    Column("cell", "cell"),
    Column("mode", "mode"),
    Column("n", "n"),
    Column("gap", "gap", ".3f"),
    Column("gap/restart", "ratio", ".2f"),
    Column("gaps (every sample)", "gaps"),
    Column("gap before", "before", ".3f"),
    Column("window", "window", ".3f"),
    Column("prod gap", "pgap", ".3f"),
    Column("prod held", "held", ".3f"),
    Column("prod blocked", "blocked", ".3f"),
    Column("run", "run", ".1f"),
    Column("lost/checks", "lost"),
    Column("paused runs", "paused"),
    Column("runs ok", "ok"),
]


def print_grid(grid: dict[str, Any]) -> None:
    bench.print_table(
        table_rows(grid),
        COLUMNS,
        title=(
            f"\n[{grid['mode']}] round trip of a trivial request {grid['round_trip_ms']:.2f} ms. Medians over the"
            " samples, seconds: gap = the live consumers' largest gap in processing (max over consumers);"
            " window = first stop -> the partitions held before held again (all N in files before session"
            " eleven); prod gap = longest time between two produce()"
            " returns; prod held / blocked = the ControlledProducer's holds (sum per run); run = dag.test() wall."
        ),
    )
    for cell in grid["cells"]:
        print(f"{cell['cell']:>9} ratios: {json.dumps(cell['ratios'])}")


def print_markdown(paths: list[Path]) -> None:
    """The tables of result files, as markdown: one row per cell and mode, then the ratios."""
    rows, ratios = [], []
    for path in paths:
        for grid in json.loads(path.read_text())["grids"]:
            where = _where(path, grid)
            for cell in grid["cells"]:
                summarize(cell)
                for row in table_rows({"cells": [cell]}):
                    m = cell[row["mode"]]
                    row.update(
                        where=where,
                        g0=m["gap_by_group_s"]["live0"],
                        g1=m["gap_by_group_s"]["live1"],
                    )
                    rows.append(row)
                ratios.append({"where": where, "cell": cell["cell"], **cell["ratios"]})
    columns = [Column("broker", "where"), *COLUMNS[:3]]
    columns += [Column("gap classic", "g0", ".3f"), Column("gap KIP-848", "g1", ".3f"), *COLUMNS[3:]]
    print(bench.table(rows, columns, markdown=True))
    print()
    ratio_columns = [
        Column("broker", "where"),
        Column("cell", "cell"),
        Column("stay gap / restart gap", "stay_gap_over_restart_gap", ".2f"),
        Column("window gap / restart gap", "window_gap_over_restart_gap", ".2f"),
        Column("window / restart (downtime)", "window_downtime_over_restart_downtime", ".2f"),
    ]
    print(bench.table(ratios, ratio_columns, markdown=True))
    print()
    print(bench.table(sample_rows(paths), SAMPLE_COLUMNS, markdown=True))


def _where(path: Path, grid: dict[str, Any]) -> str:
    """The broker a grid ran on (loopback, or the round trip the proxy added) and the file it is in."""
    where = "loopback" if grid["mode"] == "plain" else f"+{2 * grid.get('one_way_ms', 0):g} ms RTT"
    return f"{where} ({path.stem})"


def sample_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """Every sample of the result files, in the order measured."""
    rows = []
    for path in paths:
        for grid in json.loads(path.read_text())["grids"]:
            where = _where(path, grid)
            for cell in grid["cells"]:
                for s in cell["samples"]:
                    timings = (s.get("run") or {}).get("window_timings") or {}
                    rows.append(
                        {
                            "where": where,
                            "cell": cell["cell"],
                            "round": s.get("round", 0) + 1,
                            "mode": s["mode"] + (f" (after {s['after']})" if s.get("after") else ""),
                            "g0": _group_gap(s, "live0"),
                            "g1": _group_gap(s, "live1"),
                            "window": s.get("window_s"),
                            "live_window": timings.get("live_window_s"),
                            "served": timings.get("services_out_s"),
                            "positions": timings.get("positions_s"),
                            "held": s.get("all_held_after_s"),
                            "pgap": s.get("producer_gap_s"),
                            "phold": (s.get("producer") or {}).get("held_s"),
                            "run": s.get("run_s"),
                            "lost": s.get("lost"),
                            "state": s.get("state"),
                            "error": (s.get("error") or "")[:80],
                        }
                    )
    return rows


SAMPLE_COLUMNS = [
    Column("broker", "where"),
    Column("cell", "cell"),
    Column("round", "round"),
    Column("mode", "mode"),
    Column("gap classic", "g0", ".3f"),
    Column("gap KIP-848", "g1", ".3f"),
    Column("window", "window", ".3f"),
    Column("WINDOW log", "live_window", ".3f"),
    Column("SERVED", "served", ".3f"),
    Column("positions", "positions", ".3f"),
    Column("all held", "held", ".1f"),
    Column("prod gap", "pgap", ".3f"),
    Column("prod held", "phold", ".3f"),
    Column("run", "run", ".1f"),
    Column("lost", "lost"),
    Column("run state", "state"),
    Column("error", "error"),
]


# ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", nargs="+", default=CELLS, help=f"NxG cells (default: {' '.join(CELLS)})")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (stay, window), order alternating")
    parser.add_argument("--rtt", choices=["off", "only"], default="off", help="behind the delaying proxy")
    parser.add_argument("--rtt-one-way-ms", type=float, default=2.0, help="delay added in each direction")
    parser.add_argument("--timeout", type=float, default=400.0, help="bound on one DAG run (seconds)")
    parser.add_argument(
        "--output", type=Path, help=f"default: {RESULTS.name} ({RTT_RESULTS.name} with --rtt only)"
    )
    parser.add_argument(
        "--markdown",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="print the tables of result files as markdown",
    )
    parser.add_argument("--child", nargs=2, metavar=("CONF", "OUT"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _exit_on_sigterm(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if args.child:
        return child_run(json.loads(args.child[0]), Path(args.child[1]))
    if args.markdown:
        print_markdown(args.markdown)
        return 0
    from _delay_proxy import round_trip_ms

    mode = "rtt" if args.rtt == "only" else "plain"
    output = args.output or (RTT_RESULTS if mode == "rtt" else RESULTS)
    base = ROOT / ".kstate" / f"bench-stay-airflow-{mode}"
    shutil.rmtree(base, ignore_errors=True)
    started = time.monotonic()
    db = scale.migrate_template(base)
    partial = base / "partial.json"
    result: dict[str, Any] = {
        "cells": args.cells,
        "rounds": args.rounds,
        "rate": RATE,
        "live_kinds": LIVE_KINDS,
        "stay_conf": STAY_CONF,
        "load_before": Path("/proc/loadavg").read_text().split()[:3],
    }
    broker = scale.plain_broker() if mode == "plain" else scale.rtt_broker(args.rtt_one_way_ms)
    with broker as config:
        grid: dict[str, Any] = {"mode": mode, "round_trip_ms": round_trip_ms(config), "cells": []}
        if mode == "rtt":
            grid["one_way_ms"] = args.rtt_one_way_ms
        progress(f"[{mode}] round trip of a trivial request (list_topics): {grid['round_trip_ms']:.2f} ms")
        for cell in args.cells:
            grid["cells"].append(measure_cell(config, cell, args.rounds, base, db, args.timeout, mode))
            partial.write_text(json.dumps({"partial": True, "grid": grid}, indent=2, default=str))
    result["grids"] = [grid]
    result["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    result["bench_s"] = time.monotonic() - started
    result["code"] = scale.code_version()
    bench.write_results(output, result)
    print_grid(grid)
    print(f"\nbench took {result['bench_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
