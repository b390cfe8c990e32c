"""The kstate control protocol: records on a compacted control topic.

The control topic (default ``_kstate_control``) has one partition, ``cleanup.policy=compact`` and
``message.timestamp.type=LogAppendTime``. Every record is UTF-8 JSON with a UTF-8 string key. Compaction keeps
the latest record per key, so a client that starts late reads the topic from the beginning and knows the
current command for its group and the live layout of its topics.

Keys and values (``v`` is the protocol version, 1):

``cmd/<group>``
    ``{"v": 1, "kind": "command", "group": g, "command": "pause" | "resume", "epoch": e, "topic": t,
    "issued_at": ms, "issuer": "..."}``. Consumers of group ``g`` must, on ``pause``, commit their offsets
    and *leave the group* (close or unsubscribe: ``pause()`` is not enough, the broker only accepts new
    offsets for an EMPTY group), then acknowledge. They stay out of the group, even across restarts, until
    a ``resume`` with a higher epoch arrives; then they rejoin and acknowledge.

``layout/<topic>``
    ``{"v": 1, "kind": "layout", "topic": t, "partitions": n, "epoch": e, "issued_at": ms, "issuer": "..."}``.
    Producers place keyed records with Kafka's Java default partitioner over the *first n partitions
    only*: ``(murmur2(key) & 0x7fffffff) % n``, and keyless records over those n. The controller pins
    ``n`` to the old count before it adds partitions and raises it ("scale") once every group is seeded.

    With ``"hold": true`` (and ``"hold_until": ms``) producers flush what they have, block ``produce()``
    for the topic and acknowledge ``held``; the next layout (a higher epoch without ``hold``) releases them.
    A producer that is still held at ``hold_until`` releases itself on the layout it has (a safety valve
    for a controller that died mid-hold).

``barrier/<topic>``
    ``{"v": 1, "kind": "barrier", "topic": t, "epoch": e, "state": "pending" | "hold" | "off", "offsets":
    [B0, ..., Bn-1], "groups": [g, ...], "issued_at": ms, "issuer": "..."}``. Per-key order across an
    increase: consumers of the named groups process records below ``offsets[p]`` freely and pause partition
    ``p`` at ``offsets[p]`` (a partition beyond the list: 0) until their group has committed offsets
    ``>= offsets`` on every partition, or a ``release`` for the group arrives. ``pending`` announces a
    barrier (look at the control topic often); ``off`` cancels it.

``release/<topic>/<group>``
    ``{"v": 1, "kind": "release", "topic": t, "group": g, "epoch": e}``: the group passed the barrier of
    epoch ``e``; its consumers resume the partitions they hold.

``ack/<group>/<client>``, ``ack-layout/<topic>/<client>`` and ``ack-barrier/<topic>/<group>/<client>``
    ``{"v": 1, "kind": "ack", "group" | "topic": ..., "client": c, "epoch": e, "state": s, "at": ms}`` with
    ``s`` one of ``paused``, ``running`` (consumers; a consumer also acknowledges its start, with the
    epoch of its group's latest command or 0: its presence, read by the plan), ``pending``, ``barrier``, ``released`` (consumers, on
    the barrier key, with both ``group`` and ``topic``) or ``layout``, ``held`` (producers, with
    ``"partitions": n``).

Epochs are milliseconds since the epoch at issue time; a client ignores a command whose epoch is not
higher than the last it applied. The broker is the authority on membership: the controller waits for the
group to be EMPTY (or STABLE on resume), acknowledgements only make the wait observable.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_kstate.enums import StrEnum

PROTOCOL_VERSION = 1
DEFAULT_CONTROL_TOPIC = "_kstate_control"
CONTROL_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "LogAppendTime",
    "min.compaction.lag.ms": "0",
}

PAUSE = "pause"
RESUME = "resume"
COMMANDS = (PAUSE, RESUME)

STATE_PAUSED = "paused"
STATE_RUNNING = "running"
STATE_LAYOUT = "layout"
STATE_HELD = "held"
STATE_PENDING = "pending"
STATE_BARRIER = "barrier"
STATE_RELEASED = "released"

BARRIER_PENDING = "pending"
BARRIER_HOLD = "hold"
BARRIER_OFF = "off"
BARRIER_STATES = (BARRIER_PENDING, BARRIER_HOLD, BARRIER_OFF)


class KeyOrder(StrEnum):
    """``key_order`` of an increase: ``preserve`` holds post-switch records until the pre-switch ones are
    processed (at the barrier, or by draining the groups that cannot hold); ``drain`` stops the producers
    before the create and starts them once every live group has consumed what was written before;
    ``relax`` switches at once."""

    PRESERVE = "preserve"
    RELAX = "relax"
    DRAIN = "drain"


PRESERVE = KeyOrder.PRESERVE
RELAX = KeyOrder.RELAX
DRAIN = KeyOrder.DRAIN
KEY_ORDERS = tuple(KeyOrder)


def now_ms() -> int:
    """Return the wall clock in milliseconds: the epoch of a newly issued command."""
    return int(time.time() * 1000)


def command_key(group: str) -> str:
    """Return the control-topic key of ``group``'s command."""
    return f"cmd/{group}"


def layout_key(topic: str) -> str:
    """Return the control-topic key of ``topic``'s producer layout."""
    return f"layout/{topic}"


def barrier_key(topic: str) -> str:
    """Return the control-topic key of ``topic``'s key-order barrier."""
    return f"barrier/{topic}"


def release_key(topic: str, group: str) -> str:
    """Return the control-topic key that releases ``group`` from ``topic``'s barrier."""
    return f"release/{topic}/{group}"


def ack_key(group: str, client: str) -> str:
    """Return the key under which consumer ``client`` of ``group`` acknowledges."""
    return f"ack/{group}/{client}"


def barrier_ack_key(topic: str, group: str, client: str) -> str:
    """Return the key under which consumer ``client`` of ``group`` acknowledges ``topic``'s barrier."""
    return f"ack-barrier/{topic}/{group}/{client}"


def layout_ack_key(topic: str, client: str) -> str:
    """Return the key under which producer ``client`` acknowledges a layout of ``topic``."""
    return f"ack-layout/{topic}/{client}"


@dataclass(frozen=True)
class Command:
    """A pause or resume command for one consumer group."""

    group: str
    command: str
    epoch: int
    topic: str = ""
    issued_at: int = field(default_factory=now_ms)
    issuer: str = ""
    kind: str = "command"
    v: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise ValueError(f"unknown command {self.command!r}; expected one of {COMMANDS}")

    @property
    def key(self) -> str:
        return command_key(self.group)


@dataclass(frozen=True)
class Layout:
    """The number of partitions producers may write ``topic`` to."""

    topic: str
    partitions: int
    epoch: int
    issued_at: int = field(default_factory=now_ms)
    issuer: str = ""
    hold: bool = False
    hold_until: int = 0
    kind: str = "layout"
    v: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        if self.partitions <= 0:
            raise ValueError(f"a layout needs a positive partition count, got {self.partitions}")

    @property
    def key(self) -> str:
        return layout_key(self.topic)


@dataclass(frozen=True)
class Ack:
    """A client's acknowledgement of a command (``group`` set) or a layout (``topic`` set)."""

    client: str
    epoch: int
    state: str
    group: str = ""
    topic: str = ""
    partitions: int = 0
    at: int = field(default_factory=now_ms)
    kind: str = "ack"
    v: int = PROTOCOL_VERSION

    @property
    def key(self) -> str:
        if self.group and self.topic:
            return barrier_ack_key(self.topic, self.group, self.client)
        if self.group:
            return ack_key(self.group, self.client)
        return layout_ack_key(self.topic, self.client)


@dataclass(frozen=True)
class Barrier:
    """Per-key order across an increase: the end offset of every partition when producers were held.

    ``offsets[p]`` is the first offset of partition ``p`` written after the switch (partitions beyond the
    list, the new ones: 0). Consumers of ``groups`` pause a partition at its barrier offset until their group
    has committed offsets at or past every barrier offset (or a :class:`Release` arrives).
    """

    topic: str
    epoch: int
    state: str = BARRIER_HOLD
    offsets: list[int] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    issued_at: int = field(default_factory=now_ms)
    issuer: str = ""
    kind: str = "barrier"
    v: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        if self.state not in BARRIER_STATES:
            raise ValueError(f"unknown barrier state {self.state!r}; expected one of {BARRIER_STATES}")
        if any(not isinstance(o, int) or o < 0 for o in self.offsets):
            raise ValueError("barrier offsets must be integers >= 0")
        if any(not isinstance(g, str) for g in self.groups):
            raise ValueError("barrier groups must be strings")

    @property
    def key(self) -> str:
        return barrier_key(self.topic)

    def offset(self, partition: int) -> int:
        """The barrier offset of ``partition`` (0 for a partition the barrier does not list: a new one)."""
        return self.offsets[partition] if 0 <= partition < len(self.offsets) else 0

    def applies(self, group: str) -> bool:
        """True when consumers of ``group`` hold at this barrier."""
        return self.state == BARRIER_HOLD and group in self.groups

    def passed(self, committed: dict[int, int], partitions: int) -> bool:
        """True when ``committed`` (``{partition: offset}``) is at or past the barrier on all ``partitions``."""
        return all(committed.get(p, -1) >= self.offset(p) for p in range(partitions))


@dataclass(frozen=True)
class Release:
    """``group`` passed the barrier of ``topic`` with epoch ``epoch``: its consumers stop holding."""

    topic: str
    group: str
    epoch: int
    at: int = field(default_factory=now_ms)
    issuer: str = ""
    kind: str = "release"
    v: int = PROTOCOL_VERSION

    @property
    def key(self) -> str:
        return release_key(self.topic, self.group)


Record = Command | Layout | Ack | Barrier | Release
_KINDS: dict[str, type] = {
    "command": Command,
    "layout": Layout,
    "ack": Ack,
    "barrier": Barrier,
    "release": Release,
}


def encode(record: Record) -> bytes:
    """Serialize a protocol record to its JSON value."""
    return json.dumps(asdict(record), separators=(",", ":"), sort_keys=True).encode()


def decode(value: bytes | None) -> Record | None:
    """Parse a control-topic value; return None for a tombstone or a record of an unknown kind/version.

    Unknown fields are ignored so that newer controllers can add fields without breaking older clients.
    """
    if value is None:
        return None
    try:
        raw: dict[str, Any] = json.loads(value)
    except ValueError:
        return None
    cls = _KINDS.get(raw.get("kind", ""))
    if cls is None or raw.get("v") != PROTOCOL_VERSION:
        return None
    known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}  # type: ignore[attr-defined]
    try:
        return cls(**known)  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        return None
