"""The doctor's verdict on one cluster: which promise holds, which is broken, and what it saw."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kstate.doctor.promises import ALL_PROMISES, DESCRIPTIONS
from airflow_provider_kstate.errors import BrokerDeviationError


class BrokerDeviation(BrokerDeviationError):
    """A promise the job needs is broken by the broker (domain error; the hook turns it into Airflow's)."""

    def __init__(self, message: str, promises: tuple[str, ...]) -> None:
        super().__init__(message)
        self.promises = promises


@dataclass(frozen=True)
class CheckResult:
    """One promise checked: ``ok`` is None when it could not be checked (``detail`` says why)."""

    ok: bool | None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        ok = data.get("ok")
        return cls(ok=None if ok is None else bool(ok), detail=str(data.get("detail", "")))


@dataclass(frozen=True)
class Verdict:
    """The results of the doctor's checks on one cluster, at one time.

    :param cluster: the cluster id (or the bootstrap servers when the broker reports none).
    :param checked_at: when the behavioural checks ran (epoch seconds).
    :param results: ``{promise: CheckResult}``; a promise absent was not checked.
    """

    cluster: str
    checked_at: float
    results: dict[str, CheckResult] = field(default_factory=dict)

    def broken(self) -> list[str]:
        """Return the promises found broken, in :data:`ALL_PROMISES` order."""
        return [p for p in ALL_PROMISES if p in self.results and self.results[p].ok is False]

    def unchecked(self, needed: Iterable[str]) -> list[str]:
        """Return the promises of ``needed`` that were not checked (absent, or ``ok`` None)."""
        return [p for p in needed if self.results.get(p, CheckResult(None)).ok is None]

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
            mark = {True: "ok    ", False: "BROKEN", None: "n/a   "}[result.ok]
            out.append(
                f"  {mark} {promise}: {DESCRIPTIONS[promise]}{' - ' + result.detail if result.detail else ''}"
            )
        return out

    def shown(self) -> dict[str, Any]:
        """The verdict as the kstate page and ``kstate plan`` show it: checked, the broken promises, the rest."""
        return {"checked": True, "broken": list(self.broken()), **self.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "checked_at": self.checked_at,
            "results": {p: r.to_dict() for p, r in self.results.items()},
            "broken": self.broken(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            cluster=str(data.get("cluster", "")),
            checked_at=float(data.get("checked_at", 0.0)),
            results={
                str(p): CheckResult.from_dict(r)
                for p, r in (data.get("results") or {}).items()
                if p in ALL_PROMISES
            },
        )
