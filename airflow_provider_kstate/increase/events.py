"""What a run of the increase tells the world while it goes: its step, each group's state and the
producers' state.

The steps report through the :class:`RunEvents` port (a no-op by default). :class:`ProgressFile` keeps the
run's :class:`RunProgress` in its report folder (``progress.json`` beside ``seed.jsonl.gz``), written at
every event, so the kstate page can show a run in progress from the same files the proof is read from;
each task of the run (the window, or one task per step, then ``verify`` and the guard) continues the file
the earlier ones wrote. The document's schema is ``docs/schemas/increase/progress.schema.json``. Other sinks (metrics) implement the same port.

A group's **downtime** is from the moment the run asked it to leave (the pause record, or its stop command)
to the moment its service worked again: every partition held and a record processed, as the broker showed
it (:mod:`~airflow_provider_kstate.increase.served`); until the run saw that, to the moment it was asked back
(the resume record, or its start command returned ready), a lower bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol

from pydantic import ConfigDict, Field

from airflow_provider_kstate.client_piece.protocol import now_ms
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import ReportError
from airflow_provider_kstate.increase.report import LOCAL, progress_location

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_provider_kstate.increase.plan import Plan
    from airflow_provider_kstate.increase.ports import ReportStorage

PROGRESS_KIND: Final = "kstate-increase-progress"
PROGRESS_VERSION: Final = 1


class GroupState(StrEnum):
    """Where a protected group stands in a run."""

    PLANNED = "planned"
    STAYING = "staying"  # stays in its group: the run waits for its positions on the new partitions
    POSITIONED = "positioned"  # it stayed and holds a committed offset on every partition
    STOPPING = "stopping"  # asked to leave (pause record sent, or stop command running)
    PAUSED = "paused"  # the broker reports it EMPTY
    SEEDED = "seeded"  # an offset on every partition
    RESUMED = "resumed"  # asked back (resume record sent, or start command ready)
    AT_BARRIER = "at_barrier"  # its consumers hold at the key-order barrier
    DRAINING = "draining"  # the producers wait for it to consume what was written before they stopped
    DRAINED = "drained"  # it has: the producers started
    PASSED = "passed"  # past the barrier (or drained), verified


class ProducerState(StrEnum):
    """Where the topic's producers stand in a run."""

    RUNNING = "running"
    PINNED = "pinned"  # on the old layout (ControlledProducers)
    STOPPED = "stopped"  # held, or stopped by their commands, for a drain
    SWITCHED = "switched"  # on the new layout


#: The states in which a group's consumers are out of their group because of the run.
OUT = (GroupState.STOPPING, GroupState.PAUSED, GroupState.SEEDED)


class WayBack(Protocol):
    """A group's way back after the run asked it back (:class:`~airflow_provider_kstate.increase.served.Served`):
    when it held every partition again and processed a record (ms since the Unix epoch; None: not seen)."""

    held_at: int | None
    processing_at: int | None


class RunEvents(Protocol):
    """What the steps report while they run."""

    def step(self, name: str) -> None:
        """The run entered step ``name`` (``pause``, ``increase``, ``seed``, ``resume``, ``switch`` ...)."""
        ...

    def groups(self, groups: Iterable[str], state: GroupState) -> None:
        """``groups`` reached ``state``."""
        ...

    def producers(self, state: ProducerState) -> None:
        """The producers reached ``state``."""
        ...

    def served(self, served: Mapping[str, WayBack]) -> None:
        """The groups asked back worked again, as the broker showed it (:class:`ServiceWatch`)."""
        ...

    def finish(self, outcome: str) -> None:
        """The run ended: ``success`` or ``failed``."""
        ...


class NoEvents:
    """The default sink: nothing is reported."""

    def step(self, name: str) -> None:
        pass

    def groups(self, groups: Iterable[str], state: GroupState) -> None:
        pass

    def producers(self, state: ProducerState) -> None:
        pass

    def served(self, served: Mapping[str, WayBack]) -> None:
        pass

    def finish(self, outcome: str) -> None:
        pass


class GroupProgress(Document):
    """One group in a run: its state, driver and key-order mark, and when it was out of its group."""

    model_config = ConfigDict(frozen=False, title="kstate increase: one group's progress in a run")

    state: str = Field(
        default=GroupState.PLANNED,
        description="planned, stopping, paused, seeded, resumed, at_barrier, draining, drained or passed",
    )
    driver: str = Field(
        default="", description="how the run stops and starts it: control, command <name>, task"
    )
    key_order: str = Field(
        default="", description="its key-order mark: barrier, drained, relaxed, offline or empty"
    )
    out_since: int | None = Field(
        default=None, description="ms since the Unix epoch: asked to leave (null: never)"
    )
    back_at: int | None = Field(
        default=None, description="ms since the Unix epoch: asked back (null: not yet)"
    )
    held_at: int | None = Field(
        default=None,
        description="ms since the Unix epoch: every partition of every topic it reads held again, STABLE "
        "(null: not seen)",
    )
    processing_at: int | None = Field(
        default=None,
        description="ms since the Unix epoch: held and a record processed (its committed offsets moved) or "
        "nothing to process (null: not seen)",
    )

    @property
    def served_at(self) -> int | None:
        """When its service worked again: processing, else held, else asked back (None: not back yet)."""
        return self.processing_at or self.held_at or self.back_at

    def downtime_s(self, now: int) -> float | None:
        """Seconds out of its group because of the run, as its service saw it (so far, while it is out):
        to processing again, else held again, else asked back; None: never out."""
        if self.out_since is None:
            return None
        return round(((self.served_at or now) - self.out_since) / 1000.0, 3)


class RunProgress(Document):
    """A run's progress document (``progress.json``): JSON, with its kind and version, written at every event.

    :ivar run: the run's owner (``dag_id/run_id``).
    :ivar step: the step the run is in (the last one reported).
    :ivar outcome: empty while it runs; ``success`` or ``failed`` once it ended.
    """

    model_config = ConfigDict(frozen=False, title="kstate increase: a run's progress (progress.json)")
    schema_name: ClassVar[str] = "increase/progress"
    read_error: ClassVar[type[Exception]] = ReportError
    identity: ClassVar[tuple[str, ...]] = ("kind", "v")
    sort_keys: ClassVar[bool] = True

    topic: str
    run: str = Field(description="the run's owner (dag_id/run_id)")
    original_partitions: int
    target_partitions: int
    step: str = Field(default="plan", description="the step the run is in (the last one reported)")
    # the module clock, read when made
    started_at: int = Field(default_factory=lambda: now_ms(), description="ms since the Unix epoch")
    updated_at: int = Field(default_factory=lambda: now_ms(), description="ms since the Unix epoch")
    outcome: str = Field(default="", description="empty while it runs; success or failed once it ended")
    producers: str = Field(default=ProducerState.RUNNING, description="running, pinned, stopped or switched")
    producers_since: int = Field(default_factory=lambda: now_ms(), description="ms since the Unix epoch")
    groups: dict[str, GroupProgress] = Field(default_factory=dict, description="the groups the run seeds")
    #: A run of several co-partitioned topics: every one (``topic`` first); the same document is kept in
    #: each topic's run folder, so the run shows under each topic, naming the others.
    topics: list[str] = Field(
        default_factory=list, description="several topics grown in one run: every one (absent: one topic)"
    )
    #: The KIP-516 id of each topic the run grows, as the plan read it: a topic deleted and created again
    #: under its name is another log, and the run's offsets belong to this one.
    topic_ids: dict[str, str] = Field(
        default_factory=dict,
        description="each topic's KIP-516 topic id when the run was planned ('': it could not be read; "
        "absent: a run planned before ids were recorded)",
    )
    kind: Literal["kstate-increase-progress"] = PROGRESS_KIND
    v: Literal[1] = Field(default=PROGRESS_VERSION, description="version")

    @classmethod
    def of_plan(cls, plan: Plan, run: str) -> RunProgress:
        groups = {
            g: GroupProgress(driver=plan.groups[g].driver.describe(), key_order=str(plan.groups[g].key_order))
            for g in plan.where("seed")
        }
        return cls(
            topic=plan.topic,
            run=run,
            original_partitions=plan.original_partitions,
            target_partitions=plan.target_partitions,
            groups=groups,
            topics=plan.topic_names if plan.several else [],
            topic_ids=dict(plan.topic_ids),  # the plan's (filled by the planner)
        )

    def to_dict(self) -> dict[str, Any]:
        """The document's dict; ``topics`` only for a run of several topics, ``topic_ids`` only when the plan
        read them, a group's ``held_at`` and ``processing_at`` only when seen (a run of one planned without
        ids keeps its bytes)."""
        out = super().to_dict()
        for name in ("topics", "topic_ids"):
            if not out[name]:
                del out[name]
        for group in out["groups"].values():  # a run that watched no service back keeps its bytes
            for name in ("held_at", "processing_at"):
                if group[name] is None:
                    del group[name]
        return out

    @classmethod
    def from_json(cls, text: str | bytes) -> RunProgress:
        """Read a progress document; anything else is :class:`ReportError` naming what is wrong."""
        try:
            return super().from_json(text)
        except ReportError as exc:
            raise ReportError(f"not a run progress document ({exc})") from None


class ProgressFile:
    """Keeps a run's :class:`RunProgress` at ``uri``, written at every event (small: a few KB with 100
    groups). A task of a run continues the document the earlier tasks of the same run wrote.

    :param storage: where the run's reports live.
    :param uri: the document's URI (the run's report folder, ``progress.json``).
    :param plan: the run's plan.
    :param run: the run's owner.
    """

    def __init__(self, storage: ReportStorage | None, uri: str, plan: Plan, run: str) -> None:
        self.storage = storage or LOCAL
        self.uri = uri
        self.progress = self._load(plan, run)

    @classmethod
    def of_run(cls, storage: ReportStorage | None, plan: Plan, run: str) -> list[ProgressFile]:
        """The run's progress documents: ``progress.json`` in the run's report folder of each of the plan's
        topics (the same document in each, for a run of several)."""
        return [cls(storage, progress_location(plan.report_uri, t, run), plan, run) for t in plan.topic_names]

    def _load(self, plan: Plan, run: str) -> RunProgress:
        try:
            with self.storage.open(self.uri, "r") as handle:
                found = RunProgress.from_json(handle.read())
        except (OSError, ReportError):
            return RunProgress.of_plan(plan, run)
        return found if found.run == run else RunProgress.of_plan(plan, run)

    def _write(self) -> None:
        self.progress.updated_at = now_ms()
        try:
            with self.storage.open(self.uri, "w") as handle:
                handle.write(self.progress.to_json().encode())
        except OSError as exc:  # progress is for watching: a failed write never fails the run
            raise ReportError(f"progress {self.uri}: {exc}") from exc

    def step(self, name: str) -> None:
        self.progress.step = name
        self._write()

    def groups(self, groups: Iterable[str], state: GroupState) -> None:
        at = now_ms()
        for name in groups:
            group = self.progress.groups.setdefault(name, GroupProgress())
            if state in OUT and group.out_since is None:
                group.out_since, group.back_at = at, None
            if state == GroupState.RESUMED and group.out_since is not None and group.back_at is None:
                group.back_at = at
            group.state = state
        self._write()

    def producers(self, state: ProducerState) -> None:
        self.progress.producers, self.progress.producers_since = state, now_ms()
        self._write()

    def served(self, served: Mapping[str, WayBack]) -> None:
        for name, seen in served.items():
            group = self.progress.groups.get(name)
            if group is None or group.out_since is None:
                continue
            group.held_at, group.processing_at = seen.held_at, seen.processing_at
        self._write()

    def finish(self, outcome: str) -> None:
        self.progress.outcome = outcome
        self._write()


class Events:
    """Several sinks as one; a sink that fails is logged and dropped (watching never fails a run).

    :param log: the task's logger.
    """

    def __init__(self, sinks: Sequence[RunEvents], log: Any) -> None:
        self.sinks = list(sinks)
        self.log = log

    def _each(self, name: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, name)(*args)
            except Exception as exc:  # noqa: BLE001 - a broken sink must not fail the change it watches
                self.log.warning(
                    "progress sink %s failed (%s): dropped for this task", type(sink).__name__, exc
                )
                self.sinks.remove(sink)

    def step(self, name: str) -> None:
        self._each("step", name)

    def groups(self, groups: Iterable[str], state: GroupState) -> None:
        self._each("groups", list(groups), state)

    def producers(self, state: ProducerState) -> None:
        self._each("producers", state)

    def served(self, served: Mapping[str, WayBack]) -> None:
        self._each("served", dict(served))

    def finish(self, outcome: str) -> None:
        self._each("finish", outcome)
