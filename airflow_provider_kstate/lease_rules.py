"""The lease: one run at a time changes a topic or writes a snapshot, across DAGs, workers and deployments.

A lease lives in Kafka, in a one-partition lease log (default ``_kstate_leases``, ``cleanup.policy=delete``,
broker-assigned ``LogAppendTime``); :class:`~airflow_provider_kstate.hooks.lease.KStateLeaseHook` is its
transport. A run appends ``acquire`` / ``takeover`` / ``release`` records keyed by what it leases and then
replays the log up to its own record (:func:`replay`): the log's order decides, so every reader reaches the
same verdict without a compare-and-set. Replaying, an ``acquire`` takes the lease when it is free, expired
(at that record's broker timestamp) or already held by the same owner (a retry renews it); a ``release`` by
the holder frees it; a ``takeover`` naming the current holder (``from_owner``) takes it over. The holder's
first ``acquire`` carries the plan, so a rerun of a crashed step finds it again. Each record is a
:class:`LeaseRecord` (schema ``docs/schemas/lease/record.schema.json``, version ``v``; a record written
before the version existed reads as version 1).

Two kinds of lease, one :class:`LeaseKeeper`:

* a **topic**'s lease (key: the topic), held by the increase run ``dag_id/run_id`` (:func:`run_owner`);
  its steps renew it before they change anything (:meth:`LeaseKeeper.renew`), so its TTL can be short;
* a **snapshot**'s lease (key ``snapshot:<uri>``), held by one execution of a task try,
  ``dag_id/run_id#tryN@nonce`` (:func:`snapshot_owner`), renewed in the background while the body runs
  (:meth:`LeaseKeeper.holding`).

The takeover rule (:func:`may_take_over`): a run takes a lease over from a holder whose Airflow run has
ended, or from an earlier try of its own task; never from a run still running, nor from a run it cannot
see (another deployment's). A crashed run blocks the topic for at most its TTL either way, and a later run
is safe: every run seeds every gap on the topic.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from pydantic import ConfigDict, Field

from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.errors import LeaseHeldError, LeaseRecordError, SnapshotLeaseHeldError

#: Airflow run states in which a lease holder can no longer act.
ENDED = ("success", "failed")


@dataclass
class Lease:
    """Who holds the lease on a topic, until when, and the plan it was taken for."""

    topic: str
    owner: str
    since: int
    expires: int
    plan: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return (
            f"held by {self.owner} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.since / 1000))}, "
            f"expires {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.expires / 1000))}"
        )


#: The fields each operation writes (a release carries no TTL nor plan).
_WRITTEN = {
    "acquire": ("v", "op", "topic", "owner", "ttl_ms", "plan"),
    "takeover": ("v", "op", "topic", "owner", "from_owner", "ttl_ms", "plan"),
    "release": ("v", "op", "topic", "owner"),
}


class LeaseRecord(Document):
    """One record of the lease log, keyed by what is leased: an ``acquire``, a ``takeover`` or a ``release``
    of the lease by ``owner``. The log's order and the records' broker timestamps decide (:func:`replay`)."""

    model_config = ConfigDict(title="kstate lease record (lease log _kstate_leases, key: what is leased)")
    schema_name: ClassVar[str] = "lease/record"
    read_error: ClassVar[type[Exception]] = LeaseRecordError

    v: Literal[1] = Field(
        default=1, description="version; records written before it had one have none: read as 1"
    )
    op: Literal["acquire", "takeover", "release"]
    topic: str = Field(
        default="", description="what is leased (a topic, or snapshot:<uri>); the record's key"
    )
    owner: str = Field(description="the run (dag_id/run_id) or the task try (dag_id/run_id#tryN@nonce)")
    from_owner: str = Field(default="", description="takeover: the holder it takes the lease over from")
    ttl_ms: int = Field(
        default=0, description="acquire, takeover: ms the lease lives after the record's timestamp"
    )
    plan: dict[str, Any] = Field(
        default_factory=dict,
        description="acquire, takeover: what the lease is taken for (a topic's: the increase plan)",
    )

    def to_dict(self) -> dict[str, Any]:
        """The record as written: the fields of its operation (:data:`_WRITTEN`)."""
        return {k: v for k, v in super().to_dict().items() if k in _WRITTEN[self.op]}


def replay(records: Sequence[tuple[int, Mapping[str, Any] | LeaseRecord]]) -> Lease | None:
    """Return the holder after applying ``(timestamp_ms, record)`` pairs of one key in log order.

    :raises LeaseRecordError: a record cannot be read (malformed, or of a newer version): the lease cannot
        be decided.
    """
    holder: Lease | None = None
    for ts, raw in records:
        rec = _read(ts, raw)
        if holder is not None and ts >= holder.expires:
            holder = None
        if rec.op == "takeover" and holder is not None and holder.owner == rec.from_owner:
            holder = None
        if rec.op in ("acquire", "takeover") and (holder is None or holder.owner == rec.owner):
            expires = ts + rec.ttl_ms
            if holder is None:
                holder = Lease(rec.topic, rec.owner, ts, expires, rec.plan)
            else:
                holder.expires = expires
        elif rec.op == "release" and holder is not None and holder.owner == rec.owner:
            holder = None
    return holder


def _read(ts: int, raw: Mapping[str, Any] | LeaseRecord) -> LeaseRecord:
    try:
        return LeaseRecord.from_dict(raw)
    except LeaseRecordError as exc:
        raise LeaseRecordError(
            f"the lease log holds a record this version cannot read (timestamp {ts}): {exc}. The lease "
            "cannot be decided; nothing was changed."
        ) from None


def run_owner(context: Any) -> str:
    """Return the lease owner of this task's DAG run: ``dag_id/run_id``."""
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.run_id}"


def snapshot_owner(context: Any) -> str:
    """Return a snapshot lease owner for this execution of a task try: ``dag_id/run_id#tryN@nonce``.

    The nonce tells apart two executions that share a run id and a try number (two deployments).
    """
    return (
        f"{run_owner(context)}#try{int(getattr(context['ti'], 'try_number', 0) or 0)}@{uuid.uuid4().hex[:8]}"
    )


def run_of(owner: str) -> str:
    """Return the ``dag_id/run_id`` part of a lease owner."""
    return owner.partition("#")[0]


def try_of(owner: str) -> int:
    """Return the try number of a lease owner (0 for an owner written without one)."""
    tail = owner.partition("#")[2].partition("@")[0]
    return int(tail[3:]) if tail.startswith("try") and tail[3:].isdigit() else 0


def same_run(holder: str, owner: str) -> bool:
    """Whether two lease owners name the same ``dag_id/run_id``."""
    return run_of(holder) == run_of(owner)


def may_take_over(holder: str, owner: str, holder_state: str) -> bool:
    """Whether ``owner`` may take a lease over from ``holder``.

    :param holder_state: the Airflow state of the holder's run ("" when unknown here).
    :return: for the same run id, only from an earlier try (a later or equal try of that run id is another
        deployment's run of the same name); for another run, only when that run has ended.
    """
    if same_run(holder, owner):
        return try_of(holder) < try_of(owner)
    return holder_state in ENDED


def airflow_run_state(context: Any, log: Any) -> Callable[[str], str]:
    """Return a function giving the Airflow state of the run ``dag_id/run_id`` ("" when unknown here)."""

    def state(run: str) -> str:
        dag_id, _, run_id = run.partition("/")
        try:
            found = context["ti"].get_dagrun_state(dag_id=dag_id, run_id=run_id)
            return str(getattr(found, "value", found) or "")  # a DagRunState enum, or its value
        except Exception as exc:  # noqa: BLE001 - another Airflow's run, or a task SDK without the call
            log.warning("LEASE holder %s: its Airflow run state is unknown here (%s)", run, exc)
            return ""

    return state


class LeaseLog(Protocol):
    """The lease log's verbs (:class:`~airflow_provider_kstate.hooks.lease.KStateLeaseHook`); each raises
    LeaseHeldError when the replay gives the lease to someone else."""

    def current(self, topic: str) -> Lease | None: ...

    def acquire(
        self, topic: str, owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease: ...

    def take_over(
        self, topic: str, owner: str, from_owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease: ...

    def release(self, topic: str, owner: str) -> None: ...


@dataclass(frozen=True)
class LeaseKind:
    """What a kind of lease guards, for its error and its log lines."""

    noun: str  # "topic" / "snapshot"
    doing: str  # what the holder is doing to it
    did_nothing: str  # what this run did instead
    error: type[LeaseHeldError]
    takeover_note: str = ""


TOPIC = LeaseKind(
    "topic",
    "changed",
    "changed nothing",
    LeaseHeldError,
    "; this run seeds every gap that run may have left",
)
SNAPSHOT = LeaseKind("snapshot", "written", "wrote nothing", SnapshotLeaseHeldError)


class LeaseKeeper:
    """Keeps one lease for one owner: acquire it (or take it over), renew it, hold it, release it.

    :param lease_log: the lease log (:class:`~airflow_provider_kstate.hooks.lease.KStateLeaseHook`).
    :param key: what is leased (a topic, or ``snapshot:<uri>``).
    :param owner: who holds it (:func:`run_owner`, :func:`snapshot_owner`).
    :param ttl: seconds the lease lives without renewal.
    :param kind: :data:`TOPIC` or :data:`SNAPSHOT`.
    :param run_state: gives the Airflow state of a holder's ``dag_id/run_id`` (:func:`airflow_run_state`).
    :param log: the task's logger.
    """

    def __init__(
        self,
        lease_log: LeaseLog,
        key: str,
        owner: str,
        ttl: float,
        *,
        kind: LeaseKind,
        run_state: Callable[[str], str],
        log: Any,
    ) -> None:
        self.lease_log = lease_log
        self.key = key
        self.owner = owner
        self.ttl = ttl
        self.kind = kind
        self.run_state = run_state
        self.log = log
        self._renewed_at: float | None = None

    @classmethod
    def for_topic(cls, lease_log: LeaseLog, topic: str, context: Any, ttl: float, log: Any) -> LeaseKeeper:
        """The keeper of ``topic``'s lease for this task's DAG run."""
        state = airflow_run_state(context, log)
        return cls(lease_log, topic, run_owner(context), ttl, kind=TOPIC, run_state=state, log=log)

    @classmethod
    def for_snapshot(cls, lease_log: LeaseLog, root: str, context: Any, ttl: float, log: Any) -> LeaseKeeper:
        """The keeper of the lease on the snapshot at ``root`` for this execution of this task try."""
        return cls(
            lease_log,
            f"snapshot:{root}",
            snapshot_owner(context),
            ttl,
            kind=SNAPSHOT,
            run_state=airflow_run_state(context, log),
            log=log,
        )

    @property
    def name(self) -> str:
        """How log lines name the lease: ``topic orders``, ``snapshot:s3://bucket/store``."""
        return f"topic {self.key}" if self.kind is TOPIC else self.key

    @property
    def subject(self) -> str:
        """How errors name what is leased: ``topic 'orders'``, ``snapshot 's3://bucket/store'``."""
        return f"{self.kind.noun} {self.key.removeprefix('snapshot:')!r}"

    def current(self) -> Lease | None:
        """Return the live lease on the key (anyone's), or None when it is free."""
        return self.lease_log.current(self.key)

    def held(self) -> Lease | None:
        """Return the live lease when this owner holds it (a rerun of the same run), else None."""
        lease = self.current()
        return lease if lease is not None and lease.owner == self.owner else None

    def acquire(self, plan: dict[str, Any] | None = None) -> Lease:
        """Take the lease (or renew this owner's), or take it over when :func:`may_take_over` allows.

        :param plan: stored with the lease (a topic's: the increase plan).
        :raises LeaseHeldError: (a SnapshotLeaseHeldError for a snapshot) another run holds it.
        """
        try:
            lease = self.lease_log.acquire(self.key, self.owner, self.ttl, plan)
        except LeaseHeldError:
            lease = self._take_over(plan)
        self._renewed_at = time.monotonic()
        self.log.info("LEASE %s %s", self.name, lease.describe())
        return lease

    def _take_over(self, plan: dict[str, Any] | None) -> Lease:
        holder = self.current()
        if holder is None:  # released or expired since: take it
            return self._checked(self.lease_log.acquire, self.key, self.owner, self.ttl, plan)
        own_run = same_run(holder.owner, self.owner)
        state = "" if own_run else self.run_state(run_of(holder.owner))
        if not may_take_over(holder.owner, self.owner, state):
            raise self.kind.error(
                f"{self.subject} is being {self.kind.doing} by another run ({holder.describe()}, Airflow state "
                f"{state or 'unknown here'}); this run {self.kind.did_nothing}. Wait for it to finish; if it "
                "crashed, mark its run failed (then a new run takes over at once) or wait for its lease to "
                "expire."
            )
        why = "an earlier try of this task" if own_run else f"its Airflow run has ended: {state}"
        self.log.warning(
            "LEASE %s: taking the lease over from %s (%s)%s",
            self.name,
            holder.owner,
            why,
            self.kind.takeover_note,
        )
        return self._checked(self.lease_log.take_over, self.key, self.owner, holder.owner, self.ttl, plan)

    def _checked(self, verb: Callable[..., Lease], *args: Any) -> Lease:
        """Run a lease-log verb; another run winning the race fails with this kind's error."""
        try:
            return verb(*args)
        except LeaseHeldError as exc:
            if isinstance(exc, self.kind.error):
                raise
            raise self.kind.error(f"{self.subject}: {exc}") from exc

    def renew(self, plan: dict[str, Any] | None = None) -> None:
        """Make sure this owner still holds the lease before a change: renew it when a third of its TTL has
        passed since this keeper last did (one lease-log round trip), else trust it (the TTL has not run
        out, so no other run can have taken it).

        :raises LeaseHeldError: another run holds the lease (this one's ran out and was taken over).
        """
        now = time.monotonic()
        if self._renewed_at is not None and now - self._renewed_at < self.ttl / 3:
            return
        lease = self._checked(self.lease_log.acquire, self.key, self.owner, self.ttl, plan)
        self._renewed_at = now
        self.log.info("LEASE %s renewed: %s", self.name, lease.describe())

    def release(self) -> None:
        """Give the lease up (a no-op when this owner does not hold it)."""
        self.lease_log.release(self.key, self.owner)
        self.log.info("LEASE %s released", self.name)

    @contextmanager
    def holding(self) -> Iterator[Lease]:
        """Acquire the lease, renew it in the background every third of its TTL while the body runs, and
        release it after (a failed renewal is logged: the holder stays safe until the TTL ends)."""
        lease = self.acquire()
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew_until, args=(stop,), daemon=True)
        renewer.start()
        try:
            yield lease
        finally:
            stop.set()
            renewer.join(timeout=10)
            self.release()

    def _renew_until(self, stop: threading.Event) -> None:
        while not stop.wait(self.ttl / 3):
            try:
                self.lease_log.acquire(self.key, self.owner, self.ttl)
            except Exception as exc:  # noqa: BLE001 - keep running; the write stays safe until the TTL ends
                self.log.warning("LEASE %s: renewal failed: %s", self.name, exc)


class LeaseSet:
    """The leases of several co-partitioned topics grown in one run, kept as one (same verbs as
    :class:`LeaseKeeper`): taken in name order, so two runs whose sets overlap cannot each hold a part and
    wait for the other; another run holding any one fails the acquire at once with :class:`LeaseHeldError`
    naming it, and the leases this call took are given back (nothing is left held). Renewed and released
    together; a holder whose Airflow run has ended is taken over per topic, as for one topic.

    :param keepers: one keeper per topic, for the same owner.
    """

    def __init__(self, keepers: Sequence[LeaseKeeper]) -> None:
        self.keepers = sorted(keepers, key=lambda k: k.key)

    @classmethod
    def for_topics(
        cls, lease_log: LeaseLog, topics: Sequence[str], context: Any, ttl: float, log: Any
    ) -> LeaseSet:
        """The keepers of ``topics``' leases for this task's DAG run."""
        return cls([LeaseKeeper.for_topic(lease_log, t, context, ttl, log) for t in topics])

    @property
    def owner(self) -> str:
        return self.keepers[0].owner

    @property
    def key(self) -> str:
        """How errors name what is leased: the topics, comma-separated."""
        return ",".join(k.key for k in self.keepers)

    def current(self) -> Lease | None:
        """Return the first live lease another owner holds on a topic of the set, else the first live lease
        (this owner's), else None when every topic is free."""
        leases = [lease for lease in (k.current() for k in self.keepers) if lease is not None]
        foreign = [lease for lease in leases if lease.owner != self.owner]
        found = foreign or leases
        return found[0] if found else None

    def held(self) -> Lease | None:
        """Return this owner's lease (with the plan stored) when it holds a topic of the set, else None."""
        for keeper in self.keepers:
            lease = keeper.held()
            if lease is not None:
                return lease
        return None

    def acquire(self, plan: dict[str, Any] | None = None) -> Lease:
        """Take every topic's lease in name order (or take over, as :meth:`LeaseKeeper.acquire`).

        :raises LeaseHeldError: another run holds one: the leases this call took are released first.
        """
        taken: list[LeaseKeeper] = []
        first: Lease | None = None
        try:
            for keeper in self.keepers:
                before = keeper.held()
                lease = keeper.acquire(plan)
                first = first or lease
                if before is None:
                    taken.append(keeper)
        except LeaseHeldError:
            for keeper in reversed(taken):
                keeper.release()
            raise
        assert first is not None  # a set has at least one topic
        return first

    def renew(self, plan: dict[str, Any] | None = None) -> None:
        """Renew every topic's lease when due (:meth:`LeaseKeeper.renew`).

        :raises LeaseHeldError: another run holds one of them.
        """
        for keeper in self.keepers:
            keeper.renew(plan)

    def release(self) -> None:
        """Give every lease of the set up (a no-op for those this owner does not hold)."""
        for keeper in reversed(self.keepers):
            keeper.release()

    @contextmanager
    def holding(self) -> Iterator[Lease]:
        """Hold every topic's lease while the body runs (:meth:`LeaseKeeper.holding` each, in the set's order:
        another run holding one fails it and the leases taken so far are released), renewed in the
        background, released after."""
        with ExitStack() as stack:
            leases = [stack.enter_context(keeper.holding()) for keeper in self.keepers]
            yield leases[0]


class LeaseTransport(Protocol):
    """Where lease records are kept (:class:`~airflow_provider_kstate.cluster.lease_log.KafkaLeaseLog`), as
    the dicts of :class:`LeaseRecord` (read back by :func:`replay`)."""

    def append(self, record: dict[str, Any]) -> int: ...

    def read(self, topic: str, upto: int | None) -> list[tuple[int, dict[str, Any]]]: ...


class LeaseRecords:
    """The lease verbs over a log of records (:class:`LeaseLog`): each writes a record, then replays the
    log up to it (:func:`replay`) for the verdict, so concurrent runs are decided by log order.

    :param transport: where the records are kept.
    """

    def __init__(self, transport: LeaseTransport) -> None:
        self.transport = transport

    def current(self, topic: str) -> Lease | None:
        """Return the live lease on ``topic``, or None when it is free."""
        holder = replay(self.transport.read(topic, None))
        if holder is not None and holder.expires <= int(time.time() * 1000):
            return None
        return holder

    def acquire(
        self, topic: str, owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take (or renew) the lease on ``topic`` for ``owner``.

        :raises LeaseHeldError: another owner holds an unexpired lease.
        """
        record = LeaseRecord(
            op="acquire", topic=topic, owner=owner, ttl_ms=int(ttl_seconds * 1000), plan=plan or {}
        )
        offset = self.transport.append(record.to_dict())
        holder = replay(self.transport.read(topic, offset))
        if holder is None or holder.owner != owner:
            desc = holder.describe() if holder else "unknown"
            raise LeaseHeldError(
                f"topic {topic!r} is being changed by another run ({desc}); this run changed nothing. "
                "Wait for it to finish, or, if it died, for its lease to expire."
            )
        return holder

    def take_over(
        self, topic: str, owner: str, from_owner: str, ttl_seconds: float, plan: dict[str, Any] | None = None
    ) -> Lease:
        """Take the lease on ``topic`` from ``from_owner`` (a run that is no longer running).

        :raises LeaseHeldError: the lease is no longer ``from_owner``'s (another run took it first).
        """
        record = LeaseRecord(
            op="takeover",
            topic=topic,
            owner=owner,
            from_owner=from_owner,
            ttl_ms=int(ttl_seconds * 1000),
            plan=plan or {},
        )
        holder = replay(self.transport.read(topic, self.transport.append(record.to_dict())))
        if holder is None or holder.owner != owner:
            raise LeaseHeldError(
                f"topic {topic!r}: could not take the lease over from {from_owner} "
                f"({holder.describe() if holder else 'free'}); this run changed nothing."
            )
        return holder

    def release(self, topic: str, owner: str) -> None:
        """Give up ``owner``'s lease on ``topic`` (a no-op if it does not hold it)."""
        self.transport.append(LeaseRecord(op="release", topic=topic, owner=owner).to_dict())
