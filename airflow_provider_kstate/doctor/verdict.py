"""The doctor's verdict on one cluster: which promise holds, which is broken, and what it saw.

A :class:`Verdict` is a :class:`~airflow_provider_kstate.documents.Document` (schema
``docs/schemas/doctor/verdict.schema.json``): ``to_dict()`` is what the doctor's task returns and the CLI
prints, ``to_json()`` what the cache topic holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

from airflow_provider_kstate.doctor.promises import ALL_PROMISES, DESCRIPTIONS
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.errors import BrokerDeviationError, VerdictError


class BrokerDeviation(BrokerDeviationError):
    """A promise the job needs is broken by the broker (domain error; the hook turns it into Airflow's)."""

    def __init__(self, message: str, promises: tuple[str, ...]) -> None:
        super().__init__(message)
        self.promises = promises


class CheckResult(Document):
    """One promise checked: ``ok`` is None when it could not be checked (``detail`` says why), or when the
    promise does not apply to the broker (``applies`` false: it lacks what the promise is about, such as share
    groups on Kafka 4.0, or not enabled on 4.1, so there is nothing to keep or break)."""

    model_config = ConfigDict(title="kstate doctor: one promise checked")

    ok: bool | None = Field(default=None, description="true: kept; false: broken; null: could not be checked")
    detail: str = Field(default="", description="what the check saw, or why it could not check")
    applies: bool = Field(
        default=True,
        description="false: the broker lacks what the promise is about (share groups); ok is then null",
    )

    def __init__(self, ok: bool | None = None, detail: str = "", **data: Any) -> None:
        BaseModel.__init__(self, ok=ok, detail=detail, **data)  # positional, as the probes build it

    @classmethod
    def not_applicable(cls, detail: str) -> CheckResult:
        """The result of a promise about something the broker does not have (``detail`` says what)."""
        return cls(None, detail, applies=False)


class Verdict(Document):
    """The results of the doctor's checks on one cluster, at one time (cached in the cluster's
    ``_kstate_doctor`` topic; a verdict written before it had a version reads as version 1).

    :param cluster: the cluster id (or the bootstrap servers when the broker reports none).
    :param checked_at: when the behavioural checks ran (epoch seconds).
    :param results: ``{promise: CheckResult}``; a promise absent was not checked (a promise this version does
        not know is dropped on read).
    """

    model_config = ConfigDict(title="kstate doctor: the verdict on one cluster")
    schema_name: ClassVar[str] = "doctor/verdict"
    read_error: ClassVar[type[Exception]] = VerdictError

    v: Literal[1] = Field(
        default=1, description="version; a verdict cached before it had one has none: read as 1"
    )
    cluster: str = Field(
        default="", description="the cluster id (or the bootstrap servers when it reports none)"
    )
    checked_at: float = Field(
        default=0.0, description="when the behavioural checks ran (seconds since the Unix epoch)"
    )
    results: dict[str, CheckResult] = Field(
        default_factory=dict, description="promise -> its check; a promise absent was not checked"
    )

    def __init__(
        self,
        cluster: str = "",
        checked_at: float = 0.0,
        results: dict[str, CheckResult] | None = None,
        **data: Any,
    ) -> None:
        BaseModel.__init__(self, cluster=cluster, checked_at=checked_at, results=results or {}, **data)

    @field_validator("results", mode="before")
    @classmethod
    def _known_promises(cls, value: Any) -> Any:
        """Drop the promises this version does not know (a newer doctor's); a null is no result."""
        if value is None:
            return {}
        return {p: r for p, r in value.items() if p in ALL_PROMISES} if isinstance(value, dict) else value

    @computed_field(alias="broken", description="the promises found broken (derived; ignored on read)")  # type: ignore[prop-decorator]
    @property
    def broken_promises(self) -> list[str]:
        """The promises found broken (:meth:`broken`), written as ``broken``."""
        return self.broken()

    def kept(self, promise: str) -> bool:
        """True when ``promise`` was checked and kept (not when broken, unchecked or not applicable)."""
        result = self.results.get(promise)
        return result is not None and result.ok is True

    def broken(self) -> list[str]:
        """Return the promises found broken, in :data:`ALL_PROMISES` order."""
        return [p for p in ALL_PROMISES if p in self.results and self.results[p].ok is False]

    def unchecked(self, needed: Iterable[str]) -> list[str]:
        """Return the promises of ``needed`` that were not checked (absent, or ``ok`` None), leaving out
        those that do not apply to this broker."""
        missing = CheckResult(None)
        return [
            p
            for p in needed
            if self.results.get(p, missing).ok is None and self.results.get(p, missing).applies
        ]

    def not_applicable(self) -> list[str]:
        """Return the promises that do not apply to this broker (it lacks what they are about)."""
        return [p for p in ALL_PROMISES if p in self.results and not self.results[p].applies]

    def merged(self, other: Verdict) -> Verdict:
        """Return this verdict with ``other``'s results laid over it (the cheap checks over a cached one)."""
        return Verdict(
            self.cluster, max(self.checked_at, other.checked_at), {**self.results, **other.results}
        )

    def refuse(self, needed: Iterable[str], allow: Iterable[str] = (), what: str = "this run") -> list[str]:
        """Raise :class:`BrokerDeviation` when a promise of ``needed`` is broken and not in ``allow``.

        The allowed broken promises are returned: the caller logs each with :meth:`risk_line`.

        :param needed: the promises the job relies on.
        :param allow: broken promises the user accepts by name.
        :param what: the job, for the message.
        """
        needed = tuple(needed)
        allowed = set(allow)
        broken = [p for p in self.broken() if p in needed]
        refused = tuple(p for p in broken if p not in allowed)
        if refused:
            lines = "; ".join(f"{p} ({DESCRIPTIONS[p]}): {self.results[p].detail}" for p in refused)
            raise BrokerDeviation(
                f"the broker of cluster {self.cluster} breaks promises {what} relies on: {lines}. "
                f"Nothing was changed. Run it on a broker that keeps them, or accept a deviation by name with "
                f"allow_broker_deviation={list(refused)} (logged as RISK ACCEPTED).",
                refused,
            )
        return [p for p in broken if p in allowed]

    def risk_line(self, promise: str, what: str = "this run") -> str:
        """Return the ``RISK ACCEPTED`` line of an allowed broken promise."""
        return (
            f"RISK ACCEPTED: broker {self.cluster} breaks {promise!r} ({DESCRIPTIONS[promise]}): "
            f"{self.results[promise].detail}; {what} goes on because allow_broker_deviation names it"
        )

    def lines(self) -> list[str]:
        """Return one line per checked promise, for logs and the CLI."""
        out = [
            f"cluster {self.cluster}, checked {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.checked_at))}"
        ]
        for promise in ALL_PROMISES:
            result = self.results.get(promise)
            if result is None:
                continue
            mark = (
                {True: "ok    ", False: "BROKEN", None: "?     "}[result.ok] if result.applies else "n/a   "
            )
            out.append(
                f"  {mark} {promise}: {DESCRIPTIONS[promise]}{' - ' + result.detail if result.detail else ''}"
            )
        return out

    def shown(self) -> dict[str, Any]:
        """The verdict as the kstate page and ``kstate plan`` show it: checked, the broken promises, the rest."""
        return {"checked": True, "broken": list(self.broken()), **self.to_dict()}
