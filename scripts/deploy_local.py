"""`make deploy-local`: try the provider like production, on this machine.

    python scripts/deploy_local.py            # start everything, print the addresses, wait for Ctrl-C
    python scripts/deploy_local.py --check    # start, trigger a dry-run increase through the REST API, stop
    python scripts/deploy_local.py down       # stop a deployment whose owner died (by its recorded PIDs)

Starts the embedded Kafka broker (or uses ``KSTATE_BOOTSTRAP_SERVERS`` / ``KSTATE_KAFKA_CONFIG``), then
``kstate_support.prod_deploy.ProdStack``: a private PostgreSQL cluster as the metadata database, Redis as the
Celery broker, and Airflow's ``api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` and two
``celery worker`` processes from their own virtualenv (``.kstate/deploy/venv``: the provider with its
``spark-local``, ``celery`` and ``postgres`` extras). The example DAGs are unpaused; open the printed
address and log in with the printed user and password. Ctrl-C (or SIGTERM) stops every process it
started, by PID.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any

import httpx
from kstate_support import ROOT, prod_deploy
from kstate_support import broker as broker_helper

EXAMPLE_DAGS = (
    "kstate_partition_increase",
    "kstate_partition_increase_per_step",
    "kstate_state_maintenance",
    "kstate_example_pipeline",
)


def say(message: str) -> None:
    print(f"[deploy-local] {message}", flush=True)


def _client(stack: prod_deploy.ProdStack) -> httpx.Client:
    token = httpx.post(
        f"{stack.base_url}/auth/token",
        json={"username": stack.username, "password": stack.password},
        timeout=60,
        trust_env=False,
    ).json()["access_token"]
    return httpx.Client(
        base_url=stack.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60, trust_env=False
    )


def unpause_examples(api: httpx.Client, timeout: float = 180.0) -> None:
    """Wait until the dag-processor has parsed the example DAGs, then unpause them."""
    deadline = time.monotonic() + timeout
    for dag_id in EXAMPLE_DAGS:
        while api.get(f"/api/v2/dags/{dag_id}").status_code != 200:
            if time.monotonic() > deadline:
                raise prod_deploy.StackError(f"{dag_id} not parsed within {timeout:.0f} s")
            time.sleep(1)
        api.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()


def dry_run(api: httpx.Client, kafka_config: dict[str, Any]) -> str:
    """Trigger a dry-run increase of a fresh topic through the REST API; return the run's final state."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"kstate-deploy-check-{int(time.time())}"
    admin = AdminClient(kafka_config)
    for future in admin.create_topics([NewTopic(topic, 1, -1)]).values():
        future.result(timeout=30)
    body = {"conf": {"topic": topic, "partitions": 2, "dry_run": True}, "logical_date": None}
    run = api.post("/api/v2/dags/kstate_partition_increase/dagRuns", json=body)
    run.raise_for_status()
    run_id = run.json()["dag_run_id"]
    deadline = time.monotonic() + 300
    state = "queued"
    while state not in ("success", "failed") and time.monotonic() < deadline:
        time.sleep(2)
        state = api.get(f"/api/v2/dags/kstate_partition_increase/dagRuns/{run_id}").json()["state"]
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)
    return str(state)


def up(check: bool) -> int:
    halt = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: halt.set())
    t0 = time.monotonic()
    say("building the deployment's virtualenv (.kstate/deploy/venv) if needed ...")
    prod_deploy.ensure_venv()
    with broker_helper.cluster(ROOT / ".kstate" / "broker-deploy") as kafka_config:
        say(f"Kafka at {kafka_config['bootstrap.servers']}; starting PostgreSQL, Redis and Airflow ...")
        stack = prod_deploy.ProdStack(kafka_config)
        stack.start()
        try:
            api = _client(stack)
            unpause_examples(api)
            say(f"up in {time.monotonic() - t0:.0f} s (Airflow {stack.started_in:.0f} s): {stack.base_url}")
            say(f"user {stack.username}, password {stack.password}")
            say(
                f"PostgreSQL 127.0.0.1:{stack.pg_port}, Redis 127.0.0.1:{stack.redis_port}, logs {stack.logs}"
            )
            say("processes: " + ", ".join(f"{n} {p.pid}" for n, p in stack.procs.items()))
            if check:
                state = dry_run(api, kafka_config)
                say(f"dry-run increase through the REST API: {state}")
                return 0 if state == "success" else 1
            say("Ctrl-C stops everything")
            try:
                while not halt.wait(1):
                    pass
            except KeyboardInterrupt:
                pass
            return 0
        finally:
            say("stopping ...")
            stack.stop()
            say("stopped")


def down() -> int:
    """Stop what a dead ``up`` left, from each ``.kstate/deploy-*/pids.json``."""
    for record in sorted((ROOT / ".kstate").glob("deploy-*/pids.json")):
        stopped = prod_deploy.stop_recorded(record.parent)
        say(f"{record.parent.name}: stopped {', '.join(stopped) or 'nothing (all gone)'}")
    broker_helper.down(ROOT / ".kstate" / "broker-deploy")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", nargs="?", choices=["up", "down"], default="up")
    parser.add_argument("--check", action="store_true", help="trigger a dry-run increase, then stop")
    args = parser.parse_args(argv)
    return down() if args.action == "down" else up(args.check)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
