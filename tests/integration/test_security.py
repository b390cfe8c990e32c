"""SASL, TLS, ACLs and OAuth for real (issue 33, items 3-5), on an Apache Kafka 4.4.0 with secured listeners.

The module's cluster (:mod:`kstate_support.kafka_security`) runs SASL/SCRAM-SHA-512 over TLS, mutual TLS,
TLS with an expired broker certificate and SASL/OAUTHBEARER (unsecured tokens) beside PLAINTEXT, with the
standard authorizer on. The provider gets nothing but the ``kafka`` connection's extras.

Fast (``make test``): ``kstate plan`` through SCRAM over TLS with exactly the README's ACLs, and a wrong
password and an expired client certificate refused by name. The rest (whole increases through each
listener, every refusal with a live group that must not be paused, the ACL refusals, Spark and KafkaJS
through the secured listeners, KafkaJS over OAUTHBEARER with an unsecured token, a whole increase through
SCRAM over TLS on three nodes) is ``chaos``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kstate_support import ROOT
from kstate_support import kafka_security as ks
from kstate_support.broker import release_kafka_clients
from kstate_support.increase_runs import states
from kstate_support.kafka import commit_as_consumer
from kstate_support.node import consumers as node_consumers
from kstate_support.node import node_ready
from kstate_support.node import producer as node_producer
from kstate_support.traffic import live_traffic, loss, wait_until, warm_up

from airflow_provider_kstate.cluster.admin import ClusterAdmin
from airflow_provider_kstate.doctor.diagnosis import diagnose
from airflow_provider_kstate.errors import KafkaAuthenticationError

pytestmark = pytest.mark.integration

DAG_ID = "kstate_partition_increase"
#: The SCRAM users of the module and their passwords (grepped for in every output).
PASSWORDS = {
    "kstate": "kstate-Pw-7Qx2vL9s",
    "noalter": "noalter-Pw-3Hk8",
    "nogroup": "nogroup-Pw-5Tz1",
    "nocontrol": "nocontrol-Pw-9Rb4",
}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ks.SecureCluster]:
    """The module's secured cluster (``KSTATE_SECURE_DIR``: one already running, for development)."""
    reuse = os.environ.get("KSTATE_SECURE_DIR")
    if reuse:
        cluster = ks.attach(Path(reuse))
        for user, password in PASSWORDS.items():
            cluster.add_user(user, password)
        yield cluster
        return
    sigterm = signal.getsignal(signal.SIGTERM)
    with ks.secure_cluster(tmp_path_factory.mktemp("secure")) as cluster:
        for user, password in PASSWORDS.items():
            cluster.add_user(user, password)
        yield cluster
        release_kafka_clients(sigterm)  # the runs' clients go while the cluster still answers


@pytest.fixture
def names(secure: ks.SecureCluster) -> Iterator[dict[str, str]]:
    """A fresh topic (1 partition, made as the super user) and group name for one test."""
    suffix = f"{os.getpid()}-{time.monotonic_ns() % 10**9}"
    topic, group = f"sec-{suffix}", f"sec-{suffix}-g"
    admin = AdminClient({"bootstrap.servers": secure.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=30).values():
        future.result(30)
    yield {"topic": topic, "group": group}
    for future in admin.delete_topics([topic], request_timeout=30).values():
        try:
            future.result(30)
        except Exception:  # noqa: BLE001 - best effort
            pass


def grant_readme_acls(
    secure: ks.SecureCluster, user: str, topic: str, group: str, without: tuple = ()
) -> None:
    """Grant ``user`` exactly the README's ACLs for ``topic`` and ``group``, less those in ``without``
    (``(resource type, name, operation)``)."""
    text = (ROOT / "README.md").read_text()
    acls = [a[1:] for a in ks.readme_acls(text, kstate=user, orders=topic, **{"orders-app": group})]
    kept = [a for a in acls if (a[0], a[1], a[3]) not in without]
    assert len(kept) == len(acls) - len(without), f"{without} is not in the README's ACLs"
    ks.grant(secure.bootstrap, user, *kept)


def commit_offsets(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    """Give ``group`` committed offsets on ``topic`` (an EMPTY group at risk), as the super user."""
    commit_as_consumer({"bootstrap.servers": bootstrap}, group, topic, offsets)


def kstate_plan(
    config: dict[str, Any], topic: str, partitions: int, *groups: str
) -> subprocess.CompletedProcess[str]:
    """``kstate plan`` with ``config`` (bootstrap and librdkafka extras) as a user types it."""
    extras = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    cmd = [
        sys.executable, "-m", "airflow_provider_kstate.cli", "plan", topic, "--partitions", str(partitions),
        "--bootstrap-servers", config["bootstrap.servers"], "--config", json.dumps(extras), "--timeout", "15",
    ]  # fmt: skip
    if groups:
        cmd += ["--groups", ",".join(groups)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def refusal_of(config: dict[str, Any]) -> tuple[bool, str]:
    """``(retryable, message)`` of the KafkaAuthenticationError ``ClusterAdmin.check_connection`` raises
    (only strings leave: no traceback keeps the client alive after the cluster stops), once the refused
    client is freed: a refusal probed inside an ``except`` block leaked it (confluent-kafka 2.16.1), and it
    reconnected every second until the process ended."""
    import gc
    import weakref

    admin = ClusterAdmin(config, timeout=30, name="test")
    client = weakref.ref(admin.client)
    try:
        admin.check_connection()
    except KafkaAuthenticationError as exc:
        out = exc.retryable, str(exc)
    else:
        raise AssertionError("the connection was not refused")
    finally:
        del admin
    gc.collect()
    assert client() is None, "the refused admin client outlived its check"
    return out


def assert_no_secret(*outputs: Any) -> None:
    for text in outputs:
        blob = text if isinstance(text, str) else json.dumps(text, default=str)
        for user, password in {**PASSWORDS, ks.ADMIN: ks.ADMIN_PASSWORD}.items():
            assert password not in blob, f"the password of {user} leaked"


def partitions(secure: ks.SecureCluster, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": secure.bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


# -- fast: make test ---------------------------------------------------------------------------------


def test_kstate_plan_through_scram_over_tls_with_the_readme_acls(
    secure: ks.SecureCluster, names: dict[str, str]
) -> None:
    """``kstate plan`` as ``User:kstate`` over SASL_SSL (SCRAM-SHA-512), granted exactly the README's ACLs:
    it sees the group at risk and plans 1 -> 3; the password is in none of its output."""
    topic, group = names["topic"], names["group"]
    grant_readme_acls(secure, "kstate", topic, group)
    commit_offsets(secure.bootstrap, topic, group, {0: 0})
    started = time.monotonic()
    proc = kstate_plan(secure.client_config("SASL_SSL", "kstate"), topic, 3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 -> 3 partitions" in proc.stdout and f"group {group}" in proc.stdout, proc.stdout
    assert_no_secret(proc.stdout, proc.stderr)
    # timeout contract: the CLI waits at most its --timeout 15 per request; 2x that and 10 s (a loaded machine
    # starting Python) catches a plan that sat out timeouts on the TLS listener
    assert time.monotonic() - started < 40


def test_a_wrong_password_is_refused_naming_the_listener_and_the_cause(
    secure: ks.SecureCluster, names: dict[str, str]
) -> None:
    """A wrong SCRAM password: refused within seconds (not after the request timeout) with
    ``KafkaAuthenticationError``, not retryable, naming the SASL_SSL listener and "authentication failed";
    ``kstate plan`` says the same and exits 3 (a refusal, not an unreachable cluster)."""
    wrong = "Not-The-Password-42"
    config = secure.client_config("SASL_SSL", "kstate", password=wrong)
    started = time.monotonic()
    retryable, message = refusal_of(config)
    # timeout contract: refused at the handshake, not after the admin's 30 s request timeout; a handshake
    # takes well under a second, 15 s is many times that on a loaded machine
    assert time.monotonic() - started < 15
    assert retryable is False
    assert f"SASL_SSL listener at {secure.address('SASL_SSL')}" in message
    assert "authentication failed" in message and "SCRAM-SHA-512" in message
    assert wrong not in message
    proc = kstate_plan(config, names["topic"], 2)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "REFUSED" in proc.stderr and "authentication failed" in proc.stderr
    assert wrong not in proc.stdout + proc.stderr
    assert partitions(secure, names["topic"]) == 1


def test_an_expired_client_certificate_is_refused_naming_the_listener_and_the_cause(
    secure: ks.SecureCluster,
) -> None:
    """A client certificate of the trusted CA that expired (mutual TLS): the broker answers it with the alert
    it gives any certificate it cannot validate; the refusal names the MTLS listener and "certificate
    expired" with the certificate's date (read from the client's own file), within seconds, not retryable."""
    config = {
        **secure.client_config("MTLS", ks.ADMIN),
        "ssl.certificate.location": str(secure.pki.cert(ks.EXPIRED_CLIENT)),
        "ssl.key.location": str(secure.pki.key(ks.EXPIRED_CLIENT)),
    }
    started = time.monotonic()
    retryable, message = refusal_of(config)
    # timeout contract: refused at the handshake, not after the admin's 30 s request timeout (as above)
    assert time.monotonic() - started < 15
    assert retryable is False
    assert (
        f"(SSL listener at {secure.address('MTLS')}) refused the connection: certificate expired:" in message
    )
    assert "ssl.certificate.location expired on 2020-02-01 00:00 UTC" in message, message


# -- chaos: whole runs through each listener, refusals with a live group --------------------------------


def use_connection(monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]) -> None:
    """Point ``kafka_default`` (the DAG's connection) at ``config`` for this test."""
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", json.dumps({"conn_type": "kafka", "extra": config}))


def run_outputs(
    dr: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> dict[str, Any]:
    """Everything a run left to read: its tasks' XComs, the captured output (task logs, librdkafka's own
    lines), the log records, the report files and the Airflow logs folder."""
    out, err = capfd.readouterr()
    xcoms = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dr.get_task_instances()}
    home = Path(os.environ["AIRFLOW_HOME"])
    files = {
        str(p): p.read_text(errors="replace")
        for folder in (home / "kstate-reports", home / "logs")
        if folder.exists()
        for p in folder.rglob("*")
        if p.is_file() and p.stat().st_size < 5_000_000
    }
    return {"stdout": out, "stderr": err, "logs": caplog.text, "xcoms": xcoms, "files": files}


def assert_outputs_read(outputs: dict[str, Any], topic: str) -> None:
    """The grep for secrets read real outputs: the plan in XCom, the task logs, the run's report files."""
    assert any(isinstance(x, dict) and x.get("topic") == topic for x in outputs["xcoms"].values()), "no plan"
    assert "PLAN" in outputs["stdout"] + outputs["stderr"] + outputs["logs"], "no task log captured"
    assert any(topic in text for text in outputs["files"].values()), "no report of the run"


@pytest.mark.chaos
@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS", "OAUTH"])
def test_a_whole_increase_through_each_secured_listener_loses_nothing(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    listener: str,
) -> None:
    """The DAG (plan, pause, increase, seed, resume, verify) and the client piece (ControlledProducer and
    ControlledConsumer) all connect through ``listener`` with the connection's extras only: 1 -> 3 under
    live keyed traffic, 0 lost; the password is in no log, XCom, plan or report."""
    topic, group = names["topic"], names["group"]
    config = secure.client_config(listener, ks.ADMIN)
    use_connection(monkeypatch, config)
    with live_traffic(config, topic, group, n=2, controlled=True) as (producer, fleet):
        since = warm_up(producer, fleet)
        dr = run_dag(DAG_ID, {"topic": topic, "partitions": 3, "consumer_groups": [group], "dry_run": False})
        assert dr.state == "success", states(dr)
        assert wait_until(lambda: set(producer.placed.values()) == {0, 1, 2}, 20)
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=30)
    assert lost == {}, f"{len(lost)} lost"
    assert partitions(secure, topic) == 3
    outputs = run_outputs(dr, capfd, caplog)
    assert_outputs_read(outputs, topic)
    assert_no_secret(outputs)


def kstate_page(topic: str) -> dict[str, Any]:
    """What the kstate page shows of ``topic`` through ``kafka_default``: the plan of a run to 6 partitions
    (made now, over the secured connection), the broker check, the runs and each run's proof."""
    from airflow_provider_kstate.hooks.admin import KStateAdminHook
    from airflow_provider_kstate.plugins import views

    base = views.report_base()
    runs = views.list_runs(base, topic)
    page = {
        "plan": views.topic_view(KStateAdminHook(), "kafka_default", topic, 6),
        "verdict": views.broker_verdict("kafka_default"),
        "runs": runs,
        "proofs": [views.run_proof(base, topic, run["run"]) for run in runs["runs"]],
    }
    assert page["plan"]["target"] == 6 and page["proofs"], page
    return page


def refused_run(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    config: dict[str, Any],
) -> tuple[dict[str, str], str, dict[str, Any]]:
    """Run the DAG with ``config`` while a live group of the client piece (on PLAINTEXT, as the super user)
    reads the topic; return the tasks' states, everything the run printed, and its outputs. Asserts that
    nothing changed: the topic keeps 1 partition and the group was never paused."""
    topic, group = names["topic"], names["group"]
    use_connection(monkeypatch, config)
    traffic = {"bootstrap.servers": secure.bootstrap}
    with live_traffic(traffic, topic, group, n=2, controlled=True) as (producer, fleet):
        warm_up(producer, fleet)
        dr = run_dag(DAG_ID, {"topic": topic, "partitions": 3, "consumer_groups": [group], "dry_run": False})
        transitions = list(fleet.transitions)
    outputs = run_outputs(dr, capfd, caplog)
    assert dr.state == "failed", states(dr)
    assert "paused" not in transitions, transitions
    assert partitions(secure, topic) == 1
    printed = outputs["stdout"] + outputs["stderr"] + outputs["logs"]
    return states(dr), printed, outputs


@pytest.mark.chaos
@pytest.mark.parametrize(
    ("case", "cause"),
    [
        ("wrong password", "authentication failed: SASL SCRAM-SHA-512 rejected the credentials"),
        ("unknown CA", "certificate verify failed: self-signed certificate in certificate chain"),
        ("expired certificate", "certificate expired"),
        ("client certificate of an unknown CA", "TLS client certificate refused"),
        (
            "expired client certificate",
            "certificate expired: the client's certificate (ssl.certificate.location expired on 2020-02-01 "
            "00:00 UTC) was refused by the broker",
        ),
    ],
)
def test_a_refused_connection_fails_the_plan_by_name_and_pauses_nobody(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    case: str,
    cause: str,
) -> None:
    """Each refused handshake fails the run's first task (the broker check, before the plan) with
    KafkaAuthenticationError naming the listener and the cause, at once (not retried); the live group is
    never paused, the topic keeps its partition count, no secret is printed."""
    config = {
        "wrong password": secure.client_config("SASL_SSL", "kstate", password="Wrong-Pw-0000"),
        "unknown CA": secure.client_config("SASL_SSL", "kstate", ca=secure.pki.unknown_ca),
        "expired certificate": secure.client_config("EXPIRED"),
        "client certificate of an unknown CA": {
            **secure.client_config("MTLS", ks.ADMIN),
            "ssl.certificate.location": str(secure.pki.cert("stranger")),
            "ssl.key.location": str(secure.pki.key("stranger")),
        },
        "expired client certificate": {
            **secure.client_config("MTLS", ks.ADMIN),
            "ssl.certificate.location": str(secure.pki.cert(ks.EXPIRED_CLIENT)),
            "ssl.key.location": str(secure.pki.key(ks.EXPIRED_CLIENT)),
        },
    }[case]
    task_states, printed, outputs = refused_run(secure, names, run_dag, monkeypatch, capfd, caplog, config)
    # The run's first task to connect (the broker check) is refused by name, not retried; nothing after runs.
    assert task_states["check_broker"] == "failed", task_states
    assert task_states["plan"] == "upstream_failed" and task_states["pause_window"] == "upstream_failed"
    protocol = config["security.protocol"]
    assert "KafkaAuthenticationError" in printed
    assert (
        f"({protocol} listener at {config['bootstrap.servers']}) refused the connection: {cause}" in printed
    )
    assert "Wrong-Pw-0000" not in json.dumps(outputs, default=str)
    assert_no_secret(outputs)


@pytest.mark.chaos
@pytest.mark.parametrize(
    ("user", "without", "named"),
    [
        ("noalter", (("TOPIC", "{topic}", "ALTER"),), ("Alter on topic '{topic}' (increase",)),
        (
            "nogroup",
            (("GROUP", "{group}", "DESCRIBE"), ("GROUP", "{group}", "READ")),
            ("Describe on group '{group}'", "Read on group '{group}'", "--operation Describe"),
        ),
        (
            "nocontrol",
            (("TOPIC", "_kstate_", "WRITE"),),
            (
                "Write on topic '_kstate_leases'",
                "Write on topic '_kstate_control'",
                "--topic _kstate_control",
            ),
        ),
    ],
)
def test_a_principal_without_an_acl_the_run_needs_is_refused_at_plan_time(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    user: str,
    without: tuple[tuple[str, str, str], ...],
    named: tuple[str, ...],
) -> None:
    """The README's ACLs less one (Alter on the topic; Describe on the protected group; Write on the
    provider's own topics): the plan refuses with KafkaAuthorizationError naming the missing operation and
    resource and the kafka-acls command that grants it; nobody is paused, nothing changes."""
    topic, group = names["topic"], names["group"]
    fill = {"topic": topic, "group": group}
    grant_readme_acls(secure, user, topic, group, tuple((r, n.format(**fill), op) for r, n, op in without))
    diagnose(
        secure.client_config("SASL_SSL", ks.ADMIN)
    )  # the broker check's verdict cached, as an admin would
    config = secure.client_config("SASL_SSL", user)
    task_states, printed, outputs = refused_run(secure, names, run_dag, monkeypatch, capfd, caplog, config)
    assert task_states["plan"] == "failed", task_states
    assert "KafkaAuthorizationError" in printed
    refusal = [line for line in printed.splitlines() if "lacks ACLs" in line]
    head = f"principal User:{user} lacks ACLs the run needs: "
    assert any(head in r and all(n.format(**fill) in r for n in named) for r in refusal), refusal[:3]
    # kstate plan (the preview) refuses the same principal the same way
    proc = kstate_plan(config, topic, 3, group)
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-2000:])
    assert "REFUSED" in proc.stderr and head in proc.stderr
    assert all(n.format(**fill) in proc.stderr for n in named), proc.stderr[-2000:]
    assert_no_secret(proc.stdout, proc.stderr)
    assert f"--allow-principal User:{user}" in printed and "kafka-acls.sh" in printed
    assert_no_secret(outputs)


@pytest.mark.chaos
def test_exactly_the_readme_acls_let_a_whole_increase_pass(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``User:kstate`` granted exactly the README's ``kafka-acls`` commands (parsed from it) runs the broker
    check afresh (its probe topics, groups and transactions), the plan, the pause, the increase, the seed,
    the resume and the verify over SCRAM and TLS, under live traffic of the client piece: 1 -> 3, 0 lost."""
    topic, group = names["topic"], names["group"]
    user = "kstate"
    grant_readme_acls(secure, user, topic, group)
    use_connection(monkeypatch, secure.client_config("SASL_SSL", user))
    traffic = {"bootstrap.servers": secure.bootstrap}  # the services run under their own (super) principal
    with live_traffic(traffic, topic, group, n=2, controlled=True) as (producer, fleet):
        since = warm_up(producer, fleet)
        dr = run_dag(
            DAG_ID,
            {
                "topic": topic,
                "partitions": 3,
                "consumer_groups": [group],
                "dry_run": False,
                "refresh_broker_check": True,
            },
        )
        assert dr.state == "success", states(dr)
        assert wait_until(lambda: set(producer.placed.values()) == {0, 1, 2}, 20)
        producer.stop()
        lost = loss(producer, fleet, since, drain_timeout=30)
    assert lost == {}, f"{len(lost)} lost"
    assert "paused" in fleet.transitions
    assert partitions(secure, topic) == 3
    verdict, cached = diagnose(secure.client_config("SASL_SSL", user))  # what the run's fresh check cached
    assert cached and {p: r.ok for p, r in verdict.results.items() if r.ok is not True} == {}
    outputs = run_outputs(dr, capfd, caplog)
    assert_outputs_read(outputs, topic)
    outputs["page"] = kstate_page(topic)
    assert_no_secret(outputs)


# -- the Spark applications and the Node.js client through the secured listeners -----------------------


@pytest.mark.chaos
@pytest.mark.spark
@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS", "OAUTH"])
def test_the_spark_applications_read_through_each_secured_listener_with_either_reader(
    secure: ks.SecureCluster, tmp_path: Path, listener: str
) -> None:
    """``rebuild.py`` reads a changelog (compacted, with a committed and an aborted transaction) through
    ``listener`` with the connection's extras only, in the executors' confluent-kafka reader and in Spark's
    own Kafka source (the Java client: SCRAM in JAAS, the client certificate as an inline PEM key store, the
    unsecured OAUTHBEARER token): both snapshots equal the truth; the password is in none of the output."""
    from kstate_support import spark_kafka

    from tests.integration.test_spark_apps import (
        Changelog,
        N,
        assert_snapshot_is_truth,
        submit,
        write_history,
    )

    config = secure.client_config(listener, ks.ADMIN)
    tag = f"{listener.lower()}-{time.monotonic_ns() % 10**9}"
    topic = f"sec-changelog-{tag}"
    admin = AdminClient({"bootstrap.servers": secure.bootstrap})
    for future in admin.create_topics([NewTopic(topic, N, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)
    cfg = tmp_path / "kafka.json"
    cfg.write_text(json.dumps(config))
    cfg.chmod(0o600)
    log = Changelog(topic, config, str(cfg))
    write_history(log, tag)
    for reader in ("confluent", "spark"):
        uri = str(tmp_path / reader)
        args = ["--kafka-config-file", str(cfg), "--topic", topic, "--snapshot-uri", uri]
        args += ["--report-file", f"{uri}.json", "--changelog-reader", reader]
        proc, report = submit("rebuild.py", *args, spark_args=spark_kafka.submit_args())
        assert proc.returncode == 0 and report.get("ok"), proc.stderr[-3000:]
        assert f"changelog reader: {reader}" in proc.stderr
        assert report["records_read"] == log.records
        assert_snapshot_is_truth(tmp_path / reader, log)
        assert_no_secret(proc.stdout, proc.stderr, report)


@pytest.mark.chaos
@pytest.mark.skipif(bool(node_ready()), reason=node_ready() or "ready")
@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS", "OAUTH"])
def test_the_nodejs_client_piece_through_each_secured_listener(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    listener: str,
) -> None:
    """The Node.js client piece (KafkaJS: ControlledConsumer members and a keyed ControlledProducer) on
    ``listener`` (SCRAM over TLS; a client certificate; SASL/OAUTHBEARER with an unsecured JWS from KafkaJS's
    ``oauthBearerProvider``), the DAG on the same listener: the members pause
    (leave) and resume, the producer switches to the 3-partition layout, and every record the producer
    wrote is processed."""
    topic, group = names["topic"], names["group"]
    config = secure.client_config(listener, ks.ADMIN)
    use_connection(monkeypatch, config)
    base = {"brokers": config["bootstrap.servers"].split(","), "security": ks.kafkajs_security(config)}
    members = [f"{group}-{i}" for i in range(2)]
    fleet = node_consumers(
        {**base, "groupId": group, "topics": [topic], "members": [{"clientId": c} for c in members]}, "node-c"
    )
    writer = node_producer(
        {**base, "topic": topic, "clientId": f"{group}-p", "keys": 50, "rate": 100}, "node-p"
    )
    try:
        for c in members:
            fleet.wait(lambda e, c=c: e["event"] == "assigned" and e["c"] == c, timeout=60)
        writer.wait(lambda e: e["event"] == "sent", timeout=60)
        dr = run_dag(DAG_ID, {"topic": topic, "partitions": 3, "consumer_groups": [group], "dry_run": False})
        assert dr.state == "success", states(dr)
        writer.wait(lambda e: e["event"] == "layout" and e["n"] == 3, timeout=60)
        writer.wait(lambda e: e["event"] == "sent" and e["p"] == 2, timeout=30)
    finally:
        codes = [writer.stop("stop"), 0]
    sent = {(e["p"], e["o"]) for e in writer.of("sent")}
    try:
        assert wait_until(lambda: sent <= {(e["p"], e["o"]) for e in fleet.of("record")}, 60)
    finally:
        codes[1] = fleet.stop()
    assert codes == [0, 0], writer.stderr() + fleet.stderr()
    for c in members:
        assert any(e["event"] == "state" and e["c"] == c and e["state"] == "paused" for e in fleet.events), c
    assert {p for p, _ in sent} == {0, 1, 2}
    assert partitions(secure, topic) == 3


@pytest.mark.chaos
@pytest.mark.spark
def test_exactly_the_readme_acls_let_a_state_maintenance_run_pass(
    secure: ks.SecureCluster,
    names: dict[str, str],
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """``User:kstate`` with exactly the README's ACLs runs ``kstate_state_maintenance`` over SCRAM and TLS:
    the broker check, the fast check of a missing snapshot, the rebuild (Spark, each executor reading the
    changelog with the connection's settings) and both checks again pass; no secret in any output."""
    from confluent_kafka import Producer

    user, log = "kstate", f"{names['topic']}-changelog"
    admin = AdminClient({"bootstrap.servers": secure.bootstrap})
    for future in admin.create_topics([NewTopic(log, 3, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": secure.bootstrap})
    for i in range(600):
        producer.produce(log, key=f"acct-{i % 40:03d}".encode(), value=str(i).encode())
    assert producer.flush(30) == 0
    text = (ROOT / "README.md").read_text()
    acls = [a[1:] for a in ks.readme_acls(text, kstate=user, **{"orders-store-changelog": log})]
    ks.grant(secure.bootstrap, user, *[a for a in acls if a[1] not in ("orders", "orders-app")])
    use_connection(monkeypatch, secure.client_config("SASL_SSL", user))
    uri = str(tmp_path / "snapshot")
    dr = run_dag(
        "kstate_state_maintenance",
        {"changelog_topic": log, "snapshot_uri": uri, "deep": True, "rebuild": "auto"},
    )
    ran = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    assert dr.state == "success", ran
    assert {
        t: ran[t] for t in ("check_broker", "fast_check", "rebuild", "recheck_fast", "recheck_deep")
    } == dict.fromkeys(
        ("check_broker", "fast_check", "rebuild", "recheck_fast", "recheck_deep"), "success"
    ), ran
    assert (tmp_path / "snapshot").exists()
    outputs = run_outputs(dr, capfd, caplog)
    assert_no_secret(outputs)


# -- three nodes: the secured listener of a replicated cluster ------------------------------------------


@pytest.mark.chaos
def test_a_whole_increase_through_scram_over_tls_on_three_nodes(
    tmp_path: Path,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The secured listeners on a three-node cluster (KRaft, RF 3, ``min.insync.replicas=2``): the DAG and
    the client piece connect through SASL/SCRAM-SHA-512 over TLS only (every node's SASL_SSL listener in
    the bootstrap list), the provider's lease and control topics are made there with RF 3; 4 -> 8 under live
    keyed traffic, 0 lost; no password in any output."""
    sigterm = signal.getsignal(signal.SIGTERM)
    with ks.secure_cluster(tmp_path / "secure3", nodes=3) as cluster:
        try:
            topic, group = f"sec3-{os.getpid()}", f"sec3-{os.getpid()}-g"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            new = NewTopic(topic, 4, 3, config={"min.insync.replicas": "2"})
            for future in admin.create_topics([new], request_timeout=30).values():
                future.result(30)
            config = cluster.client_config("SASL_SSL", ks.ADMIN)
            assert len(config["bootstrap.servers"].split(",")) == 3
            use_connection(monkeypatch, config)
            started = time.monotonic()
            with live_traffic(config, topic, group, n=2, controlled=True, rate=100) as (producer, fleet):
                since = warm_up(producer, fleet)
                dr = run_dag(
                    DAG_ID, {"topic": topic, "partitions": 8, "consumer_groups": [group], "dry_run": False}
                )
                assert dr.state == "success", states(dr)
                assert wait_until(lambda: set(producer.placed.values()) == set(range(8)), 30)
                producer.stop()
                lost = loss(producer, fleet, since, drain_timeout=60)
            assert lost == {}, f"{len(lost)} lost"
            assert "paused" in fleet.transitions
            meta = admin.list_topics(timeout=10).topics
            assert len(meta[topic].partitions) == 8
            assert {len(p.replicas) for p in meta[topic].partitions.values()} == {3}
            for internal in ("_kstate_control", "_kstate_leases"):
                assert {len(p.replicas) for p in meta[internal].partitions.values()} == {3}, internal
            outputs = run_outputs(dr, capfd, caplog)
            assert_outputs_read(outputs, topic)
            assert_no_secret(outputs)
            with capfd.disabled():
                print(
                    f"\nthree secured nodes: 4 -> 8, {len(producer.produced)} produced, 0 lost, "
                    f"{time.monotonic() - started:.1f} s"
                )
        finally:
            release_kafka_clients(sigterm)
