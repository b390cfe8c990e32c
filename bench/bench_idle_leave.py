"""Time from "both members of a 2-consumer classic group close" to "the broker describes the group EMPTY".

python bench/bench_idle_leave.py --mode proxy|loopback --partitions 1 --client plain|controlled --rounds 5 --out X.json
(broker: started here, in --data-dir; proxy mode = bench/_delay_proxy.delayed_broker)

Written to find the 6 s EMPTY wait of bench_stay's 8 x 1 window (issue 41, item 7): librdkafka 2.16 sends no
LeaveGroup when a classic cooperative member that owns no partition closes. The results' ``controlled:patched``
rows were the ControlledConsumer with its leave patched in this script to unsubscribe such a member first:
what ``close_and_leave`` in ``airflow_provider_kstate/client_piece/consumer.py`` does since 09f6025 (the patch
is gone: ``controlled`` measures the fix now; ``plain:unsub-idle`` the same on a plain consumer).
Results: docs/measurements/issue41/idle-leave.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support.traffic import SeqProducer

SETTINGS = {
    "auto.offset.reset": "latest",
    "topic.metadata.refresh.interval.ms": 1000,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "auto.commit.interval.ms": 500,
}


def stamp() -> str:
    t = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}"


@contextlib.contextmanager
def broker(mode: str, data_dir: Path, one_way_ms: float):
    if mode == "proxy":
        from _delay_proxy import delayed_broker

        with delayed_broker(data_dir, one_way_ms) as config:
            yield config
    else:
        import shutil

        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        helper = [sys.executable, "-m", "kstate_support.broker"]
        up = subprocess.run(
            [*helper, "up", "--data-dir", str(data_dir)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        bootstrap = up.stdout.strip().splitlines()[-1]
        try:
            yield {"bootstrap.servers": bootstrap}
        finally:
            subprocess.run([*helper, "down", "--data-dir", str(data_dir)], check=False, timeout=120)


def describe(admin: AdminClient, group: str) -> tuple[str, int]:
    try:
        f = admin.describe_consumer_groups([group], request_timeout=5)[group]
        d = f.result()
        return str(d.state).split(".")[-1], len(d.members)
    except KafkaException as exc:
        return f"ERR:{exc.args[0].name()}", -1


class PlainMember(threading.Thread):
    """A plain Consumer with the bench's settings; on stop: synchronous commit, then close()."""

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        group: str,
        i: int,
        assignor: str,
        debug_log: Path | None,
        leave: str = "close",
    ) -> None:
        super().__init__(daemon=True)
        settings = {**config, **SETTINGS, "group.id": group, "client.id": f"{group}-{i}"}
        if assignor:
            settings["partition.assignment.strategy"] = assignor
        if debug_log is not None:
            settings["debug"] = "cgrp,protocol,broker"
            lg = logging.getLogger(f"rdk-{group}-{i}")
            h = logging.FileHandler(debug_log)
            h.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(name)s %(message)s", "%H:%M:%S"))
            lg.addHandler(h)
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            settings["logger"] = lg
        self.leave = leave
        self.c = Consumer(settings)
        self.c.subscribe([topic], on_assign=self._assigned)
        self.assigned: list[int] = []
        self.stop_flag = threading.Event()
        self.events: dict[str, float] = {}
        self.commit_result = ""

    def _assigned(self, c: Any, parts: list[Any]) -> None:
        self.assigned = [p.partition for p in parts]

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.c.poll(0.1)
        self.events["stop"] = time.monotonic()
        try:
            self.c.commit(asynchronous=False)
            self.commit_result = "ok"
        except KafkaException as exc:
            self.commit_result = exc.args[0].name()
        self.events["committed"] = time.monotonic()
        if self.leave == "unsub" or (self.leave == "unsub-idle" and not self.c.assignment()):
            self.c.unsubscribe()
            self.events["unsubscribed"] = time.monotonic()
        self.c.close()
        self.events["closed"] = time.monotonic()


def wait_stable(admin: AdminClient, group: str, members: int, timeout: float = 60.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        state, n = describe(admin, group)
        if state == "STABLE" and n == members:
            return time.monotonic() - start
        time.sleep(0.05)
    raise TimeoutError(f"{group} not STABLE with {members}: {describe(admin, group)}")


def wait_empty(admin: AdminClient, group: str, t0: float, timeout: float = 30.0) -> tuple[float, list]:
    samples = []
    while time.monotonic() - t0 < timeout:
        state, n = describe(admin, group)
        now = time.monotonic()
        if not samples or samples[-1][1:] != [state, n]:
            samples.append([round(now - t0, 3), state, n])
        if state == "EMPTY":
            return now - t0, samples
        time.sleep(0.02)
    return float("nan"), samples


def round_plain(config, admin, topic, group, assignor, debug_log, leave="close"):
    members = [PlainMember(config, topic, group, i, assignor, debug_log, leave) for i in range(2)]
    for m in members:
        m.start()
    stable = wait_stable(admin, group, 2)
    time.sleep(2.0)  # steady traffic, a few heartbeats
    wall = stamp()
    t0 = time.monotonic()
    for m in members:
        m.stop_flag.set()
    empty, samples = wait_empty(admin, group, t0)
    for m in members:
        m.join(30)
    return {
        "group": group,
        "stop_wall": wall,
        "stable_after": round(stable, 3),
        "empty_s": round(empty, 3),
        "samples": samples,
        "members": [
            {
                "client": f"{group}-{i}",
                "assigned": m.assigned,
                "commit": m.commit_result,
                **{k: round(v - t0, 3) for k, v in m.events.items()},
            }
            for i, m in enumerate(members)
        ],
    }


def round_controlled(config, admin, control, topic, group, assignor):
    from kstate_support.traffic import ConsumerFleet, Timeline

    timeline = Timeline()
    fleet = ConsumerFleet(
        config,
        topic,
        group,
        n=2,
        controlled=True,
        check_interval=0.2,
        timeline=timeline,
        name="m",
        protocol="classic",
        assignor=assignor or None,
        metadata_ms=1000,
    )
    try:
        stable = wait_stable(admin, group, 2)
        time.sleep(2.0)
        wall = stamp()
        t0 = time.monotonic()
        control.pause([group], topic, "leave-probe")
        empty, samples = wait_empty(admin, group, t0)
        with timeline._lock:
            events = [[round(t - t0, 3), m, k, len(p)] for t, m, k, p in timeline.events if t >= t0 - 0.01]
        return {
            "group": group,
            "stop_wall": wall,
            "stable_after": round(stable, 3),
            "empty_s": round(empty, 3),
            "samples": samples,
            "events": events,
        }
    finally:
        fleet.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["proxy", "loopback"], required=True)
    ap.add_argument("--clients", default="plain,controlled")
    ap.add_argument("--partitions", default="1,8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--one-way-ms", type=float, default=2.8)
    ap.add_argument("--assignor", default="cooperative-sticky")
    ap.add_argument(
        "--data-dir", type=Path, default=Path(__file__).resolve().parents[1] / ".kstate" / "bench-idle-leave"
    )
    ap.add_argument("--debug-log", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    results: list[dict[str, Any]] = []
    with broker(args.mode, args.data_dir, args.one_way_ms) as config:
        print("broker", config, flush=True)
        admin = AdminClient(config)
        control = None
        if "controlled" in args.clients:
            from airflow_provider_kstate.cluster.admin import ClusterAdmin
            from airflow_provider_kstate.cluster.control import Controller

            control = Controller(ClusterAdmin(config))
            control.channel()
        for parts in [int(p) for p in args.partitions.split(",")]:
            topic = f"probe{parts}-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(topic, parts, 1)])[topic].result()
            traffic = SeqProducer(config, topic, rate=200.0)  # the tests' keyed traffic
            traffic.start()
            time.sleep(1.0)
            try:
                for client in args.clients.split(","):
                    for r in range(args.rounds):
                        group = f"{topic}-{client.replace(':', '_')}{r}"
                        if client.startswith("plain"):
                            leave = client.split(":", 1)[1] if ":" in client else "close"
                            res = round_plain(
                                config, admin, topic, group, args.assignor, args.debug_log, leave
                            )
                        else:
                            res = round_controlled(config, admin, control, topic, group, args.assignor)
                        res.update(mode=args.mode, partitions=parts, client=client, round=r)
                        results.append(res)
                        print(json.dumps(res), flush=True)
                        args.out.write_text(json.dumps(results, indent=1))
                        time.sleep(0.5)
            finally:
                traffic.stop()
        if control is not None:
            control.close()
        # keep the broker's log
        import shutil

        for log in args.data_dir.rglob("server.log"):
            shutil.copy(log, args.out.with_suffix(".server.log"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
