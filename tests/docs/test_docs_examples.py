"""The documentation's examples run: every file under ``docs/examples/`` that a page includes is executed or
checked against the code here, so no example in the site can rot.

* the Python snippets build their DAGs (the task groups and the tasks they promise) or, for the client
  piece, consume a record from the real broker;
* the YAML of the metrics guide maps every metric the provider sends and alerts on mapped names only;
* the shell snippets: every ``airflow dags test`` conf names only params of its DAG, the ``kstate_drivers``
  Variable parses into drivers, the REST calls are routes of Airflow's own API, the connections' extras
  are librdkafka settings the hooks accept, the install commands name real extras.
"""

from __future__ import annotations

import configparser
import json
import re
import runpy
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


def snippet(name: str, marker: str) -> str:
    """The text between ``[START marker]`` and ``[END marker]`` of ``docs/examples/name``."""
    text = (EXAMPLES / name).read_text()
    body = text.split(f"[START {marker}]", 1)[1].split(f"[END {marker}]", 1)[0]
    return body.split("\n", 1)[1].rsplit("\n", 1)[0]


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a shell snippet (comments dropped, continuation lines joined), each split by shlex."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out, current = [], ""
    for line in joined.splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        current = f"{current}\n{line}" if current else line
        try:
            out.append(shlex.split(current, comments=True))
            current = ""
        except ValueError:  # a quoted value spans lines
            continue
    assert not current, f"unterminated command: {current}"
    return [c for c in out if c]


def _tasks(dag: Any) -> set[str]:
    return {t.task_id for t in dag.tasks}


def test_the_factory_examples_build_the_safe_increase() -> None:
    ns = runpy.run_path(str(EXAMPLES / "factory.py"))
    for dag in (ns["dag"], ns["dag2"]):
        tasks = _tasks(dag)
        assert {"safe_partition_increase.plan", "safe_partition_increase.verify"} <= tasks, tasks
        assert "safe_partition_increase.pause_window" in tasks, tasks
    plan = ns["dag"].get_task("safe_partition_increase.plan")
    assert list(plan.consumer_groups) == ["billing"]
    staying = ns["dag3"].get_task("safe_partition_increase.plan")
    assert (staying.consumers_stay, staying.committing_groups) == ("auto", ["billing-java"])
    window = ns["dag3"].get_task("safe_partition_increase.pause_window")
    assert window.positions_timeout == 330.0


def test_the_approval_example_adds_the_approval_step() -> None:
    dag = runpy.run_path(str(EXAMPLES / "approval.py"))["dag"]
    assert "safe_partition_increase.approve_plan" in _tasks(dag)


def test_the_topic_set_example_plans_both_topics() -> None:
    dag = runpy.run_path(str(EXAMPLES / "topic_sets.py"))["dag"]
    plan = dag.get_task("safe_partition_increase.plan")
    assert [plan.topic, *plan.topics] == ["orders", "payments"] or list(plan.topics) == ["orders", "payments"]


def test_the_drivers_example_names_its_command_pairs() -> None:
    ns = runpy.run_path(str(EXAMPLES / "drivers.py"))
    assert ns["billing"].stop.startswith("kubectl -n shop scale deploy/billing --replicas=0")
    assert ns["feeder"].ready == "systemctl is-active --quiet feeder"
    plan = ns["dag"].get_task("safe_partition_increase.plan")
    assert "billing" in plan.group_drivers


def test_the_assets_example_schedules_on_the_provider_assets() -> None:
    from airflow_provider_kstate.assets import snapshot_asset, topic_asset

    ns = runpy.run_path(str(EXAMPLES / "assets.py"))
    assert snapshot_asset("/data/snapshots/totals").uri.endswith("/data/snapshots/totals")
    assert topic_asset("broker-1:9092", "orders").uri == "kafka://broker-1:9092/orders"
    assert {"DAG", "snapshot_asset", "topic_asset"} <= set(ns)


@pytest.mark.integration
def test_the_client_piece_example_consumes_from_the_real_broker(
    bootstrap: str, make_topic: Callable[..., str], unique: Callable[[str], str]
) -> None:
    serve = runpy.run_path(str(EXAMPLES / "client_piece.py"))["serve"]
    topic, group = make_topic("docs-client", partitions=2), unique("docs-billing")
    got: list[Any] = []
    gave_up = threading.Event()
    timer = threading.Timer(120, gave_up.set)  # a bound on the loop, not an assertion on time
    timer.start()
    try:
        serve(bootstrap, got.append, lambda: bool(got) or gave_up.is_set(), topic=topic, group=group)
    finally:
        timer.cancel()
    assert got and got[0].topic() == topic and got[0].key() == b"acct-42"


def test_the_statsd_mapping_maps_every_metric_and_the_alerts_use_it() -> None:
    import yaml

    from airflow_provider_kstate import metrics

    mapping = yaml.safe_load((EXAMPLES / "kstate-mapping.yml").read_text())["mappings"]
    globs = [m for m in mapping if m.get("match_type") != "regex"]
    for metric in metrics.METRICS:
        # the name with its ids, as StatsD gets it under Airflow's default prefix
        legacy = "airflow." + metric.name + "".join(".x" for _ in metric.tags)
        matched = [
            m for m in globs if re.fullmatch(m["match"].replace(".", r"\.").replace("*", "[^.]+"), legacy)
        ]
        assert matched, f"no mapping for {legacy}"
    names = {m["name"] for m in globs}
    rules = yaml.safe_load((EXAMPLES / "kstate-alerts.yml").read_text())["groups"][0]["rules"]
    for rule in rules:
        used = set(re.findall(r"\b(kstate_[a-z_]+)\b", rule["expr"]))
        assert used and used <= names, (rule["alert"], used - names)


def _dag_params(dag_id: str) -> set[str]:
    """The params of the example DAG ``dag_id`` (the file builds its DAGs in a loop: the last one stays
    bound to ``_params()``, whose keys are every DAG's of the file)."""
    ns = runpy.run_path(str(ROOT / "dags" / f"{dag_id}.py"))
    return set(ns["_params"]())


def test_the_dags_test_commands_name_only_params_of_their_dag() -> None:
    text = (EXAMPLES / "commands.sh").read_text()
    commands = [c for c in shell_commands(text) if c[:3] == ["airflow", "dags", "test"]]
    assert len(commands) == 3
    params = _dag_params("kstate_partition_increase")
    for command in commands:
        assert command[3] == "kstate_partition_increase"
        conf = json.loads(command[command.index("-c") + 1])
        assert set(conf) <= params, set(conf) - params


def test_the_kstate_drivers_variable_parses_into_drivers() -> None:
    from airflow_provider_kstate.increase.drivers import CommandDriver, as_registry

    (command,) = [
        c
        for c in shell_commands(snippet("commands.sh", "kstate_drivers"))
        if c[:2] == ["airflow", "variables"]
    ]
    assert command[2:4] == ["set", "kstate_drivers"]
    registry = as_registry(json.loads(command[4]))
    assert set(registry) == {"billing-k8s", "feeder"}
    assert all(isinstance(d, CommandDriver) for d in registry.values())


def test_the_approval_calls_are_routes_of_airflow_rest_api() -> None:
    import airflow.api_fastapi.core_api.openapi as openapi
    import yaml

    spec = yaml.safe_load((Path(openapi.__file__).parent / "v2-rest-api-generated.yaml").read_text())
    routes = {path: set(ops) for path, ops in spec["paths"].items()}
    calls = [c for c in shell_commands(snippet("commands.sh", "approval_api")) if c[0] == "curl"]
    assert len(calls) == 2
    for call in calls:
        method = call[call.index("-X") + 1].lower() if "-X" in call else "get"
        url = next(a for a in call if a.startswith("$AIRFLOW/"))
        path = url.removeprefix("$AIRFLOW")
        pattern = [
            r
            for r, ops in routes.items()
            if method in ops and re.fullmatch(re.sub(r"\\{[^}]+\\}|\{[^}]+\}", "[^/]+", r), path)
        ]
        assert pattern, f"{method.upper()} {path} is not a route of Airflow's REST API"


def test_the_connection_extras_are_what_the_hooks_accept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``airflow connections add`` of the connection page: a ``kafka`` connection whose extra the
    provider's hooks read back as is, made only of settings librdkafka knows (a client is built from them;
    the file paths are left out, they name files of the reader's machine)."""
    from confluent_kafka import Producer

    from airflow_provider_kstate.hooks.kafka_config import connection_config

    text = (EXAMPLES / "connections.sh").read_text()
    commands = [c for c in shell_commands(text) if c[:3] == ["airflow", "connections", "add"]]
    assert len(commands) == 4
    for i, command in enumerate(commands):
        assert command[3] == "kafka_default" and command[command.index("--conn-type") + 1] == "kafka"
        extra = json.loads(command[command.index("--conn-extra") + 1])
        monkeypatch.setenv(
            f"AIRFLOW_CONN_KSTATE_DOCS_{i}", json.dumps({"conn_type": "kafka", "extra": extra})
        )
        assert connection_config(f"kstate_docs_{i}") == extra
        settings = {k: v for k, v in extra.items() if not k.endswith(".location")}
        Producer({**settings, "security.protocol": "PLAINTEXT"}).flush(0)  # unknown names raise here


def test_the_install_commands_name_real_extras() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = set(cfg["options.extras_require"])
    text = snippet("install.sh", "install")
    named = set(re.findall(r"\.\[([a-z-]+)\]", text))
    assert named and named <= extras, named - extras
    assert "python -m build --wheel" in text


def test_the_control_records_of_the_protocol_validate_against_their_schemas() -> None:
    import jsonschema

    decoder = json.JSONDecoder()
    for kind in ("command", "layout", "ack"):
        text, records = (EXAMPLES / "control" / f"{kind}.json").read_text().strip(), []
        while text:  # one record or several, one after the other
            record, end = decoder.raw_decode(text)
            records.append(record)
            text = text[end:].strip()
        schema = json.loads((ROOT / "docs" / "schemas" / "control" / f"{kind}.schema.json").read_text())
        for record in records:
            jsonschema.validate(record, schema)
            assert record["kind"] == kind


@pytest.mark.integration
def test_the_adoption_example_enriches_from_the_real_broker(
    kafka_config: dict[str, Any], make_topic: Callable[..., str], unique: Callable[[str], str]
) -> None:
    from confluent_kafka import Consumer, Producer

    enrich_forever = runpy.run_path(str(EXAMPLES / "adoption.py"))["enrich_forever"]
    orders, enriched = make_topic("docs-orders", partitions=1), make_topic("docs-enriched", partitions=1)
    producer = Producer(kafka_config)
    producer.produce(orders, key=b"acct-7", value=b"42")
    assert producer.flush(30) == 0
    reader = Consumer({**kafka_config, "group.id": unique("docs-reader"), "auto.offset.reset": "earliest"})
    reader.subscribe([enriched])
    got: list[Any] = []

    def running() -> bool:  # the service's loop, until its first enriched record is readable
        msg = reader.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg)
        return not got

    try:
        enrich_forever(kafka_config, lambda v: v + b"!", running, orders, enriched, unique("docs-svc"))
    finally:
        reader.close()
    assert (got[0].key(), got[0].value()) == (b"acct-7", b"42!")


def test_the_cluster_operators_example_builds_both_tasks() -> None:
    dag = runpy.run_path(str(EXAMPLES / "spark_cluster.py"))["dag"]
    rebuild, deep = dag.get_task("rebuild"), dag.get_task("deep_check")
    assert rebuild.snapshot_uri == "hdfs:///stores/orders-totals" and rebuild.deploy_mode == "cluster"
    assert deep.snapshot_uri == "s3a://stores/orders-totals" and deep.spark_conn_id == "spark_k8s"


def test_the_pack_commands_run(tmp_path: Path) -> None:
    import subprocess
    import sys
    import zipfile

    commands = [c for c in shell_commands(snippet("spark_env.sh", "pack")) if c[:2] == ["python", "-m"]]
    assert [c[2:4] for c in commands] == [
        ["airflow_provider_kstate.store.pack", "env"],
        ["airflow_provider_kstate.store.pack", "zip"],
    ]
    zip_cmd = [sys.executable, *commands[1][1:-1], str(tmp_path)]
    subprocess.run(zip_cmd, check=True, capture_output=True, cwd=tmp_path)
    (archive,) = tmp_path.glob("*.zip")
    assert "airflow_provider_kstate/spark_apps/rebuild.py" in zipfile.ZipFile(archive).namelist()
    env_help = subprocess.run(
        [sys.executable, "-m", "airflow_provider_kstate.store.pack", "env", "--help"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "--python" in env_help


def test_the_rollback_rewrites_the_pointer(tmp_path: Path) -> None:
    import subprocess
    import sys

    from airflow_provider_kstate.store import layout

    for version in ("v-20261122T020000-77b0e2", "v-20261123T031640-3f9a1c"):
        (tmp_path / version).mkdir()
    script = snippet("rollback.sh", "rollback").replace("/data/snapshots/totals", str(tmp_path))
    python_dir = str(Path(sys.executable).parent)
    out = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        env={"PATH": f"{python_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "v-20261123T031640-3f9a1c" in out.stdout
    pointer = json.loads((tmp_path / "_kstate_current.json").read_text())
    assert pointer["version"] == "v-20261122T020000-77b0e2"
    # the same bytes as the provider's own writer, but for the second it was written in (a run that crossed a
    # second between the script and this line failed the fresh-clone CI once)
    expected = layout.pointer_bytes("v-20261122T020000-77b0e2").decode()
    written = f'"written_at": "{pointer["written_at"]}"'
    expected = re.sub(r'"written_at": "[^"]*"', lambda _m: written, expected)
    assert expected == (tmp_path / "_kstate_current.json").read_text()


def test_the_checkout_commands_name_real_targets_and_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    from kstate_support import broker

    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    text = (EXAMPLES / "checkout.sh").read_text()
    commands = shell_commands(text)
    makes = [c[c.index("make") + 1] for c in commands if "make" in c]
    assert makes == ["test", "deploy-local"] and set(makes) <= targets
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        broker, "up", lambda data_dir, nodes=1: calls.append(("up", (str(data_dir), nodes))) or "127.0.0.1:1"
    )
    monkeypatch.setattr(broker, "down", lambda data_dir: calls.append(("down", str(data_dir))))
    helper = [c for c in commands if "kstate_support.broker" in c]
    assert len(helper) == 5
    for command in helper:
        assert broker.main(command[command.index("kstate_support.broker") + 1 :]) == 0
    assert calls[1] == ("up", (".kstate/cluster", 3)) and calls[2] == ("down", ".kstate/cluster")
