"""Changelog reads through Spark's own Kafka source (``spark-sql-kafka-0-10``), the other reader beside
confluent-kafka ``assign()`` (:mod:`.kafka_io`).

* :func:`java_options` - the ``kafka.*`` options of the Java client from the connection's librdkafka
  settings (plaintext, SSL with PEM files, mutual TLS, SASL PLAIN/SCRAM, unsecured OAUTHBEARER);
  :class:`Untranslatable` for anything else.
* :func:`connector_present` - whether the session has the connector (``--packages`` or ``--jars``).
* :func:`choose_reader` - the reader of ``--changelog-reader confluent|spark``: ``confluent`` by default, the
  faster where both run (``bench/bench_changelog_reader.py``: Spark's source reached 0.51x to 0.77x of its
  records/s for the rebuild and the deep check at 100k to 1.6M records, ``bench/results/changelog_reader.json``).
* :func:`range_frame` - a batch read (``spark.read.format("kafka")``) of per-partition offset ranges with
  ``startingOffsets``/``endingOffsets`` JSON, ``read_committed``, one Spark task per Kafka partition.

The reads see what a confluent-kafka read_committed read sees: aborted transactional records and control
markers are skipped (offsets are not contiguous), compacted-away offsets are gaps, a tombstone's value is
null. ``failOnDataLoss`` stays true: a range starting below the log start fails the read.

No Airflow import here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The readers of ``--changelog-reader``; the first is the default (the faster, measured side by side).
READERS = ("confluent", "spark")
DEFAULT_READER = READERS[0]
PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: Maven coordinate of the connector for a Spark version (Scala 2.13 builds: Spark 4).
PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"

#: librdkafka settings that are the same in the Java client.
_SAME = ("bootstrap.servers", "security.protocol", "client.id", "request.timeout.ms")
#: librdkafka settings with another name in the Java client (PEM files are read by the Java client too).
_RENAMED = {
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.mechanism": "sasl.mechanism",
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
#: librdkafka-only tuning and logging settings: no meaning for the read's semantics, dropped.
_IGNORED = (
    "log_level",
    "debug",
    "socket.keepalive.enable",
    "broker.address.family",
    "topic.metadata.refresh.interval.ms",
    "api.version.request",
    "statistics.interval.ms",
)
_SCRAM = {"SCRAM-SHA-256", "SCRAM-SHA-512"}
#: librdkafka settings translated below (not one to one): SASL credentials, the client certificate (mutual
#: TLS: PEM files, given to the Java client inline) and unsecured OAUTHBEARER tokens.
_TRANSLATED = (
    "sasl.username",
    "sasl.password",
    "ssl.certificate.location",
    "ssl.key.location",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
)


class Untranslatable(ValueError):
    """A connection setting has no Java client equivalent here (the read falls back to confluent-kafka)."""


def java_options(kafka_config: Mapping[str, Any]) -> dict[str, str]:
    """Return the Kafka source's ``kafka.*`` options for the connection's librdkafka settings.

    :param kafka_config: librdkafka settings (never logged: the SASL password goes into ``sasl.jaas.config``).
    :raises Untranslatable: naming the settings that have no translation (an OAuth callback, Kerberos ...).
    """
    out: dict[str, str] = {}
    unknown = []
    for key, value in kafka_config.items():
        if key in _SAME:
            out[key] = str(value)
        elif key in _RENAMED:
            out[_RENAMED[key]] = str(value)
        elif key not in _IGNORED and key not in _TRANSLATED:
            unknown.append(key)
    if unknown:
        raise Untranslatable(f"no Java client setting for {sorted(unknown)}")
    if "ssl.truststore.location" in out:
        out["ssl.truststore.type"] = "PEM"
    out.update(_client_certificate(kafka_config))
    jaas = _sasl_jaas(out.get("sasl.mechanism", ""), kafka_config)
    if jaas:
        out["sasl.jaas.config"] = jaas
    return {f"kafka.{k}": v for k, v in out.items()}


def _sasl_jaas(mechanism: str, kafka_config: Mapping[str, Any]) -> str:
    """The Java client's ``sasl.jaas.config`` (holds the password: never logged); "" without SASL."""
    if mechanism == "OAUTHBEARER":
        return _unsecured_oauth(kafka_config)
    if "sasl.username" not in kafka_config:
        return ""
    module = {"PLAIN": "plain.PlainLoginModule"}.get(mechanism)
    if module is None and mechanism in _SCRAM:
        module = "scram.ScramLoginModule"
    if module is None:
        raise Untranslatable(f"sasl.username with sasl.mechanism={mechanism or '<none>'}")
    user = json.dumps(str(kafka_config["sasl.username"]))
    password = json.dumps(str(kafka_config.get("sasl.password", "")))
    return f"org.apache.kafka.common.security.{module} required username={user} password={password};"


def _client_certificate(kafka_config: Mapping[str, Any]) -> dict[str, str]:
    """The Java client's PEM key store of a mutual-TLS connection: librdkafka's certificate and key files,
    read here (the driver) and given inline, so every executor's consumer has them without the files."""
    cert, key = kafka_config.get("ssl.certificate.location"), kafka_config.get("ssl.key.location")
    if not cert and not key:
        return {}
    if not (cert and key):
        raise Untranslatable("ssl.certificate.location and ssl.key.location go together")
    if kafka_config.get("ssl.key.password"):
        raise Untranslatable("an encrypted ssl.key.location")
    with open(str(cert), encoding="ascii") as chain, open(str(key), encoding="ascii") as private:
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": chain.read(),
            "ssl.keystore.key": private.read(),
        }


def _unsecured_oauth(kafka_config: Mapping[str, Any]) -> str:
    """The Java client's JAAS line for librdkafka's unsecured OAUTHBEARER token (``principal=...``); a
    token from an identity provider or a callback has no translation here."""
    if str(kafka_config.get("enable.sasl.oauthbearer.unsecure.jwt", "")).lower() != "true":
        raise Untranslatable("sasl.mechanism=OAUTHBEARER without enable.sasl.oauthbearer.unsecure.jwt")
    fields = dict(
        part.split("=", 1)
        for part in str(kafka_config.get("sasl.oauthbearer.config", "")).split()
        if "=" in part
    )
    principal = fields.pop("principal", "")
    if not principal or fields:
        raise Untranslatable("sasl.oauthbearer.config other than principal=<name>")
    return (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f"unsecuredLoginStringClaim_sub={json.dumps(principal)};"
    )


def connector_present(spark: SparkSession) -> bool:
    """Whether the session's classpath has Spark's Kafka source (``--packages`` or ``--jars``)."""
    try:
        spark.sparkContext._jvm.org.apache.spark.util.Utils.classForName(  # type: ignore[union-attr]
            PROVIDER_CLASS, True, False
        )
    except Exception:  # noqa: BLE001 - Py4JJavaError (ClassNotFoundException) or no JVM access
        return False
    return True


def choose_reader(spark: SparkSession, requested: str, kafka_config: Mapping[str, Any]) -> tuple[str, str]:
    """Return the reader to use (``confluent`` or ``spark``) and why.

    :param spark: the session.
    :param requested: ``confluent`` or ``spark``.
    :param kafka_config: the connection's librdkafka settings.
    :raises ValueError: an unknown reader, or ``spark`` without the connector or with settings that do not
        translate to the Java client.
    """
    if requested not in READERS:
        raise ValueError(f"--changelog-reader must be one of {READERS}, not {requested!r}")
    if requested == "confluent":
        return "confluent", "the default" if requested == DEFAULT_READER else "requested"
    if not connector_present(spark):
        package = PACKAGE.format(version=spark.version)
        raise ValueError(
            f"--changelog-reader spark: Spark's Kafka source ({package}) is not on the classpath"
        )
    try:
        java_options(kafka_config)
    except Untranslatable as exc:
        raise ValueError(f"--changelog-reader spark: {exc}") from exc
    return "spark", "requested"


def offsets_json(topic: str, bounds: Mapping[int, int]) -> str:
    """Return ``{"topic": {"partition": offset}}``, the JSON of ``startingOffsets``/``endingOffsets``."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(bounds.items())}})


def range_frame(
    spark: SparkSession,
    kafka_config: Mapping[str, Any],
    topic: str,
    ranges: Mapping[int, tuple[int, int]],
) -> DataFrame:
    """Return ``partition int, key binary, value binary, offset long`` of every record in ``ranges``.

    Only the non-empty ranges are read (the source needs at least one); the caller handles the others.
    One Spark task per Kafka partition (no ``minPartitions``), its records in offset order.

    :param spark: the session (with the connector).
    :param kafka_config: librdkafka settings, translated by :func:`java_options`.
    :param topic: the topic.
    :param ranges: ``{partition: (start, end)}``, end exclusive.
    """
    todo = {p: r for p, r in ranges.items() if r[0] < r[1]}
    reader = spark.read.format("kafka").options(**java_options(kafka_config))
    return (
        reader.option("kafka.isolation.level", "read_committed")
        .option("assign", json.dumps({topic: sorted(todo)}))
        .option("startingOffsets", offsets_json(topic, {p: lo for p, (lo, _) in todo.items()}))
        .option("endingOffsets", offsets_json(topic, {p: hi for p, (_, hi) in todo.items()}))
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "false")
        .load()
        .select("partition", "key", "value", "offset")
    )


def add_reader_argument(parser: Any) -> None:
    """Add ``--changelog-reader confluent|spark`` to an application's parser (default ``confluent``)."""
    parser.add_argument(
        "--changelog-reader",
        choices=READERS,
        default=DEFAULT_READER,
        help="how the changelog is read: confluent-kafka assign() in the tasks (confluent, the default: the "
        "faster) or Spark's own Kafka source (spark: needs spark-sql-kafka-0-10); the same results either way",
    )


def resolve_reader(spark: SparkSession, args: Any, kafka_config: Mapping[str, Any], say: Any) -> str:
    """Return the reader of ``args.changelog_reader`` for this session and say which, and why, with ``say``.

    :raises ValueError: see :func:`choose_reader`.
    """
    reader, why = choose_reader(spark, str(getattr(args, "changelog_reader", DEFAULT_READER)), kafka_config)
    say(f"changelog reader: {reader} ({why})")
    return reader
