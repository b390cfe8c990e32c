"""A secured Apache Kafka for the tests: keys and certificates made here with ``openssl``, SCRAM users, ACLs.

:func:`make_pki` writes, under one folder, a test CA, a broker certificate for ``127.0.0.1``/``localhost``,
client certificates (their CN is the principal), a broker certificate and a client certificate that have
expired and a second CA the brokers do not trust (``unknown-ca.pem``, with a client certificate it signed). :func:`secured` turns them
into the opt-in listeners of :func:`kstate_support.apache_kafka.start`:

* ``SASL_SSL``: SASL/SCRAM-SHA-512 over TLS (users made with :func:`add_scram_user`);
* ``MTLS``: TLS with ``ssl.client.auth=required`` (the principal is the client certificate's CN);
* ``EXPIRED``: TLS whose broker certificate has expired (a client must refuse it);
* ``OAUTH``: SASL/OAUTHBEARER over plaintext with Kafka's unsecured token validator (the default server
  callback of OAUTHBEARER: tests only, the token is not signed);

with the standard authorizer on (``StandardAuthorizer``) and two super users: ``ANONYMOUS`` (the PLAINTEXT
listener, inter-broker and the controllers: the suite's other helpers keep working unchanged) and ``admin``.

    with secure_cluster(tmp_path) as cluster:
        config = cluster.client_config("SASL_SSL", user="kstate")   # librdkafka settings
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstate_support import apache_kafka

#: The super user of the SASL listeners (its password is :data:`ADMIN_PASSWORD`).
ADMIN = "admin"
ADMIN_PASSWORD = "admin-Secret-4f2b9c"  # noqa: S105 - a test cluster's password
SCRAM = "SCRAM-SHA-512"
#: The listeners :func:`secured` adds: ``{name: security protocol}``.
LISTENERS = {"SASL_SSL": "SASL_SSL", "MTLS": "SSL", "EXPIRED": "SSL", "OAUTH": "SASL_PLAINTEXT"}
#: Client certificates :func:`make_pki` signs with the test CA (their CN is the principal name).
CLIENT_CERTS = ("admin", "kstate", "reader")
#: A client certificate the test CA signed that expired in 2020 (:func:`make_pki`).
EXPIRED_CLIENT = "expired-client"


class SecuritySetupError(RuntimeError):
    """A key, a certificate or a SCRAM user could not be made (the message has openssl's output)."""


@dataclass(frozen=True)
class Pki:
    """The files :func:`make_pki` wrote (PEM)."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def unknown_ca(self) -> Path:
        """A CA nobody trusts: neither the brokers nor a client configured with :attr:`ca`."""
        return self.folder / "unknown-ca.pem"

    @property
    def broker_keystore(self) -> Path:
        """The broker's private key and certificate chain in one PEM file (Kafka's PEM keystore)."""
        return self.folder / "broker-keystore.pem"

    @property
    def expired_keystore(self) -> Path:
        """A broker key and certificate, signed by the test CA, that expired in 2020."""
        return self.folder / "expired-keystore.pem"

    def cert(self, name: str) -> Path:
        return self.folder / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.folder / f"{name}.key"


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise SecuritySetupError("openssl is not installed (apt-get install -y openssl)")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SecuritySetupError(f"openssl {args[0]} failed: {(proc.stdout + proc.stderr)[-1500:]}")


def _ca(folder: Path, name: str, cn: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
        "-days", "3650", "-subj", f"/CN={cn}", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )  # fmt: skip


def _leaf(folder: Path, name: str, cn: str, ca: str = "ca", server: bool = False) -> None:
    """A key and a certificate ``name`` (CN ``cn``) signed by CA ``ca``, valid for a year."""
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
        "-subj", f"/CN={cn}", cwd=folder,
    )  # fmt: skip
    ext = folder / f"{name}.ext"
    usage = "serverAuth" if server else "clientAuth"
    san = "subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else ""
    ext.write_text(f"{san}extendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "365", "-sha256", "-extfile", ext.name,
        cwd=folder,
    )  # fmt: skip


def _expired(folder: Path, name: str, cn: str = "localhost", client: bool = False) -> None:
    """A key and certificate signed by the test CA, valid only in January 2020 (``openssl ca``: the one way
    OpenSSL 3.0 sets both dates): a broker's (``serverAuth``), or with ``client`` a client's (``clientAuth``,
    its CN the principal)."""
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
        "-subj", f"/CN={cn}", cwd=folder,
    )  # fmt: skip
    db = folder / "ca-db"
    (db / "certs").mkdir(parents=True, exist_ok=True)
    if not (db / "serial").exists():
        (db / "index.txt").write_text("")
        (db / "serial").write_text("1000\n")
    (folder / "ca.cnf").write_text(
        "[ca]\ndefault_ca=test\n"
        f"[test]\ndatabase={db}/index.txt\nnew_certs_dir={db}/certs\nserial={db}/serial\n"
        "default_md=sha256\npolicy=anything\nunique_subject=no\n"
        "[anything]\ncommonName=supplied\n"
        "[server]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        "basicConstraints=CA:FALSE\n"
        "[client]\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"
    )
    _openssl(
        "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", f"{name}.csr",
        "-out", f"{name}.pem", "-notext", "-startdate", "20200101000000Z", "-enddate", "20200201000000Z",
        "-extensions", "client" if client else "server", cwd=folder,
    )  # fmt: skip


def make_pki(folder: Path) -> Pki:
    """Write the test CA, the broker's keystore, the client certificates, an expired broker certificate, an
    expired client certificate (:data:`EXPIRED_CLIENT`) and an unknown CA with a client certificate of its
    own under ``folder`` (made once: kept if present)."""
    pki = Pki(folder)
    if pki.cert(EXPIRED_CLIENT).exists():
        return pki
    folder.mkdir(parents=True, exist_ok=True)
    _ca(folder, "ca", "kstate-test-ca")
    _ca(folder, "unknown-ca", "kstate-unknown-ca")
    _leaf(folder, "broker", "localhost", server=True)
    for name in CLIENT_CERTS:
        _leaf(folder, name, name)
    _leaf(folder, "stranger", "stranger", ca="unknown-ca")  # a client certificate of the unknown CA
    _expired(folder, "expired")
    _expired(folder, EXPIRED_CLIENT, cn=EXPIRED_CLIENT, client=True)  # a client certificate of the test CA
    # Kafka's PEM keystore: the (unencrypted PKCS#8) key, then the certificate chain.
    pki.broker_keystore.write_text(
        pki.key("broker").read_text() + pki.cert("broker").read_text() + pki.ca.read_text()
    )
    pki.expired_keystore.write_text(
        pki.key("expired").read_text() + pki.cert("expired").read_text() + pki.ca.read_text()
    )
    return pki


def secured(pki: Pki) -> apache_kafka.Secured:
    """The listeners and settings of a secured cluster (see the module) on the files of ``pki``."""
    scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    oauth_jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'unsecuredLoginStringClaim_sub="{ADMIN}";'
    )
    properties = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.expired.ssl.keystore.type": "PEM",
        "listener.name.expired.ssl.keystore.location": str(pki.expired_keystore),
        "listener.name.expired.ssl.truststore.type": "PEM",
        "listener.name.expired.ssl.truststore.location": str(pki.ca),
        # The principal of a client certificate is its CN (User:kstate, not User:CN=kstate).
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": f"{SCRAM},OAUTHBEARER",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM,
        f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": scram_jaas,
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config": oauth_jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:ANONYMOUS;User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }
    return apache_kafka.Secured(listeners=dict(LISTENERS), properties=properties)


def add_scram_user(bootstrap: str, user: str, password: str, timeout: float = 30.0) -> None:
    """Create (or reset) SCRAM-SHA-512 user ``user`` through the PLAINTEXT listener ``bootstrap``."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values():
        future.result(timeout=timeout)


@dataclass
class SecureCluster:
    """A running secured cluster: its data folder, its keys and certificates, its users."""

    data_dir: Path
    pki: Pki
    bootstrap: str  # the PLAINTEXT listener (super user ANONYMOUS)
    passwords: dict[str, str] = field(default_factory=dict)

    def nodes(self) -> list[apache_kafka.Node]:
        layout = apache_kafka.read_layout(self.data_dir)
        assert layout is not None
        return apache_kafka.nodes_of(layout)

    def address(self, listener: str) -> str:
        """The bootstrap servers of ``listener`` (``PLAINTEXT``, ``SASL_SSL``, ``MTLS``, ``EXPIRED``, ``OAUTH``)."""
        return ",".join(n.address_of(listener) for n in self.nodes())

    def add_user(self, user: str, password: str) -> None:
        add_scram_user(self.bootstrap, user, password)
        self.passwords[user] = password

    def client_config(
        self, listener: str, user: str = ADMIN, password: str | None = None, ca: Path | None = None
    ) -> dict[str, Any]:
        """The librdkafka settings (a ``kafka`` connection's extra) of ``user`` on ``listener``.

        :param password: another password than the user's (a wrong one).
        :param ca: another CA file than the test CA (an unknown CA).
        """
        config: dict[str, Any] = {"bootstrap.servers": self.address(listener)}
        ca_location = str(ca or self.pki.ca)
        if listener == "SASL_SSL":
            config.update(
                {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanisms": SCRAM,
                    "sasl.username": user,
                    "sasl.password": self.passwords.get(user, "") if password is None else password,
                    "ssl.ca.location": ca_location,
                }
            )
        elif listener == "MTLS":
            config.update(
                {
                    "security.protocol": "SSL",
                    "ssl.ca.location": ca_location,
                    "ssl.certificate.location": str(self.pki.cert(user)),
                    "ssl.key.location": str(self.pki.key(user)),
                }
            )
        elif listener == "EXPIRED":
            config.update({"security.protocol": "SSL", "ssl.ca.location": ca_location})
        elif listener == "OAUTH":
            config.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanisms": "OAUTHBEARER",
                    "enable.sasl.oauthbearer.unsecure.jwt": True,
                    "sasl.oauthbearer.config": f"principal={user}",
                }
            )
        return config


def start_secure(data_dir: Path, nodes: int = 1, timeout: float = 120.0) -> SecureCluster:
    """Start a secured cluster in ``data_dir`` (fresh: its data is wiped) with the ``admin`` SCRAM user."""
    if data_dir.exists():
        apache_kafka.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
    pki = make_pki(data_dir / "pki")
    bootstrap = apache_kafka.start(data_dir / "kafka", nodes=nodes, timeout=timeout, secured=secured(pki))
    cluster = SecureCluster(data_dir / "kafka", pki, bootstrap)
    deadline = time.monotonic() + 30
    while True:  # SCRAM credentials need the metadata to be loaded: retried briefly after a fresh start
        try:
            cluster.add_user(ADMIN, ADMIN_PASSWORD)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    return cluster


@contextlib.contextmanager
def secure_cluster(data_dir: Path, nodes: int = 1) -> Iterator[SecureCluster]:
    """Run a secured cluster for the duration of the block (stopped after)."""
    cluster = start_secure(data_dir, nodes)
    try:
        yield cluster
    finally:
        apache_kafka.stop(cluster.data_dir)


def grant(bootstrap: str, principal: str, *acls: tuple[str, str, str, str]) -> None:
    """Grant ``User:principal`` each ``(resource type, name, pattern type, operation)``, e.g.
    ``("TOPIC", "orders", "LITERAL", "READ")``, through the PLAINTEXT listener (super user)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        AclBinding(
            ResourceType[rtype],
            name,
            ResourcePatternType[pattern],
            f"User:{principal}",
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for rtype, name, pattern, operation in acls
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=30)


def attach(data_dir: Path, passwords: dict[str, str] | None = None) -> SecureCluster:
    """The :class:`SecureCluster` already running in ``data_dir`` (:func:`start_secure`'s folder)."""
    layout = apache_kafka.read_layout(data_dir / "kafka")
    if layout is None or not apache_kafka.pids(data_dir / "kafka"):
        raise SecuritySetupError(f"no secured cluster runs in {data_dir}")
    bootstrap = apache_kafka.bootstrap_of(apache_kafka.nodes_of(layout))
    return SecureCluster(
        data_dir / "kafka", Pki(data_dir / "pki"), bootstrap, {ADMIN: ADMIN_PASSWORD, **(passwords or {})}
    )


#: The marker of the README's block of ``kafka-acls`` commands (what :func:`readme_acls` reads).
README_ACLS_MARKER = "<!-- kstate-acls: the test parses this block -->"
_RESOURCE_FLAGS = {"--topic": "TOPIC", "--group": "GROUP", "--transactional-id": "TRANSACTIONAL_ID"}


def readme_acls(text: str, **names: str) -> list[tuple[str, str, str, str, str]]:
    """The ACLs of the README's ``kafka-acls`` block as ``(principal, resource type, name, pattern type,
    operation)``; ``names`` renames resources and principals (``orders="t-123"``, ``kstate="alice"``)."""
    import re
    import shlex

    block = text.split(README_ACLS_MARKER, 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in commands.splitlines():
        line = line.strip()
        if not line.startswith("kafka-acls"):
            continue
        args = shlex.split(line)
        principal = resource = name = ""
        pattern = "LITERAL"
        operations: list[str] = []
        for flag, value in zip(args, args[1:], strict=False):
            if flag == "--allow-principal":
                principal = value.split(":", 1)[1]
            elif flag == "--operation":
                operations.append(re.sub(r"(?<!^)(?=[A-Z])", "_", value).upper())
            elif flag in _RESOURCE_FLAGS:
                resource, name = _RESOURCE_FLAGS[flag], value
            elif flag == "--resource-pattern-type":
                pattern = value.upper()
        if "--cluster" in args:
            resource, name = "BROKER", "kafka-cluster"
        principal = names.get(principal, principal)
        name = names.get(name, name)
        out += [(principal, resource, name, pattern, op) for op in operations]
    return out


def kafkajs_security(config: dict[str, Any]) -> dict[str, Any]:
    """The ``security`` of the Node.js test apps (``clients/node/test/apps/common.js``) for librdkafka
    settings ``config``: the CA, the client certificate and key (paths), SASL/SCRAM credentials, or the
    principal of an unsecured OAUTHBEARER token."""
    out: dict[str, Any] = {}
    if config.get("ssl.ca.location"):
        out["ca"] = config["ssl.ca.location"]
    if config.get("ssl.certificate.location"):
        out["cert"], out["key"] = config["ssl.certificate.location"], config["ssl.key.location"]
    mechanism = str(config.get("sasl.mechanisms") or config.get("sasl.mechanism") or "")
    if mechanism == "OAUTHBEARER":
        # librdkafka's unsecured token ("principal=NAME" in sasl.oauthbearer.config): the apps make the same
        # unsecured JWS for KafkaJS's oauthBearerProvider
        if not config.get("enable.sasl.oauthbearer.unsecure.jwt"):
            raise SecuritySetupError("the Node.js test apps take OAUTHBEARER with unsecured tokens only")
        extras = dict(
            part.split("=", 1)
            for part in str(config.get("sasl.oauthbearer.config", "")).split()
            if "=" in part
        )
        out["sasl"] = {"mechanism": "oauthbearer", "principal": extras.get("principal", ADMIN)}
    elif mechanism:
        if not mechanism.startswith("SCRAM-") and mechanism != "PLAIN":
            raise SecuritySetupError(
                f"the Node.js test apps take SASL PLAIN, SCRAM or OAUTHBEARER (unsecured), not {mechanism}"
            )
        out["sasl"] = {
            "mechanism": mechanism.lower(),
            "username": config["sasl.username"],
            "password": config["sasl.password"],
        }
    return out
