"""IncreaseRun.again counts its time from a step's first failure (issue 41, item 5): an attempt that itself
waited a request's whole timeout still gets its tries inside the task."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from airflow_provider_kstate.errors import BrokerUnavailableError
from airflow_provider_kstate.increase.run import IncreaseRun


def run(retry_within: float) -> SimpleNamespace:
    """What ``again`` uses of a run."""
    return SimpleNamespace(retry_within=retry_within, retried=[], log=logging.getLogger("test"))


def test_a_first_attempt_that_waited_its_timeout_is_still_tried_again() -> None:
    attempts: list[float] = []

    def slow_then_fine() -> str:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(0.4)  # the request's whole timeout, on a broker killed with it in flight
            raise BrokerUnavailableError("no answer within 0.4s")
        return "seeded"

    r = run(retry_within=0.3)
    assert IncreaseRun.again(r, "seed", slow_then_fine) == "seeded"  # type: ignore[arg-type]
    [(step, error, after_s)] = r.retried
    assert (step, error) == ("seed", "BrokerUnavailableError") and after_s >= 0.4


def test_the_budget_still_ends_the_retries() -> None:
    attempts: list[int] = []

    def down() -> None:
        attempts.append(1)
        time.sleep(0.2)
        raise BrokerUnavailableError("down")

    with pytest.raises(BrokerUnavailableError):
        IncreaseRun.again(run(retry_within=0.5), "seed", down)  # type: ignore[arg-type]
    assert len(attempts) == 2, "failed at 0.2 s; tried at 0.4 s, failed at 0.6 s: 0.4 + 0.4 passes 0.5"
