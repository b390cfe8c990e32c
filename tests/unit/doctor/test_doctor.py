"""The broker doctor without a broker: the wire formats, the API checks, the verdict and its refusals."""

from __future__ import annotations

import struct

import pytest
from kstate_support.airflow_env import python_without

from airflow_provider_kstate.doctor import promises as P
from airflow_provider_kstate.doctor import wire
from airflow_provider_kstate.doctor.probe import api_checks
from airflow_provider_kstate.doctor.verdict import BrokerDeviation, CheckResult, Verdict
from airflow_provider_kstate.errors import BrokerDeviationError, KStateConfigError
from airflow_provider_kstate.hooks.doctor import refuse
from airflow_provider_kstate.operators.doctor import allowed_deviations, needed_promises

# ApiVersions v0 response body (after the correlation id), as a Kafka 3.x broker sends it, cut to a few
# APIs: error_code int16, then [api_key int16, min int16, max int16] with an int32 count.
KAFKA_APIS = {0: (0, 11), 1: (4, 17), 2: (1, 9), 8: (2, 9), 9: (1, 9), 15: (0, 5), 16: (0, 5), 37: (0, 3)}
# Tansu 0.6.0's answer lacks CreatePartitions (37); measured on the binary (tansu-findings).
TANSU_APIS = {k: v for k, v in KAFKA_APIS.items() if k != 37}


def api_versions_body(apis: dict[int, tuple[int, int]], error: int = 0) -> bytes:
    body = struct.pack(">hi", error, len(apis))
    return body + b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in sorted(apis.items()))


def compact(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


# ListGroups v5 response body (after the response header's tagged fields), per ListGroupsResponse.json:
# throttle_time_ms int32, error_code int16, groups compact array of (group_id, protocol_type, group_state,
# group_type, tagged fields), tagged fields. The four group types a Kafka 4.2 cluster lists.
LIST_GROUPS_V5 = (
    struct.pack(">ih", 0, 0)
    + bytes([5])
    + compact("orders-billing") + compact("consumer") + compact("Stable") + compact("classic") + b"\x00"
    + compact("orders-new") + compact("consumer") + compact("Empty") + compact("consumer") + b"\x00"
    + compact("orders-queue") + compact("share") + compact("Stable") + compact("share") + b"\x00"
    + compact("orders-enricher") + compact("streams") + compact("Stable") + compact("streams") + b"\x00"
    + b"\x00"
)  # fmt: skip


def test_api_versions_are_parsed_and_judged() -> None:
    versions = wire.parse_api_versions(api_versions_body(KAFKA_APIS))
    assert versions == KAFKA_APIS
    assert all(r.ok for r in api_checks(versions).values())


def test_a_broker_without_create_partitions_breaks_that_promise_only() -> None:
    results = api_checks(wire.parse_api_versions(api_versions_body(TANSU_APIS)))
    assert results[P.API_CREATE_PARTITIONS].ok is False
    assert "CreatePartitions (37)" in results[P.API_CREATE_PARTITIONS].detail
    assert [p for p, r in results.items() if not r.ok] == [P.API_CREATE_PARTITIONS]


def test_list_offsets_without_isolation_levels_is_broken() -> None:
    old = {**KAFKA_APIS, 2: (0, 1)}  # ListOffsets v0-1 has no isolation level
    assert api_checks(old)[P.API_LIST_OFFSETS].ok is False


def test_consumer_group_describe_alone_serves_describe_groups() -> None:
    kip848_only = {k: v for k, v in KAFKA_APIS.items() if k != 15} | {69: (0, 0)}
    assert api_checks(kip848_only)[P.API_DESCRIBE_GROUPS].ok is True


def test_list_groups_v5_names_every_group_type() -> None:
    groups = wire.parse_list_groups_v5(LIST_GROUPS_V5)
    assert [(g.group_id, g.type, g.state) for g in groups] == [
        ("orders-billing", "classic", "Stable"),
        ("orders-new", "consumer", "Empty"),
        ("orders-queue", "share", "Stable"),
        ("orders-enricher", "streams", "Stable"),
    ]


def test_a_truncated_answer_is_a_named_error() -> None:
    with pytest.raises(ValueError, match="truncated"):
        wire.parse_list_groups_v5(LIST_GROUPS_V5[:20])


def test_requests_are_framed_with_their_size_and_header() -> None:
    frame = wire.request(wire.API_LIST_GROUPS, 5, 7, wire.list_groups_v5_body(), flexible=True)
    size, key, version, correlation = struct.unpack_from(">ihhi", frame)
    assert (size, key, version, correlation) == (len(frame) - 4, 16, 5, 7)
    assert frame.endswith(b"\x01\x01\x00")  # two empty compact arrays, no tagged fields


def test_bootstrap_addresses_and_unsupported_security() -> None:
    assert wire.bootstrap_addresses({"bootstrap.servers": "a:1, SASL_SSL://b:2"}) == [("a", 1), ("b", 2)]
    with pytest.raises(wire.WireUnavailable, match="no bootstrap"):
        wire.bootstrap_addresses({})
    with pytest.raises(wire.WireUnavailable, match="not supported"):
        wire.Connection({"security.protocol": "KERBEROS"}, ("127.0.0.1", 1))


def _verdict(**broken: str) -> Verdict:
    results = {p: CheckResult(True) for p in P.ALL_PROMISES}
    results.update({p: CheckResult(False, why) for p, why in broken.items()})
    return Verdict("cluster-1", 1_700_000_000.0, results)


def test_a_broken_promise_the_job_needs_is_refused_by_name() -> None:
    verdict = _verdict(read_committed="5 aborted records returned")
    verdict.refuse(P.INCREASE_NEEDS)  # the increase does not read transactionally
    with pytest.raises(BrokerDeviation) as info:
        verdict.refuse(P.STATE_NEEDS, what="the rebuild")
    assert info.value.promises == ("read_committed",)
    message = str(info.value)
    assert "read_committed" in message and "5 aborted records returned" in message
    assert "Nothing was changed" in message and "allow_broker_deviation" in message


def test_an_allowed_deviation_is_returned_with_its_risk_line() -> None:
    verdict = _verdict(latest_offset="latest 1, fetch 10")
    assert verdict.refuse(P.STATE_NEEDS, allow=["latest_offset"]) == ["latest_offset"]
    line = verdict.risk_line("latest_offset", "the rebuild")
    assert line.startswith("RISK ACCEPTED") and "latest 1, fetch 10" in line and "the rebuild" in line


def test_the_airflow_edge_makes_it_a_fatal_named_error() -> None:
    with pytest.raises(BrokerDeviationError, match="unknown_group") as info:
        refuse(_verdict(unknown_group="described EMPTY"), P.INCREASE_NEEDS, (), "the increase")
    assert not info.value.retryable


def test_unchecked_promises_are_not_reported_broken() -> None:
    verdict = Verdict("c", 0.0, {P.GROUP_MEMBERS: CheckResult(None, "no assignment")})
    assert verdict.broken() == []
    assert verdict.unchecked([P.GROUP_MEMBERS, P.LATEST_OFFSET]) == [P.GROUP_MEMBERS, P.LATEST_OFFSET]


def test_verdicts_round_trip_and_cheap_checks_lay_over_cached_ones() -> None:
    cached = _verdict(latest_offset="1 vs 10")
    assert Verdict.from_dict(cached.to_dict()) == cached
    fresh = Verdict("cluster-1", 0.0, {P.API_CREATE_PARTITIONS: CheckResult(False, "missing")})
    merged = cached.merged(fresh)
    assert merged.broken() == [P.API_CREATE_PARTITIONS, P.LATEST_OFFSET]
    assert merged.checked_at == cached.checked_at


def test_names_are_checked_where_the_user_gives_them() -> None:
    assert allowed_deviations("latest_offset, read_committed") == ("latest_offset", "read_committed")
    assert allowed_deviations(None) == () and allowed_deviations("[]") == ()
    assert allowed_deviations("['config_defaults']") == ("config_defaults",)  # a rendered template
    with pytest.raises(KStateConfigError, match="latest_ofset"):
        allowed_deviations(["latest_ofset"])
    assert needed_promises("state") == P.STATE_NEEDS
    with pytest.raises(KStateConfigError, match="increase"):
        needed_promises("everything")


def test_the_kstate_command_names_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_provider_kstate.cli import main

    assert main(["frobnicate"]) == 2
    assert "kstate doctor" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_the_doctor_and_its_command_import_no_airflow() -> None:
    """``kstate doctor`` runs where Airflow is not installed (a laptop, a broker host): import the CLI and
    every doctor module in a Python where ``airflow`` and ``pyspark`` cannot be imported."""

    code = (
        "import importlib, pkgutil\n"
        "importlib.import_module('airflow_provider_kstate.cli')\n"
        "package = importlib.import_module('airflow_provider_kstate.doctor')\n"
        "for info in pkgutil.iter_modules(package.__path__):\n"
        "    importlib.import_module(package.__name__ + '.' + info.name)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'airflow'], 'airflow imported'\n"
    )
    done = python_without(code)
    assert done.returncode == 0, done.stderr


def test_kstate_plan_and_the_cluster_package_import_no_airflow() -> None:
    """``kstate plan`` runs where Airflow is not installed: the cluster package (admin verbs, controller,
    lease log) and the preview import in a Python where ``airflow`` and ``pyspark`` cannot be imported."""

    code = (
        "import importlib, pkgutil\n"
        "importlib.import_module('airflow_provider_kstate.increase.preview')\n"
        "package = importlib.import_module('airflow_provider_kstate.cluster')\n"
        "for info in pkgutil.iter_modules(package.__path__):\n"
        "    importlib.import_module(package.__name__ + '.' + info.name)\n"
        "from airflow_provider_kstate.cli import main\n"
        "main(['plan', '--help'])  # argparse prints the help and exits 0\n"
    )
    done = python_without(code)
    assert done.returncode == 0 and "kstate plan" in done.stdout, done.stderr


def test_a_broker_that_dies_mid_request_is_not_an_unsupported_listener() -> None:
    """``usable`` tells a listener the wire client cannot use (the client from then on, whose
    ``describe_consumer_groups`` can abort the process when a coordinator dies) from a broker that stopped
    answering mid-request (a node killed as a task starts): the next bootstrap broker is asked, and with none
    left it is unavailable now, asked again next time."""
    import socket
    import threading

    def dying_broker() -> tuple[socket.socket, int]:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                conn.recv(1024)  # the ApiVersions request, then the connection dies without an answer
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        return server, server.getsockname()[1]

    server, port = dying_broker()
    try:
        with pytest.raises(wire.WireUnavailable) as raised:
            wire.usable({"bootstrap.servers": f"127.0.0.1:{port}"}, timeout=2.0)
        assert not isinstance(raised.value, wire.WireUnsupported), raised.value
    finally:
        server.close()
    with pytest.raises(wire.WireUnsupported, match="SCRAM"):
        conn = wire.Connection.__new__(wire.Connection)
        conn.protocol, conn.config = "SASL_PLAINTEXT", {"sasl.mechanism": "SCRAM-SHA-512"}
        conn.authenticate()
