"""The broker doctor as a task: refuse to go on when the cluster breaks a promise the next steps need."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.defaults import DEFAULT_TTL
from airflow_provider_kstate.doctor.promises import Needs
from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.operators.kafka import KStateKafkaOperator
from airflow_provider_kstate.params import as_bool, as_str_list

if TYPE_CHECKING:
    from collections.abc import Iterable

    from airflow.sdk import Context

    from airflow_provider_kstate.doctor.verdict import Verdict


class KStateBrokerDoctorOperator(KStateKafkaOperator):
    """Check that the cluster keeps the Kafka promises the run relies on; fail before anything changes.

    The cheap checks (ApiVersions lists every API the run needs) run every time; the behavioural checks
    (ListOffsets against a real fetch, read_committed and the LSO against a transaction, group states
    against live and never-seen groups, an offset read back) are cached per cluster for ``ttl`` seconds.
    A broken promise fails the task with :class:`~airflow_provider_kstate.errors.BrokerDeviationError`,
    naming it; ``allow_broker_deviation`` accepts named ones (logged as ``RISK ACCEPTED``). Returns the
    verdict (XCom).

    :param needs: a named set of promises (:class:`~airflow_provider_kstate.doctor.promises.Needs`:
        ``"increase"``, ``"state"``, ``"all"``), or a list of promise names.
    :param allow_broker_deviation: promise names to accept although broken (templated).
    :param refresh_broker_check: re-run the behavioural checks now instead of using the cached verdict
        (templated).
    :param ttl: seconds a cached verdict stays valid.
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param request_timeout: seconds each request may take (default 20).
    """

    template_fields: tuple[str, ...] = ("allow_broker_deviation", "refresh_broker_check")
    ui_color = "#fff3e0"
    default_request_timeout = 20.0

    def __init__(
        self,
        *,
        needs: Needs | str | list[str] = Needs.ALL,
        allow_broker_deviation: list[str] | str | None = None,
        refresh_broker_check: bool | str = False,
        ttl: float = DEFAULT_TTL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.needs = needs
        self.allow_broker_deviation = allow_broker_deviation
        self.refresh_broker_check = refresh_broker_check
        self.ttl = ttl

    def execute(self, context: Context) -> dict[str, Any]:
        needed = needed_promises(self.needs)
        allow = allowed_deviations(self.allow_broker_deviation)
        from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

        hook = KStateDoctorHook(self.kafka_config_id, request_timeout=self.request_timeout)
        refresh = as_bool("refresh_broker_check", self.refresh_broker_check)
        verdict = hook.require(needed, allow, f"this {self.dag_id} run", refresh, self.ttl)
        self.log.info("DOCTOR the broker keeps every promise this run needs (%s)", ", ".join(needed))
        return verdict.to_dict()


def needed_promises(needs: Needs | str | list[str]) -> tuple[str, ...]:
    """Return the promise names of ``needs`` (a named set or a list); raise KStateConfigError naming the
    named sets and the promises when unknown."""
    from airflow_provider_kstate.doctor.promises import NEEDS, Needs, check_names

    if isinstance(needs, str) and needs in tuple(Needs):
        return NEEDS[Needs(needs)]
    try:
        return check_names(needs, "needs")
    except ValueError as exc:
        raise KStateConfigError(
            f"{exc}; or a named set: one of {', '.join(Needs)}. Nothing was changed."
        ) from None


def allowed_deviations(allow: object) -> tuple[str, ...]:
    """Return ``allow_broker_deviation`` (a list, a rendered list ``"['x']"`` or ``"x,y"``) as promise names;
    raise KStateConfigError naming an unknown one."""
    from airflow_provider_kstate.doctor.promises import check_names

    try:
        return check_names(as_str_list("allow_broker_deviation", allow))
    except ValueError as exc:
        raise KStateConfigError(f"{exc}. Nothing was changed.") from None


def broker_verdict(task: Any, needs: Iterable[str], what: str) -> Verdict:
    """Return the broker doctor's verdict on ``task``'s connection (cached per cluster), refusing before
    anything changes a broken promise of ``needs`` that the task's ``allow_broker_deviation`` does not accept
    (:class:`~airflow_provider_kstate.errors.BrokerDeviationError`; each accepted one logged as ``RISK
    ACCEPTED``). The plan and the Spark state tasks ask it so.

    :param task: an operator with ``kafka_config_id``, ``request_timeout`` and ``allow_broker_deviation``.
    :param what: the run a refusal names (``the increase of 'orders'``).
    """
    from airflow_provider_kstate.hooks.doctor import KStateDoctorHook

    allow = allowed_deviations(task.allow_broker_deviation)
    hook = KStateDoctorHook(task.kafka_config_id, request_timeout=task.request_timeout)
    return hook.require(needs, allow, what)
