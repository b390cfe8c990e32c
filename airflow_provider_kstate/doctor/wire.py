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
        """Authenticate a SASL listener with the PLAIN mechanism (others: :class:`WireUnavailable`)."""
        if not self.protocol.startswith("SASL"):
            return
        mechanism = str(
            self.config.get("sasl.mechanism", self.config.get("sasl.mechanisms", "GSSAPI"))
        ).upper()
        if mechanism != "PLAIN":
            raise WireUnavailable(f"SASL mechanism {mechanism} is not supported by the wire client")
        answer = Reader(self.call(API_SASL_HANDSHAKE, 1, _string("PLAIN")))
        if answer.take(">h"):
            raise WireUnavailable("the broker refused the SASL PLAIN handshake")
        token = f"\0{self.config.get('sasl.username', '')}\0{self.config.get('sasl.password', '')}".encode()
        answer = Reader(self.call(API_SASL_AUTHENTICATE, 0, struct.pack(">i", len(token)) + token))
        if answer.take(">h"):
            raise WireUnavailable("SASL PLAIN authentication failed")  # never echo the credentials


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
