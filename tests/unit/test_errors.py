"""The domain's plain errors (errors.py) and their Airflow faces (exceptions.py): one place translates."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from airflow_provider_kstate import errors, exceptions
from airflow_provider_kstate.compat import AirflowFailException
from airflow_provider_kstate.increase.plan import InvalidPlanError
from airflow_provider_kstate.operators.base import KStateStepOperator


def test_every_domain_error_has_an_airflow_face_of_its_name() -> None:
    domain = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(domain) >= 10 and set(exceptions.FACES) == set(domain)
    for error, face in exceptions.FACES.items():
        assert face is getattr(exceptions, error.__name__)
        assert issubclass(face, error) and issubclass(face, exceptions.KStateError)
    # the fatal and retryable ones stay as users catch them
    assert issubclass(exceptions.UnsafeResumeError, AirflowFailException)
    assert issubclass(exceptions.ReportError, exceptions.KStateFatalError)
    assert not issubclass(exceptions.GroupNotEmptyError, exceptions.KStateFatalError)


def test_a_domain_error_leaves_as_its_face_with_its_message_traceback_and_cause() -> None:
    def domain() -> None:
        try:
            raise FileNotFoundError("seed.evidence.json")
        except OSError as exc:
            raise errors.ReportError("report x: seed.evidence.json") from exc

    with pytest.raises(exceptions.ReportError, match="report x") as info:
        with exceptions.airflow_errors():
            domain()
    assert isinstance(info.value, exceptions.KStateFatalError)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert info.traceback[-1].name == "domain"  # the line that raised it
    # a face passes unchanged; a subclass the domain defines leaves as its nearest face
    face = exceptions.GroupNotEmptyError("members left")
    assert exceptions.airflow_error(face) is face
    plan_error = exceptions.airflow_error(InvalidPlanError("not a kstate plan"))
    assert (
        type(plan_error) is exceptions.InvalidPartitionCountError and str(plan_error) == "not a kstate plan"
    )


def test_a_step_operator_fails_with_the_face_of_what_the_domain_raised() -> None:
    class Step(KStateStepOperator):
        def execute(self, context: Any) -> None:
            raise errors.UnsafeResumeError("UNSAFE TO RESUME")

        def execute_complete(self, context: Any, event: Any) -> None:
            raise errors.GroupNotEmptyError("c1@host")

    step = Step(task_id="s", plan={})
    with pytest.raises(exceptions.UnsafeResumeError, match="UNSAFE TO RESUME"):
        step.execute({})
    with pytest.raises(exceptions.GroupNotEmptyError, match="c1@host"):
        step.execute_complete({}, {})
