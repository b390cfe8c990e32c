"""Progress of the changelog reads, reported by the DRIVER while the executors read.

Every changelog read (one Spark task per partition, see :mod:`.changelog`) knows its total up front: the
sum of each partition's offset range. Progress is counted in offsets read of that total, so the last line
equals it exactly (records returned are fewer: compaction gaps, transaction markers and aborted records
take offsets too; the final line adds the records counted).

What reaches the driver while tasks run: PySpark accumulators only arrive when a task ends, and no Spark
metric counts what a Python task has consumed so far. So each task sends its position over a small side
channel: a TCP listener the driver opens beside its own ports (``spark.driver.bindAddress``, or
``spark.driver.host``, port chosen by the OS), which executors reach as they reach the driver. A task's
:class:`TaskReporter` hands its position to a background thread that sends one line
``<token> <partition> <position>`` at most every :data:`REPORT_EVERY` seconds (nothing on the read path
waits for the network). Should the channel be unreachable (a firewall), the driver still counts each
partition whose task finished (its accumulator update) and says once that no live report came.

:class:`DriverProgress` prints one line every ``interval`` seconds (a first one when a read starts and a
last one when it ends)::

    PROGRESS rebuild orders: 0 of 10,000,000 offsets (0.0%) in 16 partitions, starting
    PROGRESS rebuild orders: 1,234,567 of 10,000,000 offsets (12.3%), 45,000 offsets/s, 3 of 16 partitions read, about 3 min 15 s left
    PROGRESS rebuild orders: 10,000,000 of 10,000,000 offsets (100.0%), 44,000 offsets/s, done in 3 min 47 s: 9,871,012 records

and hands the same numbers, as a document (:data:`DOC_FORMAT`), to a ``publish`` callback (the rebuild
keeps it at ``<snapshot uri>/`` :data:`PROGRESS_NAME` for the kstate page). Progress never changes what is
read or written. No Airflow and no Spark import here (the driver passes its session's host in).

The document is a :class:`ProgressDocument` (``docs/schemas/store/rebuild-progress.schema.json``); the
kstate page reads it (``plugins/rebuild_progress.py``).
"""

from __future__ import annotations

import contextlib
import math
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_INTERVAL as DEFAULT_INTERVAL,
)
from airflow_provider_kstate.documents import OrderedDocument
from airflow_provider_kstate.errors import SnapshotError
from airflow_provider_kstate.store.manifest import utc_now

#: The progress document's name under a snapshot root (``_``: hidden from Parquet readers and checks).
PROGRESS_NAME = "_kstate_progress.json"
#: The progress document's format tag.
DOC_FORMAT: Final = "kstate-progress/1"
#: The states of the progress document.
#: Seconds between two progress lines unless told otherwise (``--progress-interval``).
#: Seconds between two position reports of one executor task, at most.
REPORT_EVERY = 1.0
#: Seconds an executor task waits for the driver's listener to accept its connection.
CONNECT_TIMEOUT = 2.0
#: A read that took longer than this without a single live report says so (the channel is blocked).
QUIET = 2 * CONNECT_TIMEOUT + 2 * REPORT_EVERY
#: How every progress line starts.
PREFIX = "PROGRESS"

_UNREACHABLE: set[tuple[str, int]] = set()  # listeners this Python worker failed to reach: not tried again


class ProgressError(SnapshotError, ValueError):
    """The progress document is not a valid ``kstate-progress/1`` document."""


class ProgressDocument(OrderedDocument):
    """The progress of a rebuild (document ``store/rebuild-progress``, ``kstate-progress/1``), kept at
    ``<snapshot uri>/`` :data:`PROGRESS_NAME`: the last ``PROGRESS`` line's numbers while it reads, then
    the outcome (``done`` with the version committed, ``failed`` with the error). A run that failed before
    it read anything has only the first fields and the outcome."""

    model_config = ConfigDict(
        extra="allow",
        title="kstate rebuild progress (_kstate_progress.json)",
        json_schema_extra={
            "description": "Kept beside a snapshot by the rebuild's Spark driver: the last PROGRESS line's "
            "numbers while it reads the changelog, then the outcome (done with the version, failed with the "
            "error). A run that failed before it read has only the first fields and the outcome."
        },
    )
    schema_name = "store/rebuild-progress"
    read_error = ProgressError

    format: Literal["kstate-progress/1"] = Field(description="the document's version")
    state: Literal["running", "done", "failed"] = Field(description="the run's state")
    app: str = Field(description="the application (rebuild)")
    topic: str = Field(description="the changelog topic")
    topic_id: str | None = Field(
        default=None, description="the changelog's topic id (KIP-516) being read (null: it cannot be read)"
    )
    label: str | None = Field(
        default=None, description="which read, when the application reads more than once"
    )
    read: int | None = Field(default=None, description="offsets read so far")
    total: int | None = Field(default=None, description="offsets to read")
    percent: float | None = Field(default=None, description="offsets read of the total, percent")
    rate: float | None = Field(default=None, description="offsets read per second, on average")
    eta_seconds: float | None = Field(default=None, description="seconds left at that rate (null: unknown)")
    partitions: int | None = Field(default=None, description="the changelog partitions read")
    partitions_read: int | None = Field(default=None, description="of them, the ones read to their end")
    records: int | None = Field(default=None, description="records the read returned (at its end)")
    line: str | None = Field(default=None, description="the PROGRESS line")
    started_at: str | None = Field(default=None, description="when the read started, ISO-8601 UTC")
    updated_at: str = Field(description="when the document was written, ISO-8601 UTC")
    interval: float = Field(description="seconds between two documents")
    live_reports: int | None = Field(default=None, description="position reports the executors sent")
    snapshot_uri: str | None = Field(default=None, description="the snapshot rebuilt")
    version: str | None = Field(default=None, description="the version being written (committed when done)")
    rows: int | None = Field(default=None, description="done: the rows of the version committed")
    error: str | None = Field(default=None, description="failed: the error")


# ------------------------------------------------------------------------------------------ arithmetic


def format_count(n: float) -> str:
    """Return ``n`` with thousands separators: ``1,234,567``."""
    return f"{round(n):,}"


def format_duration(seconds: float) -> str:
    """Return a duration for people: ``under 1 s``, ``42 s``, ``3 min 15 s``, ``2 h 5 min``.

    :param seconds: the duration (>= 0).
    """
    if seconds < 1:
        return "under 1 s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


@dataclass(frozen=True)
class Reading:
    """Where one changelog read stands: ``read`` of ``total`` offsets after ``elapsed`` seconds.

    The rate is the average since the first offsets came in (``reading`` seconds ago; the Spark job's
    start-up before that does not count), and the time left is what remains at that rate.

    :param kind: the application (``rebuild``, ``deep check``).
    :param topic: the changelog topic.
    :param read: offsets read so far.
    :param total: offsets to read (the sum of the partitions' offset ranges).
    :param elapsed: seconds since the read started (0: the first line).
    :param partitions: the changelog partitions read.
    :param partitions_read: of them, the ones read to their end.
    :param label: which read, when an application reads more than once (``resolving strays``).
    :param final: the read has ended (the last line).
    :param records: the records the read returned (known at the end).
    :param reading: seconds since the first offsets came in (None: as ``elapsed``).
    """

    kind: str
    topic: str
    read: int
    total: int
    elapsed: float
    partitions: int = 0
    partitions_read: int = 0
    label: str = ""
    final: bool = False
    records: int | None = None
    reading: float | None = None

    @property
    def percent(self) -> float:
        """Offsets read of the total, in percent (100 for an empty read)."""
        return 100.0 if self.total <= 0 else min(100.0, 100.0 * self.read / self.total)

    @property
    def rate(self) -> float:
        """Offsets read per second, on average since the first offsets came in (0 before any did)."""
        seconds = self.elapsed if self.reading is None else self.reading
        return self.read / seconds if seconds > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the average rate; 0 when done; None while nothing has been read."""
        left = max(0, self.total - self.read)
        if self.final or left == 0:
            return 0.0
        return left / self.rate if self.rate > 0 else None

    def line(self) -> str:
        """Return the progress line (see the module's docstring)."""
        what = f"{self.kind} {self.topic}" + (f" ({self.label})" if self.label else "")
        head = f"{PREFIX} {what}: {format_count(self.read)} of {format_count(self.total)} offsets ({self.percent:.1f}%)"
        if self.final:
            records = "" if self.records is None else f": {format_count(self.records)} records"
            return f"{head}, {format_count(self.rate)} offsets/s, done in {format_duration(self.elapsed)}{records}"
        if self.elapsed <= 0:
            return f"{head} in {self.partitions} partitions, starting"
        done = f"{self.partitions_read} of {self.partitions} partitions read"
        return f"{head}, {format_count(self.rate)} offsets/s, {done}, {self._left()}"

    def _left(self) -> str:
        eta = self.eta
        if self.read >= self.total:
            return "all read, finishing"  # the tasks still write or hand over their results
        if eta is None:
            return "time left unknown"
        return "under 1 s left" if eta < 1 else f"about {format_duration(eta)} left"

    def to_dict(self) -> dict[str, Any]:
        """Return the numbers of the progress document (:class:`ProgressDocument`)."""
        eta = self.eta
        return {
            "app": self.kind,
            "topic": self.topic,
            "label": self.label,
            "read": self.read,
            "total": self.total,
            "percent": round(self.percent, 1),
            "rate": round(self.rate, 1),
            "eta_seconds": None if eta is None else round(eta, 1),
            "partitions": self.partitions,
            "partitions_read": self.partitions_read,
            "records": self.records,
            "line": self.line(),
        }


class Throttle:
    """Say yes at most once every ``every`` seconds (the first call says yes).

    :param every: seconds between two yeses.
    :param clock: the clock (``time.monotonic``).
    """

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._next = -math.inf

    def due(self) -> bool:
        """Whether ``every`` seconds have passed since the last yes (and take this one if so)."""
        now = self.clock()
        if now < self._next:
            return False
        self._next = now + self.every
        return True


class Tracker:
    """The positions one read's tasks reported, per partition (thread-safe).

    :param ranges: ``{partition: (start, end)}`` the read covers.
    """

    def __init__(self, ranges: Mapping[int, tuple[int, int]]) -> None:
        self.ranges = {int(p): (int(lo), int(hi)) for p, (lo, hi) in ranges.items()}
        self.total = sum(max(0, hi - lo) for lo, hi in self.ranges.values())
        self.positions: dict[int, int] = {}
        self.reports = 0
        self.first_at: float | None = None  # when the first report came (monotonic)
        self._lock = threading.Lock()

    def update(self, partition: int, position: int) -> None:
        """Record that ``partition`` was read up to ``position`` (a retried task never moves it back)."""
        with self._lock:
            if partition in self.ranges:
                self.positions[partition] = max(position, self.positions.get(partition, position))
                self.reports += 1
                self.first_at = time.monotonic() if self.first_at is None else self.first_at

    def progress(self, finished: set[int]) -> tuple[int, int]:
        """Return ``(offsets read, partitions read to their end)``.

        :param finished: partitions whose task has ended (their whole range counts as read).
        """
        with self._lock:
            positions = dict(self.positions)
        read = done = 0
        for p, (lo, hi) in self.ranges.items():
            size = max(0, hi - lo)
            got = size if p in finished else min(size, max(0, positions.get(p, lo) - lo))
            read += got
            done += got == size
        return read, done


# ------------------------------------------------------------------------------------ executor side


@dataclass(frozen=True)
class Address:
    """Where an executor task reports its position (pickled to the executors with the read context).

    :param host: the driver's host.
    :param port: the listener's port.
    :param token: names one read; reports without it are dropped.
    """

    host: str
    port: int
    token: str


class TaskReporter:
    """An executor task's reports: call it with each new position; it never waits for the network.

    A background thread connects to the driver's listener and sends the latest position whenever the
    :class:`Throttle` lets a report through, and the last one on :meth:`close`.

    :param address: the driver's listener.
    :param partition: the changelog partition this task reads.
    :param every: seconds between two reports, at most.
    """

    def __init__(self, address: Address, partition: int, every: float = REPORT_EVERY) -> None:
        self.address = address
        self.partition = partition
        self.throttle = Throttle(every)
        self.position: int | None = None
        self.connected = False
        self._stop = False
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kstate-progress", daemon=True)
        self._thread.start()

    def __call__(self, position: int) -> None:
        """Note that the task has read up to ``position`` (the next offset it would read)."""
        self.position = position
        if self.throttle.due():
            self._wake.set()

    def close(self, wait: float = 1.0) -> None:
        """Send the last position (when connected: waiting at most ``wait`` seconds), then stop."""
        self._stop = True
        self._wake.set()
        if self.connected:
            self._thread.join(wait)

    def _run(self) -> None:
        where = (self.address.host, self.address.port)
        if where in _UNREACHABLE:
            return
        try:
            with socket.create_connection(where, timeout=CONNECT_TIMEOUT) as sock:
                self.connected = True
                self._send_until_stopped(sock)
        except OSError:
            _UNREACHABLE.add(where)  # the driver says so once; this worker stops trying

    def _send_until_stopped(self, sock: socket.socket) -> None:
        sent = None
        while True:
            self._wake.wait()
            self._wake.clear()
            stopping = self._stop  # read before the position: a stop comes after the last position
            position = self.position
            if position is not None and position != sent:
                sock.sendall(f"{self.address.token} {self.partition} {position}\n".encode())
                sent = position
            if stopping:
                return


@contextlib.contextmanager
def task_reporter(address: Address | None, partition: int) -> Iterator[TaskReporter | None]:
    """Yield the reporter of one task's read (None without a listener), closed afterwards.

    :param address: the driver's listener, or None (progress off).
    :param partition: the changelog partition the task reads.
    """
    if address is None:
        yield None
        return
    reporter = TaskReporter(address, partition)
    try:
        yield reporter
    finally:
        reporter.close()


# -------------------------------------------------------------------------------------- driver side


class _Handler(socketserver.StreamRequestHandler):
    """One executor task's connection: lines ``<token> <partition> <position>``."""

    def handle(self) -> None:
        receive = self.server.receive  # type: ignore[attr-defined]
        while True:
            raw = self.rfile.readline(200)
            if not raw:
                return
            receive(raw)


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    receive: Callable[[bytes], None]  # set by the DriverProgress that owns it


@dataclass
class _Read:
    """One changelog read being reported: its tracker, its context (for finished tasks), its clock."""

    label: str
    tracker: Tracker | None = None
    ctx: Any = None
    started: float = field(default_factory=time.monotonic)
    started_at: str = ""
    lines: int = 0
    first_seen: float | None = None  # when offsets read first showed (without live reports)
    all_read: float | None = None  # when the last offset showed read (the rate stops there)


def _echo(line: str) -> None:
    print(line, flush=True)  # the driver's stdout: spark-submit's output, which the Spark hook logs


def _finished(ctx: Any) -> set[int]:
    """Return the partitions whose task has ended (their accumulator update reached the driver)."""
    acc = (getattr(ctx, "accumulators", None) or {}).get("sources")
    return set(acc.value) if acc is not None else set()


def _records(ctx: Any) -> int | None:
    totals = getattr(ctx, "totals", None)
    return int(totals()["records"]) if totals is not None else None


class DriverProgress:
    """The driver's progress reports of an application's changelog reads.

    Use :meth:`reading` around each read's Spark action and :meth:`attach` on its read context before
    its DataFrame is built (the context is pickled to the executors then)::

        with progress.reading("resolving strays"):
            progress.attach(ctx)
            df = changelog_frame(spark, ctx)
            df.write...  # the action

    :param kind: the application (``rebuild``, ``deep check``).
    :param topic: the changelog topic.
    :param interval: seconds between two lines (<= 0: no progress at all).
    :param host: the host executors reach the driver at; ``bind`` the address to listen on (default
        ``host``).
    :param publish: called with the progress document at every line (e.g. to write it next to the
        snapshot); its errors are reported once and never fail the application.
    :param echo: prints a line (default: the driver's stdout).
    """

    def __init__(
        self,
        kind: str,
        topic: str,
        interval: float = DEFAULT_INTERVAL,
        host: str = "127.0.0.1",
        bind: str | None = None,
        publish: Callable[[ProgressDocument], None] | None = None,
        echo: Callable[[str], None] = _echo,
    ) -> None:
        self.kind, self.topic, self.interval = kind, topic, float(interval)
        self.host, self.bind = host, bind or host
        self.publish, self.echo = publish, echo
        self.extra: dict[str, Any] = {}
        self.last: ProgressDocument | None = None
        self._reads: dict[str, _Read] = {}
        self._current: _Read | None = None
        self._listener: _Listener | None = None
        self._listener_failed = False
        self._said: set[str] = set()
        self._lock = threading.RLock()

    @classmethod
    def off(cls) -> DriverProgress:
        """Return a progress that reports nothing (``--progress-interval 0``, and tests)."""
        return cls("", "", interval=0)

    @classmethod
    def for_spark(cls, spark: Any, kind: str, topic: str, interval: float, **kwargs: Any) -> DriverProgress:
        """Return the progress of an application on ``spark``: executors report to the driver's host.

        :param spark: the SparkSession.
        :param kind: the application; :param topic: the changelog; :param interval: seconds per line.
        :param kwargs: see :class:`DriverProgress` (``publish``, ``echo``).
        """
        conf = spark.sparkContext.getConf()
        host = conf.get("spark.driver.host", None) or socket.gethostname()
        return cls(
            kind, topic, interval, host=host, bind=conf.get("spark.driver.bindAddress", None), **kwargs
        )

    @property
    def enabled(self) -> bool:
        """Whether progress is reported at all."""
        return self.interval > 0

    # -- the reads ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, label: str = "") -> Iterator[None]:
        """Report the read attached inside this block: a line every ``interval`` seconds, a last one after.

        :param label: which read, when the application reads more than once.
        """
        if not self.enabled:
            yield
            return
        read = _Read(label)
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(read, stop), name="kstate-progress", daemon=True)
        self._current = read
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            self._current = None
        if read.tracker is not None:  # the read succeeded: its last line (a failed one has no "done")
            self._emit(read, final=True)

    def attach(self, ctx: Any) -> None:
        """Make the read of ``ctx`` (a :class:`~.changelog.ReadContext`) report to this driver: sets
        ``ctx.progress`` and prints the read's first line. Outside :meth:`reading`: nothing."""
        read = self._current
        if read is None or not self.enabled:
            return
        read.tracker = Tracker({p: ctx.ranges[p] for p in ctx.sources if p in ctx.ranges})
        read.ctx, read.started, read.started_at = ctx, time.monotonic(), utc_now()
        token = secrets.token_hex(8)
        self._reads[token] = read
        ctx.progress = self._address(token)
        self._emit(read)

    def finish(self, state: str, **extra: Any) -> None:
        """Publish the last document once more with ``state`` (``done``, ``failed``) and ``extra``.

        :param state: the application's outcome.
        :param extra: more fields (``version``, ``error`` ...).
        """
        if not self.enabled or self.publish is None:
            return
        unread = {"format": DOC_FORMAT, "app": self.kind, "topic": self.topic, "interval": self.interval}
        with self._lock:  # before any read (a failure early on): what is known
            last = self.last.to_dict() if self.last is not None else unread
            fields = {**last, **self.extra, **extra, "state": state, "updated_at": utc_now()}
            self._publish(ProgressDocument(**fields))

    def close(self) -> None:
        """Stop the listener (in the background: the application does not wait for it)."""
        listener, self._listener = self._listener, None
        if listener is not None:

            def stop() -> None:
                listener.shutdown()
                listener.server_close()

            threading.Thread(target=stop, name="kstate-progress-stop", daemon=True).start()

    # -- inside ---------------------------------------------------------------------------------------

    def _address(self, token: str) -> Address | None:
        """Return the listener's address for ``token``, starting the listener on first use (None when it
        cannot listen: then only finished tasks count)."""
        if self._listener is None and not self._listener_failed:
            try:
                self._listener = _Listener((self.bind, 0), _Handler)
            except OSError as exc:
                self._listener_failed = True
                self._say(
                    f"{PREFIX} {self.kind} {self.topic}: no live progress (cannot listen on {self.bind}: {exc})"
                )
                return None
            self._listener.receive = self._receive
            threading.Thread(target=self._listener.serve_forever, args=(0.1,), daemon=True).start()
        if self._listener is None:
            return None
        return Address(self.host, int(self._listener.server_address[1]), token)

    def _receive(self, raw: bytes) -> None:
        parts = raw.split()
        if len(parts) != 3:
            return
        read = self._reads.get(parts[0].decode(errors="replace"))
        if read is not None and read.tracker is not None and parts[1].isdigit() and parts[2].isdigit():
            read.tracker.update(int(parts[1]), int(parts[2]))

    def _tick(self, read: _Read, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            if read.tracker is not None:
                self._emit(read)

    def reading_of(self, read: _Read, final: bool = False) -> Reading:
        """Return where ``read`` stands now."""
        assert read.tracker is not None
        now = time.monotonic()
        done_read, done = read.tracker.progress(_finished(read.ctx))
        if done_read and read.first_seen is None:
            read.first_seen = now
        if done_read >= read.tracker.total and read.all_read is None:
            read.all_read = now
        begun = read.tracker.first_at or read.first_seen
        return Reading(
            self.kind,
            self.topic,
            done_read,
            read.tracker.total,
            now - read.started if read.lines or final else 0.0,  # the first line: starting
            partitions=len(read.tracker.ranges),
            partitions_read=done,
            label=read.label,
            final=final,
            records=_records(read.ctx) if final else None,
            reading=None if begun is None else (read.all_read or now) - begun,
        )

    def _emit(self, read: _Read, final: bool = False) -> None:
        with self._lock:
            now = self.reading_of(read, final)
            self.echo(now.line())
            read.lines += 1
            tracker = read.tracker
            assert tracker is not None
            if final and now.elapsed > QUIET and tracker.total and not tracker.reports and self._listener:
                self._say(
                    f"{PREFIX} {self.kind} {self.topic}: no live report from the executors reached "
                    f"{self.host}:{self._listener.server_address[1]}: only finished partitions were counted"
                )
            self.last = ProgressDocument(
                format=DOC_FORMAT,
                state="running",
                **now.to_dict(),
                started_at=read.started_at,
                updated_at=utc_now(),
                interval=self.interval,
                live_reports=tracker.reports,
                **self.extra,
            )
            self._publish(self.last)

    def _publish(self, doc: ProgressDocument) -> None:
        if self.publish is None:
            return
        try:
            self.publish(doc)
        except Exception as exc:  # noqa: BLE001 - progress never fails the application
            self._say(f"{PREFIX} {self.kind} {self.topic}: cannot write the progress document: {exc}")

    def _say(self, line: str) -> None:
        """Print ``line`` once (warnings that would otherwise repeat every interval)."""
        if line not in self._said:
            self._said.add(line)
            self.echo(line)


def add_progress_argument(parser: Any) -> None:
    """Add ``--progress-interval`` (seconds between two progress lines; 0: none) to an app's parser."""
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=DEFAULT_INTERVAL,
        help=f"seconds between two PROGRESS lines of the changelog reads (default {DEFAULT_INTERVAL:g}; 0: none)",
    )
