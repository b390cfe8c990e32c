"""The secured test cluster's pieces without a broker: its listeners in server.properties, the README's ACLs."""

from __future__ import annotations

from pathlib import Path

from kstate_support import ROOT, apache_kafka
from kstate_support import kafka_security as ks


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_secured_node_adds_its_listeners_and_keeps_plaintext(tmp_path: Path) -> None:
    node = apache_kafka.Node(
        1, 9000, 9100, listeners={"SASL_SSL": 9001, "MTLS": 9002, "EXPIRED": 9003, "OAUTH": 9004}
    )
    settings = props(apache_kafka.server_properties(node, [node], tmp_path, ks.secured(ks.Pki(tmp_path))))
    assert settings["listeners"] == (
        "PLAINTEXT://127.0.0.1:9000,CONTROLLER://127.0.0.1:9100,SASL_SSL://127.0.0.1:9001,"
        "MTLS://127.0.0.1:9002,EXPIRED://127.0.0.1:9003,OAUTH://127.0.0.1:9004"
    )
    assert settings["inter.broker.listener.name"] == "PLAINTEXT"
    assert settings["listener.security.protocol.map"].endswith(
        ",SASL_SSL:SASL_SSL,MTLS:SSL,EXPIRED:SSL,OAUTH:SASL_PLAINTEXT"
    )
    assert settings["listener.name.mtls.ssl.client.auth"] == "required"
    assert settings["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    plain = props(apache_kafka.server_properties(apache_kafka.Node(1, 9000, 9100), [node], tmp_path))
    assert "authorizer.class.name" not in plain and plain["listeners"].count("://") == 2


def test_the_readme_lists_the_acls_the_test_grants() -> None:
    acls = ks.readme_acls(
        (ROOT / "README.md").read_text(), kstate="alice", orders="t1", **{"orders-app": "g1"}
    )
    assert {a[0] for a in acls} == {"alice"}
    assert ("alice", "TOPIC", "t1", "LITERAL", "ALTER") in acls
    assert ("alice", "GROUP", "g1", "LITERAL", "DESCRIBE") in acls
    assert ("alice", "TOPIC", "_kstate_", "PREFIXED", "WRITE") in acls
    assert ("alice", "TRANSACTIONAL_ID", "kstate-doctor-", "PREFIXED", "WRITE") in acls


def test_the_nodejs_apps_get_the_principal_of_an_unsecured_oauthbearer_token() -> None:
    """librdkafka's unsecured OAUTHBEARER settings become the Node.js apps' ``oauthbearer`` SASL (their
    ``oauthBearerProvider`` makes the JWS); a signed-token setting is refused, not silently dropped."""
    oauth = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=kstate",
    }
    assert ks.kafkajs_security(oauth) == {"sasl": {"mechanism": "oauthbearer", "principal": "kstate"}}
    signed = {k: v for k, v in oauth.items() if k != "enable.sasl.oauthbearer.unsecure.jwt"}
    try:
        ks.kafkajs_security(signed)
    except ks.SecuritySetupError as exc:
        assert "unsecured" in str(exc)
    else:
        raise AssertionError("a signed-token config was accepted")
