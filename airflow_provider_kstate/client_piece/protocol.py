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

Each record is a :class:`~airflow_provider_kstate.documents.Document`; its JSON Schema under
``docs/schemas/control/`` is generated from the model (``python -m airflow_provider_kstate.documents``).
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import BeforeValidator, ConfigDict, Field

from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_CONTROL_TOPIC as DEFAULT_CONTROL_TOPIC,
)
from airflow_provider_kstate.defaults import (
    DRAIN as DRAIN,
)
from airflow_provider_kstate.defaults import (
    PRESERVE as PRESERVE,
)
from airflow_provider_kstate.defaults import (
    RELAX as RELAX,
)
from airflow_provider_kstate.defaults import (
    KeyOrder as KeyOrder,
)
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.errors import ControlRecordError

PROTOCOL_VERSION: Final = 1
CONTROL_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "LogAppendTime",
    "min.compaction.lag.ms": "0",
}

PAUSE = "pause"
RESUME = "resume"
COMMANDS = (PAUSE, RESUME)

STATE_PAUSED = "paused"
#: A consumer out of its group before its ``paused``: its consumer closed but its commit before leaving
#: failed (it commits without membership once the group is EMPTY), or closing with no partition assigned
#: (a close that may wait for the group's JoinGroup); ``paused`` follows (control protocol, rule 4.3).
STATE_LEFT = "left"
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
ACK_STATES = (
    STATE_PAUSED,
    STATE_LEFT,
    STATE_RUNNING,
    STATE_PENDING,
    STATE_BARRIER,
    STATE_RELEASED,
    STATE_LAYOUT,
    STATE_HELD,
)


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


def _control_schema(schema: dict[str, Any]) -> None:
    """A reader ignores fields it does not know (a newer controller may add some): say so to validators."""
    schema["additionalProperties"] = True


def _millis(description: str) -> Any:
    """A time field: milliseconds since the Unix epoch, now when a record is made, 0 when a reader lacks it."""
    return Field(default_factory=now_ms, ge=0, description=description, json_schema_extra={"default": 0})


def _one_of(what: str, choices: tuple[str, ...]) -> BeforeValidator:
    """Refuse a value outside ``choices`` naming them (the schema lists them as its ``enum``)."""

    def check(value: Any) -> Any:
        if value not in choices:
            raise ValueError(f"unknown {what} {value!r}; expected one of {choices}")
        return value

    return BeforeValidator(check)


#: A command: pause or resume.
CommandName = Annotated[str, _one_of("command", COMMANDS), Field(json_schema_extra={"enum": list(COMMANDS)})]
#: An acknowledgement's state.
AckState = Annotated[
    str, _one_of("ack state", ACK_STATES), Field(json_schema_extra={"enum": list(ACK_STATES)})
]
#: A barrier's state.
BarrierState = Annotated[
    str, _one_of("barrier state", BARRIER_STATES), Field(json_schema_extra={"enum": list(BARRIER_STATES)})
]
#: Epochs, offsets, counts: JSON integers >= 0 (they fit in 53 bits, so a JavaScript number holds them).
Count = Annotated[int, Field(ge=0)]
#: Group, topic and client ids: non-empty strings.
Name = Annotated[str, Field(min_length=1)]


class ControlRecord(Document):
    """The base of the control records: ``v`` and ``kind`` required on read; unknown fields ignored; read
    strictly (a string epoch is invalid); encoded with sorted keys (:func:`encode`)."""

    model_config = ConfigDict(json_schema_extra=_control_schema)

    read_error: ClassVar[type[Exception]] = ControlRecordError
    identity: ClassVar[tuple[str, ...]] = ("v", "kind")
    sort_keys: ClassVar[bool] = True
    read_strict: ClassVar[bool] = True

    v: Literal[1] = Field(default=PROTOCOL_VERSION, description="protocol version")

    @property
    def key(self) -> str:
        """The control-topic key the record is written under."""
        raise NotImplementedError


class Command(ControlRecord):
    """Pause or resume the consumers of one group. Readers ignore a record that does not validate."""

    model_config = ConfigDict(title="kstate control record: command (key cmd/<group>)")
    schema_name: ClassVar[str] = "control/command"

    kind: Literal["command"] = "command"
    group: Name = Field(description="the consumer group (group.id); equals <group> in the key")
    command: CommandName
    epoch: Count = Field(description="strictly increasing per group (ms since the Unix epoch at issue)")
    topic: str = Field(default="", description="informational")
    issued_at: int = _millis("milliseconds since the Unix epoch")
    issuer: str = ""

    @property
    def key(self) -> str:
        return command_key(self.group)


class Layout(ControlRecord):
    """How many partitions producers of a topic may write to; with hold, producers flush and block."""

    model_config = ConfigDict(title="kstate control record: layout (key layout/<topic>)")
    schema_name: ClassVar[str] = "control/layout"

    kind: Literal["layout"] = "layout"
    topic: Name
    partitions: int = Field(ge=1, description="producers use partitions 0 .. partitions-1")
    epoch: Count = Field(description="strictly increasing per topic")
    hold: bool = Field(default=False, description="flush, block produce, acknowledge held")
    hold_until: Count = Field(
        default=0, description="a held producer releases itself at this instant; 0: never"
    )
    issued_at: int = _millis("milliseconds since the Unix epoch")
    issuer: str = ""

    @property
    def key(self) -> str:
        return layout_key(self.topic)


class Ack(ControlRecord):
    """A client's acknowledgement of a command, its start (presence), a layout, a hold or a barrier: ``group``
    set for a command, ``topic`` for a layout, both for a barrier."""

    model_config = ConfigDict(
        title="kstate control record: acknowledgement (keys ack/<group>/<client>, ack-layout/<topic>/<client>, "
        "ack-barrier/<topic>/<group>/<client>)"
    )
    schema_name: ClassVar[str] = "control/ack"

    kind: Literal["ack"] = "ack"
    client: Name = Field(description="stable id of the instance; a consumer's equals its Kafka client id")
    epoch: Count = Field(
        description="the epoch of the record acknowledged (presence: the group's latest command, 0 when none)"
    )
    state: AckState
    group: str = Field(default="", description="consumer acks: the group; producer acks: empty")
    topic: str = Field(default="", description="producer and barrier acks: the topic; command acks: empty")
    partitions: Count = Field(default=0, description="producer acks: the partition count in use")
    at: int = _millis("milliseconds since the Unix epoch")

    @property
    def key(self) -> str:
        if self.group and self.topic:
            return barrier_ack_key(self.topic, self.group, self.client)
        if self.group:
            return ack_key(self.group, self.client)
        return layout_ack_key(self.topic, self.client)


class Barrier(ControlRecord):
    """Per-key order across an increase: the end offset of every partition when producers were held.

    ``offsets[p]`` is the first offset of partition ``p`` written after the switch (partitions beyond the
    list, the new ones: 0). Consumers of ``groups`` pause a partition at its barrier offset until their group
    has committed offsets at or past every barrier offset (or a :class:`Release` arrives). ``pending``
    announces a barrier, ``off`` cancels it.
    """

    model_config = ConfigDict(title="kstate control record: key-order barrier (key barrier/<topic>)")
    schema_name: ClassVar[str] = "control/barrier"

    kind: Literal["barrier"] = "barrier"
    topic: Name
    epoch: Count = Field(description="strictly increasing per topic")
    state: BarrierState = BARRIER_HOLD
    offsets: list[Count] = Field(default=[], description="B[p] per partition; a partition beyond the list: 0")
    groups: list[str] = Field(default=[], description="the groups that hold")
    partitions: Count = Field(
        default=0,
        description="pending, sent once the topic grew: its partition count now; a consumer of the groups "
        "whose metadata shows fewer refreshes it and takes the new partitions at once (0: not said)",
    )
    grown_from: Count = Field(
        default=0,
        description="pending, sent once the topic grew: its count before; partitions grown_from .. "
        "partitions-1 are new and hold no record until the producers switch, so a consumer starts there at "
        "offset 0 without asking (0: not said)",
    )
    issued_at: int = _millis("milliseconds since the Unix epoch")
    issuer: str = ""

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


class Release(ControlRecord):
    """``group`` passed the barrier of ``topic`` with epoch ``epoch``: its consumers stop holding."""

    model_config = ConfigDict(title="kstate control record: release (key release/<topic>/<group>)")
    schema_name: ClassVar[str] = "control/release"

    kind: Literal["release"] = "release"
    topic: Name
    group: Name
    epoch: Count = Field(description="the epoch of the barrier passed")
    at: int = _millis("milliseconds since the Unix epoch")
    issuer: str = ""

    @property
    def key(self) -> str:
        return release_key(self.topic, self.group)


Record = Command | Layout | Ack | Barrier | Release
_KINDS: dict[str, type[ControlRecord]] = {
    "command": Command,
    "layout": Layout,
    "ack": Ack,
    "barrier": Barrier,
    "release": Release,
}


def encode(record: Record) -> bytes:
    """Serialize a protocol record to its JSON value (compact, sorted keys: the same bytes for the same
    record)."""
    return record.to_json().encode()


def decode(value: bytes | None) -> Record | None:
    """Parse a control-topic value; return None for a tombstone and for anything a reader ignores: not a JSON
    object, an unknown kind or version, a missing or invalid field (the schema of its kind). Never raises.

    Unknown fields are ignored so that newer controllers can add fields without breaking older clients.
    """
    if value is None:
        return None
    try:
        raw = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    kind, version = raw.get("kind"), raw.get("v")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None or type(version) is not int or version != PROTOCOL_VERSION:
        return None
    try:
        return cls.from_dict(raw)  # type: ignore[return-value]
    except ControlRecordError:
        return None
