"""The plan of a safe partition increase: what the topic is, which groups are at risk and what each step does.

:class:`Plan` (with a :class:`GroupPlan` per group) is the one model of the plan: the domain works with it,
and its dict is the plan's wire form, the document that travels through XCom and is stored with the topic's
lease (:meth:`Plan.to_dict` / :meth:`Plan.from_dict`, or :meth:`Plan.to_json` / :meth:`Plan.from_json`;
schema ``docs/schemas/increase/plan.schema.json``, generated from the model): validated on read, with a
version ``v`` (a plan written before it had one reads as version 1). Its size grows with the number of
groups, never with the number of partitions. A field added to the model is in the wire form and the schema.

Group classes: ``active`` (a live classic or consumer-protocol group: paused, waited for, seeded and
waited for again after resume), ``empty`` (committed offsets, no members: seeded, not waited for),
``spark`` (a Spark Structured Streaming source group: it reads new partitions from earliest by itself and
keeps its offsets in its checkpoint, so it is left alone), ``share-safe`` (a share group, KIP-932, that reads
the topic and starts the new partitions at their first record: its ``share.auto.offset.reset`` is
``earliest``, or the broker keeps the doctor's ``share_new_partitions`` promise; left alone), ``excluded`` (at risk, but excluded explicitly:
left alone, logged as a risk accepted) and ``absent`` (named explicitly, unknown to the broker and allowed
with ``allow_unknown_groups``: it has no offsets to protect).

A plan whose target equals the current count is a **repair**: it seeds every gap (a protected group without
an offset on a partition of the topic) left by a crashed run or by a topic grown outside the tool.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from airflow_provider_kstate import enums
from airflow_provider_kstate.defaults import (  # re-exported: the value lives there (parse time)
    DEFAULT_SPARK_PREFIXES as DEFAULT_SPARK_PREFIXES,
)
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import (
    InternalTopicError,
    InvalidPartitionCountError,
    UnknownGroupError,
    UnprotectedGroupError,
    UnsupportedGroupTypeError,
)
from airflow_provider_kstate.increase.drivers import CONTROL, DriverField
from airflow_provider_kstate.increase.model import (
    CLASSIC,
    DEAD,
    EMPTY,
    SHARE,
    SHARE_RESET,
    STREAMS,
    UNKNOWN_TYPE,
    GroupInfo,
)
from airflow_provider_kstate.increase.replicas import ReplicationState
from airflow_provider_kstate.increase.report import ranges
from airflow_provider_kstate.increase.request import PlanRequest
from airflow_provider_kstate.increase.streams_apps import StreamsAppPlan, discover_streams, streams_runbook

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort

#: Kafka Connect names the consumer group of a sink connector ``connect-<connector name>``.
CONNECT_PREFIX = "connect-"
#: The classic protocol's assignor name of a Kafka Streams application.
STREAMS_ASSIGNOR = "stream"
INTERNAL_PREFIXES = ("__", "_confluent", "_kstate_")
#: Members named per group in the plan (the count is always kept): the plan stays small at any size.
MEMBER_SAMPLE = 3
FLAGS = ("pause", "seed", "wait")
NO_FLAGS = {"pause": False, "seed": False, "wait": False}


_Choice = TypeVar("_Choice", bound=StrEnum)


class GroupClass(StrEnum):
    """What a group is to the run (the module's docstring says what each goes through)."""

    ACTIVE = "active"
    EMPTY = "empty"
    SPARK = "spark"
    EXCLUDED = "excluded"
    ABSENT = "absent"
    #: A share group reading the topic that starts new partitions at their first record: left alone.
    SHARE_SAFE = "share-safe"
    #: Refused unless excluded (or, for streams, acknowledged): :func:`_refuse_unsupported` says why.
    SHARE = "share"
    STREAMS = "streams"
    UNKNOWN_TYPE = "unknown-type"
    UNDESCRIBED = "undescribed"


class GroupRole(StrEnum):
    """What a group's clients are, when it is known: a Kafka Streams application, a Kafka Connect sink
    connector, or plain consumers (empty)."""

    PLAIN = ""
    STREAMS = "streams"
    CONNECT_SINK = "connect-sink"


class KeyOrderMark(StrEnum):
    """Per-key order at the switch, as the plan sees a protected group (``GroupPlan.key_order``): every live
    member runs the client piece and holds at the ``barrier``; it cannot hold, but its producers are stopped
    before the create and started once it has consumed everything written before (``drained``); it cannot
    hold and its producers cannot be stopped (``relaxed``); no live members (``offline``: its consumers hold
    at start if they use the client piece); empty for the groups the run leaves alone."""

    NONE = ""
    BARRIER = "barrier"
    DRAINED = "drained"
    RELAXED = "relaxed"
    OFFLINE = "offline"


class PlanMode(StrEnum):
    """An ``increase`` creates partitions; a ``repair`` (target equals the current count) only seeds gaps."""

    INCREASE = "increase"
    REPAIR = "repair"


#: What each class of group goes through (the flags a plan stores only where they differ).
CLASS_FLAGS: dict[str, dict[str, bool]] = {
    GroupClass.ACTIVE: {"pause": True, "seed": True, "wait": True},
    GroupClass.EMPTY: {"pause": True, "seed": True, "wait": False},
}
#: The classes the run cannot pause or seed (refused unless excluded).
UNSUPPORTED = (GroupClass.SHARE, GroupClass.STREAMS, GroupClass.UNKNOWN_TYPE, GroupClass.UNDESCRIBED)


class InvalidPlanError(InvalidPartitionCountError):
    """The plan argument is not a plan (a wrong XCom or a hand-written dict)."""


def choice(what: str, value: str, choices: type[_Choice]) -> _Choice:
    """Return ``value`` as a member of ``choices``, else raise :class:`InvalidPlanError` naming them (the
    one coercer, :func:`airflow_provider_kstate.enums.choice`, with the plan's error)."""
    return enums.choice(what, value, choices, InvalidPlanError)


def group_class(value: str) -> GroupClass:
    """Return ``value`` as a :class:`GroupClass`, else raise :class:`InvalidPlanError` naming the choices."""
    return choice("group class", value, GroupClass)


def check_topic_name(topic: str) -> None:
    """Refuse Kafka's internal topics and the provider's own."""
    if topic.startswith(INTERNAL_PREFIXES):
        raise InternalTopicError(
            f"topic {topic!r} is internal (starts with one of {INTERNAL_PREFIXES}); refusing to change it"
        )


def _str(what: str, choices: type[_Choice]) -> BeforeValidator:
    """Read ``what`` as a member of ``choices`` (:func:`choice`: InvalidPlanError naming them)."""
    return BeforeValidator(lambda value: choice(what, str(value), choices))


def _read_implies(schema: dict[str, Any]) -> None:
    """A field whose value, when a compact form leaves it out, follows from the others: no fixed default."""
    schema.pop("default", None)


class _PlanModel(Document):
    """What the plan and its groups share: a frozen, validated model whose wire form is its dict, built
    with keywords or, in field order, positionally (``Plan("orders", 2, 4, groups)``)."""

    read_error: ClassVar[type[Exception]] = InvalidPlanError

    def __init__(self, /, *args: Any, **fields: Any) -> None:
        super().__init__(**dict(zip(type(self).model_fields, args, strict=False)), **fields)

    def replace(self, **changes: Any) -> Self:
        """Return a copy with ``changes`` (validated, as a new model: a mark given as a string becomes its
        member, a wrong one is refused)."""
        return type(self).model_validate({**self.__dict__, **changes})


class GroupPlan(_PlanModel):
    """What the run does to one group, and what the broker said of it at plan time.

    Its compact form (each entry of the plan's ``groups``) writes ``class``, ``state`` and ``member_count``
    always, the flags where they differ from what the class implies, the key-order reason with the mark,
    the driver for the groups the run seeds, and every other field where it differs from its default; read
    back (a dict with ``class``), what was left out takes those values again (``member_count``:
    ``len(members)``).
    """

    #: Written whatever their value.
    always: ClassVar[tuple[str, ...]] = ("cls", "state", "member_count")
    #: Written exactly when the other field is set.
    written_with: ClassVar[dict[str, str]] = {"key_order_reason": "key_order", "driver": "seed"}

    cls: Annotated[GroupClass, _str("group class", GroupClass)] = Field(
        validation_alias=AliasChoices("class", "cls"),
        serialization_alias="class",
        description="what the group is to the run",
    )
    state: str = Field(default="", description="the broker's group state at plan time")
    member_count: int = Field(
        default=0,
        ge=0,
        description="live members at plan time (absent: len(members))",
        json_schema_extra=_read_implies,
    )
    members: tuple[str, ...] = Field(
        default=(), description=f"client_id@host of up to {MEMBER_SAMPLE} members"
    )
    type: str = Field(default=CLASSIC, description=f"the group's protocol type (absent: {CLASSIC})")
    #: What the group's clients are, when it is known: ``streams`` (a Kafka Streams application),
    #: ``connect-sink`` (a Kafka Connect sink connector); empty for plain consumers.
    role: Annotated[GroupRole, _str("group role", GroupRole)] = Field(
        default=GroupRole.PLAIN, description="streams, connect-sink"
    )
    #: Per-key order at the switch, as the plan sees it: ``barrier`` (every live member runs the client
    #: piece: the group holds at the barrier), ``relaxed`` (it cannot hold: ``key_order_reason`` says why),
    #: ``offline`` (no live members: its consumers hold at start if they use the client piece); empty for
    #: the groups the run leaves alone. The switch checks again at run time (``switch.relaxed_groups``).
    key_order: Annotated[KeyOrderMark, _str("group key_order", KeyOrderMark)] = Field(
        default=KeyOrderMark.NONE, description="per-key order at the switch"
    )
    key_order_reason: str = Field(default="", description="why the group is marked so")
    #: How the run stops and starts the group's services (:mod:`~airflow_provider_kstate.increase.drivers`):
    #: set for the groups it seeds.
    driver: DriverField = Field(
        default=CONTROL, description="how the run stops and starts it (seeded groups)"
    )
    #: Why the run cannot drive the group with that driver ("" when it can): the plan is refused.
    driver_problem: str = Field(default="", description="why the run cannot drive it: the plan is refused")
    #: A share group reading the topic: its ``share.auto.offset.reset`` as the broker applies it.
    share_reset: str = Field(
        default="", description="a share group reading the topic: its share.auto.offset.reset"
    )
    pause: bool = Field(
        default=False, description="absent: as the class implies", json_schema_extra=_read_implies
    )
    seed: bool = Field(
        default=False, description="absent: as the class implies", json_schema_extra=_read_implies
    )
    wait: bool = Field(
        default=False, description="absent: as the class implies", json_schema_extra=_read_implies
    )
    #: The group stays in its group while the topics grow (it is neither paused nor seeded by the run): the
    #: evidence the run waits for, that it holds a position on every partition (``client-piece``: its
    #: consumers commit their start on each partition they are assigned; ``commits``: the request names it
    #: in ``committing_groups``); empty: it does not stay (``stay_reason`` says why, when asked to).
    stay: str = Field(
        default="", description="client-piece or commits: the group stays (absent: it does not)"
    )
    stay_reason: str = Field(default="", description="why the group stays, or why it cannot")
    #: Every live member runs the client piece (its client id acknowledged on the control topic): set for the
    #: seeded groups with live members, at plan time.
    client_piece: bool = Field(default=False, description="every live member runs the client piece")
    #: In a plan of several co-partitioned topics: the ones the group reads, where it is paused once and
    #: seeded on each (empty: every topic of the plan).
    topics: tuple[str, ...] = Field(
        default=(), description="several topics: the ones it reads (absent: every topic of the plan)"
    )

    @classmethod
    def what(cls) -> str:
        return "group plan"

    def reads(self, topic: str) -> bool:
        """Whether the run handles the group on ``topic`` (every topic of the plan when ``topics`` is empty)."""
        return not self.topics or topic in self.topics

    @model_validator(mode="before")
    @classmethod
    def _read_compact(cls, data: Any) -> Any:
        """Give a compact form (a dict with ``class``) back what its writer left out."""
        if not isinstance(data, Mapping) or "class" not in data:
            return data  # built in Python (``cls=``): the fields as given
        out = dict(data)
        members = out.get("members")
        if isinstance(members, (list, tuple)):
            out.setdefault("member_count", len(members))
            out["members"] = members[:MEMBER_SAMPLE]
        group = out["class"]
        implied = CLASS_FLAGS.get(group, NO_FLAGS) if isinstance(group, str) else NO_FLAGS
        return {**implied, **out}

    # No return annotation: the published schema stays the model's own (the compact form leaves fields out).
    @model_serializer(mode="wrap")
    def _write_compact(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        full = handler(self)
        flags = {flag: getattr(self, flag) for flag in FLAGS} != CLASS_FLAGS.get(self.cls, NO_FLAGS)
        out = {}
        for name, info in type(self).model_fields.items():
            key = info.serialization_alias if info.serialization_alias in full else name
            if name in FLAGS:
                written = flags
            elif name in self.written_with:
                written = bool(getattr(self, self.written_with[name]))
            else:
                written = name in self.always or getattr(self, name) != info.default
            if written:
                out[key] = full[key]
        return out


class Plan(_PlanModel):
    """A validated request: the topic, its partition counts and the plan of each group; its dict is the
    plan's wire form (XCom, the lease). ``producers`` is written only when the run may stop producer
    services; ``mode`` is derived (written, ignored on read); a plan written before the version existed
    reads as version 1."""

    model_config = ConfigDict(title="kstate increase: the plan (XCom, the topic's lease)")
    schema_name: ClassVar[str] = "increase/plan"

    topic: str
    original_partitions: int = Field(ge=0, description="the topic's partition count at plan time")
    target_partitions: int = Field(ge=0, description="the count after the run (equal: a repair)")
    groups: dict[str, GroupPlan] = Field(default_factory=dict, description="group -> what the run does to it")
    groups_discovered: bool = Field(
        default=True, description="false: the groups were named, and checked against discovery"
    )
    planned_at: str = Field(default="", description="UTC, ISO 8601")
    owner: str = Field(default="", description="the run (dag_id/run_id) once it runs")
    dry_run: bool = False
    control_topic: str = ""
    lease_topic: str = ""
    report_uri: str = ""
    #: The producer services the run may stop and start (``{service: driver}``; ``control`` stands for the
    #: ControlledProducers): set when a group is drained, or the run's key order is ``drain``.
    producers: dict[str, DriverField] = Field(
        default_factory=dict, description="producer service -> its driver, for a drain (absent: none)"
    )
    #: The topic's replication as the plan saw it (:mod:`~airflow_provider_kstate.increase.replicas`):
    #: written when it was checked.
    replication: ReplicationState | None = Field(
        default=None, description="the topic's replication at plan time (absent: not checked)"
    )
    #: The Kafka Streams applications at risk and their resize (:mod:`~airflow_provider_kstate.increase.streams_apps`).
    streams_apps: dict[str, StreamsAppPlan] = Field(
        default_factory=dict, description="application id -> its topology and resize (absent: none)"
    )
    #: Co-partitioned topics grown together in one run (one plan, one lease per topic taken as a set, one
    #: pause window): every topic of the set, ``topic`` first, with its partition count at plan time.
    #: Empty for a plan of one topic (every plan written before it existed).
    topics: dict[str, int] = Field(
        default_factory=dict,
        description="several topics: every topic of the set (topic first) -> its count at plan time "
        "(absent: the one topic)",
    )
    #: Each topic's id (KIP-516) at plan time: a topic deleted and created again under the same name has
    #: another id, so no offset stored against the plan's topic is trusted against a different log.
    topic_ids: dict[str, str] = Field(
        default_factory=dict, description="topic -> its topic id at plan time (absent or empty: unknown)"
    )
    #: The request the plan was made from (:mod:`~airflow_provider_kstate.increase.request`): a plan made
    #: again from it (the approval's re-plan) asks for exactly the same.
    request: PlanRequest | None = Field(
        default=None, description="the request the plan was made from (absent: made by hand)"
    )
    v: Literal[1] = Field(
        default=1, description="version; a plan written before it had one has none: read as 1"
    )

    @field_validator(
        "owner", "control_topic", "lease_topic", "report_uri", "groups", "producers", mode="before"
    )
    @classmethod
    def _null_is_empty(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return {} if info.field_name in ("groups", "producers") else ""
        return value

    @field_validator("producers", mode="wrap")
    @classmethod
    def _name_producers(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A producer's driver read from its dict form without a name is named after its service."""
        drivers = handler(value)
        if not isinstance(value, Mapping):
            return drivers
        return {
            s: replace(d, name=s) if not d.name and isinstance(value.get(s), Mapping) else d
            for s, d in drivers.items()
        }

    @computed_field(description="increase (creates partitions) or repair (seeds gaps only); derived")  # type: ignore[prop-decorator]
    @property
    def mode(self) -> PlanMode:
        """``increase`` when the run creates partitions (on any topic of the set), ``repair`` when it only
        seeds gaps."""
        lowest = min(self.topics.values(), default=self.original_partitions)
        return PlanMode.INCREASE if self.target_partitions > lowest else PlanMode.REPAIR

    @property
    def several(self) -> bool:
        """Whether the plan grows several co-partitioned topics together."""
        return len(self.topics) > 1

    @property
    def topic_names(self) -> list[str]:
        """The topics the run grows, ``topic`` first (the lease takes them in name order)."""
        return list(self.topics) if self.topics else [self.topic]

    def for_topic(self, topic: str) -> Plan:
        """Return the plan of one topic of the set: its count at plan time, the groups that read it, the
        run fields unchanged (the steps of one topic work on it). A plan of one topic returns itself."""
        if not self.several:
            if topic != self.topic:
                raise InvalidPlanError(f"the plan grows {self.topic!r}, not {topic!r}")
            return self
        if topic not in self.topics:
            raise InvalidPlanError(f"the plan grows {self.topic_names}, not {topic!r}")
        return self.replace(
            topic=topic,
            original_partitions=self.topics[topic],
            groups={g: e.replace(topics=()) for g, e in self.groups.items() if e.reads(topic)},
            replication=self.replication if topic == self.topic else None,
            topics={},
        )

    def resized_apps(self) -> dict[str, StreamsAppPlan]:
        """The Kafka Streams applications this run resizes with their state (the request's
        ``resize_streams_groups``; a plan stored without a request: every application it names). An
        application only acknowledged is paused and seeded like a consumer group, its state not moved."""
        if self.request is None:
            return dict(self.streams_apps)
        wanted = set(self.request.resize_streams_groups)
        return {app: entry for app, entry in self.streams_apps.items() if app in wanted}

    def views(self) -> list[Plan]:
        """The plan of each topic (:meth:`for_topic`), in the plan's order."""
        return [self.for_topic(t) for t in self.topic_names]

    def ids_of(self, *topics: str) -> dict[str, str]:
        """``{topic: its id at plan time}`` of those ``topics`` whose id the plan knows."""
        return {t: self.topic_ids[t] for t in topics if self.topic_ids.get(t)}

    @property
    def new_partitions(self) -> range:
        """The partitions this run creates (empty for a repair)."""
        return range(self.original_partitions, self.target_partitions)

    def where(self, flag: str) -> list[str]:
        """Return the groups whose plan has ``flag`` (``pause``, ``seed`` or ``wait``) set, in plan order."""
        return [g for g, entry in self.groups.items() if getattr(entry, flag)]

    def of_class(self, *classes: str) -> list[str]:
        """Return the groups of the given classes, in plan order."""
        return [g for g, entry in self.groups.items() if entry.cls in classes]

    def with_run(self, **changes: Any) -> Plan:
        """Return a copy with run fields (owner, dry_run, topics, report_uri) set."""
        return self.replace(**changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-safe form stored in XCom and in the lease (no per-partition list)."""
        out = super().to_dict()
        if not out["producers"]:
            del out["producers"]
        if out["replication"] is None:
            del out["replication"]
        if not out["streams_apps"]:
            del out["streams_apps"]
        for name in ("topics", "topic_ids"):
            if not out[name]:
                del out[name]
        if out["request"] is None:
            del out["request"]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """Read a plan from XCom (also a plan written by an earlier version, with ``new_partitions``): once, at
        the operator's or sensor's edge (``typed_plan``), where a :class:`Plan` given in Python passes
        through; the domain takes only :class:`Plan`.

        :raises InvalidPlanError: not a plan, or a field missing or of the wrong type (named).
        """
        if isinstance(data, Plan):
            return data
        if not isinstance(data, dict) or "topic" not in data:
            raise InvalidPlanError(f"not a kstate plan: {str(data)[:200]!r}")
        return super().from_dict(data)

    def marked(self, mark: KeyOrderMark) -> list[str]:
        """Return the seeded groups whose key order is ``mark``, in plan order."""
        return [g for g in self.where("seed") if self.groups[g].key_order == mark]

    def staying(self) -> list[str]:
        """Return the groups that stay in their groups while the topics grow, in plan order."""
        return [g for g, e in self.groups.items() if e.stay]

    def seeded_by_run(self) -> list[str]:
        """Return the seeded groups the run itself seeds (EMPTY by then): every one but those that stay."""
        return [g for g in self.where("seed") if not self.groups[g].stay]

    def undrivable(self) -> dict[str, str]:
        """Return ``{group: why the run cannot drive it}`` (a plan with any is refused), in plan order."""
        return {g: e.driver_problem for g, e in self.groups.items() if e.driver_problem}


def parsed_plan(task: Any) -> Plan:
    """Return ``task.plan`` parsed (:meth:`Plan.from_dict`), parsing it again only when the attribute now
    holds another object (a re-render): every later read in the task (an operator's or a sensor's
    ``typed_plan``) is a dictionary lookup."""
    cached = task.__dict__.get("_parsed_plan")
    if cached is None or cached[0] is not task.plan:
        cached = (task.plan, Plan.from_dict(task.plan))
        task.__dict__["_parsed_plan"] = cached
    return cached[1]


@dataclass(frozen=True)
class Seen:
    """What the cluster says of one group reading the topic, as the reader kinds judge it.

    :param listed: whether the cluster lists the group (None: its listing was not read).
    """

    info: GroupInfo
    group_type: str
    role: GroupRole
    listed: bool | None
    spark_prefixes: tuple[str, ...]


class ReaderKind:
    """A kind of reader of the topics: whether a group is one (:meth:`claims`, from what the cluster says of
    it) and its plan (:meth:`plan`: its class, and whether the run pauses, seeds and waits for it). The kinds
    are tried in the order of :data:`READER_KINDS`; adding a kind is one subclass and its place there (and
    its :class:`GroupClass` value)."""

    cls: ClassVar[GroupClass]
    #: What the approval prompt says of a group of this kind that the run leaves alone, by class (a kind may
    #: plan more than one class: a share group is refused, or left alone when the broker starts it right).
    words: ClassVar[Mapping[GroupClass, str]] = {}
    #: Whether a plan that names its groups (``consumer_groups``) lets a group of this kind go unnamed: one
    #: the run leaves alone by nature, or refuses with a message of its own.
    unnamed_ok: ClassVar[bool] = False

    def claims(self, seen: Seen) -> bool:
        raise NotImplementedError

    def plan(self, base: GroupPlan, seen: Seen) -> GroupPlan:
        """The plan of a group of this kind (by default: its class, left alone)."""
        return base.replace(cls=self.cls)


class SparkQuery(ReaderKind):
    """A Spark Structured Streaming source (its group id's prefix): it reads new partitions from earliest."""

    cls = GroupClass.SPARK
    words = {GroupClass.SPARK: "left alone: Spark reads new partitions from earliest"}
    unnamed_ok = True

    def claims(self, seen: Seen) -> bool:
        return seen.info.group.startswith(seen.spark_prefixes)


class AbsentGroup(ReaderKind):
    """Unknown to the cluster (not listed, no members): nothing to protect. Without the listing, a group the
    broker describes DEAD (some brokers describe a never-seen group as EMPTY)."""

    cls = GroupClass.ABSENT
    words = {GroupClass.ABSENT: "left alone: unknown to the cluster, nothing to protect"}

    def claims(self, seen: Seen) -> bool:
        unknown = not seen.listed if seen.listed is not None else seen.info.state == DEAD
        return unknown and not seen.info.members


class UndescribedGroup(ReaderKind):
    """Listed, yet described DEAD: DescribeGroups below v6 describes a consumer-protocol (KIP-848) group that
    way, members and all. Its members cannot be seen, so it cannot be paused safely (refused)."""

    cls = GroupClass.UNDESCRIBED
    unnamed_ok = True  # refused by check_group_types, saying why

    def claims(self, seen: Seen) -> bool:
        return seen.info.state == DEAD and not seen.info.members


class ShareGroup(ReaderKind):
    """A share group (KIP-932): refused, unless the broker starts it on new partitions at their first record
    (:func:`share_plan`, once its ``share.auto.offset.reset`` is read)."""

    cls = GroupClass.SHARE
    words = {
        GroupClass.SHARE_SAFE: "left alone: a share group that reads new partitions from their first record"
    }
    unnamed_ok = True  # left alone, or refused by check_group_types, saying why

    def claims(self, seen: Seen) -> bool:
        return seen.group_type == SHARE


class UntypedGroup(ReaderKind):
    """A group whose type the client cannot tell (ListGroups v5 not readable): refused unless excluded."""

    cls = GroupClass.UNKNOWN_TYPE
    unnamed_ok = True  # refused by check_group_types, saying why

    def claims(self, seen: Seen) -> bool:
        return seen.group_type == UNKNOWN_TYPE


class StreamsApplication(ReaderKind):
    """A Kafka Streams application (its group type or assignor): refused unless acknowledged or resized with
    its state (:mod:`~airflow_provider_kstate.increase.streams_apps`)."""

    cls = GroupClass.STREAMS

    def claims(self, seen: Seen) -> bool:
        return seen.role == GroupRole.STREAMS


class ConsumerGroup(ReaderKind):
    """A consumer group (classic or KIP-848, a Kafka Connect sink's too): paused (or stopped by its driver),
    seeded and resumed; ``empty`` without members, else ``active``."""

    cls = GroupClass.ACTIVE

    def claims(self, seen: Seen) -> bool:
        return True

    def plan(self, base: GroupPlan, seen: Seen) -> GroupPlan:
        return as_consumer_group(base, seen.info)


#: The reader kinds, in the order they are tried (the first that claims a group decides its plan).
READER_KINDS: tuple[ReaderKind, ...] = (
    SparkQuery(),
    AbsentGroup(),
    UndescribedGroup(),
    ShareGroup(),
    UntypedGroup(),
    StreamsApplication(),
    ConsumerGroup(),
)
#: The classes a plan that names its groups does not ask to be named (:attr:`ReaderKind.unnamed_ok`).
UNNAMED_OK = frozenset(c for k in READER_KINDS if k.unnamed_ok for c in (k.cls, *k.words))
#: What the approval prompt says of each class the run leaves alone (:attr:`ReaderKind.words`).
LEFT_ALONE = {c: text for k in READER_KINDS for c, text in k.words.items()}


def classify(
    info: GroupInfo, spark_prefixes: tuple[str, ...], types: dict[str, str] | None = None
) -> GroupPlan:
    """Return the plan of one group: that of the first reader kind of :data:`READER_KINDS` that claims it.

    :param types: ``{group: TYPE}`` of every group the cluster lists. With it, a group is unknown
        (``absent``) when it is not listed and has no members, whatever state the broker describes
        (some brokers describe a never-seen group as EMPTY); without it, when the broker says DEAD.
    """
    members = tuple(f"{m.client_id}@{m.host}" for m in info.members)
    group_type = ((types or {}).get(info.group) or info.type or CLASSIC).upper()
    seen = Seen(
        info,
        group_type,
        _role(info, group_type),
        None if types is None else info.group in types,
        spark_prefixes,
    )
    base = GroupPlan(
        cls=GroupClass.ABSENT,  # the kind sets the class
        state=info.state,
        type=group_type,
        member_count=len(members),
        members=members[:MEMBER_SAMPLE],
        role=seen.role,
    )
    kind = next(k for k in READER_KINDS if k.claims(seen))
    return kind.plan(base, seen)


def share_plan(base: GroupPlan, reset: str, kept: bool) -> GroupPlan:
    """Return the plan of a share group that reads the topic: left alone (``share-safe``) when it starts
    the new partitions at their first record, else refused (``share``, the reason kept for the message).

    :param reset: the group's ``share.auto.offset.reset`` as the broker applies it.
    :param kept: the broker starts added partitions at their first record whatever the reset.
    """
    safe = kept or reset.strip().lower() == "earliest"
    return base.replace(cls=GroupClass.SHARE_SAFE if safe else GroupClass.SHARE, share_reset=reset)


def as_consumer_group(base: GroupPlan, info: GroupInfo) -> GroupPlan:
    """Return ``base`` as a group the run pauses and seeds: ``empty`` without members, else ``active``."""
    if info.state == EMPTY and not info.members:
        return base.replace(cls=GroupClass.EMPTY, pause=True, seed=True, wait=False)
    return base.replace(cls=GroupClass.ACTIVE, pause=True, seed=True, wait=True)


def _role(info: GroupInfo, group_type: str) -> GroupRole:
    if group_type == STREAMS or info.assignor == STREAMS_ASSIGNOR:
        return GroupRole.STREAMS
    if info.group.startswith(CONNECT_PREFIX):
        return GroupRole.CONNECT_SINK
    return GroupRole.PLAIN


def build_plan(
    hook: AdminPort,
    topic: str,
    request: PlanRequest,
    target: int | None = None,
    replication: ReplicationState | None = None,
) -> Plan:
    """Validate ``request`` against the cluster for ``topic`` and return its plan (nothing is changed).

    Every choice comes from the request itself (a field added to :class:`PlanRequest` is read here, not
    passed along by each caller): ``consumer_groups``, ``exclude_groups``, ``allow_unknown_groups``,
    ``acknowledge_streams_groups``, ``spark_group_prefixes`` and ``share_new_partitions_kept``.

    Discovery always runs: every group with committed offsets on ``topic`` or with live members assigned
    its partitions is at risk. With ``consumer_groups`` named, a discovered group that is not named (nor a
    Spark source group, nor in ``exclude_groups``) fails the plan, and so does a named group the cluster
    does not know (a likely typo) unless ``allow_unknown_groups``. A group is unknown when it is not listed
    and has no members, whatever state the broker describes.

    Group types: classic and consumer-protocol groups are paused and seeded. A share group (KIP-932) is
    at risk when it reads the topic (DescribeShareGroupOffsets; every share group when that cannot be
    read): it is left alone (``share-safe``) when it starts the new partitions at their first record (its
    ``share.auto.offset.reset`` is ``earliest``, or ``share_new_partitions_kept``), else it fails the plan
    unless excluded. A group whose type the client cannot tell fails the plan unless excluded; a Kafka
    Streams application fails it unless acknowledged (``acknowledge_streams_groups``) or excluded. Connect
    sink groups are named as such and handled as consumer groups.

    :param request: what the run asks (:class:`~airflow_provider_kstate.increase.request.PlanRequest`):
        ``consumer_groups`` the groups to protect (empty: every group at risk); ``exclude_groups`` groups
        at risk the run leaves alone, a risk accepted explicitly; ``acknowledge_streams_groups`` Kafka
        Streams applications the run may pause and seed (their owner knows the input grows: co-partitioning,
        state partitioned by the input; see the error message); ``share_new_partitions_kept`` the broker
        starts a share group on a partition added while it reads at the partition's first record, whatever
        its ``share.auto.offset.reset`` (the broker doctor's ``share_new_partitions`` promise: measured kept
        on Apache Kafka 4.4.0, broken on 4.2.0 and 4.2.2). Its ``topics`` are not read: ``topic`` is.
    :param target: the target partition count (None: the request's ``partitions``, else the count now).
    :param replication: the topic's replication as checked
        (:func:`~airflow_provider_kstate.increase.replicas.check_replication`), kept in the plan.
    :raises InvalidPartitionCountError: the target is below the current count.
    :raises UnprotectedGroupError: a group at risk is neither named nor excluded.
    :raises UnknownGroupError: a named group is unknown to the cluster.
    :raises UnsupportedGroupTypeError: a share group, a Streams application or a group of unknown type.
    """
    check_topic_name(topic)
    current = hook.partition_count(topic)
    if target is None:
        target = request.partitions or current
    if target < current:
        raise InvalidPartitionCountError(
            f"topic {topic!r} has {current} partitions; the target {target} is below it "
            "(Kafka cannot remove partitions). Nothing was changed."
        )
    named = list(dict.fromkeys(request.consumer_groups))
    excluded = set(request.exclude_groups)
    types = hook.group_types()
    # Share groups keep no OffsetFetch offsets: the topics they read come from DescribeShareGroupOffsets.
    # Where that cannot be read, every share group (and every group of a type the client cannot tell) is
    # treated as reading the topic, and must be excluded by name.
    shares = hook.share_groups_on_topic(topic, types)
    unread = (SHARE, UNKNOWN_TYPE) if shares is None else (UNKNOWN_TYPE,)
    untyped = [g for g, t in sorted(types.items()) if t in unread]
    discovered = list(dict.fromkeys([*hook.groups_on_topic(topic, current), *(shares or {}), *untyped]))
    names = list(dict.fromkeys([*named, *discovered]))
    infos = hook.describe_groups(names, topic)
    # Kafka Streams applications: KIP-1071 groups the client does not list, their topologies (refused here
    # when the run cannot resize them).
    streams = discover_streams(hook, topic, current, target, types, infos, excluded)
    infos.update(streams.infos)
    discovered += [g for g in streams.infos if g not in discovered]
    names = list(dict.fromkeys([*names, *discovered]))
    plans = {g: classify(infos[g], request.spark_group_prefixes, types) for g in names}
    for g, reset in (shares or {}).items():
        plans[g] = share_plan(plans[g], reset, request.share_new_partitions_kept)
    _check_named(topic, named, discovered, plans, excluded, request.allow_unknown_groups)
    acknowledged = set(request.acknowledge_streams_groups) - excluded
    for g in acknowledged & set(plans):
        if plans[g].cls == GroupClass.STREAMS:
            plans[g] = as_consumer_group(plans[g], infos[g])
    for g in excluded & set(plans):
        plans[g] = plans[g].replace(cls=GroupClass.EXCLUDED, pause=False, seed=False, wait=False)
    check_group_types(topic, target, current, plans)
    return Plan(
        topic=topic,
        original_partitions=current,
        target_partitions=target,
        groups=plans,
        groups_discovered=not named,
        planned_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        replication=replication,
        streams_apps=streams.apps,
    )


def check_group_types(topic: str, target: int, current: int, plans: dict[str, GroupPlan]) -> None:
    """Refuse the plan when a group at risk is a share group, an unacknowledged Kafka Streams application
    or of a type the client cannot tell (each names what to do)."""
    problems = [
        _type_problem(topic, target, current, g, entry)
        for g, entry in plans.items()
        if entry.cls in UNSUPPORTED
    ]
    if problems:
        raise UnsupportedGroupTypeError(" ".join(problems) + " Nothing was changed.")


def _type_problem(topic: str, target: int, current: int, group: str, entry: GroupPlan) -> str:
    new = ",".join(str(p) for p in range(current, target)) or "<new partitions>"
    if entry.cls == GroupClass.SHARE:
        return _share_problem(topic, new, group, entry)
    if entry.cls == GroupClass.STREAMS:
        return (
            f"Group {group!r} is a Kafka Streams application: when an input topic grows, Streams fails fast "
            f"if the topic is co-partitioned with another (a join) that keeps its count, and its state stores "
            f"are partitioned by the input partition, so the keys that move to new partitions leave their "
            f"state behind. Resize it with its state instead: the kstate_streams_resize DAG "
            f"(KStateStreamsResizeOperator, application_id={group!r}) grows its co-partitioned inputs, "
            f"repartition topics and changelogs, moves its state with its keys, and takes every other reader "
            f"of its inputs out and back in the same run. Or, once its owner resets or rebuilds its state, "
            f"acknowledge it with acknowledge_streams_groups=[{group!r}] (paused and seeded like a consumer "
            f"group, its state not moved), or leave it alone with exclude_groups."
        )
    if entry.cls == GroupClass.UNDESCRIBED:
        return (
            f"Group {group!r} is listed by the broker but described DEAD with no members: a client whose "
            f"DescribeGroups is below v6 describes a consumer-protocol (KIP-848) group that way, so its members "
            f"cannot be seen, paused or waited for. Use confluent-kafka 2.10 or later (ConsumerGroupDescribe), "
            f"or exclude it with exclude_groups."
        )
    return (
        f"Group {group!r} is of a type this client cannot tell (ListGroups v5 was not readable: a SASL "
        f"mechanism other than PLAIN, or a broker before 3.8): it may be a share or a streams group. Check it "
        f"with kafka-groups.sh --bootstrap-server <servers> --list, then exclude it with exclude_groups."
    )


def _share_problem(topic: str, new: str, group: str, entry: GroupPlan) -> str:
    """The refusal of a share group that may skip the new partitions' first records, with the fix measured
    on Apache Kafka (4.2.0: 841 of 1,137 records on the new partition lost at ``latest``, 0 with the fix)."""
    if entry.share_reset:
        reads = f"reads {topic!r} with {SHARE_RESET}={entry.share_reset}"
    else:  # which topics share groups read could not be read
        reads = f"may read {topic!r} (DescribeShareGroupOffsets could not be read)"
    return (
        f"Group {group!r} is a share group (KIP-932) that {reads}: it starts a partition it never read at "
        f"its {SHARE_RESET}, and a broker that starts added partitions there (Apache Kafka before 4.4: "
        f"measured on 4.2.0 and 4.2.2) skips what producers write to partitions {new} before its next "
        f"heartbeat. The run cannot pause a share group, nor seed one that has members. Before the "
        f"increase make it start partitions it never read at their first record (nothing it already reads "
        f"moves): kafka-configs.sh --bootstrap-server <servers> --entity-type groups --entity-name {group} "
        f"--alter --add-config {SHARE_RESET}=earliest ; then run again (the plan leaves it alone). Remove "
        f"it after the increase once kafka-share-groups.sh --bootstrap-server <servers> --describe --group "
        f"{group} --offsets lists partitions {new} with a start offset: --alter --delete-config "
        f"{SHARE_RESET}. Where the broker doctor's share_new_partitions promise holds (Apache Kafka "
        f"4.4.0), the group is safe as it is: exclude it with exclude_groups."
    )


def _check_named(
    topic: str,
    named: list[str],
    discovered: list[str],
    plans: dict[str, GroupPlan],
    excluded: set[str],
    allow_unknown: bool,
) -> None:
    unknown = [g for g in named if plans[g].cls == GroupClass.ABSENT and g not in discovered]
    if unknown and not allow_unknown:
        raise UnknownGroupError(
            f"consumer groups {unknown} are unknown to the cluster (no members, no offsets): likely a typo. "
            f"Groups at risk on {topic!r}: {discovered}. Fix the names, or set allow_unknown_groups. "
            "Nothing was changed."
        )
    if not named:
        return
    # Kinds left alone by nature, or refused with their own message (check_group_types), need no naming.
    unprotected = [
        g for g in discovered if g not in named and g not in excluded and plans[g].cls not in UNNAMED_OK
    ]
    if unprotected:
        raise UnprotectedGroupError(
            f"consumer groups {unprotected} read {topic!r} (committed offsets or assigned members) but are "
            "not in consumer_groups: the run would neither pause nor seed them, and a latest-reset consumer "
            "of theirs would skip what producers write to new partitions (KAFKA-12261). Add them to "
            "consumer_groups, leave consumer_groups empty to protect every group at risk, or accept the "
            "risk with exclude_groups. Nothing was changed."
        )


def headline(plan: Plan, *, markdown: bool = False) -> str:
    """The plan's change in one line, the header of every rendering of a plan: the runbook (the plan task's
    log, the preview) and, in Markdown, the approval prompt."""
    strong = "**" if markdown else ""
    if plan.mode == PlanMode.REPAIR:
        return f"{strong}stays at {plan.target_partitions} partitions{strong}: a repair (seed every gap, create nothing)"
    new = plan.new_partitions
    counts = f"{strong}{plan.original_partitions} -> {plan.target_partitions} partitions{strong}"
    created = f"partitions {ranges(new)} ({len(new):,})"
    return f"{counts}: creates {created}" if markdown else f"{counts}, new {created}"


def readers(plan: Plan) -> dict[str, str]:
    """Every reader of the plan's topics with what the run does to it, in a few words (a report's
    ``readers``): a Kafka Streams application's resize, a group's way out and back, or why it is left alone."""
    out: dict[str, str] = {}
    resized = plan.resized_apps()
    for group, entry in plan.groups.items():
        if group in resized:
            out[group] = "streams application: drained, stopped, grown with its state, seeded, started"
        elif entry.seed and entry.pause:
            driver = entry.driver
            out[group] = f"{entry.cls}: {driver.leave_words}, seeded, {driver.back_words}"
        elif entry.seed:
            out[group] = f"{entry.cls}: seeded"
        else:
            out[group] = f"{entry.cls}: left alone"
    return out


def describe(plan: Plan) -> list[str]:
    """Return the plan as runbook lines for the task log: a header, then one line per group."""
    heads = [f"topic {view.topic}: {headline(view)}" for view in plan.views()]
    resized = plan.resized_apps()
    if plan.several:
        heads.insert(0, f"co-partitioned topics {', '.join(plan.topic_names)}: grown together in one run")
    lines = [
        *heads,
        f"groups ({'discovered' if plan.groups_discovered else 'named, and checked against discovery'}): "
        f"{len(plan.groups)}",
    ]
    for group, entry in plan.groups.items():
        steps = [s for s in FLAGS if getattr(entry, s)] or ["left alone"]
        if entry.role == GroupRole.STREAMS and entry.seed and group in resized:
            steps = ["stopped, seeded and started by its driver (its Streams steps below)"]  # not paused
        elif entry.role == GroupRole.STREAMS and entry.seed:
            steps = [*steps, "acknowledged: paused and seeded like a consumer group, its state not moved"]
        if entry.stay:
            steps = [
                f"STAYS in its group ({entry.stay}: {entry.stay_reason}); the switch waits for its positions"
            ]
        elif entry.stay_reason:
            steps = [*steps, entry.stay_reason]
        risk = (
            " RISK ACCEPTED: excluded explicitly, not paused nor seeded"
            if entry.cls == GroupClass.EXCLUDED
            else ""
        )
        # "classic streams group", "consumer group", "streams group" (KIP-1071: not "streams streams")
        kind = " ".join(dict.fromkeys(w for w in (entry.type.lower(), str(entry.role)) if w)) + " group"
        order = f"; key order: {entry.key_order} ({entry.key_order_reason})" if entry.key_order else ""
        order += _share_note(entry)
        driver = f"; driver: {entry.driver.describe()}" if entry.seed else ""
        problem = f"; CANNOT DRIVE: {entry.driver_problem}" if entry.driver_problem else ""
        reads = f"; on {', '.join(entry.topics or plan.topic_names)}" if plan.several else ""
        lines.append(
            f"  group {group}: {entry.cls} ({kind}, state {entry.state}, {entry.member_count} members) -> "
            f"{', '.join(steps)}{risk}{driver}{order}{problem}{reads}"
        )
    for service, producer in plan.producers.items():
        role = "stopped for a drain"
        if plan.staying():
            role = (
                "pinned on the old layout until the staying groups hold their positions"
                if producer.commands() is None
                else "stopped before the create, started after the switch (the layout cannot pin it)"
            )
        lines.append(f"  producers {service}: driver {producer.describe()} ({role})")
    if plan.replication is not None:
        lines.append(plan.replication.describe())
    lines += streams_runbook(resized)
    return lines


def _share_note(entry: GroupPlan) -> str:
    """What the runbook line says of a share group reading the topic ("" for the other groups)."""
    if not entry.share_reset:
        return ""
    if entry.cls != GroupClass.SHARE_SAFE:
        return f"; {SHARE_RESET}={entry.share_reset}"
    if entry.share_reset.strip().lower() == "earliest":
        return f"; {SHARE_RESET}=earliest: it reads the new partitions from their first record"
    return (
        f"; {SHARE_RESET}={entry.share_reset}, and the broker starts added partitions at their first record "
        "(share_new_partitions)"
    )
