"""Kafka Streams applications reading the topic, as the plan sees them (issue 32): what each is, and what a
resize does to it.

A Kafka Streams application is a group whose ``application.id`` is its group id: on the classic protocol a
group of protocol type ``consumer`` whose assignor is ``stream``; on KIP-1071's protocol a group of type
``streams`` (Apache Kafka 4.2+), which confluent-kafka neither lists nor describes: it is found here by its
type (ListGroups v5) and its described topology or committed offsets, and described by StreamsGroupDescribe.

An application's topics are what the broker says they are, never a name prefix (issue 40: the application
``counts`` took the changelog ``counts-v2-...-changelog`` of its running neighbour ``counts-v2`` as its own,
the resize grew it and the neighbour could not start again). The evidence, strongest first:

* a streams group's **described topology** (StreamsGroupDescribe): its subtopologies' source topics,
  repartition source and sink topics, state changelog topics;
* a running classic application's **members' subscriptions** (DescribeGroups: the consumer protocol's
  metadata of each member lists its source and repartition topics);
* its **committed offsets** (a stopped application);
* where only names remain (a classic application's changelogs, a stopped application's internal topics),
  an internal topic ``...-changelog`` / ``...-repartition`` is the application's whose id is the **longest**
  listed group id prefixing it (:func:`owner`), so ``counts-v2-...`` is never ``counts``'s.

What the plan names for each (:class:`StreamsAppPlan`, the plan's ``streams_apps``):

* its **source topics**, plus the topic itself. A task owns one partition number of every co-partitioned
  source, so the run grows them all to the target together;
* its **changelog topics** and **repartition topics**;
* the **store type** behind each changelog, which says how its keys are laid out (:func:`store_type`):

  ============================  ==========================  ==========================================
  ``cleanup.policy``            store name                  store type (changelog key)
  ============================  ==========================  ==========================================
  ``compact``                   any                         key-value (the record key)
  ``compact,delete``            holds ``SESSION``           session (key + 8-byte end + 8-byte start)
  ``compact,delete``/``delete`` holds ``JOIN`` / ``WINDOW`` window (key + 8-byte start + 4-byte seqnum)
  ============================  ==========================  ==========================================

  Streams gives a windowed or session store's changelog ``compact,delete`` and a stream-stream join's
  window stores (duplicates retained) ``delete``; a key-value store (plain, timestamped, versioned) gets
  ``compact``. A ``compact,delete`` store whose name tells neither (the DSL's default
  ``KSTREAM-AGGREGATE-STATE-STORE-...`` of a windowed or a session aggregation) is refused: its key layout
  cannot be told. So are a foreign-key join's subscription store (``SUBSCRIPTION``: a combined key), a
  left/outer join's shared store (``OUTER``: the key behind the timestamp) and a suppression buffer
  (``SUPPRESS``: records in flight).

A topology the run cannot resize is refused here, before anything is paused
(:class:`~airflow_provider_kstate.errors.UnsupportedStreamsTopologyError`), naming why and what to do: a
source topic not co-partitioned with the topic, another group reading a co-partitioned source (the run
protects the groups of the topic only), a changelog or repartition topic whose partition count is not the
sources', a store whose changelog it cannot re-place. The resize itself is
:mod:`airflow_provider_kstate.cluster.streams_resize`.

An interrupted resize is no refusal: a source, changelog or repartition topic already at the target (grown
by the run that stopped) or, when the topic itself is at the target (a run again), one still below it, is
the layout such a run leaves, and the run continues from there
(:meth:`~airflow_provider_kstate.cluster.streams_resize.StreamsResize.interrupted`).

No Airflow and no Kafka client import at module level (the plan is imported at DAG parse).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_kstate.enums import StrEnum
from airflow_provider_kstate.errors import UnsupportedStreamsTopologyError
from airflow_provider_kstate.increase.model import DEAD, STREAMS, UNKNOWN_STATE, GroupInfo

#: The classic protocol's assignor name of a Kafka Streams application (as plan.STREAMS_ASSIGNOR).
STREAMS_ASSIGNOR = "stream"
CHANGELOG_SUFFIX = "-changelog"
REPARTITION_SUFFIX = "-repartition"
INTERNAL_SUFFIXES = (CHANGELOG_SUFFIX, REPARTITION_SUFFIX)


class StoreType(StrEnum):
    """The kind of state store behind a changelog: it fixes the changelog's key layout."""

    KEY_VALUE = "key-value"
    WINDOW = "window"
    SESSION = "session"


#: Bytes a changelog key carries after the record key, per store type: a window store's key is the record
#: key + the window start (8 bytes) + a sequence number (4); a session store's the record key + the
#: session end (8) + its start (8). The record key alone decides the partition.
KEY_SUFFIX: dict[str, int] = {StoreType.KEY_VALUE: 0, StoreType.WINDOW: 12, StoreType.SESSION: 16}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class StreamsChangelog(_Frozen):
    """One changelog topic of a Streams application and the store behind it."""

    topic: str
    store: str = Field(description="the store's name (the topic between the application id and -changelog)")
    store_type: StoreType = Field(description="key-value, window or session (its changelog key layout)")
    cleanup_policy: str = Field(default="", description="the topic's cleanup.policy")
    partitions: int = Field(ge=0, description="its partition count at plan time")

    @property
    def key_suffix(self) -> int:
        """Bytes after the record key in this changelog's keys."""
        return KEY_SUFFIX[self.store_type]


class StreamsAppPlan(_Frozen):
    """A Kafka Streams application that reads the topic, and what a resize does to it."""

    application_id: str = Field(description="its application.id (= its group id)")
    protocol: Literal["classic", "streams"] = Field(
        description="classic (the stream assignor) or streams (a KIP-1071 streams group)"
    )
    sources: list[str] = Field(description="its co-partitioned source topics, grown together")
    changelogs: list[StreamsChangelog] = Field(default_factory=list, description="its changelog topics")
    repartitions: list[str] = Field(default_factory=list, description="its repartition topics")
    partitions: int = Field(ge=0, description="the sources' partition count at plan time")
    target: int = Field(ge=0, description="the partition count after the resize")
    actions: list[str] = Field(default_factory=list, description="what the resize does, in order")

    @property
    def stateful(self) -> bool:
        return bool(self.changelogs)

    @property
    def grown(self) -> list[str]:
        """Every topic the resize grows: sources, repartition topics, changelogs."""
        return [*self.sources, *self.repartitions, *(c.topic for c in self.changelogs)]


def store_type(store: str, cleanup_policy: str) -> tuple[StoreType | None, str]:
    """Return the store type behind a changelog (module docstring: the rule), or None with why not.

    :param store: the store's name (the changelog's name between ``<application.id>-`` and ``-changelog``).
    :param cleanup_policy: the changelog's ``cleanup.policy``.
    """
    name = store.upper()
    policies = {p.strip().lower() for p in cleanup_policy.split(",") if p.strip()}
    if "SUBSCRIPTION" in name:
        return None, "a foreign-key join's subscription store: its changelog key is a combined key"
    if "SUPPRESS" in name:
        return None, "a suppression buffer: it holds records in flight, not state placed by key"
    if "OUTER" in name:
        return None, "a left/outer join's shared store: its changelog key puts the timestamp before the key"
    if policies == {"compact"}:
        return StoreType.KEY_VALUE, ""
    if "delete" in policies:
        if "SESSION" in name:
            return StoreType.SESSION, ""
        if "JOIN" in name or "WINDOW" in name:
            return StoreType.WINDOW, ""
        return None, (
            f"cleanup.policy={cleanup_policy} makes it a windowed or a session store, and its name tells "
            "neither (so its changelog key layout is unknown)"
        )
    return None, f"cleanup.policy={cleanup_policy or '?'} is neither compact nor compact,delete"


def record_key(changelog_key: bytes, suffix: int) -> bytes:
    """The record key of a changelog key of a store whose keys carry ``suffix`` bytes after it."""
    return changelog_key[: len(changelog_key) - suffix] if suffix else changelog_key


def is_streams_app(info: GroupInfo, group_type: str) -> bool:
    """Whether a group is a Kafka Streams application: a KIP-1071 streams group, or a classic group whose
    assignor is ``stream``."""
    return group_type == STREAMS or info.assignor == STREAMS_ASSIGNOR


# --- discovery ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamsTopology:
    """An application's topics as the broker describes its configured topology (KIP-1071's
    StreamsGroupDescribe: its subtopologies' source topics, repartition source and sink topics, state
    changelog topics)."""

    sources: list[str]
    repartitions: list[str]
    changelogs: list[str]

    def reads(self, topic: str) -> bool:
        return topic in self.sources or topic in self.repartitions


@dataclass(frozen=True)
class StreamsDescription:
    """A streams group as the broker describes it: its state and members (each with its partitions of the
    topic), and its topology (None when the broker has none configured for it)."""

    info: GroupInfo
    topology: StreamsTopology | None


def owner(topic: str, apps: Iterable[str]) -> str | None:
    """The application an internal topic belongs to where only its name tells (a classic application's
    changelog, a stopped application): among ``apps`` (every group id the cluster knows), the longest id
    that, with a dash, prefixes the topic, so ``counts-v2-store-changelog`` is ``counts-v2``'s, never
    ``counts``'s. None for a topic that is not named as a Streams internal topic, or that no id prefixes.

    :param apps: the candidate application ids (every listed group).
    """
    if not topic.endswith(INTERNAL_SUFFIXES):
        return None
    found = [a for a in apps if a and topic.startswith(f"{a}-")]
    return max(found, key=len) if found else None


@dataclass
class StreamsDiscovery:
    """What the plan learns of the Streams applications at risk on the topic.

    :param infos: groups to add or correct in the plan's descriptions: KIP-1071 streams groups that read the
        topic (by their topology, or their committed offsets on it: the client does not list them), as the
        broker describes them (StreamsGroupDescribe), else with their state as ListGroups names it.
    :param apps: ``{application id: its plan}`` of every Streams application not excluded.
    """

    infos: dict[str, GroupInfo] = field(default_factory=dict)
    apps: dict[str, StreamsAppPlan] = field(default_factory=dict)


def _cluster(hook: Any) -> Any:
    """The :class:`~airflow_provider_kstate.cluster.admin.ClusterAdmin` behind ``hook`` (it, or the
    Airflow hook's ``cluster``), or None (a fake)."""
    for candidate in (hook, getattr(hook, "cluster", None)):
        if hasattr(candidate, "client") and hasattr(candidate, "config"):
            return candidate
    return None


def _verb(hook: Any, name: str) -> Any:
    """The cluster's verb ``name`` behind ``hook`` (ClusterAdmin's, else the hook's own: a fake), or None."""
    return getattr(_cluster(hook), name, None) or getattr(hook, name, None)


def listing_states(hook: Any, infos: Mapping[str, GroupInfo]) -> dict[str, str]:
    """``{group: STATE}`` of ``infos`` as ListGroups v5 names them, through the cluster's own reader of those
    states (ClusterAdmin's, which describe_groups uses for the states confluent-kafka cannot name); empty
    when there is none (a fake)."""
    reader = getattr(_cluster(hook), "_broker_states", None)
    if reader is None:
        return {}
    return {g: info.state for g, info in reader(dict(infos), list(infos)).items()}


def group_topics(hook: Any, group: str, topics: Iterable[str]) -> set[str]:
    """The topics of ``topics`` that ``group`` has committed offsets on: through the cluster's reader of
    them (one consumer of the group over every partition); without one (a fake), one read per topic."""
    reader = getattr(_cluster(hook), "group_topics", None)
    if reader is not None:
        return set(reader(group, topics))
    return {t for t in topics if dict(hook.committed_offsets_many([group], t)).get(group)}


def _readable(hook: Any) -> bool:
    """Whether the hook can read a topology (a fake of the unit tests may not)."""
    return all(hasattr(hook, verb) for verb in ("list_topics", "topic_config", "committed_offsets_many"))


def describe_streams(hook: Any, groups: list[str], topic: str) -> dict[str, StreamsDescription]:
    """``{group: its description}`` of the streams groups of ``groups`` (StreamsGroupDescribe), empty where
    the cluster cannot describe them (a broker before Kafka 4.1, a listener the wire client cannot use)."""
    describe = _verb(hook, "describe_streams_groups")
    return dict(describe(groups, topic)) if describe is not None and groups else {}


def discover_streams(
    hook: Any,
    topic: str,
    current: int,
    target: int,
    types: Mapping[str, str],
    infos: Mapping[str, GroupInfo],
    excluded: Iterable[str] = (),
) -> StreamsDiscovery:
    """Find the Streams applications at risk on ``topic`` and plan their resize.

    An application's topics are what the broker says they are, never a name prefix: a streams group's
    described topology; a running classic application's members' subscriptions; its committed offsets.
    Where only names remain (a classic application's changelogs, a stopped application), an internal topic
    is the application's when its id is the longest listed group id that prefixes it (:func:`owner`).

    :param types: ``{group: TYPE}`` of every listed group.
    :param infos: the groups the plan has described so far.
    :param excluded: groups the run leaves alone (not planned, never refused here).
    :raises UnsupportedStreamsTopologyError: an application's topology cannot be resized (every reason of
        every application, each with what to do).
    """
    out = StreamsDiscovery()
    if not _readable(hook):
        return out
    streams_groups = sorted(g for g, t in types.items() if t == STREAMS)
    descriptions = describe_streams(hook, streams_groups, topic)
    by_topology = [g for g, d in descriptions.items() if d.topology is not None and d.topology.reads(topic)]
    described = {g: i for g, i in infos.items() if g in streams_groups}
    unknown = [g for g in streams_groups if g not in infos and g not in by_topology]
    reading = [g for g, offsets in hook.committed_offsets_many(unknown, topic, current) if offsets]
    stale = [g for g, i in described.items() if i.state in (DEAD, UNKNOWN_STATE) and not i.members]
    found = list(dict.fromkeys([*by_topology, *reading, *stale]))
    out.infos.update({g: descriptions[g].info for g in found if g in descriptions})
    blank = {
        g: GroupInfo(group=g, state=UNKNOWN_STATE, type=STREAMS, protocol_type="streams")
        for g in found
        if g not in descriptions
    }
    states = listing_states(hook, blank) if blank else {}
    out.infos.update({g: replace(i, state=states.get(g, UNKNOWN_STATE)) for g, i in blank.items()})
    topics = hook.list_topics()
    known = {*types, *infos}
    for group, info in infos.items():
        # A stopped classic application (EMPTY) names no assignor: internal topics of its own tell it.
        if group not in out.infos and not info.assignor and types.get(group, info.type).upper() != STREAMS:
            if any(owner(t, known) == group for t in topics):
                out.infos[group] = replace(info, assignor=STREAMS_ASSIGNOR)
    every = {**infos, **out.infos}
    skip = set(excluded)
    apps = [g for g, i in every.items() if g not in skip and is_streams_app(i, types.get(g, i.type).upper())]
    if not apps:
        return out
    classic = [a for a in apps if types.get(a) != STREAMS]
    subscribe = _verb(hook, "subscriptions")
    subscribed = dict(subscribe(classic)) if subscribe is not None and classic else {}
    problems: list[str] = []
    for app in apps:
        protocol: Literal["classic", "streams"] = "streams" if types.get(app) == STREAMS else "classic"
        description = descriptions.get(app)
        plan, why = plan_app(
            hook,
            app,
            protocol,
            topic,
            current,
            target,
            topics,
            topology=description.topology if description is not None else None,
            subscribed=subscribed.get(app),
            known=known,
        )
        out.apps[app] = plan
        problems += why
    if problems:
        raise UnsupportedStreamsTopologyError(" ".join(problems) + " Nothing was paused or changed.")
    return out


def interrupted(count: int, current: int, target: int) -> bool:
    """Whether a topic's ``count`` is one an interrupted resize of the sources from ``current`` to ``target``
    leaves: already grown, or (the topic at the target: a run again) not grown yet."""
    return count == target > current or (current == target and count < current)


def app_topics(
    hook: Any,
    app: str,
    topic: str,
    topics: list[str],
    *,
    topology: StreamsTopology | None = None,
    subscribed: Iterable[str] | None = None,
    known: Iterable[str] = (),
) -> tuple[list[str], list[str], list[str]]:
    """``(sources, repartition topics, changelogs)`` of application ``app`` that reads ``topic``, from the
    evidence :func:`plan_app` names (its parameters)."""
    prefix = f"{app}-"
    existing = set(topics)
    if topology is not None:
        changelogs = sorted(t for t in topology.changelogs if t in existing)
        repartitions = sorted(t for t in topology.repartitions if t in existing)
        read = set(topology.sources)
    else:
        mine = [t for t in topics if owner(t, {app, *known}) == app]
        changelogs = sorted(t for t in mine if t.endswith(CHANGELOG_SUFFIX))
        if subscribed is not None:
            read = set(subscribed)
        else:
            read = group_topics(hook, app, [t for t in topics if not t.startswith(("__", "_kstate_"))])
        own = {t for t in read if t.startswith(prefix) and t.endswith(REPARTITION_SUFFIX)}
        if subscribed is None:  # stopped: its subscriptions unknown, its repartition topics by name too
            own |= {t for t in mine if t.endswith(REPARTITION_SUFFIX)}
        repartitions = sorted(own & existing)
    sources = sorted({topic, *(t for t in read & existing if t not in repartitions)})
    return sources, repartitions, changelogs


def plan_app(
    hook: Any,
    app: str,
    protocol: Literal["classic", "streams"],
    topic: str,
    current: int,
    target: int,
    topics: list[str],
    *,
    topology: StreamsTopology | None = None,
    subscribed: Iterable[str] | None = None,
    known: Iterable[str] = (),
) -> tuple[StreamsAppPlan, list[str]]:
    """Plan one application's resize; return the plan and the reasons it cannot be resized (empty: it can).

    Its topics, strongest evidence first: its ``topology`` (a streams group: sources, repartition topics and
    changelogs as the broker has them); else the topics its members subscribe (``subscribed``: a running
    classic application subscribes its sources and repartition topics) or, stopped, those it has committed
    offsets on, with the changelogs and repartition topics whose :func:`owner` among ``known`` is ``app``.

    :param topics: every topic of the cluster.
    :param topology: its described topology (a KIP-1071 streams group), when the broker has one.
    :param subscribed: the topics its members subscribe (a classic group with members), when read.
    :param known: every group id the cluster lists (the candidates of :func:`owner`).
    """
    prefix = f"{app}-"
    sources, repartitions, changelog_topics = app_topics(
        hook, app, topic, topics, topology=topology, subscribed=subscribed, known=known
    )
    problems: list[str] = []
    fix = (
        f"Reset the application and reprocess instead (kafka-streams-application-reset --application-id {app} "
        f"with its owner), or leave it alone with exclude_groups=[{app!r}]."
    )
    counts = {t: hook.partition_count(t) for t in [*sources, *repartitions, *changelog_topics]}

    for source in sources:
        if counts[source] != current and not interrupted(counts[source], current, target):
            problems.append(
                f"Kafka Streams application {app!r} reads {source!r} ({counts[source]} partitions) with "
                f"{topic!r} ({current}): they are not co-partitioned, and the run grows every source of the "
                f"application to {target} together. Bring them to one count first, or {fix[0].lower()}{fix[1:]}"
            )
    others = [s for s in sources if s != topic]
    for source in others:
        readers = [g for g in hook.groups_on_topic(source, counts[source]) if g != app]
        if readers:
            problems.append(
                f"Kafka Streams application {app!r} reads {source!r} with {topic!r} (co-partitioned: both grow "
                f"together), and groups {readers} read {source!r} too: this run protects the groups of "
                f"{topic!r} only. Grow {source!r} first in a run of its own (its groups paused and seeded; "
                f"{app!r} excluded there), or exclude those groups here."
            )
    changelogs = []
    for name in changelog_topics:
        store = name[len(prefix) if name.startswith(prefix) else 0 : -len(CHANGELOG_SUFFIX)]
        policy = str(hook.topic_config(name).get("cleanup.policy") or "")
        kind, why = store_type(store, policy)
        if kind is None:
            problems.append(
                f"Kafka Streams application {app!r}: the run cannot re-place changelog {name!r}: {why}. Name "
                f"the store so its kind shows (Materialized.as / Stores ...: a name holding 'window' or "
                f"'session'), or {fix[0].lower()}{fix[1:]}"
            )
            kind = StoreType.KEY_VALUE  # recorded as read; the plan is refused anyway
        if counts[name] != current and not interrupted(counts[name], current, target):
            problems.append(
                f"Kafka Streams application {app!r}: changelog {name!r} has {counts[name]} partitions, its "
                f"sources {current}: the application is not running on this layout now (Streams stops on it). "
                f"{fix}"
            )
        changelogs.append(
            StreamsChangelog(
                topic=name, store=store, store_type=kind, cleanup_policy=policy, partitions=counts[name]
            )
        )
    for name in repartitions:
        if counts[name] != current and not interrupted(counts[name], current, target):
            problems.append(
                f"Kafka Streams application {app!r}: repartition topic {name!r} has {counts[name]} partitions, "
                f"its sources {current} (a count set by Repartitioned): the stores after it are partitioned "
                f"by it, not by the sources, and the run would not know which to grow. {fix}"
            )
    plan = StreamsAppPlan(
        application_id=app,
        protocol=protocol,
        sources=sources,
        changelogs=changelogs,
        repartitions=repartitions,
        partitions=current,
        target=target,
    )
    return plan.model_copy(update={"actions": actions(plan)}), problems


def actions(app: StreamsAppPlan) -> list[str]:
    """What the resize does to ``app``, in order (the plan's runbook)."""
    n, m = app.partitions, app.target
    if m <= n:
        behind = {c.topic: c.partitions for c in app.changelogs if c.partitions < m}
        left = f" (changelogs below them: {behind})" if behind else ""
        return [
            f"no resize: the sources are at {n} partitions{left}. If application {app.application_id!r} is "
            f"stopped with a topic below {m}, an offset gap on its sources or repartition topics, or a changelog "
            f"key outside murmur2(key) % {m} (a resize that did not finish), the run continues it: grows what "
            "is left, re-places every changelog on all its partitions and deep-checks it, seeds every gap at 0, "
            "starts the application, then its producers. Otherwise it changes nothing"
        ]
    out = [
        "stop the producers of its sources (their drivers), wait until the application has consumed every "
        f"record of {', '.join(app.sources + app.repartitions)} (drained: nothing in flight)",
        f"stop the application by its driver and wait until group {app.application_id!r} is EMPTY",
        f"grow the sources {', '.join(app.sources)} {n} -> {m} together",
    ]
    if app.repartitions:
        out.append(f"grow the (drained) repartition topics {', '.join(app.repartitions)} {n} -> {m}")
    for c in app.changelogs:
        placed = (
            "murmur2(key)"
            if c.store_type == StoreType.KEY_VALUE
            else f"murmur2(key without its {c.key_suffix} window bytes)"
        )
        out.append(
            f"grow changelog {c.topic} ({c.store_type} store, cleanup.policy={c.cleanup_policy}) {n} -> {m} and "
            f"re-place it (each moved key's latest value to {placed} % {m}, a tombstone in its old partition), "
            f"then deep-check that every live key sits in {placed} % {m}"
        )
    out += [
        f"seed group {app.application_id!r} at offset 0 on the new partitions {n}..{m - 1} of its sources"
        + (" and repartition topics" if app.repartitions else ""),
        "start the application by its driver, wait until it is ready, then start the producers",
    ]
    if not app.changelogs:
        out.insert(0, "stateless (no changelog): nothing to re-place")
    return out


def streams_runbook(apps: Mapping[str, StreamsAppPlan]) -> list[str]:
    """Runbook lines of the plan's Streams applications (for :func:`~airflow_provider_kstate.increase.plan.describe`)."""
    lines = []
    for app in apps.values():
        stores = ", ".join(f"{c.topic} ({c.store_type})" for c in app.changelogs) or "none (stateless)"
        lines.append(
            f"  streams application {app.application_id} ({app.protocol} protocol): sources "
            f"{', '.join(app.sources)}; changelogs {stores}; repartition topics "
            f"{', '.join(app.repartitions) or 'none'}"
        )
        lines += [f"    {i}. {a}" for i, a in enumerate(app.actions, 1)]
    return lines
