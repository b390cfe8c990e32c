"""Benchmark the client piece: consumer throughput of ``ControlledConsumer`` vs a plain confluent-kafka
``Consumer``, and pause/resume latency vs a plain close() + new Consumer subscribe.

    .venv/bin/python bench/bench_client_throughput.py [--messages 500000] [--repeats 6] [--consumers 1 4]

Starts its own embedded broker unless ``KSTATE_BOOTSTRAP_SERVERS`` is set (extra librdkafka settings in
``KSTATE_KAFKA_CONFIG`` as JSON). Prints a table and writes ``bench/results/client_throughput.json``.

Throughput is timed from the first message to the last, so group joins and start-up reads are excluded
(they are what the latency part measures). Two measurements of the wrapper's cost, both reported as the
median of per-pair ratios (seconds per message, wrapper / plain) with quartiles, for wall and CPU time:

* separate runs: a plain ``Consumer`` and a ``ControlledConsumer`` (defaults, follower thread included)
  each drain the topic with a new group, alternating in ABBA order; run i of each kind is a pair;
* interleaved: one prefetched ``ControlledConsumer`` drains the topic in blocks that alternate (ABBA)
  between the wrapper and its inner ``Consumer`` with the same call; adjacent blocks are a pair. Robust
  against other load on the machine, which hits both blocks of a pair alike.

The latency functions are importable: ``measure_pause_resume(config, topic, consumers)`` and
``measure_plain_restart(config, topic, consumers)``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import threading
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, Producer
from confluent_kafka.admin import AdminClient
from kstate_support import bench
from kstate_support.bench import Column, delete_topics, progress

from airflow_provider_kstate.client_piece.channel import ControlChannel
from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.protocol import Command, now_ms

RESULTS = bench.results_path("client_throughput")
BATCH = 1000

#: The cluster of ``KSTATE_BOOTSTRAP_SERVERS``, else a fresh embedded broker in a folder of this process.
broker = functools.partial(bench.broker, "broker-bench-client", per_process=True)


def produce_dataset(config: dict[str, Any], topic: str, count: int, size: int = 64) -> float:
    """Write ``count`` keyed messages of ``size`` bytes; return seconds taken."""
    producer = Producer(
        {**config, "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000}
    )
    payload = b"x" * size
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, str(i).encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("dataset not fully produced")
    return time.perf_counter() - start


# -- throughput ---------------------------------------------------------------------------------------------


def _read(consumer: Any, mode: str) -> int:
    """One read of the service loop: ``poll(1.0)`` or ``consume(1000, 1.0)``; returns the messages read."""
    if mode == "poll":
        msg = consumer.poll(1.0)
        return 0 if msg is None or msg.error() else 1
    return sum(1 for m in consumer.consume(BATCH, 1.0) if not m.error())


def _drain(
    consumer: Any, count: int, mode: str, prefetch: float, timeout: float = 300.0
) -> tuple[float, float]:
    """Read ``count`` messages the way a service would (``poll(1.0)`` or ``consume(1000, 1.0)``).

    After the first delivery it sleeps ``prefetch`` seconds so librdkafka's local queue fills, then times
    the rest: the result is the client's own cost, not the broker's serving rate. Returns
    ``(msgs/s wall clock, CPU µs/msg of the whole process)``; CPU time is robust against a busy machine.
    """
    got = 0
    deadline = time.monotonic() + timeout
    while got == 0:
        if time.monotonic() > deadline:
            raise TimeoutError("no first message")
        got = _read(consumer, mode)
    wait_prefetched(prefetch)
    start, cpu_start = time.perf_counter(), time.process_time()
    counted_from = got
    while got < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {got}/{count}")
        got += _read(consumer, mode)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return (got - counted_from) / wall, 1e6 * cpu / (got - counted_from)


def consumer_throughput(
    config: dict[str, Any],
    topic: str,
    count: int,
    kind: str,
    mode: str,
    control_topic: str,
    prefetch: float = 3.0,
) -> tuple[float, float]:
    """Consume ``topic`` from the start with a new group; ``kind`` is ``plain`` (a confluent-kafka Consumer)
    or ``controlled`` (a ControlledConsumer with its defaults, follower thread included).
    Returns ``(msgs/s, CPU µs/msg)``."""
    cfg = {
        **config,
        "group.id": bench.topic_name("tp"),
        "auto.offset.reset": "earliest",
        "queued.min.messages": 10_000_000,
        "queued.max.messages.kbytes": 2_000_000,
    }
    if kind == "controlled":
        consumer: Any = ControlledConsumer(cfg, [topic], control_topic=control_topic, client_id="bench")
    else:
        consumer = Consumer(cfg)
        consumer.subscribe([topic])
    try:
        return _drain(consumer, count, mode, prefetch)
    finally:
        consumer.close()


def _compare(runs: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Medians per kind, and the median of the per-pair ratios (run i of each kind is a pair)."""
    rate = {k: statistics.median(r for r, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    pairs = list(zip(runs["plain"], runs["controlled"], strict=True))
    wall_ratio = _spread([p[0] / c[0] for p, c in pairs])  # seconds per message, controlled / plain
    cpu_ratio = _spread([c[1] / p[1] for p, c in pairs])
    return {
        "plain_msgs_per_s": round(rate["plain"]),
        "controlled_msgs_per_s": round(rate["controlled"]),
        "overhead_pct": round(100 * (wall_ratio["median"] - 1), 2),
        "overhead_pct_q1_q3": [
            round(100 * (wall_ratio["q1"] - 1), 2),
            round(100 * (wall_ratio["q3"] - 1), 2),
        ],
        "plain_cpu_us_per_msg": round(cpu["plain"], 3),
        "controlled_cpu_us_per_msg": round(cpu["controlled"], 3),
        "cpu_overhead_pct": round(100 * (cpu_ratio["median"] - 1), 2),
        "cpu_overhead_pct_q1_q3": [
            round(100 * (cpu_ratio["q1"] - 1), 2),
            round(100 * (cpu_ratio["q3"] - 1), 2),
        ],
        "runs_msgs_per_s": {k: [round(r) for r, _ in v] for k, v in runs.items()},
        "runs_cpu_us_per_msg": {k: [round(c, 3) for _, c in v] for k, v in runs.items()},
    }


def wait_prefetched(seconds: float) -> None:
    """Give librdkafka's fetchers ``seconds`` to fill the local queue before the clock starts.

    (Waiting for the process to go idle does not work: a consumer at the end of a log keeps fetching, and
    the embedded broker answers empty fetches at once.)
    """
    time.sleep(seconds)


def _spread(values: list[float]) -> dict[str, Any]:
    """Median, quartiles and extremes of ``values`` (rounded)."""
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {
        "median": round(statistics.median(values), 4),
        "q1": round(q[0], 4),
        "q3": round(q[2], 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "n": len(values),
    }


def _time_block(reader: Any, mode: str, block: int, budget: int) -> tuple[int, float, float]:
    """Read up to ``block`` messages (at most ``budget``); return (messages, wall s, thread CPU s)."""
    n = 0
    start, cpu = time.perf_counter(), time.thread_time()
    while n < block and n < budget:
        n += _read(reader, mode)
    return n, time.perf_counter() - start, time.thread_time() - cpu


def measure_interleaved(
    config: dict[str, Any],
    topic: str,
    count: int,
    mode: str,
    control_topic: str,
    block: int = 1000,
    prefetch: float = 15.0,
) -> dict[str, Any]:
    """The wrapper's own cost, robust against a noisy machine: ONE ControlledConsumer drains ``topic`` (fully
    prefetched) in blocks of ``block`` messages that alternate, in ABBA order, between the wrapper
    (``cc.poll(1.0)`` / ``cc.consume(1000, 1.0)``) and its inner confluent-kafka Consumer with the same call.
    Each adjacent (wrapper, inner) pair gives a ratio of seconds per message; the result is the median of
    those ratios with its quartiles, for wall time and for the reading thread's CPU time. Neighbouring
    blocks see the same machine load, so a burst of other work moves one ratio, not the median.
    """
    cfg = {
        **config,
        "group.id": bench.topic_name("il"),
        "auto.offset.reset": "earliest",
        "queued.min.messages": 10_000_000,
        "queued.max.messages.kbytes": 2_000_000,
    }
    cc = ControlledConsumer(cfg, [topic], control_topic=control_topic, client_id="bench-il")
    wall: list[float] = []
    cpu: list[float] = []
    totals = {"controlled": [0, 0.0], "plain": [0, 0.0]}
    try:
        got = 0
        deadline = time.monotonic() + 120
        while got == 0 and time.monotonic() < deadline:
            got = _read(cc, mode)
        wait_prefetched(prefetch)
        inner = cc.consumer
        assert inner is not None
        pair = 0
        direct = 0
        while got < count - 2 * block and time.monotonic() < deadline + 300:
            order = (cc, inner) if pair % 2 == 0 else (inner, cc)  # ABBA: drift cancels out
            timed = {}
            for reader in order:
                n, w, c = _time_block(reader, mode, block, count - got)
                got += n
                kind = "controlled" if reader is cc else "plain"
                if reader is cc:  # poll routed straight to the inner consumer (see ControlledConsumer.poll)
                    direct += "poll" in cc.__dict__
                timed[kind] = (n, w, c)
                totals[kind][0] += n
                totals[kind][1] += w
            (nc, wc, cc_cpu), (np_, wp, cp) = timed["controlled"], timed["plain"]
            wall.append((wc / nc) / (wp / np_))
            if cp > 0 and cc_cpu > 0:
                cpu.append((cc_cpu / nc) / (cp / np_))
            pair += 1
    finally:
        cc.close()
    ratio_wall, ratio_cpu = _spread(wall), _spread(cpu)
    return {
        "overhead_pct": round(100 * (ratio_wall["median"] - 1), 2),
        "overhead_pct_q1_q3": [
            round(100 * (ratio_wall["q1"] - 1), 2),
            round(100 * (ratio_wall["q3"] - 1), 2),
        ],
        "cpu_overhead_pct": round(100 * (ratio_cpu["median"] - 1), 2),
        "cpu_overhead_pct_q1_q3": [
            round(100 * (ratio_cpu["q1"] - 1), 2),
            round(100 * (ratio_cpu["q3"] - 1), 2),
        ],
        "wall_ratio": ratio_wall,
        "cpu_ratio": ratio_cpu,
        "controlled_msgs_per_s": round(totals["controlled"][0] / totals["controlled"][1]),
        "plain_msgs_per_s": round(totals["plain"][0] / totals["plain"][1]),
        "pairs": len(wall),
        "wrapper_blocks_with_direct_poll": direct,
        "block": block,
        "prefetch_seconds": prefetch,
    }


class _Instant:
    """A stand-in inner Consumer whose poll/consume are C builtins that return at once, so that timing
    ``ControlledConsumer.poll`` against it gives the wrapper's own Python cost per call."""

    def __init__(self) -> None:
        self.poll = abs  # poll(0) -> 0: "a message"
        batch = [object()] * BATCH
        self.consume = lambda n, t: batch


def measure_call_overhead(number: int = 200_000, repeat: int = 15) -> dict[str, float]:
    """Nanoseconds the wrapper adds per ``poll``/``consume`` call (min over ``repeat`` timings: the least
    disturbed run), against a direct call of the same inner method; both looked up on the object at every
    call, as a service loop does."""
    cc = ControlledConsumer.__new__(ControlledConsumer)  # no broker: only the hot path is timed
    inner = _Instant()
    cc.__dict__.update(_due=False, _pending=None, check_interval=0.2)
    cc._set_inner(inner)  # type: ignore[arg-type]  # running, nothing due
    # the first timed cc.poll goes through the wrapper, hands out "a message" and routes poll to the inner
    # method itself (as a running ControlledConsumer does): what remains is the attribute lookup

    def best(stmt: str, obj: Any) -> float:
        return min(timeit.repeat(stmt, globals={"o": obj}, number=number, repeat=repeat)) / number * 1e9

    direct_poll = best("o.poll(0)", inner)
    wrapped_poll = best("o.poll(1.0)", cc)
    direct_consume = best("o.consume(1000, 0.2)", inner)
    wrapped_consume = best("o.consume(1000, 1.0)", cc)
    return {
        "poll_ns_per_call": round(wrapped_poll - direct_poll, 1),
        "consume_ns_per_call": round(wrapped_consume - direct_consume, 1),
    }


def bench_throughput(
    config: dict[str, Any], count: int, repeats: int, partitions: int = 4, prefetch: float = 3.0
) -> dict[str, Any]:
    """Plain vs controlled consumer on the same pre-produced topic, alternating order; medians."""
    topic = bench.new_topic(config, "tp", partitions)
    control = ControlChannel(config, bench.topic_name("control"))
    control.ensure()
    # a control topic with some unrelated traffic, as in production
    control.publish(
        *(Command(group=bench.topic_name("other"), command="resume", epoch=now_ms()) for _ in range(50))
    )
    produce_s = produce_dataset(config, topic, count)
    out: dict[str, Any] = {
        "messages": count,
        "partitions": partitions,
        "produce_seconds": round(produce_s, 2),
        "prefetch_seconds": prefetch,
        "load_average": os.getloadavg()[0],
    }
    try:
        for mode in ("poll", "consume"):
            runs: dict[str, list[tuple[float, float]]] = {"plain": [], "controlled": []}
            for r in range(repeats):
                order = ("plain", "controlled") if r % 2 == 0 else ("controlled", "plain")  # ABBA
                for kind in order:
                    progress(f"throughput {mode} {kind} run {r + 1}/{repeats}")
                    runs[kind].append(
                        consumer_throughput(config, topic, count, kind, mode, control.topic, prefetch)
                    )
            out[mode] = _compare(runs)
            progress(f"throughput {mode}: interleaved blocks")
            out[mode]["interleaved"] = measure_interleaved(
                config,
                topic,
                count,
                mode,
                control.topic,
                block=500 if mode == "poll" else 2000,
                prefetch=max(prefetch, count / 40_000),
            )
    finally:
        delete_topics(config, [topic, control.topic])
        control.close()
    calls = measure_call_overhead()
    out["wrapper_ns_per_call"] = calls
    # the wrapper's Python cost relative to what a message costs a plain consumer (median CPU per message)
    out["poll"]["call_overhead_pct"] = round(
        100 * calls["poll_ns_per_call"] / 1000 / out["poll"]["plain_cpu_us_per_msg"], 2
    )
    per_msg = calls["consume_ns_per_call"] / BATCH / 1000
    out["consume"]["call_overhead_pct"] = round(100 * per_msg / out["consume"]["plain_cpu_us_per_msg"], 3)
    return out


# -- pause / resume latency ---------------------------------------------------------------------------------


def group_state(admin: AdminClient, group: str) -> tuple[ConsumerGroupState, int]:
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return desc.state, len(desc.members)


def wait_group(
    admin: AdminClient, group: str, state: ConsumerGroupState, members: int, timeout: float = 60.0
) -> float:
    """Return the monotonic time at which ``group`` was first seen in ``state`` with ``members`` members."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if group_state(admin, group) == (state, members):
            return time.monotonic()
        time.sleep(0.005)
    raise TimeoutError(f"group {group} not {state.name} with {members} members within {timeout}s")


def _seconds(
    admin: AdminClient,
    group: str,
    state: ConsumerGroupState,
    members: int,
    since: float,
    timeout: float = 20.0,
) -> float | None:
    """Seconds from ``since`` until ``group`` is in ``state``; None if not within ``timeout`` (then it waits
    up to 60 s more so that the next round starts clean)."""
    try:
        return wait_group(admin, group, state, members, timeout) - since
    except TimeoutError:
        wait_group(admin, group, state, members, 60.0)
        return None


class _Worker(threading.Thread):
    """A service thread: builds its consumer, polls until told to stop, then closes it."""

    def __init__(self, make: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.make = make
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.consumer: Any = None

    def run(self) -> None:
        self.consumer = self.make()
        while not self.stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()
        self.closed.set()


def _start(workers: list[_Worker]) -> None:
    for w in workers:
        w.start()


def _stop(workers: list[_Worker]) -> None:
    for w in workers:
        w.stop.set()
    for w in workers:
        w.join(timeout=60)


def measure_plain_restart(
    config: dict[str, Any], topic: str, consumers: int, rounds: int = 3
) -> dict[str, Any]:
    """Latency of the plain way: every member ``close()``s (commit + LeaveGroup) → group EMPTY, then new
    Consumers subscribe → STABLE with all members. Seconds, medians over ``rounds``."""
    admin = AdminClient(config)
    group = bench.topic_name("plain")
    cfg = {**config, "group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}

    def make() -> Consumer:
        consumer = Consumer(cfg)
        consumer.subscribe([topic])
        return consumer

    workers = [_Worker(make) for _ in range(consumers)]
    _start(workers)
    wait_group(admin, group, ConsumerGroupState.STABLE, consumers)
    leave: list[float | None] = []
    join: list[float | None] = []
    for _ in range(rounds):
        t0 = time.monotonic()
        _stop(workers)
        leave.append(_seconds(admin, group, ConsumerGroupState.EMPTY, 0, t0))
        t1 = time.monotonic()
        workers = [_Worker(make) for _ in range(consumers)]
        _start(workers)
        join.append(_seconds(admin, group, ConsumerGroupState.STABLE, consumers, t1))
    _stop(workers)
    return _summary(consumers, leave, join, "close() -> EMPTY", "new Consumer subscribe -> STABLE")


def measure_pause_resume(
    config: dict[str, Any],
    topic: str,
    consumers: int,
    rounds: int = 3,
    control_topic: str | None = None,
    check_interval: float = 0.2,
) -> dict[str, Any]:
    """Latency of the controlled way: ``pause`` published → group EMPTY, ``resume`` published → STABLE with
    all ``consumers`` ControlledConsumers back. Seconds, medians over ``rounds``."""
    admin = AdminClient(config)
    group = bench.topic_name("ctl")
    channel = ControlChannel(config, control_topic or bench.topic_name("control"))
    channel.ensure()
    cfg = {**config, "group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}

    def maker(i: int) -> Callable[[], ControlledConsumer]:
        return lambda: ControlledConsumer(
            cfg, [topic], control_topic=channel.topic, client_id=f"w{i}", check_interval=check_interval
        )

    workers = [_Worker(maker(i)) for i in range(consumers)]
    _start(workers)
    wait_group(admin, group, ConsumerGroupState.STABLE, consumers)
    # warm the control producer (an idempotent producer's first send also fetches a producer id)
    channel.publish(Command(group=bench.topic_name("warm"), command="resume", epoch=now_ms()))
    leave: list[float | None] = []
    join: list[float | None] = []
    try:
        for _ in range(rounds):
            t0 = time.monotonic()
            channel.publish(Command(group=group, command="pause", epoch=now_ms(), topic=topic))
            leave.append(_seconds(admin, group, ConsumerGroupState.EMPTY, 0, t0))
            t1 = time.monotonic()
            channel.publish(Command(group=group, command="resume", epoch=now_ms(), topic=topic))
            join.append(_seconds(admin, group, ConsumerGroupState.STABLE, consumers, t1))
    finally:
        _stop(workers)
        if control_topic is None:
            delete_topics(config, [channel.topic])
        channel.close()
    result = _summary(consumers, leave, join, "pause published -> EMPTY", "resume published -> STABLE")
    result["check_interval"] = check_interval
    return result


def _summary(
    consumers: int, leave: list[float | None], join: list[float | None], leave_what: str, join_what: str
) -> dict[str, Any]:
    """Medians over the rounds that finished within the bound; the others are counted as timeouts."""

    def median(xs: list[float | None]) -> float | None:
        ok = [x for x in xs if x is not None]
        return round(statistics.median(ok), 4) if ok else None

    return {
        "consumers": consumers,
        "leave_s": median(leave),
        "join_s": median(join),
        "leave_runs": [None if x is None else round(x, 4) for x in leave],
        "join_runs": [None if x is None else round(x, 4) for x in join],
        "timeouts": sum(x is None for x in leave + join),
        "leave": leave_what,
        "join": join_what,
    }


def bench_latency(config: dict[str, Any], consumer_counts: list[int], rounds: int) -> list[dict[str, Any]]:
    topic = bench.new_topic(config, "lat", max(consumer_counts))
    produce_dataset(config, topic, 1000)
    rows = []
    try:
        for n in consumer_counts:
            progress(f"latency with {n} consumers")
            try:
                rows.append(
                    {
                        "consumers": n,
                        "plain": measure_plain_restart(config, topic, n, rounds),
                        "controlled": measure_pause_resume(config, topic, n, rounds),
                    }
                )
            except TimeoutError as exc:  # the embedded broker can leave a group stuck in a rebalance
                rows.append({"consumers": n, "error": str(exc)})
    finally:
        delete_topics(config, [topic])
    return rows


def _pct(r: dict[str, Any], key: str) -> str:
    q1, q3 = r[f"{key}_q1_q3"]
    return f"{r[key]:+.1f}% [{q1:+.1f}, {q3:+.1f}]"


#: The throughput table: per mode, the overhead of separate runs and of interleaved blocks.
THROUGHPUT = [
    Column("mode", lambda m: m["mode"], align="<"),
    Column("separate runs (wall)", lambda m: _pct(m, "overhead_pct")),
    Column("(process CPU)", lambda m: _pct(m, "cpu_overhead_pct")),
    Column("interleaved (wall)", lambda m: _pct(m["interleaved"], "overhead_pct")),
    Column("(thread CPU)", lambda m: _pct(m["interleaved"], "cpu_overhead_pct")),
]
#: The latency table: per consumer count, plain restart against pause / resume (seconds).
LATENCY = [
    Column("consumers", "consumers", align="<"),
    Column("close->EMPTY", lambda r: r["plain"]["leave_s"], ".3f", missing="timeout"),
    Column("pause->EMPTY", lambda r: r["controlled"]["leave_s"], ".3f", missing="timeout"),
    Column("new->STABLE", lambda r: r["plain"]["join_s"], ".3f", missing="timeout"),
    Column("resume->STABLE", lambda r: r["controlled"]["join_s"], ".3f", missing="timeout"),
]


def _runs_line(mode: str, r: dict[str, Any]) -> str:
    """The rates behind a mode's row: separate runs' medians, the interleaved pairs."""
    il = r["interleaved"]
    line = (
        f"{mode}: separate runs: plain {r['plain_msgs_per_s']:,}/s, wrapper {r['controlled_msgs_per_s']:,}/s"
        f" (medians of {len(r['runs_msgs_per_s']['plain'])}); interleaved: {il['pairs']} pairs of"
        f" {il['block']} messages"
    )
    if mode == "poll":
        line += (
            f"; wrapper blocks whose poll was the inner consumer's own:"
            f" {il['wrapper_blocks_with_direct_poll']}/{il['pairs']}"
        )
    return line


def print_report(result: dict[str, Any]) -> None:
    tp = result["throughput"]
    print(
        f"\nconsumer throughput, {tp['messages']} msgs x 64 B, {tp['partitions']} partitions: wrapper vs plain"
        " confluent-kafka Consumer, same calls"
    )
    print("  overhead = median of per-pair ratios (seconds per message, wrapper / plain) [quartiles]")
    bench.print_table([{"mode": mode, **tp[mode]} for mode in ("poll", "consume")], THROUGHPUT)
    for mode in ("poll", "consume"):
        print(_runs_line(mode, tp[mode]))
    calls = tp["wrapper_ns_per_call"]
    print(
        f"\nwrapper's own cost per call (no broker, best of 15): poll {calls['poll_ns_per_call']:.0f} ns ="
        f" {tp['poll']['call_overhead_pct']:.2f}% of a plain poll's CPU per message; consume"
        f" {calls['consume_ns_per_call']:.0f} ns per batch of {BATCH} = {tp['consume']['call_overhead_pct']:.3f}%"
    )
    rows = result["latency"]
    bench.print_table(
        [row for row in rows if "error" not in row],
        LATENCY,
        title="\ngroup leave / rejoin latency in seconds (medians)",
    )
    for row in rows:
        if "error" in row:
            print(f"{row['consumers']} consumers: {row['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefetch", type=float, default=5.0, help="seconds to let the local queue fill")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with broker() as config:
        result = {
            "throughput": bench_throughput(config, args.messages, args.repeats, prefetch=args.prefetch),
            "latency": bench_latency(config, args.consumers, args.rounds),
        }
    bench.write_results(args.out, result)
    print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
