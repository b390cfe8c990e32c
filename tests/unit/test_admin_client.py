"""Admin clients never destroyed on librdkafka's threads (admin_client.py): the cause of the broker-fault
matrix's silent deaths (issue 33), reproduced without a broker in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from airflow_provider_kstate import admin_client as clients

#: A client, garbage in a reference cycle with a request in flight; the request's done-callback runs on the
#: client's own background thread (librdkafka's) and collects garbage there, as any allocation may.
SCRIPT = textwrap.dedent(
    """
    import gc, sys, threading
    from confluent_kafka.admin import AdminClient as Plain
    from airflow_provider_kstate.admin_client import AdminClient as Safe, deferred_count

    cls = Safe if sys.argv[1] == "safe" else Plain
    gc.disable()
    done = threading.Event()

    class Cycle:
        pass

    def make():
        c = Cycle()
        c.c = c
        c.admin = cls({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
        future = c.admin.describe_consumer_groups(["g"], request_timeout=0.3)["g"]

        def collect(_future):
            gc.collect()
            done.set()

        future.add_done_callback(collect)

    make()
    assert done.wait(30), "the request never completed"
    print("survived, deferred", deferred_count(), flush=True)
    """
)


def _run(kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, kind], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_client_collected_on_its_own_background_thread_is_destroyed_on_the_janitor() -> None:
    safe = _run("safe")
    assert safe.returncode == 0, safe.stdout + safe.stderr
    assert "survived, deferred 1" in safe.stdout
    # confluent-kafka's own client dies there (librdkafka aborts: SIGABRT): the test reproduces the hazard
    plain = _run("plain")
    assert plain.returncode != 0 and "survived" not in plain.stdout, (
        "confluent-kafka's AdminClient no longer dies when collected on its background thread: "
        f"this test no longer proves the guard ({plain.returncode}, {plain.stderr[-500:]})"
    )
    assert "librdkafka owned thread" in plain.stderr


def test_on_a_python_thread_the_client_goes_at_once() -> None:
    before = clients.deferred_count()
    client = clients.AdminClient({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    assert not clients.on_foreign_thread()
    del client
    assert clients.deferred_count() == before
