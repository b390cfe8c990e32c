"""Unit tests of the Spark Kafka source reader's pure parts: the Java client options, the reader choice, the
per-partition fold of Arrow batches (the same result as the confluent-kafka fold), and the example pipeline's
reduction across a key-order barrier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kstate_support import load_file

from airflow_provider_kstate.spark_apps import changelog, kafka_source
from airflow_provider_kstate.spark_apps.kafka_source import Untranslatable, choose_reader, java_options

ROOT = Path(__file__).resolve().parents[3]


def test_plaintext_settings_translate_and_tuning_is_dropped() -> None:
    opts = java_options({"bootstrap.servers": "b:9092", "log_level": 3, "client.id": "x"})
    assert opts == {"kafka.bootstrap.servers": "b:9092", "kafka.client.id": "x"}


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [("PLAIN", "plain.PlainLoginModule"), ("SCRAM-SHA-512", "scram.ScramLoginModule")],
)
def test_sasl_becomes_a_jaas_config_with_quoted_secrets(mechanism: str, module: str) -> None:
    cfg = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mechanism,
        "sasl.username": "u",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/ca.pem",
    }
    opts = java_options(cfg)
    assert opts["kafka.sasl.mechanism"] == mechanism
    assert opts["kafka.ssl.truststore.location"] == "/ca.pem" and opts["kafka.ssl.truststore.type"] == "PEM"
    jaas = opts["kafka.sasl.jaas.config"]
    assert jaas.startswith(f"org.apache.kafka.common.security.{module} required ")
    assert 'password="p\\"w";' in jaas


def test_what_does_not_translate_is_refused_by_name() -> None:
    with pytest.raises(Untranslatable, match="oauth_cb"):
        java_options({"bootstrap.servers": "b", "oauth_cb": "m:f"})
    with pytest.raises(Untranslatable, match="GSSAPI"):
        java_options({"bootstrap.servers": "b", "sasl.mechanism": "GSSAPI", "sasl.username": "u"})


class FakeSpark:
    """A session whose JVM has the connector or not."""

    version = "4.2.0"

    def __init__(self, present: bool) -> None:
        self.present = present
        self.sparkContext = self

    @property
    def _jvm(self) -> Any:
        return self

    @property
    def org(self) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        return self

    def classForName(self, name: str, *_: Any) -> str:
        if not self.present:
            raise RuntimeError(f"ClassNotFoundException: {name}")
        return name


def test_confluent_is_the_default_and_spark_needs_the_connector_and_a_translatable_config() -> None:
    cfg = {"bootstrap.servers": "b"}
    assert kafka_source.DEFAULT_READER == "confluent"
    assert choose_reader(FakeSpark(True), "confluent", cfg) == ("confluent", "the default")  # type: ignore[arg-type]
    assert choose_reader(FakeSpark(True), "spark", cfg) == ("spark", "requested")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="spark-sql-kafka-0-10_2.13:4.2.0.* not on the classpath"):
        choose_reader(FakeSpark(False), "spark", cfg)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="oauth_cb"):
        choose_reader(FakeSpark(True), "spark", {**cfg, "oauth_cb": "m:f"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be one of"):
        choose_reader(FakeSpark(True), "auto", cfg)  # type: ignore[arg-type]


def test_offsets_json_is_what_the_source_takes() -> None:
    assert json.loads(kafka_source.offsets_json("t", {1: 5, 0: 2})) == {"t": {"0": 2, "1": 5}}


class Acc:
    def __init__(self) -> None:
        self.value: dict[int, Any] = {}

    def add(self, item: dict[int, Any]) -> None:
        self.value.update(item)


def arrow(rows: list[tuple[int, bytes | None, bytes | None, int]]) -> pa.RecordBatch:
    cols = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [pa.array(cols[0], pa.int32()), pa.array(cols[1], pa.binary()), pa.array(cols[2], pa.binary()),
         pa.array(cols[3], pa.int64())],
        names=["partition", "key", "value", "offset"],
    )  # fmt: skip


def test_the_arrow_fold_keeps_the_latest_per_key_tombstones_and_counts() -> None:
    ctx = changelog.ReadContext({}, "t", [0, 1], {0: (0, 10), 1: (0, 10)}, 2, full=True, reader="spark")
    ctx.accumulators["sources"] = Acc()
    batches = [
        arrow([(0, b"a", b"1", 0), (0, b"b", b"1", 1), (0, None, b"x", 2)]),
        arrow([(0, b"a", None, 4), (1, b"c", b"9", 7)]),  # a tombstone; a second partition in one batch
        arrow([(0, b"b", b"2", 8)]),
    ]
    out = pa.Table.from_batches(list(changelog._spark_source_task(iter(batches), ctx))).to_pylist()
    got = {(r["source"], r["key"]): (r["value"], r["offset"]) for r in out}
    assert got == {(0, b"a"): (None, 4), (0, b"b"): (b"2", 8), (1, b"c"): (b"9", 7)}
    assert ctx.accumulators["sources"].value[0][:2] == (4, 1)  # 4 keyed records, 1 keyless
    assert ctx.accumulators["sources"].value[1][:2] == (1, 0)


def pipeline() -> Any:
    return load_file(ROOT / "dags" / "pipelines" / "running_totals.py", "running_totals")


def test_changes_across_the_barrier_compose_in_order() -> None:
    rt = pipeline()
    rows = [  # account a moved from partition 0 to 5: closed, then reopened with deposits
        {"partition": 0, "offset": 3, "key": b"a", "value": b"10"},
        {"partition": 0, "offset": 4, "key": b"a", "value": b"CLOSE"},
        {"partition": 0, "offset": 9, "key": b"b", "value": b"7"},  # past the barrier, not moved
        {"partition": 0, "offset": 10, "key": b"x", "value": b"junk"},
    ]
    new = [{"partition": 5, "offset": 0, "key": b"a", "value": b"4"}]
    barrier = {0: 5}
    collected = list(rt.reduce_partition(iter(rows), barrier)) + list(rt.reduce_partition(iter(new), barrier))
    changes, bad, events = rt.combine(collected, ordered=True)
    assert (bad, events) == (1, 4)
    assert rt.apply(100, changes[b"a"]) == 4 and rt.apply(1, changes[b"b"]) == 8
    unordered, _, _ = rt.combine(list(reversed(collected)), ordered=False)  # no barrier: the order is lost
    assert rt.apply(100, unordered[b"a"]) is None


def test_compose_is_the_fold_of_the_concatenated_events() -> None:
    rt = pipeline()
    seqs = [[b"5", b"CLOSE"], [b"3"], [b"CLOSE"], [b"-2", b"4"], []]
    for first in seqs:
        for then in seqs:
            whole = rt.reduce_events([(b"k", v) for v in first + then]).get(b"k", (False, 0, False))
            a = rt.reduce_events([(b"k", v) for v in first]).get(b"k", (False, 0, False))
            b = rt.reduce_events([(b"k", v) for v in then]).get(b"k", (False, 0, False))
            assert rt.apply(50, rt.compose(a, b)) == rt.apply(50, whole), (first, then)
