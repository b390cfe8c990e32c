"""Every control record the Python side writes validates against ``docs/schemas/control/`` (JSON Schema
2020-12), and malformed values do not: the schemas are the contract a second implementation (the Node.js
client of ``clients/node``) reads and writes by. No broker: the records are captured at the channel."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
from airflow_provider_kstate.client_piece.producer import ControlledProducer
from airflow_provider_kstate.client_piece.protocol import (
    Ack,
    Barrier,
    Command,
    Layout,
    Record,
    Release,
    decode,
    encode,
)
from airflow_provider_kstate.hooks.control import KStateControlHook

SCHEMAS = Path(__file__).resolve().parents[3] / "docs" / "schemas" / "control"
KINDS = ("command", "layout", "ack", "barrier", "release")


def validator(kind: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


VALIDATORS = {kind: validator(kind) for kind in KINDS}


def problems(value: bytes | dict[str, Any]) -> list[str]:
    """The schema errors of a control value (its ``kind`` picks the schema); [] when it is valid."""
    doc = json.loads(value) if isinstance(value, bytes) else value
    kind = doc.get("kind")
    if kind not in VALIDATORS:
        return [f"unknown kind {kind!r}"]
    return [e.message for e in VALIDATORS[kind].iter_errors(doc)]


class Recorder:
    """Stands in for the ControlChannel: keeps what would be published."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def publish(self, *records: Record, timeout: float = 30.0, wait: bool = True) -> None:
        self.records.extend(records)


def test_every_kind_has_a_schema_with_id_title_and_version() -> None:
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(f"{k}.schema.json" for k in KINDS)
    for kind in KINDS:
        schema = VALIDATORS[kind].schema
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/{kind}.schema.json") and schema["title"]
        assert schema["properties"]["v"]["const"] == 1
        assert schema["properties"]["kind"]["const"] == kind
        assert schema["additionalProperties"] is True, "readers must ignore unknown fields"
        assert {"v", "kind", "epoch"} <= set(schema["required"])


def test_every_record_the_controller_hook_writes_validates() -> None:
    hook = KStateControlHook().get_conn  # the controller
    recorder = Recorder()
    hook._channel = recorder  # type: ignore[assignment]  # channel() returns it: no control topic needed
    hook.pause(["g1", "g2"], "orders", issuer="kstate/run-1")
    hook.resume(["g1"], "orders", issuer="kstate/run-1")
    hook.set_layout("orders", 4, issuer="kstate/run-1")
    hook.hold_producers("orders", 4, 30.0, issuer="kstate/run-1")
    hook.announce_barrier("orders", ["g1", "g2"], issuer="kstate/run-1")
    hook.set_barrier("orders", [10, 0, 7, 3], ["g1", "g2"], issuer="kstate/run-1")
    hook.release_group("orders", "g1", 1700000000000, issuer="kstate/run-1")
    kinds = [r.kind for r in recorder.records]
    assert kinds == ["command", "command", "command", "layout", "layout", "barrier", "barrier", "release"]
    for record in recorder.records:
        assert problems(encode(record)) == [], record


def test_every_ack_the_python_clients_write_validates() -> None:
    recorder = Recorder()
    consumer = SimpleNamespace(
        client_id="svc-0", group="g1", _epoch=1700000000001, _channel=recorder, _timeout=1.0
    )
    for state in ("running", "left", "paused"):
        ControlledConsumer._ack(consumer, state)  # type: ignore[arg-type]
    for state in ("pending", "barrier", "released"):
        ControlledConsumer._ack(consumer, state, 1700000000002, "orders")  # type: ignore[arg-type]
    consumer._epoch = 0  # the presence acknowledgement before any command
    ControlledConsumer._ack(consumer, "running")  # type: ignore[arg-type]
    producer = SimpleNamespace(client_id="api-0", _channel=recorder, _timeout=1.0)
    layout = Layout(topic="orders", partitions=4, epoch=1700000000003)
    for state in ("layout", "held"):
        ControlledProducer._ack(producer, layout, state)  # type: ignore[arg-type]
    assert [(r.key, r.state) for r in recorder.records] == [  # type: ignore[union-attr]
        ("ack/g1/svc-0", "running"),
        ("ack/g1/svc-0", "left"),
        ("ack/g1/svc-0", "paused"),
        ("ack-barrier/orders/g1/svc-0", "pending"),
        ("ack-barrier/orders/g1/svc-0", "barrier"),
        ("ack-barrier/orders/g1/svc-0", "released"),
        ("ack/g1/svc-0", "running"),
        ("ack-layout/orders/api-0", "layout"),
        ("ack-layout/orders/api-0", "held"),
    ]
    for record in recorder.records:
        assert problems(encode(record)) == [], record


@pytest.mark.parametrize(
    "record",
    [
        Command(group="g", command="pause", epoch=1),
        Layout(topic="t", partitions=1, epoch=0, hold=True, hold_until=5),
        Ack(client="c", epoch=0, state="running", group="g"),
        Barrier(topic="t", epoch=2, state="off"),
        Barrier(topic="t", epoch=2, state="pending", groups=["g"]),
        Release(topic="t", group="g", epoch=3),
    ],
)
def test_the_minimal_records_validate(record: Record) -> None:
    assert problems(encode(record)) == []


VALID = {
    "command": {"v": 1, "kind": "command", "group": "g", "command": "pause", "epoch": 5},
    "layout": {"v": 1, "kind": "layout", "topic": "t", "partitions": 2, "epoch": 5},
    "ack": {"v": 1, "kind": "ack", "client": "c", "epoch": 5, "state": "paused"},
    "barrier": {"v": 1, "kind": "barrier", "topic": "t", "epoch": 5},
    "release": {"v": 1, "kind": "release", "topic": "t", "group": "g", "epoch": 5},
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_required_fields_alone_validate_and_unknown_fields_are_allowed(kind: str) -> None:
    assert problems(VALID[kind]) == []
    assert problems({**VALID[kind], "added_by_a_newer_controller": {"x": 1}}) == []
    assert decode(json.dumps(VALID[kind]).encode()) is not None, "the Python reader accepts it too"
    for field in VALIDATORS[kind].schema["required"]:
        assert problems({k: v for k, v in VALID[kind].items() if k != field}), f"{kind} without {field}"


@pytest.mark.parametrize(
    ("kind", "change"),
    [
        ("command", {"v": 2}),
        ("command", {"command": "stop"}),
        ("command", {"epoch": "5"}),
        ("command", {"epoch": -1}),
        ("command", {"group": ""}),
        ("layout", {"partitions": 0}),
        ("layout", {"partitions": 2.5}),
        ("layout", {"hold": "yes"}),
        ("ack", {"state": "done"}),
        ("ack", {"client": ""}),
        ("ack", {"partitions": -1}),
        ("barrier", {"state": "closed"}),
        ("barrier", {"offsets": [1, -2]}),
        ("barrier", {"groups": "g"}),
        ("release", {"group": None}),
        ("release", {"kind": "ack"}),
    ],
)
def test_malformed_values_fail(kind: str, change: dict[str, Any]) -> None:
    doc = {**VALID[kind], **change}
    assert VALIDATORS[kind].is_valid(doc) is False, doc
