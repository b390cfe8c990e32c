"""The wire client's group descriptions (issue 40): DescribeGroups v5 with each classic member's subscription
(the consumer protocol's metadata) and StreamsGroupDescribe v0 with a streams group's topology. The answers
are encoded here field by field as Apache Kafka 4.4's message specs lay them out (``DescribeGroupsResponse``,
``ConsumerProtocolSubscription`` v3, ``StreamsGroupDescribeResponse``), every optional field present, and
the parse must land on the last byte; tests/integration/test_streams_neighbours.py reads them from a broker."""

from __future__ import annotations

import struct

import pytest

from airflow_provider_kstate.doctor import wire


def u(n: int) -> bytes:
    return wire._uvarint(n)


def cs(s: str | None) -> bytes:
    """A compact (nullable) string."""
    return u(0) if s is None else wire._compact_string(s)


def carr(items: list[bytes]) -> bytes:
    return u(len(items) + 1) + b"".join(items)


def cbytes(b: bytes) -> bytes:
    return u(len(b) + 1) + b


def s16(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


TAGS = b"\x00"


def subscription_v3(topics: list[str]) -> bytes:
    body = struct.pack(">h", 3) + struct.pack(">i", len(topics)) + b"".join(s16(t) for t in topics)
    body += struct.pack(">i", 4) + b"user"  # user data
    body += struct.pack(">i", 1) + s16(topics[0]) + struct.pack(">ii", 1, 0)  # owned partitions
    return body + struct.pack(">i", 7) + s16("rack-a")  # generation, rack


def assignment_v0(topic: str, partitions: list[int]) -> bytes:
    out = struct.pack(">h", 0) + struct.pack(">i", 1) + s16(topic) + struct.pack(">i", len(partitions))
    return out + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


def test_describe_groups_v5_names_each_member_s_subscription() -> None:
    member = (
        cs("m-1") + cs("static-1") + cs("app-StreamThread-1-consumer") + cs("/127.0.0.1")
        + cbytes(subscription_v3(["words", "app-X-repartition"])) + cbytes(assignment_v0("words", [0, 1])) + TAGS
    )  # fmt: skip
    streams_app = struct.pack(">h", 0) + cs("app") + cs("Stable") + cs("consumer") + cs("stream")
    streams_app += carr([member]) + struct.pack(">i", -(2**31)) + TAGS
    moved = (
        struct.pack(">h", 16)
        + cs("moved")
        + cs("")
        + cs("")
        + cs("")
        + carr([])
        + struct.pack(">i", 0)
        + TAGS
    )
    body = struct.pack(">i", 0) + carr([streams_app, moved]) + TAGS
    groups, errors = wire.parse_describe_groups_v5(body)
    assert errors == {"moved": 16}
    (group,) = groups
    assert (group.group_id, group.state, group.protocol_type, group.protocol) == (
        "app",
        "Stable",
        "consumer",
        "stream",
    )
    (m,) = group.members
    assert m.topics == ("words", "app-X-repartition") and m.assignment == (("words", (0, 1)),)
    assert m.client_id == "app-StreamThread-1-consumer"
    # a member of another protocol type carries no consumer subscription
    assert wire.parse_subscription(b"\x00\x01") == () and wire.parse_assignment(b"junk") == ()


def topic_info(name: str) -> bytes:
    return cs(name) + struct.pack(">ih", 0, 3) + carr([cs("cleanup.policy") + cs("compact") + TAGS]) + TAGS


def task_ids(sub: str, partitions: list[int]) -> bytes:
    return cs(sub) + carr([struct.pack(">i", p) for p in partitions]) + TAGS


def streams_member(member_id: str, active: list[bytes]) -> bytes:
    assignment = carr(active) + carr([task_ids("1", [3])]) + carr([]) + TAGS
    return (
        cs(member_id) + struct.pack(">i", 5) + cs(None) + cs("rack-a") + cs(f"{member_id}-client") + cs("/10.0.0.1")
        + struct.pack(">i", 1) + cs("process-1")
        + struct.pack(">b", 1) + cs("host-1") + struct.pack(">H", 8080) + TAGS  # user endpoint
        + carr([cs("zone") + cs("a") + TAGS])  # client tags
        + carr([cs("0") + struct.pack(">iq", 0, 42) + TAGS])  # task offsets
        + carr([cs("0") + struct.pack(">iq", 0, 50) + TAGS])  # task end offsets
        + assignment + assignment + struct.pack(">b", 0) + TAGS
    )  # fmt: skip


def streams_answer() -> bytes:
    """A StreamsGroupDescribe v0 answer: a group with two subtopologies and a member, a group without a
    topology yet, and a classic group (GROUP_ID_NOT_FOUND)."""
    sub0 = (
        cs("0") + carr([cs("words")]) + carr([cs("app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition")])
        + carr([]) + carr([]) + TAGS
    )  # fmt: skip
    sub1 = (
        cs("1") + carr([]) + carr([])
        + carr([topic_info("app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog")])
        + carr([topic_info("app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition")]) + TAGS
    )  # fmt: skip
    topology = struct.pack(">b", 1) + struct.pack(">i", 2) + carr([sub0, sub1]) + TAGS
    group = (
        struct.pack(">h", 0) + cs(None) + cs("app") + cs("Stable") + struct.pack(">ii", 9, 9) + topology
        + carr([streams_member("a", [task_ids("0", [0, 1]), task_ids("1", [0])])]) + struct.pack(">i", 0) + TAGS
    )  # fmt: skip
    blank = (
        struct.pack(">h", 0) + cs(None) + cs("fresh") + cs("NotReady") + struct.pack(">ii", 1, 0)
        + struct.pack(">b", -1) + carr([]) + struct.pack(">i", 0) + TAGS
    )  # fmt: skip
    missing = (
        struct.pack(">h", 69) + cs("not a streams group") + cs("classic") + cs("") + struct.pack(">ii", 0, 0)
    )
    missing += struct.pack(">b", -1) + carr([]) + struct.pack(">i", 0) + TAGS
    return struct.pack(">i", 0) + carr([group, blank, missing]) + TAGS


def test_streams_group_describe_v0_gives_the_topology_and_each_member_s_tasks() -> None:
    groups, errors = wire.parse_streams_group_describe_v0(streams_answer())
    assert errors == {"classic": 69}
    app, fresh = groups
    assert fresh.subtopologies is None and fresh.state == "NotReady" and fresh.members == ()
    assert [s.subtopology_id for s in app.subtopologies or ()] == ["0", "1"]
    s0, s1 = app.subtopologies or ()
    assert s0.source_topics == ("words",) and s0.repartition_sink_topics[0].endswith("-repartition")
    assert s1.changelog_topics == ("app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog",)
    assert s1.repartition_source_topics == s0.repartition_sink_topics
    (member,) = app.members
    assert (member.member_id, member.client_id, member.active) == (
        "a",
        "a-client",
        (("0", (0, 1)), ("1", (0,))),
    )


def test_a_truncated_answer_is_refused_not_misread() -> None:
    answer = streams_answer()
    for cut in range(4, len(answer), 7):
        with pytest.raises(ValueError, match="truncated"):
            wire.parse_streams_group_describe_v0(answer[:cut])


def consumer_group(group: str, error: int = 0, members: int = 1) -> bytes:
    assignment = (
        carr([b"\x00" * 16 + cs("words") + carr([struct.pack(">i", p) for p in (0, 2)]) + TAGS]) + TAGS
    )
    member = (
        cs("m-1") + cs(None) + cs(None) + struct.pack(">i", 4) + cs("rdkafka") + cs("/127.0.0.1")
        + carr([cs("words")]) + cs(None) + assignment + assignment + TAGS
    )  # fmt: skip
    return (
        struct.pack(">h", error) + cs(None) + cs(group) + cs("Stable" if not error else "") + struct.pack(">ii", 3, 3)
        + cs("uniform") + carr([member] * members if not error else []) + struct.pack(">i", 0) + TAGS
    )  # fmt: skip


def test_consumer_group_describe_v0_gives_each_member_s_subscription_and_assignment() -> None:
    body = struct.pack(">i", 0) + carr([consumer_group("kip848"), consumer_group("classic", error=69)]) + TAGS
    groups, errors = wire.parse_consumer_group_describe_v0(body)
    assert errors == {"classic": 69}
    (group,) = groups
    assert (group.group_id, group.state, group.protocol, group.type) == (
        "kip848",
        "Stable",
        "uniform",
        "consumer",
    )
    (member,) = group.members
    assert member.topics == ("words",) and member.assignment == (("words", (0, 2)),)


def classic_group(group: str, state: str, error: int = 0) -> bytes:
    members = (
        carr([cs("m") + cs(None) + cs("c") + cs("/h") + cbytes(b"") + cbytes(b"") + TAGS])
        if state == "Stable"
        else carr([])
    )
    return (
        struct.pack(">h", error)
        + cs(group)
        + cs(state)
        + cs("consumer" if members != carr([]) else "")
        + cs("range" if state == "Stable" else "")
        + members
        + struct.pack(">i", 0)
        + TAGS
    )


class FakeCoordinator:
    """A coordinator the wire client talks to: ``dead`` refuses the first connections; each API answers from
    ``answers`` ``{api: {group: encoded group}}`` (a group it does not list: GROUP_ID_NOT_FOUND)."""

    dead = 0
    answers: dict[int, dict[str, bytes]] = {}
    asked: list[tuple[int, tuple[str, ...]]] = []

    def __init__(self, config: dict[str, object], address: tuple[str, int], timeout: float = 10.0) -> None:
        if FakeCoordinator.dead > 0:
            FakeCoordinator.dead -= 1
            raise wire.WireUnavailable(
                f"cannot connect to {address[0]}:{address[1]}: [Errno 111] Connection refused"
            )

    def call(self, api: int, version: int, body: bytes = b"", flexible: bool = False) -> bytes:
        if api == wire.API_VERSIONS:
            keys = (
                wire.API_DESCRIBE_GROUPS,
                wire.API_CONSUMER_GROUP_DESCRIBE,
                wire.API_STREAMS_GROUP_DESCRIBE,
            )
            return struct.pack(">hi", 0, len(keys)) + b"".join(struct.pack(">hhh", k, 0, 5) for k in keys)
        reader = wire.Reader(body)
        groups = tuple(reader.compact_string() for _ in range(reader.uvarint() - 1))
        FakeCoordinator.asked.append((api, groups))
        known = FakeCoordinator.answers[api]
        missing = {
            wire.API_DESCRIBE_GROUPS: lambda g: classic_group(g, "Dead"),
            wire.API_CONSUMER_GROUP_DESCRIBE: lambda g: consumer_group(g, error=69),
            wire.API_STREAMS_GROUP_DESCRIBE: lambda g: (
                consumer_group(g, error=69)[:2]
                + cs(None)
                + cs(g)
                + cs("")
                + struct.pack(">ii", 0, 0)
                + struct.pack(">b", -1)
                + carr([])
                + struct.pack(">i", 0)
                + TAGS
            ),
        }[api]
        return struct.pack(">i", 0) + carr([known[g] if g in known else missing(g) for g in groups]) + TAGS

    def authenticate(self) -> None:
        return None

    def close(self) -> None:
        return None


def test_groups_of_every_type_are_described_by_their_own_request_on_one_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeCoordinator.dead, FakeCoordinator.asked = 2, []  # the coordinator died: refused twice, then back
    FakeCoordinator.answers = {
        wire.API_DESCRIBE_GROUPS: {"classic": classic_group("classic", "Stable")},
        wire.API_CONSUMER_GROUP_DESCRIBE: {"kip848": consumer_group("kip848")},
        wire.API_STREAMS_GROUP_DESCRIBE: {},
    }
    monkeypatch.setattr(wire, "Connection", FakeCoordinator)
    monkeypatch.setattr(wire, "_coordinators", lambda config, groups, timeout: {g: ("c", 1) for g in groups})
    found = wire.describe_any_groups({"bootstrap.servers": "c:1"}, ["classic", "kip848", "gone"], timeout=5.0)
    assert {g: (type(d).__name__, d.state) for g, d in found.items()} == {
        "classic": ("GroupDescription", "Stable"),
        "kip848": ("GroupDescription", "Stable"),
        "gone": ("GroupDescription", "Dead"),  # nobody's: the classic answer stands
    }
    assert found["kip848"].type == "consumer" and found["classic"].type == "classic"
    assert FakeCoordinator.asked == [
        (wire.API_DESCRIBE_GROUPS, ("classic", "kip848", "gone")),
        (wire.API_CONSUMER_GROUP_DESCRIBE, ("kip848", "gone")),
        (wire.API_STREAMS_GROUP_DESCRIBE, ("gone",)),
    ]
    # a group the principal may not describe is refused, not asked again
    FakeCoordinator.answers[wire.API_DESCRIBE_GROUPS] = {"secret": classic_group("secret", "", error=30)}
    with pytest.raises(wire.WireRefused) as refused:
        wire.describe_any_groups({"bootstrap.servers": "c:1"}, ["secret"], timeout=5.0)
    assert refused.value.codes == {"secret": 30}


def test_a_coordinator_that_stays_down_is_named_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCoordinator.dead = 10**6
    monkeypatch.setattr(wire, "Connection", FakeCoordinator)
    monkeypatch.setattr(wire, "_coordinators", lambda config, groups, timeout: {g: ("c", 1) for g in groups})
    with pytest.raises(wire.WireUnavailable, match="did not answer for 0.6s: cannot connect to c:1"):
        wire.describe_any_groups({"bootstrap.servers": "c:1"}, ["g"], timeout=0.6)


def test_leave_group_v5_request_and_answer() -> None:
    """The batch LeaveGroup the run sends for members whose LeaveGroup was lost (KIP-345's v3+; v5 with a
    reason the broker logs), and its answer per member."""
    import struct

    from airflow_provider_kstate.doctor import wire

    body = wire.leave_group_v5_body("g", ["m0", "m1"], "why")
    expected = (
        b"\x02g" + b"\x03" + b"".join(b"\x03m" + d + b"\x00" + b"\x04why" + b"\x00" for d in (b"0", b"1"))
    )
    assert body == expected + b"\x00"
    answer = struct.pack(">ih", 0, 0) + b"\x03" + b"\x03m0\x00" + struct.pack(">h", 0) + b"\x00"
    answer += b"\x03m1\x00" + struct.pack(">h", 25) + b"\x00" + b"\x00"
    assert wire.parse_leave_group_v5(answer) == (0, {"m0": 0, "m1": 25})
