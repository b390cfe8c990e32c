"""The test suites' shared fixtures and their helpers: one home, a pytest plugin registered once by
``tests/conftest.py`` (``pytest_plugins``), so the unit, integration, e2e and Tansu suites use the same ones.

* ``unique`` and ``make_topic``: names unique to a test, topics created for it and deleted after. A suite
  whose broker differs overrides the two small fixtures they read: ``name_prefix`` (Tansu's names say
  ``kstate-tansu``) and ``replication_factor`` (Tansu wants 1; Kafka takes -1, its default).
* ``control_topic``, ``control`` and ``controller``: a control topic of the test's own, deleted after; the
  control channel on it (what services with the client piece read), and the controller on it (the control
  hook's, on ``kafka_default``).
* :func:`drop_topics` (best-effort delete) and :func:`wait_until` (a bounded wait).

The broker fixtures themselves (``kafka_config``, ``bootstrap``, ``admin``, ``run_dag``) stay in the
conftests: each suite names its own broker. Nothing here starts one; the fixtures that need it ask for
``admin`` or ``kafka_config``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: Seconds a :func:`wait_until` waits unless told otherwise.
WAIT = 20.0


def drop_topics(admin: Any, names: list[str]) -> None:
    """Delete ``names`` and wait for it, ignoring any failure (a clean-up: the topic may be gone)."""
    if not names:
        return
    for future in admin.delete_topics(names).values():
        try:
            future.result(timeout=30)
        except Exception:  # noqa: BLE001 - best-effort clean-up
            pass


def wait_until(
    check: Callable[[], bool],
    timeout: float = WAIT,
    step: Callable[[], Any] | None = None,
    interval: float = 0.01,
) -> float:
    """Call ``step`` (e.g. a service's poll; else sleep ``interval``) until ``check()``; return the seconds it
    took; fail (AssertionError) after ``timeout``."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        if step is not None:
            step()
        else:
            time.sleep(interval)
    return time.monotonic() - start


@pytest.fixture(scope="session")
def name_prefix() -> str:
    """The first word of every name :func:`unique` makes (a suite on another broker overrides it)."""
    return "kstate-test"


@pytest.fixture(scope="session")
def replication_factor() -> int:
    """The replication factor of the topics :func:`make_topic` creates (-1: the broker's default)."""
    return -1


@pytest.fixture
def unique(name_prefix: str) -> Callable[[str], str]:
    """Return a maker of names unique to this test run (topics, groups), safe on a shared cluster."""
    tag = uuid.uuid4().hex[:8]
    return lambda prefix: f"{name_prefix}-{prefix}-{tag}"


@pytest.fixture
def make_topic(
    admin: Any, unique: Callable[[str], str], replication_factor: int
) -> Iterator[Callable[..., str]]:
    """Create topics for a test and delete them afterwards."""
    from confluent_kafka.admin import NewTopic

    created: list[str] = []

    def _make(prefix: str = "t", partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = unique(prefix)
        topic = NewTopic(name, partitions, replication_factor, config=config or {})
        for future in admin.create_topics([topic]).values():
            future.result(timeout=30)
        created.append(name)
        return name

    yield _make
    drop_topics(admin, created)


@pytest.fixture
def control_topic(admin: Any, unique: Callable[[str], str]) -> Iterator[str]:
    """A control topic of this test's own (created by whoever uses it first), deleted afterwards."""
    name = unique("control")
    yield name
    drop_topics(admin, [name])


@pytest.fixture
def control(kafka_config: dict[str, Any], control_topic: str) -> Iterator[Any]:
    """The control channel (:class:`~airflow_provider_kstate.client_piece.channel.ControlChannel`) on
    ``control_topic``, created."""
    from airflow_provider_kstate.client_piece.channel import ControlChannel

    channel = ControlChannel(kafka_config, control_topic)
    channel.ensure()
    yield channel
    channel.close()


@pytest.fixture
def controller(control_topic: str) -> Iterator[Any]:
    """The controller (the control hook's, on ``kafka_default``) on ``control_topic``, created."""
    from airflow_provider_kstate.hooks.control import KStateControlHook

    hook = KStateControlHook(control_topic=control_topic).get_conn
    hook.channel()  # creates the control topic
    yield hook
    hook.close()
