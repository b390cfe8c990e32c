"""The store domain package: URIs, the applications' contract, typed results, the provider zip."""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from kstate_support.airflow_env import python_without

from airflow_provider_kstate.store import contract, uri
from airflow_provider_kstate.store.pack import provider_zip
from airflow_provider_kstate.store.results import CHECK_FORMAT, CheckReport, PartitionResult, Side

PACKAGE = Path(__file__).resolve().parents[3] / "airflow_provider_kstate"


def oauth_token(config: str) -> tuple[str, float]:
    """A module-level OAUTHBEARER callback (travels by name)."""
    return "token", 0.0


def test_the_store_and_the_apps_import_neither_airflow_nor_spark_at_module_level() -> None:
    for folder in ("store", "spark_apps", "client_piece"):
        for file in (PACKAGE / folder).rglob("*.py"):
            tree = ast.parse(file.read_text())
            for node in tree.body:  # module level only: the apps import pyspark inside functions
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                assert not [n for n in names if n.split(".")[0] in ("airflow", "pyspark")], file
                assert not [
                    n
                    for n in names
                    if n.startswith(("airflow_provider_kstate.hooks", "airflow_provider_kstate.operators"))
                ], file


def test_uris() -> None:
    assert uri.local_path("/a/b") == Path("/a/b") and uri.local_path("file:///a/b") == Path("/a/b")
    assert uri.local_path("s3://bucket/x") is None and uri.is_local("rel/dir")
    assert uri.spark_path("file:///a/b/") == "file:///a/b" and uri.spark_path("s3a://b/x/") == "s3a://b/x"
    assert uri.uri_problem("") and "unsupported scheme 'ftp'" in (uri.uri_problem("ftp://h/x") or "")
    assert uri.uri_problem("gs://b/x") is None and uri.join("s3://b/x/", "m.json") == "s3://b/x/m.json"


def test_callbacks_travel_by_name_and_oidc_settings_as_strings() -> None:
    config: dict[str, Any] = {
        "bootstrap.servers": "b:9092",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.secret": "s",
        "oauth_cb": oauth_token,
        "error_cb": lambda err: None,
        "stats_cb": print,
    }
    portable = contract.portable_config(config)
    assert portable["oauth_cb"] == f"{__name__}:oauth_token"
    assert "error_cb" not in portable and "stats_cb" not in portable
    assert portable["sasl.oauthbearer.method"] == "oidc"
    live = contract.live_config(json.loads(json.dumps(portable)))
    assert live["oauth_cb"] is oauth_token
    with pytest.raises(contract.AppError, match="cannot import"):
        contract.live_config({"oauth_cb": "no.such.module:fn"})


def test_kafka_config_shipped_by_name_is_found_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kafka.json").write_text(json.dumps({"bootstrap.servers": "b:1"}))
    monkeypatch.chdir(tmp_path)
    assert contract.load_kafka_config("/elsewhere/on/the/worker/kafka.json") == {"bootstrap.servers": "b:1"}
    with pytest.raises(contract.AppError, match="cannot read"):
        contract.load_kafka_config("/nowhere/other.json")


def test_report_files_and_the_failed_partitions_field(tmp_path: Path) -> None:
    path = str(tmp_path / "r.json")
    assert contract.fail(path, "topic 'x' is not compacted", lambda line: None, "app") == 2
    assert contract.reported_error(path) == "topic 'x' is not compacted"
    contract.write_report(f"file://{tmp_path}/u.json", {"ok": True})
    assert contract.load_report(str(tmp_path / "u.json")) == {"ok": True}
    assert contract.failed_partitions({"failed_partitions": [3, 1]}) == [1, 3]  # listed without entries
    assert contract.failed_partitions({"bad_partitions": [3, 1]}) == []  # the unreleased old name is gone
    assert contract.failed_partitions({"partitions": {"0": {"ok": True}, "2": {"ok": False}}}) == [2]


def test_results_round_trip() -> None:
    res = PartitionResult(
        2, changelog=Side(3, "a" * 16), snapshot=Side(2, "b" * 16), manifest=Side(3, "a" * 16)
    )
    res.problems.append("differs")
    res.samples["missing"].append("b'k'")
    assert PartitionResult.from_dict(2, json.loads(json.dumps(res.to_dict()))).to_dict() == res.to_dict()
    doc = {
        "check": "deep",
        "topic": "t",
        "snapshot_uri": "/s",
        "ok": False,
        "problems": [],
        "partitions": {"0": {"ok": True, "problems": []}, "2": res.to_dict()},
        "records_read": 9,
    }
    report = CheckReport.read(json.loads(json.dumps(doc)))
    assert report.failed_partitions == [2] and report.extra == {"records_read": 9}
    assert report.to_dict() == {"format": CHECK_FORMAT, **doc, "failed_partitions": [2]}
    listed = CheckReport.read({"ok": False, "failed_partitions": [1], "topic": "t", "snapshot_uri": "/s"})
    assert listed.failed_partitions == [1]


def _emitted_before(doc: dict[str, Any], check: str) -> dict[str, Any]:
    """What the check operators pushed to XCom before they parsed reports into CheckReport (their code),
    with the report's version now first."""
    out = {"format": CHECK_FORMAT, **json.loads(json.dumps(doc))}
    out.setdefault("check", check)
    out.setdefault("topic", "t")
    out.setdefault("snapshot_uri", "/s")
    out[contract.FAILED_FIELD] = contract.failed_partitions(out)
    return out


def test_a_check_report_serializes_back_to_the_identical_xcom() -> None:
    """The XCom is unchanged: a report document parsed into a CheckReport and serialized again is the same
    JSON, byte for byte (field order, partition order, failed-partition fields), for a fast check's report,
    the deep check application's (good, bad, unusable) and one listing failed partitions without entries."""
    bad = PartitionResult(
        10, changelog=Side(3, "a" * 16), snapshot=Side(2, "b" * 16), manifest=Side(3, "a" * 16)
    )
    bad.problems.append("row differences: 1 missing")
    bad.samples["missing"].append("b'k'")
    fast = {
        "check": "fast",
        "topic": "t",
        "snapshot_uri": "/s",
        "topic_partitions": 11,
        "snapshot_partitions": 11,
        "snapshot_ok": True,
        "snapshot_missing": False,
        "layout_ok": True,
        "problems": [],
        "partitions": {
            str(p): {"ok": p != 10, "problems": [] if p != 10 else ["covers up to 9"], "end_offset": p}
            for p in range(11)
        },
        "written_at": None,
        "snapshot_version": "v-0001",
        "data_files": 11,
        "failed_partitions": [10],
        "ok": False,
        "seconds": 0.012,
    }
    deep = {  # the application's order: partitions in the manifest's order, not sorted as strings
        "ok": False,
        "topic": "t",
        "snapshot_uri": "/s",
        "snapshot_version": "v-0001",
        "layout": 11,
        "records_read": 9,
        "failed_partitions": [10],
        "problems": [],
        "partitions": {
            "2": PartitionResult(2).to_dict(),
            "10": bad.to_dict(),
            "1": PartitionResult(1).to_dict(),
        },
        "warnings": [],
        "seconds": 1.5,
    }
    unusable = {
        **deep,
        "snapshot_ok": False,
        "failed_partitions": [],
        "problems": ["unusable"],
        "partitions": {},
    }
    listed = {"ok": False, "failed_partitions": [3, 1], "topic": "t", "snapshot_uri": "/s"}
    no_problems = {"ok": True, "records_read": 0, "partitions": {"0": {"ok": True, "problems": []}}}
    for doc, check in (
        (fast, "fast"),
        (deep, "deep"),
        (unusable, "deep"),
        (listed, "deep"),
        (no_problems, "deep"),
    ):
        report = CheckReport.read(json.loads(json.dumps(doc)), check=check, topic="t", snapshot_uri="/s")
        assert json.dumps(report.to_dict()) == json.dumps(_emitted_before(doc, check)), doc
    assert CheckReport.read(deep).failed_partitions == [10]
    assert CheckReport.read(listed).failed_partitions == [1, 3] and not CheckReport.read(listed).partitions
    assert list(CheckReport.read(deep).to_dict()["partitions"]) == ["2", "10", "1"]
    # the fast check's as is (its version first)
    assert json.dumps(CheckReport.read(fast).to_dict()) == json.dumps({"format": CHECK_FORMAT, **fast})
    built = CheckReport(check="deep", topic="t", snapshot_uri="/s", ok=True)  # built in Python: every field
    assert built.to_dict() == {
        "format": CHECK_FORMAT,
        "check": "deep",
        "topic": "t",
        "snapshot_uri": "/s",
        "ok": True,
        "problems": [],
        "partitions": {},
        "failed_partitions": [],
    }


def test_provider_zip_holds_the_apps_and_the_store_only(tmp_path: Path) -> None:
    with zipfile.ZipFile(provider_zip(str(tmp_path))) as zf:
        names = set(zf.namelist())
    assert "airflow_provider_kstate/store/manifest.py" in names
    assert "airflow_provider_kstate/spark_apps/rebuild.py" in names
    assert "airflow_provider_kstate/documents.py" in names  # the store's documents build on it
    assert not [n for n in names if "/operators/" in n or "/hooks/" in n]


def _imports(file: Path) -> list[str]:
    """Every module ``file`` imports, at any depth (lazy and ``TYPE_CHECKING`` imports included); a name
    imported from a module counts as ``module.name`` (``from airflow_provider_kstate import errors``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [f"{node.module or ''}.{a.name}" for a in node.names]
    return names


#: The domain packages: they import no Airflow, no Spark and nothing of the provider but one another and
#: the plain errors (``errors.py``), the enums and the documents' base (``documents.py``), so the domain can
#: change without Airflow or Spark installed.
DOMAIN = ("increase", "store", "client_piece")
DOMAIN_MAY_IMPORT = tuple(
    f"airflow_provider_kstate.{name}."
    for name in (*DOMAIN, "errors", "enums", "documents", "defaults", "params", "failpoints")
)


def test_the_domain_packages_import_neither_airflow_nor_spark_nor_the_layers_above_them() -> None:
    files = [
        PACKAGE / f"{name}.py"
        for name in ("errors", "enums", "documents", "defaults", "params", "failpoints")
    ]
    files += [f for folder in DOMAIN for f in (PACKAGE / folder).rglob("*.py")]
    assert len(files) >= 22
    for file in files:
        names = _imports(file)
        assert not [n for n in names if n.split(".")[0] in ("airflow", "pyspark")], file
        own = [n for n in names if n.split(".")[0] == "airflow_provider_kstate"]
        assert not [n for n in own if not f"{n}.".startswith(DOMAIN_MAY_IMPORT)], file


def test_the_domain_imports_with_airflow_and_spark_missing() -> None:
    """Import every domain module in a Python where ``airflow`` and ``pyspark`` cannot be imported."""
    code = (
        "import importlib, pkgutil\n"
        "importlib.import_module('airflow_provider_kstate.errors')\n"
        "importlib.import_module('airflow_provider_kstate.enums')\n"
        "importlib.import_module('airflow_provider_kstate.documents')\n"
        "importlib.import_module('airflow_provider_kstate.defaults')\n"
        "importlib.import_module('airflow_provider_kstate.params')\n"
        "importlib.import_module('airflow_provider_kstate.failpoints')\n"
        f"for folder in {DOMAIN!r}:\n"
        "    package = importlib.import_module('airflow_provider_kstate.' + folder)\n"
        "    for info in pkgutil.iter_modules(package.__path__):\n"
        "        importlib.import_module(package.__name__ + '.' + info.name)\n"
    )
    done = python_without(code)
    assert done.returncode == 0, done.stderr


def test_the_increase_domain_never_imports_the_airflow_layers_above_it() -> None:
    upper = tuple(
        f"airflow_provider_kstate.{layer}"
        for layer in ("hooks", "operators", "sensors", "triggers", "task_groups")
    )
    files = list((PACKAGE / "increase").rglob("*.py"))
    assert len(files) >= 7
    for file in files:
        assert not [n for n in _imports(file) if n.startswith(upper)], file
    # utils/ is split by what it is for: Airflow compatibility, parameter coercion, failpoints for the chaos
    # tests; no folder of plain utilities (and no folder loop) is left
    assert not (PACKAGE / "utils").exists()
    assert all((PACKAGE / name).is_file() for name in ("compat.py", "params.py", "failpoints.py"))
