"""The Kafka promises the provider's safety depends on, by name, and which job needs which.

Each name is a promise a broker may break. The doctor checks each one and a run refuses to start when a
promise it needs is broken, unless the user accepts that one deviation by name
(``allow_broker_deviation=["latest_offset"]``), which is logged as ``RISK ACCEPTED``.
"""

from __future__ import annotations

from airflow_provider_kstate.enums import StrEnum

#: ApiVersions lists CreatePartitions (key 37): the increase itself.
API_CREATE_PARTITIONS = "api.create_partitions"
#: ApiVersions lists OffsetCommit (key 8) and OffsetFetch (key 9): seeding and reading group offsets.
API_ALTER_GROUP_OFFSETS = "api.alter_group_offsets"
#: ApiVersions lists DescribeGroups (key 15) or ConsumerGroupDescribe (key 69), and ListGroups (key 16).
API_DESCRIBE_GROUPS = "api.describe_groups"
#: ApiVersions lists ListOffsets (key 2) at v2+ and Fetch (key 1) at v4+: reads by isolation level.
API_LIST_OFFSETS = "api.list_offsets"

#: ListOffsets "latest" equals the end a real fetch reaches.
LATEST_OFFSET = "latest_offset"
#: A read_committed fetch excludes the records of an aborted transaction.
READ_COMMITTED = "read_committed"
#: The last stable offset (ListOffsets latest, read_committed) stops at an open transaction.
LAST_STABLE_OFFSET = "last_stable_offset"
#: A never-seen group is not reported as a known one (listed, or described EMPTY or STABLE).
UNKNOWN_GROUP = "unknown_group"
#: DescribeGroups shows a live member and its assignment.
GROUP_MEMBERS = "group_members"
#: An offset altered on an EMPTY group reads back.
OFFSET_READBACK = "offset_readback"
#: A topic with ``message.timestamp.type=LogAppendTime`` stamps records with the broker's time (the lease
#: log's expiry is decided by these timestamps).
LOG_APPEND_TIME = "log_append_time"
#: DescribeConfigs returns a topic's default settings too (``cleanup.policy``): the compaction guard reads it.
CONFIG_DEFAULTS = "config_defaults"
#: A share group (KIP-932) reads a partition added while it reads from the partition's first record: records
#: written to it before the group's next heartbeat are delivered, although ``share.auto.offset.reset`` is
#: ``latest``. Does not apply to a broker without share groups (ShareGroupHeartbeat, ShareFetch).
SHARE_NEW_PARTITIONS = "share_new_partitions"

API_PROMISES = (API_CREATE_PARTITIONS, API_ALTER_GROUP_OFFSETS, API_DESCRIBE_GROUPS, API_LIST_OFFSETS)
BEHAVIOUR_PROMISES = (
    LATEST_OFFSET,
    READ_COMMITTED,
    LAST_STABLE_OFFSET,
    UNKNOWN_GROUP,
    GROUP_MEMBERS,
    OFFSET_READBACK,
    LOG_APPEND_TIME,
    CONFIG_DEFAULTS,
    SHARE_NEW_PARTITIONS,
)
ALL_PROMISES = API_PROMISES + BEHAVIOUR_PROMISES

#: What the safe increase relies on: create, seed, describe and read offsets, recognise groups, the lease.
INCREASE_NEEDS = (
    API_CREATE_PARTITIONS,
    API_ALTER_GROUP_OFFSETS,
    API_DESCRIBE_GROUPS,
    API_LIST_OFFSETS,
    LATEST_OFFSET,
    UNKNOWN_GROUP,
    GROUP_MEMBERS,
    OFFSET_READBACK,
    LOG_APPEND_TIME,
)
#: What the state check and the rebuild rely on: bounded, transactional reads of the changelog.
STATE_NEEDS = (API_LIST_OFFSETS, LATEST_OFFSET, READ_COMMITTED, LAST_STABLE_OFFSET, CONFIG_DEFAULTS)
#: What an increase of a topic a share group reads relies on besides :data:`INCREASE_NEEDS` (not part of
#: them: a broker that breaks it loses nothing for consumer groups, only for share groups).
SHARE_GROUP_NEEDS = (SHARE_NEW_PARTITIONS,)


class Needs(StrEnum):
    """A named set of promises (``needs``): what the increase needs, what the state check and rebuild need,
    all of them."""

    INCREASE = "increase"
    STATE = "state"
    ALL = "all"


#: The promises of each named set.
NEEDS: dict[Needs, tuple[str, ...]] = {
    Needs.INCREASE: INCREASE_NEEDS,
    Needs.STATE: STATE_NEEDS,
    Needs.ALL: ALL_PROMISES,
}

#: One line per promise, for messages and the README's compatibility table.
DESCRIPTIONS = {
    API_CREATE_PARTITIONS: "ApiVersions lists CreatePartitions (API 37)",
    API_ALTER_GROUP_OFFSETS: "ApiVersions lists OffsetCommit and OffsetFetch (APIs 8, 9)",
    API_DESCRIBE_GROUPS: "ApiVersions lists ListGroups and DescribeGroups or ConsumerGroupDescribe (16, 15/69)",
    API_LIST_OFFSETS: "ApiVersions lists ListOffsets v2+ and Fetch v4+ (reads by isolation level)",
    LATEST_OFFSET: 'ListOffsets "latest" equals the end a real fetch reaches',
    READ_COMMITTED: "read_committed excludes the records of an aborted transaction",
    LAST_STABLE_OFFSET: "the last stable offset stops at an open transaction",
    UNKNOWN_GROUP: "a never-seen group is not reported as a known one",
    GROUP_MEMBERS: "DescribeGroups shows a live member and its assignment",
    OFFSET_READBACK: "an offset altered on an EMPTY group reads back",
    LOG_APPEND_TIME: "LogAppendTime topics are stamped with the broker's time",
    CONFIG_DEFAULTS: "DescribeConfigs returns default settings (cleanup.policy)",
    SHARE_NEW_PARTITIONS: "a share group reads a partition added while it reads from its first record",
}


def check_names(names: object, what: str = "allow_broker_deviation") -> tuple[str, ...]:
    """Return ``names`` as a tuple of known promise names; raise ValueError naming any unknown one."""
    if names is None or names == "":
        return ()
    if isinstance(names, str):
        items = [n.strip() for n in names.split(",") if n.strip()]
    elif isinstance(names, (list, tuple, set, frozenset)):
        items = [str(n).strip() for n in names]
    else:
        raise ValueError(f"{what} must be a list of promise names, not {type(names).__name__}")
    unknown = [n for n in items if n not in ALL_PROMISES]
    if unknown:
        raise ValueError(f"{what}: unknown promise names {unknown}; known: {list(ALL_PROMISES)}")
    return tuple(dict.fromkeys(items))
