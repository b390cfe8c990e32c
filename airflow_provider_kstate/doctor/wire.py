"""A minimal Kafka wire client for the requests librdkafka does not expose: ApiVersions, ListGroups v5 and
DescribeShareGroupOffsets (with the FindCoordinator that routes it).

ApiVersions tells which APIs (and versions) a broker serves; librdkafka reads it but does not return it.
ListGroups v5 (KIP-848) returns each group's *type* (``classic``, ``consumer``, ``share``, ``streams``);
confluent-kafka maps every type it does not know to UNKNOWN, which hides share and streams groups.
DescribeShareGroupOffsets (KIP-932) tells which topics a share group reads (confluent-kafka 2.16 has no
admin call for it).

Connections: PLAINTEXT, SSL (the connection's ``ssl.*`` files) and SASL with the PLAIN mechanism. Other
SASL mechanisms (SCRAM, OAUTHBEARER, GSSAPI) raise :class:`WireUnavailable`: the caller falls back to what
librdkafka can tell. ApiVersions itself is answered before authentication (KIP-35), so it works on every
listener that is not TLS-only with settings this client cannot read.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_provider_kstate.errors import BrokerUnavailableError

API_FETCH = 1
API_LIST_OFFSETS = 2
API_FIND_COORDINATOR = 10
API_DESCRIBE_SHARE_GROUP_OFFSETS = 90
API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_SASL_HANDSHAKE = 17
API_VERSIONS = 18
API_CREATE_PARTITIONS = 37
API_SASL_AUTHENTICATE = 36
API_CONSUMER_GROUP_DESCRIBE = 69
CLIENT_ID = "kstate-doctor"


class WireUnavailable(BrokerUnavailableError):
    """The wire client cannot talk to this listener (its security settings, or no answer)."""


@dataclass(frozen=True)
class GroupListing:
    """One group of a ListGroups v5 answer."""

    group_id: str
    protocol_type: str
    state: str
    type: str


# -- encoding ---------------------------------------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _compact_array(items: list[str]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(_uvarint(len(i.encode()) + 1) + i.encode() for i in items)


def request(
    api_key: int, version: int, correlation_id: int, body: bytes = b"", flexible: bool = False
) -> bytes:
    """Return a framed request: size, header (v1, or v2 with empty tagged fields when flexible), body."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + _string(CLIENT_ID)
    if flexible:
        header += b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _compact_string(value: str) -> bytes:
    data = value.encode()
    return _uvarint(len(data) + 1) + data


def find_coordinator_v4_body(groups: list[str]) -> bytes:
    """FindCoordinator v4: the coordinators of ``groups`` (key type 0, group), no tagged fields."""
    return b"\x00" + _compact_array(groups) + b"\x00"


def describe_share_group_offsets_v0_body(group: str) -> bytes:
    """DescribeShareGroupOffsets v0: one group, every topic-partition it has state for (topics null)."""
    return _uvarint(2) + _compact_string(group) + _uvarint(0) + b"\x00" + b"\x00"


def list_groups_v5_body() -> bytes:
    """ListGroups v5: no state filter, no type filter (every group of every type), no tagged fields."""
    return _compact_array([]) + _compact_array([]) + b"\x00"


# -- decoding ---------------------------------------------------------------------------------------


class Reader:
    """Read Kafka's primitive types from a response body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"response truncated at byte {self.pos} (needs {size} more)")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(">B")
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            return ""
        raw = self.data[self.pos : self.pos + length]
        if len(raw) != length:
            raise ValueError(f"response truncated in a string at byte {self.pos}")
        self.pos += length
        return raw.decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def parse_api_versions(body: bytes) -> dict[int, tuple[int, int]]:
    """Return ``{api_key: (min, max)}`` of an ApiVersions v0 response body (after the correlation id).

    :raises ValueError: the broker answered with an error code, or the body is malformed.
    """
    reader = Reader(body)
    error = reader.take(">h")
    count = reader.take(">i")
    versions = {}
    for _ in range(max(count, 0)):
        key, low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
        versions[key] = (low, high)
    if error and not versions:
        raise ValueError(f"ApiVersions answered error code {error}")
    return versions


def parse_list_groups_v5(body: bytes) -> list[GroupListing]:
    """Return the groups of a ListGroups v5 response body (after the correlation id and header tags)."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    error = reader.take(">h")
    if error:
        raise ValueError(f"ListGroups answered error code {error}")
    groups = []
    for _ in range(reader.uvarint() - 1):
        group_id = reader.compact_string()
        protocol_type = reader.compact_string()
        state = reader.compact_string()
        group_type = reader.compact_string()
        reader.skip_tags()
        groups.append(GroupListing(group_id, protocol_type, state, group_type))
    return groups


def parse_find_coordinator_v4(body: bytes) -> dict[str, tuple[str, int]]:
    """Return ``{group: (host, port)}`` of a FindCoordinator v4+ response body.

    :raises ValueError: a group's coordinator is unknown (its error code is named), or the body is malformed.
    """
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    out = {}
    for _ in range(reader.uvarint() - 1):
        key = reader.compact_string()
        reader.take(">i")  # node_id
        host = reader.compact_string()
        port = reader.take(">i")
        error = reader.take(">h")
        message = reader.compact_string()
        reader.skip_tags()
        if error:
            raise ValueError(f"FindCoordinator of {key!r} answered error code {error} ({message})")
        out[key] = (host, port)
    return out


def parse_describe_share_group_offsets(body: bytes) -> dict[str, dict[str, dict[int, int]]]:
    """Return ``{group: {topic: {partition: start offset}}}`` of a DescribeShareGroupOffsets v0 response
    body (a partition whose state is not initialized has start offset -1).

    :raises ValueError: a group-level or partition-level error code (named), or a malformed body.
    """
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    out: dict[str, dict[str, dict[int, int]]] = {}
    for _ in range(reader.uvarint() - 1):
        group = reader.compact_string()
        topics: dict[str, dict[int, int]] = {}
        for _ in range(reader.uvarint() - 1):
            topic = reader.compact_string()
            reader.pos += 16  # topic id
            topics[topic] = _share_partitions(reader, group, topic)
            reader.skip_tags()
        error = reader.take(">h")
        message = reader.compact_string()
        reader.skip_tags()
        if error:
            raise ValueError(
                f"DescribeShareGroupOffsets of {group!r} answered error code {error} ({message})"
            )
        out[group] = topics
    return out


def _share_partitions(reader: Reader, group: str, topic: str) -> dict[int, int]:
    partitions = {}
    for _ in range(reader.uvarint() - 1):
        index, start = reader.take(">i"), reader.take(">q")
        reader.take(">i")  # leader epoch
        error = reader.take(">h")
        message = reader.compact_string()
        reader.skip_tags()
        if error:
            raise ValueError(f"share group {group!r} on {topic}-{index}: error code {error} ({message})")
        partitions[index] = start
    return partitions


# -- connections ------------------------------------------------------------------------------------


def bootstrap_addresses(config: dict[str, Any]) -> list[tuple[str, int]]:
    """Return ``[(host, port)]`` of the config's ``bootstrap.servers``."""
    out = []
    for entry in str(config.get("bootstrap.servers", "")).split(","):
        entry = entry.strip().split("://")[-1]
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        out.append((host.strip("[]"), int(port or 9092)))
    if not out:
        raise WireUnavailable("the connection has no bootstrap.servers")
    return out


def _ssl_context(config: dict[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.get("ssl.certificate.location"):
        context.load_cert_chain(
            config["ssl.certificate.location"], config.get("ssl.key.location"), config.get("ssl.key.password")
        )
    return context


class Connection:
    """One blocking connection to one broker, with the connection's security settings."""

    def __init__(self, config: dict[str, Any], address: tuple[str, int], timeout: float = 10.0) -> None:
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise WireUnavailable(f"security.protocol {protocol} is not supported by the wire client")
        self.config = config
        self.protocol = protocol
        self.correlation = 0
        try:
            raw = socket.create_connection(address, timeout=timeout)
            self.sock = (
                _ssl_context(config).wrap_socket(raw, server_hostname=address[0])
                if "SSL" in protocol
                else raw
            )
        except (OSError, ssl.SSLError) as exc:
            raise WireUnavailable(f"cannot connect to {address[0]}:{address[1]}: {exc}") from exc

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, body: bytes = b"", flexible: bool = False) -> bytes:
        """Send one request and return its response body (after the correlation id and, when flexible,
        the response header's tagged fields)."""
        self.correlation += 1
        try:
            self.sock.sendall(request(api_key, version, self.correlation, body, flexible))
            size = struct.unpack(">i", self._read(4))[0]
            data = self._read(size)
        except OSError as exc:
            raise WireUnavailable(
                f"the broker closed the connection on API {api_key} v{version}: {exc}"
            ) from exc
        if struct.unpack_from(">i", data)[0] != self.correlation:
            raise WireUnavailable("the broker answered out of order")
        if not flexible:
            return data[4:]
        reader = Reader(data[4:])
        reader.skip_tags()
        return data[4 + reader.pos :]

    def _read(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise OSError("connection closed")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def authenticate(self) -> None:
        """Authenticate a SASL listener with the PLAIN mechanism (others, a refused handshake or
        authentication: :class:`WireUnsupported`, the listener's settings; a broker that stops answering:
        :class:`WireUnavailable`)."""
        if not self.protocol.startswith("SASL"):
            return
        mechanism = str(
            self.config.get("sasl.mechanism", self.config.get("sasl.mechanisms", "GSSAPI"))
        ).upper()
        if mechanism != "PLAIN":
            raise WireUnsupported(f"SASL mechanism {mechanism} is not supported by the wire client")
        answer = Reader(self.call(API_SASL_HANDSHAKE, 1, _string("PLAIN")))
        if answer.take(">h"):
            raise WireUnsupported("the broker refused the SASL PLAIN handshake")
        token = f"\0{self.config.get('sasl.username', '')}\0{self.config.get('sasl.password', '')}".encode()
        answer = Reader(self.call(API_SASL_AUTHENTICATE, 0, struct.pack(">i", len(token)) + token))
        if answer.take(">h"):
            raise WireUnsupported("SASL PLAIN authentication failed")  # never echo the credentials


def _connections(config: dict[str, Any], timeout: float) -> Iterator[Connection]:
    errors = []
    for address in bootstrap_addresses(config):
        try:
            yield Connection(config, address, timeout)
            return
        except WireUnavailable as exc:
            errors.append(str(exc))
    raise WireUnavailable("; ".join(errors))


def api_versions(config: dict[str, Any], timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """Return the ApiVersions of the first bootstrap broker that answers: ``{api_key: (min, max)}``."""
    for conn in _connections(config, timeout):
        try:
            return parse_api_versions(conn.call(API_VERSIONS, 0))
        except ValueError as exc:
            raise WireUnavailable(f"malformed ApiVersions answer: {exc}") from exc
        finally:
            conn.close()
    raise WireUnavailable("no bootstrap broker answered")  # pragma: no cover - _connections raises first


def list_groups(
    config: dict[str, Any], addresses: list[tuple[str, int]] | None = None, timeout: float = 10.0
) -> list[GroupListing]:
    """Return every group with its type, through ListGroups v5 on each broker of ``addresses``.

    ListGroups is answered per coordinator, so every broker of the cluster is asked (default: the
    bootstrap servers only; pass the metadata's brokers for a whole cluster).

    :raises WireUnavailable: a broker does not serve ListGroups v5 (before Kafka 3.8), or this client
        cannot reach or authenticate to it.
    """
    out: list[GroupListing] = []
    for address in addresses or bootstrap_addresses(config):
        conn = Connection(config, address, timeout)
        try:
            versions = parse_api_versions(conn.call(API_VERSIONS, 0))
            if versions.get(API_LIST_GROUPS, (0, 0))[1] < 5:
                raise WireUnavailable("the broker does not serve ListGroups v5 (group types)")
            conn.authenticate()
            out += parse_list_groups_v5(conn.call(API_LIST_GROUPS, 5, list_groups_v5_body(), flexible=True))
        except ValueError as exc:
            raise WireUnavailable(f"malformed ListGroups answer: {exc}") from exc
        finally:
            conn.close()
    return out


def share_group_offsets(
    config: dict[str, Any], group: str, timeout: float = 10.0
) -> dict[str, dict[int, int]]:
    """Return ``{topic: {partition: start offset}}`` of share group ``group``: the topics it reads (its
    state), through FindCoordinator then DescribeShareGroupOffsets on its coordinator.

    :raises WireUnavailable: the broker serves no DescribeShareGroupOffsets (no share groups: before
        Kafka 4.1), this client cannot reach or authenticate to it, or it answered with an error.
    """
    for conn in _connections(config, timeout):
        try:
            versions = parse_api_versions(conn.call(API_VERSIONS, 0))
            if (
                API_DESCRIBE_SHARE_GROUP_OFFSETS not in versions
                or versions.get(API_FIND_COORDINATOR, (0, 0))[1] < 4
            ):
                raise WireUnavailable("the broker serves no DescribeShareGroupOffsets (share groups)")
            conn.authenticate()
            found = conn.call(API_FIND_COORDINATOR, 4, find_coordinator_v4_body([group]), flexible=True)
            address = parse_find_coordinator_v4(found)[group]
        except ValueError as exc:
            raise WireUnavailable(f"share group {group!r}: {exc}") from exc
        finally:
            conn.close()
        return _share_offsets_at(config, address, group, timeout)
    raise WireUnavailable("no bootstrap broker answered")  # pragma: no cover - _connections raises first


def _share_offsets_at(
    config: dict[str, Any], address: tuple[str, int], group: str, timeout: float
) -> dict[str, dict[int, int]]:
    conn = Connection(config, address, timeout)
    try:
        conn.call(API_VERSIONS, 0)
        conn.authenticate()
        body = conn.call(
            API_DESCRIBE_SHARE_GROUP_OFFSETS, 0, describe_share_group_offsets_v0_body(group), flexible=True
        )
        return parse_describe_share_group_offsets(body).get(group, {})
    except ValueError as exc:
        raise WireUnavailable(f"share group {group!r}: {exc}") from exc
    finally:
        conn.close()


def answering(
    config: dict[str, Any], brokers: dict[int, tuple[str, int]], timeout: float = 3.0
) -> set[int] | None:
    """Return the ids of ``brokers`` (``{id: (host, port)}``, the metadata's) that answer ApiVersions (which a
    broker answers before authentication), asked concurrently; None when none answers, where this client
    cannot tell (its security settings): the caller then knows nothing of which brokers are down.
    """

    def answers(address: tuple[str, int]) -> bool:
        try:
            conn = Connection(config, address, timeout)
        except WireUnavailable:
            return False
        try:
            parse_api_versions(conn.call(API_VERSIONS, 0))
            return True
        except (WireUnavailable, ValueError):
            return False
        finally:
            conn.close()

    if not brokers:
        return None
    with ThreadPoolExecutor(max_workers=min(16, len(brokers))) as pool:
        found = dict(zip(brokers, pool.map(answers, brokers.values()), strict=True))
    up = {b for b, ok in found.items() if ok}
    return up or None


# -- group descriptions: the classic members' subscriptions and a streams group's topology ---------------

API_STREAMS_GROUP_DESCRIBE = 89
#: Group-level errors of a coordinator that is loading or has moved: the group is asked again.
COORDINATOR_MOVING_CODES = frozenset({14, 15, 16})  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
#: GROUP_ID_NOT_FOUND: StreamsGroupDescribe of a group that is not a streams group (or does not exist).
GROUP_ID_NOT_FOUND = 69
#: GROUP_AUTHORIZATION_FAILED: the principal may not describe the group.
GROUP_AUTHORIZATION_FAILED = 30


class WireUnsupported(WireUnavailable):
    """The wire client cannot use this listener (its security settings: a SASL mechanism other than PLAIN,
    TLS settings it cannot read), unlike a broker that does not answer now."""


class WireRefused(WireUnavailable):
    """The broker answered a describe with an error code for some groups (``codes``: ``{group: code}``):
    asking again does not help."""

    def __init__(self, message: str, codes: dict[str, int]) -> None:
        super().__init__(message)
        self.codes = codes


@dataclass(frozen=True)
class GroupMember:
    """One member of a classic group (DescribeGroups) or a consumer group (ConsumerGroupDescribe):
    ``topics``, the topics its subscription names (a classic member's consumer protocol metadata; empty for
    another protocol type); ``assignment``, its ``(topic, partitions)``."""

    member_id: str
    client_id: str
    host: str
    topics: tuple[str, ...]
    assignment: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    """One group of a DescribeGroups answer (``type`` classic) or of a ConsumerGroupDescribe answer
    (``type`` consumer): ``protocol``, the assignor (``stream`` for a classic Kafka Streams application)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    type: str = "classic"


@dataclass(frozen=True)
class Subtopology:
    """One subtopology of a streams group (KIP-1071): the topics it reads, the repartition topics it writes
    and reads, its state changelogs."""

    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]
    repartition_source_topics: tuple[str, ...]


@dataclass(frozen=True)
class StreamsMember:
    """One member of a streams group; ``active``: ``(subtopology id, partitions)`` of its active tasks."""

    member_id: str
    client_id: str
    host: str
    active: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class StreamsGroup:
    """One group of a StreamsGroupDescribe answer; ``subtopologies`` None when the broker has no configured
    topology for it (not initialized yet, its source topics missing or not partitioned as it requires)."""

    group_id: str
    state: str
    subtopologies: tuple[Subtopology, ...] | None
    members: tuple[StreamsMember, ...]


def describe_groups_v5_body(groups: list[str]) -> bytes:
    """DescribeGroups v5: ``groups``, without the authorized operations, no tagged fields."""
    return _compact_array(groups) + b"\x00" + b"\x00"


def consumer_group_describe_v0_body(groups: list[str]) -> bytes:
    """ConsumerGroupDescribe v0: ``groups``, without the authorized operations, no tagged fields."""
    return _compact_array(groups) + b"\x00" + b"\x00"


def streams_group_describe_v0_body(groups: list[str]) -> bytes:
    """StreamsGroupDescribe v0: ``groups``, without the authorized operations, no tagged fields."""
    return _compact_array(groups) + b"\x00" + b"\x00"


def _nullable_compact_string(reader: Reader) -> str | None:
    length = reader.uvarint() - 1
    if length < 0:
        return None
    raw = reader.data[reader.pos : reader.pos + length]
    if len(raw) != length:
        raise ValueError(f"response truncated in a string at byte {reader.pos}")
    reader.pos += length
    return raw.decode()


def _compact_bytes(reader: Reader) -> bytes:
    length = reader.uvarint() - 1
    if length < 0:
        return b""
    raw = reader.data[reader.pos : reader.pos + length]
    if len(raw) != length:
        raise ValueError(f"response truncated in bytes at byte {reader.pos}")
    reader.pos += length
    return raw


def _compact_strings(reader: Reader) -> tuple[str, ...]:
    return tuple(reader.compact_string() for _ in range(max(reader.uvarint() - 1, 0)))


def _compact_int32s(reader: Reader) -> tuple[int, ...]:
    return tuple(reader.take(">i") for _ in range(max(reader.uvarint() - 1, 0)))


def _string16(reader: Reader) -> str:
    """A classic (non-compact) string: an int16 length, then its bytes."""
    length = max(reader.take(">h"), 0)
    raw = reader.data[reader.pos : reader.pos + length]
    if len(raw) != length:
        raise ValueError(f"truncated in a string at byte {reader.pos}")
    reader.pos += length
    return raw.decode()


def _strings(reader: Reader) -> tuple[str, ...]:
    """A classic (non-compact) array of classic strings."""
    return tuple(_string16(reader) for _ in range(max(reader.take(">i"), 0)))


def parse_subscription(metadata: bytes) -> tuple[str, ...]:
    """The topics of a consumer protocol subscription (``ConsumerProtocolSubscription``, any version: the
    topics come first after the version); empty when it is not one."""
    if len(metadata) < 6:
        return ()
    try:
        reader = Reader(metadata)
        reader.take(">h")  # version
        return _strings(reader)
    except (ValueError, UnicodeDecodeError):
        return ()


def parse_assignment(assignment: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``(topic, partitions)`` of a consumer protocol assignment (``ConsumerProtocolAssignment``); empty
    when it is not one."""
    if len(assignment) < 6:
        return ()
    try:
        reader = Reader(assignment)
        reader.take(">h")  # version
        out = []
        for _ in range(max(reader.take(">i"), 0)):
            topic = _string16(reader)
            partitions = tuple(reader.take(">i") for _ in range(max(reader.take(">i"), 0)))
            out.append((topic, partitions))
        return tuple(out)
    except (ValueError, UnicodeDecodeError):
        return ()


def parse_describe_groups_v5(body: bytes) -> tuple[list[GroupDescription], dict[str, int]]:
    """Return the groups of a DescribeGroups v5 response body and ``{group: error code}`` of the groups
    answered with an error."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    groups, errors = [], {}
    for _ in range(reader.uvarint() - 1):
        error = reader.take(">h")
        group_id = reader.compact_string()
        state = reader.compact_string()
        protocol_type = reader.compact_string()
        protocol = reader.compact_string()
        members = []
        for _ in range(reader.uvarint() - 1):
            member_id = reader.compact_string()
            _nullable_compact_string(reader)  # group instance id
            client_id = reader.compact_string()
            host = reader.compact_string()
            metadata = _compact_bytes(reader)
            assignment = _compact_bytes(reader)
            reader.skip_tags()
            consumer = protocol_type == "consumer"
            members.append(
                GroupMember(
                    member_id,
                    client_id,
                    host,
                    parse_subscription(metadata) if consumer else (),
                    parse_assignment(assignment) if consumer else (),
                )
            )
        reader.take(">i")  # authorized operations
        reader.skip_tags()
        if error:
            errors[group_id] = error
        else:
            groups.append(GroupDescription(group_id, state, protocol_type, protocol, tuple(members)))
    return groups, errors


def _consumer_assignment(reader: Reader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        reader.take(">Q")  # topic id (16 bytes)
        reader.take(">Q")
        topic = reader.compact_string()
        out.append((topic, _compact_int32s(reader)))
        reader.skip_tags()
    reader.skip_tags()
    return tuple(out)


def _described_group(reader: Reader) -> tuple[int, str, str]:
    """Read the head every described group of ConsumerGroupDescribe v0 and StreamsGroupDescribe v0 starts
    with: its error code, group id and state (the error message and the two epochs skipped)."""
    error = reader.take(">h")
    _nullable_compact_string(reader)  # error message
    group_id = reader.compact_string()
    state = reader.compact_string()
    reader.take(">i")  # group epoch
    reader.take(">i")  # assignment epoch
    return error, group_id, state


def parse_consumer_group_describe_v0(body: bytes) -> tuple[list[GroupDescription], dict[str, int]]:
    """Return the groups of a ConsumerGroupDescribe v0 response body (KIP-848 consumer groups) and
    ``{group: error code}`` of the groups answered with an error (GROUP_ID_NOT_FOUND: not a consumer group)."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    groups, errors = [], {}
    for _ in range(reader.uvarint() - 1):
        error, group_id, state = _described_group(reader)
        assignor = reader.compact_string()
        members = []
        for _ in range(max(reader.uvarint() - 1, 0)):
            member_id = reader.compact_string()
            _nullable_compact_string(reader)  # instance id
            _nullable_compact_string(reader)  # rack id
            reader.take(">i")  # member epoch
            client_id = reader.compact_string()
            host = reader.compact_string()
            topics = _compact_strings(reader)
            _nullable_compact_string(reader)  # subscribed topic regex
            assignment = _consumer_assignment(reader)
            _consumer_assignment(reader)  # target assignment
            reader.skip_tags()
            members.append(GroupMember(member_id, client_id, host, topics, assignment))
        reader.take(">i")  # authorized operations
        reader.skip_tags()
        if error:
            errors[group_id] = error
        else:
            groups.append(GroupDescription(group_id, state, "consumer", assignor, tuple(members), "consumer"))
    return groups, errors


def _topic_infos(reader: Reader) -> tuple[str, ...]:
    names = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        names.append(reader.compact_string())
        reader.take(">i")  # partitions
        reader.take(">h")  # replication factor
        for _ in range(max(reader.uvarint() - 1, 0)):  # topic configs
            reader.compact_string()
            reader.compact_string()
            reader.skip_tags()
        reader.skip_tags()
    return tuple(names)


def _task_ids(reader: Reader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        subtopology = reader.compact_string()
        out.append((subtopology, _compact_int32s(reader)))
        reader.skip_tags()
    return tuple(out)


def _assignment(reader: Reader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    active = _task_ids(reader)
    _task_ids(reader)  # standby
    _task_ids(reader)  # warm-up
    reader.skip_tags()
    return active


def _streams_member(reader: Reader) -> StreamsMember:
    member_id = reader.compact_string()
    reader.take(">i")  # member epoch
    _nullable_compact_string(reader)  # instance id
    _nullable_compact_string(reader)  # rack id
    client_id = reader.compact_string()
    host = reader.compact_string()
    reader.take(">i")  # topology epoch
    reader.compact_string()  # process id
    if reader.take(">b") >= 0:  # user endpoint (a nullable struct)
        reader.compact_string()
        reader.take(">H")
        reader.skip_tags()
    for _ in range(max(reader.uvarint() - 1, 0)):  # client tags
        reader.compact_string()
        reader.compact_string()
        reader.skip_tags()
    for _ in range(2):  # task offsets, task end offsets
        for _ in range(max(reader.uvarint() - 1, 0)):
            reader.compact_string()
            reader.take(">i")
            reader.take(">q")
            reader.skip_tags()
    active = _assignment(reader)
    _assignment(reader)  # target assignment
    reader.take(">b")  # is classic
    reader.skip_tags()
    return StreamsMember(member_id, client_id, host, active)


def parse_streams_group_describe_v0(body: bytes) -> tuple[list[StreamsGroup], dict[str, int]]:
    """Return the groups of a StreamsGroupDescribe v0 response body and ``{group: error code}`` of the
    groups answered with an error."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    groups, errors = [], {}
    for _ in range(reader.uvarint() - 1):
        error, group_id, state = _described_group(reader)
        subtopologies: tuple[Subtopology, ...] | None = None
        if reader.take(">b") >= 0:  # topology (a nullable struct)
            reader.take(">i")  # topology epoch
            count = reader.uvarint() - 1
            if count >= 0:
                found = []
                for _ in range(count):
                    sub_id = reader.compact_string()
                    sources = _compact_strings(reader)
                    sinks = _compact_strings(reader)
                    changelogs = _topic_infos(reader)
                    repartition_sources = _topic_infos(reader)
                    reader.skip_tags()
                    found.append(Subtopology(sub_id, sources, sinks, changelogs, repartition_sources))
                subtopologies = tuple(found)
            reader.skip_tags()
        members = tuple(_streams_member(reader) for _ in range(max(reader.uvarint() - 1, 0)))
        reader.take(">i")  # authorized operations
        reader.skip_tags()
        if error:
            errors[group_id] = error
        else:
            groups.append(StreamsGroup(group_id, state, subtopologies, members))
    return groups, errors


def _found_coordinators(body: bytes) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
    """``({group: (host, port)}, {group: error code})`` of a FindCoordinator v4+ response body."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    found, errors = {}, {}
    for _ in range(reader.uvarint() - 1):
        key = reader.compact_string()
        reader.take(">i")  # node_id
        host = reader.compact_string()
        port = reader.take(">i")
        error = reader.take(">h")
        reader.compact_string()  # error message
        reader.skip_tags()
        if error:
            errors[key] = error
        else:
            found[key] = (host, port)
    return found, errors


def _coordinators(config: dict[str, Any], groups: list[str], timeout: float) -> dict[str, tuple[str, int]]:
    """``{group: (host, port)}`` of each group's coordinator (FindCoordinator v4), asked again while one
    is loading or moving, within ``timeout``.

    :raises WireRefused: a group answered another error code (GROUP_AUTHORIZATION_FAILED ...).
    :raises WireUnsupported: the broker serves no FindCoordinator v4, or its answer cannot be read.
    :raises WireUnavailable: no bootstrap broker answered, or a coordinator kept moving.
    """
    deadline = time.monotonic() + timeout
    for conn in _connections(config, timeout):
        try:
            versions = parse_api_versions(conn.call(API_VERSIONS, 0))
            if versions.get(API_FIND_COORDINATOR, (0, 0))[1] < 4:
                raise WireUnsupported("the broker serves no FindCoordinator v4 (Kafka 2.8+)")
            conn.authenticate()
            while True:
                body = conn.call(API_FIND_COORDINATOR, 4, find_coordinator_v4_body(groups), flexible=True)
                found, errors = _found_coordinators(body)
                refused = {g: c for g, c in errors.items() if c not in COORDINATOR_MOVING_CODES}
                if refused:
                    raise WireRefused(f"FindCoordinator answered error codes {refused}", refused)
                if not errors:
                    return found
                if time.monotonic() >= deadline:
                    raise WireUnavailable(f"the coordinators of {sorted(errors)} kept moving: codes {errors}")
                time.sleep(0.2)
        except ValueError as exc:
            raise WireUnsupported(f"find the coordinators of {groups}: {exc}") from exc
        finally:
            conn.close()
    raise WireUnavailable("no bootstrap broker answered")  # pragma: no cover - _connections raises first


@dataclass(frozen=True)
class DescribeStep:
    """One describe request of :func:`_describe_at_coordinators`: ``api`` (key, version), ``body(groups)``,
    ``parse(body)`` -> ``(descriptions, {group: error code})``, and ``final(description)``: whether the
    answer is the group's (else the group is asked by the next step, this answer kept if none has one:
    DescribeGroups describes a group of another type, or none, as ``Dead``)."""

    api: tuple[int, int]
    body: Any
    parse: Any
    final: Any = None


def _describe_at_coordinators(
    config: dict[str, Any], groups: list[str], timeout: float, steps: list[DescribeStep]
) -> dict[str, Any]:
    """Describe ``groups`` on their coordinators (one connection each), by ``steps`` in order: a group
    another step's answer is final for, or answered GROUP_ID_NOT_FOUND (not of the kind asked), is asked by
    the next step; a step the coordinator does not serve is passed. Groups whose coordinator moved are asked
    again within ``timeout``. Returns ``{group: its description}`` (a group no step describes is left out).

    :raises WireUnavailable: a coordinator cannot be reached, answered another error code, or kept moving.
    """
    deadline = time.monotonic() + timeout
    wanted = list(dict.fromkeys(groups))
    out: dict[str, Any] = {}
    last: Exception | str = "a coordinator loading or moving"
    while wanted:
        again: list[str] = []
        try:
            coordinators = _coordinators(config, wanted, max(0.5, deadline - time.monotonic()))
        except (WireRefused, WireUnsupported):
            raise
        except WireUnavailable as exc:  # no bootstrap broker answered: asked again
            coordinators, again, last = {}, list(wanted), exc
        by_address: dict[tuple[str, int], list[str]] = {}
        for group, address in coordinators.items():
            by_address.setdefault(address, []).append(group)
        for address, asked in by_address.items():
            try:
                left = max(0.5, deadline - time.monotonic())
                found, moving = _describe_at(config, address, asked, left, steps)
            except (WireRefused, WireUnsupported):
                raise
            except WireUnavailable as exc:  # the coordinator died, or closed the connection: asked again
                found, moving, last = {}, asked, exc
            out.update(found)
            again += moving
        if again and time.monotonic() >= deadline:
            raise WireUnavailable(
                f"the coordinators of {again} kept moving or did not answer for {timeout}s: {last}"
            )
        if again:
            time.sleep(0.2)
        wanted = again
    return out


def _describe_at(
    config: dict[str, Any],
    address: tuple[str, int],
    asked: list[str],
    timeout: float,
    steps: list[DescribeStep],
) -> tuple[dict[str, Any], list[str]]:
    """``({group: description}, groups whose coordinator moved)`` of ``asked`` at one coordinator."""
    conn = Connection(config, address, timeout)
    out: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    moving: list[str] = []
    try:
        versions = parse_api_versions(conn.call(API_VERSIONS, 0))
        conn.authenticate()
        pending = list(asked)
        for step in steps:
            if not pending or versions.get(step.api[0], (0, -1))[1] < step.api[1]:
                continue
            described, errors = step.parse(
                conn.call(step.api[0], step.api[1], step.body(pending), flexible=True)
            )
            failed = {
                g: c
                for g, c in errors.items()
                if c not in COORDINATOR_MOVING_CODES and c != GROUP_ID_NOT_FOUND
            }
            if failed:
                raise WireRefused(f"API {step.api[0]} answered error codes {failed}", failed)
            moving += [g for g, c in errors.items() if c in COORDINATOR_MOVING_CODES]
            for d in described:
                if step.final is None or step.final(d):
                    out[d.group_id] = d
                else:
                    kept.setdefault(d.group_id, d)
            pending = [g for g in pending if g not in out and g not in moving]
    except ValueError as exc:
        raise WireUnsupported(f"malformed describe answer from {address[0]}:{address[1]}: {exc}") from exc
    finally:
        conn.close()
    out.update({g: d for g, d in kept.items() if g not in out and g not in moving})
    return out, moving


def _described(group: GroupDescription) -> bool:
    """Whether a DescribeGroups answer is the group's own: not ``Dead`` without members (how it answers
    for a consumer or streams group, and for a group that does not exist)."""
    return group.state != "Dead" or bool(group.members)


#: The describe requests of each kind of group.
CLASSIC_STEP = DescribeStep((API_DESCRIBE_GROUPS, 5), describe_groups_v5_body, parse_describe_groups_v5)
CONSUMER_STEP = DescribeStep(
    (API_CONSUMER_GROUP_DESCRIBE, 0), consumer_group_describe_v0_body, parse_consumer_group_describe_v0
)
STREAMS_STEP = DescribeStep(
    (API_STREAMS_GROUP_DESCRIBE, 0), streams_group_describe_v0_body, parse_streams_group_describe_v0
)


def usable(config: dict[str, Any], timeout: float = 10.0) -> None:
    """Return when the wire client can talk to this listener: a bootstrap broker answers ApiVersions and
    accepts this connection's authentication.

    :raises WireUnsupported: it cannot (its security settings); the caller uses another client.
    :raises WireUnavailable: no bootstrap broker answered (a broker down, the network): unknown yet.
    """
    errors = []
    for address in bootstrap_addresses(config):
        try:
            conn = Connection(config, address, timeout)
        except WireUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and not isinstance(cause, ssl.SSLError):
                errors.append(str(exc))  # not answering now: the next one
                continue
            raise WireUnsupported(str(exc)) from exc
        try:
            parse_api_versions(conn.call(API_VERSIONS, 0))
            conn.authenticate()
            return
        except WireUnsupported:
            raise
        except WireUnavailable as exc:  # it stopped answering (killed mid-request): not its settings
            errors.append(str(exc))
        except ValueError as exc:
            raise WireUnsupported(str(exc)) from exc
        finally:
            conn.close()
    raise WireUnavailable("; ".join(errors) or "no bootstrap broker answered")


def describe_any_groups(config: dict[str, Any], groups: list[str], timeout: float = 10.0) -> dict[str, Any]:
    """Describe groups of any type on their coordinators, one connection each: DescribeGroups v5 (classic
    groups), then ConsumerGroupDescribe v0 (KIP-848 consumer groups) and StreamsGroupDescribe v0 (KIP-1071
    streams groups) for the groups it describes ``Dead`` without members. ``{group:`` a
    :class:`GroupDescription` (its ``type`` classic or consumer) or a :class:`StreamsGroup` ``}``; a group
    none of them knows is the classic answer (``Dead``, no members).

    :raises WireUnavailable: as :func:`_describe_at_coordinators`.
    """
    classic = DescribeStep(CLASSIC_STEP.api, CLASSIC_STEP.body, CLASSIC_STEP.parse, _described)
    return _describe_at_coordinators(config, groups, timeout, [classic, CONSUMER_STEP, STREAMS_STEP])


def describe_classic_groups(
    config: dict[str, Any], groups: list[str], timeout: float = 10.0
) -> dict[str, GroupDescription]:
    """Describe classic groups through DescribeGroups v5 on each group's coordinator: their state, assignor
    and members with the topics each subscribes (which confluent-kafka does not return).

    :raises WireUnavailable: as :func:`_describe_at_coordinators`.
    """
    return _describe_at_coordinators(config, groups, timeout, [CLASSIC_STEP])


def describe_consumer_groups(
    config: dict[str, Any], groups: list[str], timeout: float = 10.0
) -> dict[str, GroupDescription]:
    """Describe KIP-848 consumer groups through ConsumerGroupDescribe v0 on each group's coordinator; a
    group that is not a consumer group is left out.

    A coordinator before Kafka 3.7 serves no ConsumerGroupDescribe: its groups are left out.

    :raises WireUnavailable: as :func:`_describe_at_coordinators`.
    """
    return _describe_at_coordinators(config, groups, timeout, [CONSUMER_STEP])


def describe_streams_groups(
    config: dict[str, Any], groups: list[str], timeout: float = 10.0
) -> dict[str, StreamsGroup]:
    """Describe KIP-1071 streams groups through StreamsGroupDescribe v0 on each group's coordinator: their
    state, topology (subtopologies: source, repartition and changelog topics) and members with their active
    tasks (confluent-kafka has no call for it). A group that is not a streams group is left out.

    A coordinator before Kafka 4.1 serves no StreamsGroupDescribe: its groups are left out.

    :raises WireUnavailable: as :func:`_describe_at_coordinators`.
    """
    return _describe_at_coordinators(config, groups, timeout, [STREAMS_STEP])


API_LEAVE_GROUP = 13


def leave_group_v5_body(group: str, member_ids: list[str], reason: str) -> bytes:
    """A LeaveGroup v5 request body (KIP-345's batch leave): ``member_ids`` of ``group``, dynamic members."""
    members = b"".join(
        _compact_string(m) + _uvarint(0) + _compact_string(reason) + b"\x00" for m in member_ids
    )
    return _compact_string(group) + _uvarint(len(member_ids) + 1) + members + b"\x00"


def parse_leave_group_v5(body: bytes) -> tuple[int, dict[str, int]]:
    """``(top-level error code, {member id: its error code})`` of a LeaveGroup v5 response body."""
    reader = Reader(body)
    reader.take(">i")  # throttle_time_ms
    error = reader.take(">h")
    members: dict[str, int] = {}
    for _ in range(reader.uvarint() - 1):
        member = reader.compact_string()
        _nullable_compact_string(reader)  # group_instance_id
        members[member] = reader.take(">h")
        reader.skip_tags()
    reader.skip_tags()
    return error, members


def leave_members(
    config: dict[str, Any], group: str, member_ids: list[str], reason: str, timeout: float = 10.0
) -> dict[str, int]:
    """Remove ``member_ids`` from the classic ``group`` (or KIP-848 consumer group, Kafka 4.0+) at its
    coordinator (what a member's own LeaveGroup does; Kafka's admin ``removeMembersFromConsumerGroup``);
    return ``{member id: error code}`` (0: removed; 25 UNKNOWN_MEMBER_ID: already gone).

    :raises WireRefused: the coordinator refused the request (GROUP_AUTHORIZATION_FAILED ...).
    :raises WireUnsupported: the coordinator serves no LeaveGroup v5 (Kafka 2.4+), or its answer cannot be read.
    :raises WireUnavailable: the coordinator cannot be reached or is moving.
    """
    address = _coordinators(config, [group], timeout)[group]
    conn = Connection(config, address, timeout)
    try:
        versions = parse_api_versions(conn.call(API_VERSIONS, 0))
        if versions.get(API_LEAVE_GROUP, (0, -1))[1] < 5:
            raise WireUnsupported("the coordinator serves no LeaveGroup v5 (Kafka 2.4+)")
        conn.authenticate()
        body = conn.call(API_LEAVE_GROUP, 5, leave_group_v5_body(group, member_ids, reason), flexible=True)
        error, members = parse_leave_group_v5(body)
    except ValueError as exc:
        raise WireUnsupported(f"malformed LeaveGroup answer: {exc}") from exc
    finally:
        conn.close()
    if error in COORDINATOR_MOVING_CODES:
        raise WireUnavailable(f"the coordinator of {group!r} is moving (code {error})")
    if error:
        raise WireRefused(f"LeaveGroup of {group!r} answered error code {error}", {group: error})
    return members
