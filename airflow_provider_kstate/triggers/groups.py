"""The trigger behind every deferrable kstate sensor: polls a cluster condition in the triggerer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_provider_kstate.hooks.admin import KStateAdminHook
from airflow_provider_kstate.hooks.control import KStateControlHook
from airflow_provider_kstate.increase.checks import CHECKS, CheckResult


def run_check(
    name: str,
    kafka_config_id: str,
    arguments: dict[str, Any],
    control_topic: str | None = None,
    request_timeout: float = 10.0,
) -> CheckResult:
    """Run the named check with a fresh hook: the one place a sensor's poke and the trigger's poll (in a
    thread of the triggerer, off the event loop) run a check.

    :param name: a key of :data:`~airflow_provider_kstate.increase.checks.CHECKS`.
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param arguments: the check's keyword arguments.
    :param control_topic: the control topic, for a check that reads the control channel too (its
        ``control``: the EMPTY check's ghosts); None: the check gets none.
    :param request_timeout: seconds each request may take.
    """
    if control_topic is None:
        hook = KStateAdminHook(kafka_config_id=kafka_config_id, request_timeout=request_timeout)
        return CHECKS[name](hook, **arguments)
    channel = KStateControlHook(kafka_config_id, control_topic=control_topic, request_timeout=request_timeout)
    try:
        return CHECKS[name](channel.admin, **arguments, control=channel.get_conn)
    finally:
        channel.get_conn.close()


class KStateConditionTrigger(BaseTrigger):
    """Poll a named check (see ``increase.checks.CHECKS``) until it holds or the deadline passes.

    The admin client is synchronous, so each poll runs in a thread via ``sync_to_async``; waits use
    ``asyncio.sleep``, starting at 0.1 s and doubling up to ``poke_interval`` (a paused consumer leaves
    within a fraction of a second, so the first polls are cheap and quick). The trigger enforces its own deadline, so a wait is bounded even where the
    deferral timeout is not (``dag.test()``).

    :param check: the check's name, e.g. ``groups_empty``.
    :param kafka_config_id: the Airflow connection id (``kafka`` type).
    :param arguments: JSON-safe keyword arguments of the check.
    :param poke_interval: seconds between polls.
    :param deadline: unix time after which the trigger gives up with ``{"status": "timeout"}``.
    :param control_topic: the control topic, for a check that reads the control channel too (see
        :func:`run_check`); None: none.
    """

    def __init__(
        self,
        *,
        check: str,
        kafka_config_id: str,
        arguments: dict[str, Any],
        poke_interval: float,
        deadline: float,
        control_topic: str | None = None,
    ) -> None:
        super().__init__()
        if check not in CHECKS:
            raise ValueError(f"unknown check {check!r}; expected one of {sorted(CHECKS)}")
        self.check = check
        self.kafka_config_id = kafka_config_id
        self.arguments = arguments
        self.poke_interval = poke_interval
        self.deadline = deadline
        self.control_topic = control_topic

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{self.__class__.__module__}.{self.__class__.__qualname__}",
            {
                "check": self.check,
                "kafka_config_id": self.kafka_config_id,
                "arguments": self.arguments,
                "poke_interval": self.poke_interval,
                "deadline": self.deadline,
                "control_topic": self.control_topic,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = 0
        poll = sync_to_async(run_check, thread_sensitive=False)
        while True:
            polls += 1
            try:
                result = await poll(self.check, self.kafka_config_id, self.arguments, self.control_topic)
            except Exception as exc:  # noqa: BLE001 - reported to the task, which raises it
                yield TriggerEvent(
                    {"status": "error", "check": self.check, "message": f"{type(exc).__name__}: {exc}"}
                )
                return
            if result.ok:
                yield TriggerEvent(
                    {"status": "success", "check": self.check, "polls": polls, "detail": result.detail}
                )
                return
            if time.time() >= self.deadline:
                yield TriggerEvent(
                    {"status": "timeout", "check": self.check, "polls": polls, "detail": result.detail}
                )
                return
            self.log.info("%s not yet: %s", self.check, result.detail)
            await asyncio.sleep(min(self.poke_interval, 0.1 * 2 ** (polls - 1)))
