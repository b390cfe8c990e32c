"""The kstate page (airflow_provider_kstate.plugins): Airflow's login guards it, it shows a real topic's plan
and a finished run's proof, and never a connection's extras.

* ``test_page_api_*`` (fast, no deployment): Airflow's own API app built in this process, with the plugin
  mounted as the API server mounts it, driven by Starlette's TestClient: no token -> 401, a forged token
  -> 403, the UI's JWT cookie -> the plan of a real topic with two groups; a run's proof read from real
  reports (written by the report module) with paging; a SASL password in the connection's extras appears
  in no answer.
* ``test_kstate_page_in_the_browser`` (``browser``, ``deployment``): the session's ``airflow standalone``;
  an increase of a real topic with two groups runs to success; headless Chromium logs in on the UI's
  login page, opens kstate from the navigation (the page in its iframe), asks for the plan to 4
  partitions and opens the run's proof (with each group's final downtime above it). Screenshots to
  ``artifacts/`` (and to ``$KSTATE_DOCS_IMAGES``).
* ``test_a_run_watched_live_in_the_browser`` (``browser``, ``deployment``): the same deployment; a real
  increase of a topic read by a live KafkaJS group whose command-pair driver stops it in ``STOP_S`` s,
  watched on the page while it runs (step, group ``stopping``, downtime growing without a reload) and
  until it ends (success, the group resumed, its final downtime, the proof).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_kstate.increase.report import read_report, report_location, write_report
from airflow_provider_kstate.plugins import views
from tests.e2e import test_browser
from tests.e2e.test_browser import _missing, _visible, _wait
from tests.e2e.test_deployment import commit_offsets, create_topic, delete_topics, produce

INCREASE = "kstate_partition_increase"
browser = test_browser.browser  # the fixture: headless Chromium
SECRET = "kstate-ui-secret-" + uuid.uuid4().hex[:8]


def _two_groups(admin: Any, kafka_config: dict[str, Any], tag: str) -> tuple[str, str, str]:
    """A topic of 2 partitions with 10 records each and two EMPTY groups with committed offsets."""
    topic, billing, audit = f"kstate-ui-{tag}", f"kstate-ui-{tag}-billing", f"kstate-ui-{tag}-audit"
    create_topic(admin, topic, 2)
    produce(kafka_config, topic, [(p, b"k%d" % i, b"v") for p in range(2) for i in range(10)])
    commit_offsets(kafka_config, billing, {(topic, 0): 10, (topic, 1): 4})
    commit_offsets(kafka_config, audit, {(topic, 0): 7})
    return topic, billing, audit


# --------------------------------------------------------------------------------- fast: the page's API


@pytest.fixture(scope="module")
def api(kafka_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Airflow's API app (``core``: UI, REST API and plugins) in this process, with a report base of its own
    and a connection whose extras hold a SASL password."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from starlette.testclient import TestClient

    base = tmp_path_factory.mktemp("kstate-reports")
    secret_conn = {"conn_type": "kafka", "extra": {**kafka_config, "sasl.password": SECRET}}
    saved = {k: os.environ.get(k) for k in ("AIRFLOW__KSTATE__REPORT_BASE", "AIRFLOW_CONN_KSTATE_UI_SECRET")}
    os.environ["AIRFLOW__KSTATE__REPORT_BASE"] = str(base)
    os.environ["AIRFLOW_CONN_KSTATE_UI_SECRET"] = json.dumps(secret_conn)
    purge_cached_app()
    app = create_app("core")
    try:
        with TestClient(app, base_url="http://localhost") as client:
            client.report_base = base  # type: ignore[attr-defined]
            yield client
    finally:
        purge_cached_app()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cookie() -> dict[str, str]:
    """The UI's session cookie of the simple auth manager's admin (what the login page sets)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
    return {COOKIE_NAME_JWT_TOKEN: token}


def test_plugin_import_stays_light() -> None:
    """Every Airflow process loads plugins (a task process too): importing the plugin builds no app and
    imports none of Airflow's API server (measured: 0.7 s per process when it did)."""
    code = (
        "import sys, airflow_provider_kstate.plugins.kstate as k; "
        "assert 'airflow.api_fastapi.core_api.security' not in sys.modules; "
        "assert list.__len__(k.KStatePlugin.fastapi_apps) == 0; print('light')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and "light" in out.stdout, out.stderr[-2000:]


def test_page_api_refuses_without_the_login(api: Any) -> None:
    for path in (
        "/kstate/",
        "/kstate/api/topics",
        "/kstate/api/plan?topic=x",
        "/kstate/api/runs",
        "/kstate/api/runs/orders/some_run/progress",
        "/kstate/api/snapshots",
    ):
        api.cookies.clear()
        assert api.get(path).status_code == 401, path
        forged = api.get(path, headers={"Authorization": "Bearer not-a-jwt"})
        assert forged.status_code == 403, (path, forged.status_code)
    assert api.post("/kstate/api/plan?topic=x", cookies=_cookie()).status_code == 405  # read-only


def test_page_api_shows_the_plan_and_the_proof(api: Any, admin: Any, kafka_config: dict[str, Any]) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, billing, audit = _two_groups(admin, kafka_config, tag)
    try:
        page = api.get("/kstate/", cookies=_cookie())
        assert page.status_code == 200 and "Show plan" in page.text
        plan = api.get(
            "/kstate/api/plan",
            params={"topic": topic, "partitions": 4, "conn_id": "kstate_ui_secret"},
            cookies=_cookie(),
        )
        assert plan.status_code == 200, plan.text
        body = plan.json()
        assert (body["partitions"], body["target"], body["mode"], body["new_partitions"]) == (
            2,
            4,
            "increase",
            "2-3",
        )
        groups = {g["group"]: g for g in body["groups"]}
        assert set(groups) == {billing, audit}
        assert {g: (e["class"], e["type"], e["member_count"]) for g, e in groups.items()} == {
            billing: ("empty", "CLASSIC", 0),
            audit: ("empty", "CLASSIC", 0),
        }
        # lag = log end - committed: billing 0 + 6 on its two offsets; audit 3 on partition 0, none on 1
        assert (groups[billing]["lag"], groups[billing]["without_offset"]) == (6, 0)
        assert (groups[audit]["lag"], groups[audit]["without_offset"]) == (3, 1)
        assert sorted(body["would_seed"]) == sorted([billing, audit]) and body["would_wait"] == []
        assert "checked" in body["broker_check"]
        missing = api.get("/kstate/api/plan", params={"topic": f"no-such-{tag}"}, cookies=_cookie())
        assert missing.status_code == 404 and "does not exist" in missing.json()["detail"]
        topics = api.get("/kstate/api/topics", params={"conn_id": "kstate_ui_secret"}, cookies=_cookie())
        assert topic in topics.json()["topics"]
        for answer in (plan, topics, missing):
            assert SECRET not in answer.text and "sasl" not in answer.text
    finally:
        delete_topics(admin, [topic])


def _write_run(
    base: Path, topic: str, owner: str, groups: int, partitions: int, skip: tuple[str, int] | None
) -> str:
    """Write a run's verify report (and seed index) with the provider's report writer; return its folder."""
    uri = report_location(str(base), topic, owner, "verify")
    with write_report(uri) as report:
        for g in range(groups):
            report.write_lines(
                [
                    json.dumps(
                        {
                            "group": f"g{g:03d}",
                            "partition": p,
                            "committed": None if skip == (f"g{g:03d}", p) else 5,
                            "log_start": 0,
                            "log_end": 9,
                            "lag": 4,
                            "new": p >= partitions // 2,
                            "seeded": p >= partitions // 2,
                            "problem": "no committed offset" if skip == (f"g{g:03d}", p) else None,
                        }
                    )
                    + "\n"
                    for p in range(partitions)
                ]
            )
    return Path(uri).parent.name


def test_page_api_pages_a_runs_proof(api: Any) -> None:
    base = api.report_base
    good = _write_run(base, "orders", "kstate_partition_increase/manual__1", 120, 16, None)
    time.sleep(0.02)
    bad = _write_run(base, "orders", "kstate_partition_increase/manual__2", 3, 16, ("g001", 3))
    runs = api.get("/kstate/api/runs", params={"topic": "orders", "limit": 1}, cookies=_cookie()).json()
    assert runs["topics"] == ["orders"] and runs["total"] == 2
    assert [r["run"] for r in runs["runs"]] == [bad], "newest first, one per page"
    proof = api.get(
        f"/kstate/api/runs/orders/{good}", params={"offset": 100, "limit": 50}, cookies=_cookie()
    ).json()
    assert (proof["verified"], proof["ok"], proof["total"], proof["partitions"]) == (True, True, 120, 16)
    assert [g["group"] for g in proof["groups"]] == [f"g{g:03d}" for g in range(100, 120)]
    assert proof["groups"][0]["seeded_by_run"] == "8-15" and proof["groups"][0]["lag"] == 64
    for folder in (good, bad):  # the page's pyarrow pass and the plain Python pass agree
        path = str(base / "orders" / folder / "verify.jsonl.gz")
        assert views.summarize_verify_file(path) == views.summarize_verify(read_report(path))
    failed = api.get(f"/kstate/api/runs/orders/{bad}", cookies=_cookie()).json()
    assert failed["ok"] is False
    assert [(g["group"], g["skipping_partitions"]) for g in failed["groups"] if not g["ok"]] == [
        ("g001", "3")
    ]
    for name in ("%2E%2E", "..%2F..%2Fetc"):
        escape = api.get(f"/kstate/api/runs/orders/{name}", cookies=_cookie())
        assert escape.status_code in (400, 404), (name, escape.status_code, escape.text)


def test_page_api_shows_a_run_in_progress(api: Any) -> None:
    """A run's progress document as the steps write it (ProgressFile): the list shows the run in progress
    with its step, the progress route each group's state and downtime so far; a torn document answers
    200 "unreadable"; a folder name that leaves the report base is refused."""
    from airflow_provider_kstate.increase.events import GroupState, ProgressFile
    from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, Plan
    from airflow_provider_kstate.increase.report import progress_location

    base = api.report_base
    live = GroupPlan(cls=GroupClass.ACTIVE, state="STABLE", pause=True, seed=True, wait=True)
    plan = Plan("payments", 2, 4, {"billing": live})
    doc = ProgressFile(
        None, progress_location(str(base), "payments", "increase/live__1"), plan, "increase/live__1"
    )
    doc.step("pause")
    doc.groups(["billing"], GroupState.STOPPING)
    time.sleep(0.05)
    runs = api.get("/kstate/api/runs", params={"topic": "payments"}, cookies=_cookie()).json()
    assert [(r["run"], r["progress"]) for r in runs["runs"]] == [
        ("increase_live__1", {"phase": "running", "step": "pause", "outcome": ""})
    ]
    answer = api.get("/kstate/api/runs/payments/increase_live__1/progress", cookies=_cookie())
    assert answer.status_code == 200, answer.text
    shown = answer.json()
    assert (shown["phase"], shown["step"], shown["airflow"]) == ("running", "pause", None)
    [billing] = shown["groups"]
    assert billing["state"] == "stopping" and billing["ticking"] and billing["downtime_s"] >= 0.05
    torn = base / "payments" / "increase_torn"
    torn.mkdir()
    (torn / "progress.json").write_text('{"kind": "kstate-increase-progress", "v": 1, "gro')
    unreadable = api.get("/kstate/api/runs/payments/increase_torn/progress", cookies=_cookie())
    assert unreadable.status_code == 200 and unreadable.json()["phase"] == "unreadable", unreadable.text
    for name in ("%2E%2E", "..%2F..%2Fetc"):
        escape = api.get(f"/kstate/api/runs/payments/{name}/progress", cookies=_cookie())
        assert escape.status_code in (400, 404), (name, escape.status_code, escape.text)


def test_page_api_shows_a_snapshot(api: Any, tmp_path: Path) -> None:
    """A versioned snapshot (pointer with history, manifest in the current version) and two check XComs:
    the view names the version, the history, rows and offsets, the last fast and deep check and the
    partitions the newest check found damaged."""
    from airflow_provider_kstate.store.layout import POINTER_NAME, new_version_name, pointer_bytes
    from airflow_provider_kstate.store.manifest import Manifest, PartitionStats, write_manifest

    root = tmp_path / "totals"
    old, current = new_version_name(1_700_000_000), new_version_name(1_700_000_100)
    stats = {0: PartitionStats(0, 40, 12, "0" * 16, {}), 1: PartitionStats(3, 25, 9, "0" * 16, {})}
    write_manifest(
        str(root / current), Manifest(topic="totals-changelog", partitions=2, partition_stats=stats)
    )
    (root / POINTER_NAME).write_bytes(pointer_bytes(current, history=[old]))
    uri = f"file://{root}"

    def check(kind: str, ok: bool, failed: list[int], at: str) -> dict[str, Any]:
        value = {"check": kind, "ok": ok, "failed_partitions": failed, "snapshot_uri": str(root)}
        return {
            "dag_id": "kstate_state_maintenance",
            "run_id": f"r-{kind}",
            "task_id": f"{kind}_check",
            "timestamp": at,
            "value": value,
        }

    checks = [check("deep", False, [1], "2026-01-02"), check("fast", True, [], "2026-01-01")]  # newest first
    view = views.snapshot_view(uri, checks)
    assert (view["readable"], view["version"], view["history"], view["legacy"]) == (
        True,
        current,
        [old],
        False,
    )
    assert (view["topic"], view["partitions"], view["rows"]) == ("totals-changelog", 2, 21)
    assert view["offsets"] == {
        "0": {"start": 0, "end": 40, "rows": 12},
        "1": {"start": 3, "end": 25, "rows": 9},
    }
    assert view["last_fast_check"]["ok"] is True and view["last_deep_check"]["failed_partitions"] == [1]
    assert view["damaged_partitions"] == [1]
    missing = views.snapshot_view(f"file://{tmp_path}/never-built", [])
    assert missing["readable"] is False and "never built" in missing["problem"]
    assert view["progress"] is None and missing["progress"] is None  # no rebuild wrote progress there
    answer = api.get("/kstate/api/snapshots", cookies=_cookie())
    assert answer.status_code == 200 and isinstance(answer.json()["snapshots"], list)


@contextlib.contextmanager
def _running_rebuild(root: Path, read: int) -> Iterator[None]:
    """While the body runs, a rebuild's driver is in the middle of a read: its tasks reported ``read`` of
    1,000 offsets, and it keeps the progress document under ``root`` (the driver's own code,
    :class:`DriverProgress`, its listener fed by a real task reporter; no Spark: a rebuild of the test
    changelogs reads in about a second, too short to catch from here; the Spark tests catch a real one
    through :func:`~airflow_provider_kstate.plugins.rebuild_progress.snapshot_progress`)."""
    from airflow_provider_kstate.spark_apps.changelog import ReadContext
    from airflow_provider_kstate.spark_apps.read_progress import PROGRESS_NAME, DriverProgress, TaskReporter
    from airflow_provider_kstate.spark_apps.rebuild import progress_publisher

    publish = progress_publisher(None, str(root))  # type: ignore[arg-type] # a local root needs no Spark
    progress = DriverProgress(
        "rebuild", "totals-changelog", interval=0.05, publish=publish, echo=lambda _: None
    )
    progress.extra["version"] = "v-20260101T000000-abcdef"  # as the rebuild names the version it writes
    ctx = ReadContext({}, "totals-changelog", [0, 1], {0: (0, 600), 1: (0, 400)}, 2)
    try:
        with progress.reading():
            progress.attach(ctx)
            assert ctx.progress is not None
            reporter = TaskReporter(ctx.progress, 0)
            reporter(read)
            reporter.close()
            deadline = time.monotonic() + 10
            while f"{read:,} of 1,000" not in json.loads((root / PROGRESS_NAME).read_text())["line"]:
                assert time.monotonic() < deadline, "the driver did not see the task's report"
                time.sleep(0.02)
            yield
    finally:
        progress.close()


def test_page_api_shows_a_running_rebuilds_progress(api: Any, tmp_path: Path) -> None:
    """A snapshot (a ``kstate-snapshot`` asset) whose rebuild is running: ``/kstate/api/snapshots`` gives
    the driver's progress (offsets read of the total, percent, time left, updated at), the page renders
    it; a running document not replaced for minutes is stale."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session

    from airflow_provider_kstate.assets import GROUP, snapshot_uri_of
    from airflow_provider_kstate.spark_apps.read_progress import PROGRESS_NAME

    root = tmp_path / "rebuilding"
    root.mkdir()
    uri = snapshot_uri_of(str(root))
    with create_session() as session:
        session.add(AssetModel(name=uri, uri=uri, group=GROUP))
    try:
        with _running_rebuild(root, 250):
            answer = api.get("/kstate/api/snapshots", cookies=_cookie())
            assert answer.status_code == 200, answer.text
            (shown,) = [s for s in answer.json()["snapshots"] if s["uri"] == uri]
            progress = shown["progress"]
            assert (progress["state"], progress["read"], progress["total"], progress["percent"]) == (
                "running",
                250,
                1000,
                25.0,
            )
            assert progress["line"].startswith(
                "PROGRESS rebuild totals-changelog: 250 of 1,000 offsets (25.0%), "
            )
            assert (
                progress["line"].endswith(" left") and progress["eta_seconds"] > 0 and not progress["stale"]
            )
            assert progress["updated_at"] and progress["version"] == "v-20260101T000000-abcdef"
            assert shown["readable"] is False  # the first build: no version committed yet
            page = api.get("/kstate/", cookies=_cookie()).text
            assert "function progressHtml(p)" in page and "${progressHtml(s.progress)}" in page

        doc = json.loads((root / PROGRESS_NAME).read_text())
        (root / PROGRESS_NAME).write_text(json.dumps({**doc, "updated_at": "2026-01-01T00:00:00Z"}))
        (old,) = [
            s
            for s in api.get("/kstate/api/snapshots", cookies=_cookie()).json()["snapshots"]
            if s["uri"] == uri
        ]
        assert old["progress"]["stale"] and old["progress"]["age_seconds"] > 60
    finally:
        with create_session() as session:
            session.query(AssetModel).filter(AssetModel.uri == uri).delete()


# ------------------------------------------------------------------------------ browser, real deployment


@pytest.mark.browser
@pytest.mark.deployment
@pytest.mark.timeout(420)
@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_kstate_page_in_the_browser(
    deployment: Any,
    browser: Any,
    admin: Any,
    kafka_config: dict[str, Any],
    artifacts_dir: Path,
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, billing, audit = _two_groups(admin, kafka_config, tag)
    try:
        r = deployment.trigger(
            INCREASE, {"topic": topic, "partitions": 3, "consumer_groups": [], "dry_run": False}
        )
        assert r.status_code == 200, r.text
        run_id = r.json()["dag_run_id"]
        run = deployment.wait_for_run(INCREASE, run_id, timeout=240)
        assert run["state"] == "success", deployment.failure_report(INCREASE, run_id)

        frame = _open_kstate(browser, deployment)

        # Topics: the plan of a run to 4 partitions (the run above grew the topic to 3).
        _visible(browser, "#topic", "topic field").send_keys(topic)
        partitions = _visible(browser, "#partitions", "partitions field")
        partitions.send_keys("4")
        _visible(browser, "#plan-go", "Show plan").click()
        table = _wait(
            browser, lambda d: d.find_elements("css selector", "#plan-groups tbody tr"), "the plan's groups"
        )
        summary = browser.find_element("css selector", "#plan-summary").text
        assert "3 partitions now" in summary and "creates 1 (partition 3)" in summary, summary
        rows = [row.text for row in table]
        assert len(rows) == 2 and any(billing in t and "empty" in t for t in rows), rows
        assert any(audit in t for t in rows), rows
        browser.switch_to.default_content()
        _shot(browser, artifacts_dir / "kstate-ui-plan.png")

        # Runs: the finished run's proof, linked to its Airflow run.
        browser.switch_to.frame(frame)
        browser.find_element("css selector", "nav button[data-tab=runs]").click()
        select = _wait(
            browser, lambda d: d.find_elements("css selector", "#run-topic option"), "the run topics"
        )
        assert any(o.text == topic for o in select), [o.text for o in select]
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element("css selector", "#run-topic")).select_by_visible_text(topic)
        link = _wait(
            browser, lambda d: d.find_elements("css selector", "#run-table a[data-run]"), "the run list"
        )[0]
        assert run_id in browser.find_element("css selector", "#run-table").text
        link.click()
        proof = _wait(browser, lambda d: d.find_elements("css selector", "#proof-summary"), "the proof")[0]
        assert "Proved" in proof.text and "3 partitions" in proof.text, proof.text
        proof_rows = browser.find_elements("css selector", "#proof-table tbody tr")
        assert len(proof_rows) == 2 and all("no message skipped" in r.text for r in proof_rows)
        # above the proof: the run's progress, ended, with each group's final downtime
        live = [r.text for r in browser.find_elements("css selector", "#live-groups tbody tr")]
        assert len(live) == 2 and all("resumed" in t and t.endswith(" s") for t in live), live
        assert "success" in browser.find_element("css selector", "#live-summary").text
        browser.switch_to.default_content()
        _shot(browser, artifacts_dir / "kstate-ui-runs.png")
    finally:
        delete_topics(admin, [topic])


def _open_kstate(browser: Any, deployment: Any) -> Any:
    """Log in on the UI's login page, open kstate from the navigation and switch into its iframe."""
    browser.get(f"{deployment.base_url}/plugin/kstate")
    _visible(browser, "input[name=username]", "login form").send_keys(deployment.username)
    _visible(browser, "input[name=password]", "password field").send_keys(deployment.password)
    _visible(browser, "button[type=submit]", "sign-in button").click()
    _wait(browser, lambda d: "/auth/login" not in d.current_url, "redirect after login")
    if "/plugin/kstate" not in browser.current_url:
        browser.get(f"{deployment.base_url}/plugin/kstate")
    frame = _wait(
        browser, lambda d: d.find_elements("css selector", "iframe[src*='kstate']"), "the page's iframe"
    )[0]
    browser.switch_to.frame(frame)
    return frame


def _shot(driver: Any, path: Path, docs: bool = True) -> None:
    time.sleep(0.5)  # let the table render
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000, "screenshot looks empty"
    folder = os.environ.get("KSTATE_DOCS_IMAGES")
    if folder and docs:
        shutil.copy2(path, Path(folder) / path.name)


# ------------------------------------------------------------------------ browser: a run watched live

#: The live test's stop command sleeps this long before it stops the service: the pause window to watch.
STOP_S = 8
DRIVER = "kstate-ui-live"


def _set_variable(deployment: Any, key: str, value: Any) -> None:
    """Set an Airflow Variable through the deployment's REST API (as whoever deploys the DAG would)."""
    deployment.api.delete(f"/api/v2/variables/{key}")
    r = deployment.api.post("/api/v2/variables", json={"key": key, "value": json.dumps(value)})
    assert r.status_code in (200, 201), r.text


def _wait_file(path: Path, deployment: Any, run_id: str, timeout: float = 120) -> None:
    """Wait until the run wrote ``path``; fail at once, with the tasks' logs, when the run failed."""
    deadline = time.monotonic() + timeout
    while not path.is_file():
        run = deployment.get_json(f"/api/v2/dags/{INCREASE}/dagRuns/{run_id}")
        assert run["state"] != "failed", deployment.failure_report(INCREASE, run_id)
        assert time.monotonic() < deadline, f"no {path} after {timeout}s"
        time.sleep(0.5)


def _text(browser: Any, css: str) -> str:
    """The text of ``css`` now (the run's view is redrawn at each answer: a stale element is looked up
    again)."""
    return str(_wait(browser, lambda d: d.find_element("css selector", css).text or " ", css))


def _cell(group: str, column: str) -> str:
    return f"#live-groups tr[data-group='{group}'] td.{column}"


def _downtime(browser: Any, group: str) -> tuple[float, bool]:
    """The group's downtime as the page shows it now, and whether it is ticking (counted to now)."""

    def read(d: Any) -> tuple[float, bool]:
        cell = d.find_element("css selector", _cell(group, "downtime"))
        return float(cell.text.split()[0]), cell.get_attribute("data-tick") is not None

    return tuple(_wait(browser, read, "the group's downtime"))  # type: ignore[return-value]


def _open_run_in_progress(browser: Any, topic: str, folder: str) -> None:
    """On the Runs tab: the run's topic, the run listed in progress, then its view."""
    from selenium.webdriver.support.ui import Select

    browser.find_element("css selector", "nav button[data-tab=runs]").click()
    _wait(
        browser,
        lambda d: [o for o in d.find_elements("css selector", "#run-topic option") if o.text == topic],
        "the run's topic",
    )
    Select(browser.find_element("css selector", "#run-topic")).select_by_visible_text(topic)
    row = _wait(
        browser,
        lambda d: [
            t.text for t in d.find_elements("css selector", "#run-table tbody tr") if folder in t.text
        ],
        "the run in the list",
    )[0]
    assert "in progress" in row, row
    # the list refreshes itself while a run goes: a link found just before may be replaced; look again
    link = f"#run-table a[data-run='{folder}']"
    _wait(browser, lambda d: d.find_element("css selector", link).click() or True, "the run's link")


@pytest.mark.browser
@pytest.mark.deployment
@pytest.mark.timeout(420)
@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_a_run_watched_live_in_the_browser(
    deployment: Any,
    browser: Any,
    admin: Any,
    kafka_config: dict[str, Any],
    artifacts_dir: Path,
    tmp_path: Path,
) -> None:
    """Issue 27, item 2: a real increase of a topic read by a live KafkaJS group whose driver's stop
    command takes STOP_S s; the page, opened while the run goes, shows it in progress with its step and
    the group stopping, its downtime growing between two reads without a reload, then the run ending:
    the group resumed (or passed), its final downtime, the outcome and the proof."""
    from kstate_support.fleet import Fleet, FleetError, start_group

    if set(kafka_config) - {"bootstrap.servers"}:
        pytest.skip("the KafkaJS services take a bootstrap address only")
    try:
        fleet = Fleet(tmp_path / "fleet", kafka_config["bootstrap.servers"])
    except FleetError as exc:
        pytest.skip(str(exc))
    tag = uuid.uuid4().hex[:8]
    topic, group = f"kstate-live-{tag}", f"kstate-live-{tag}-kjs"
    create_topic(admin, topic, 2)
    try:
        fleet.consumer("live-m0", topic, group)
        pair = fleet.group_commands(group)
        slow = {"kind": "command", "stop": f"sleep {STOP_S}; {pair.stop}", "start": pair.start}
        _set_variable(deployment, "kstate_drivers", {DRIVER: {**slow, "ready": pair.ready, "timeout": 60}})
        start_group(fleet, admin, group)
        frame = _open_kstate(browser, deployment)
        browser.execute_script("window.kstateWatched = 'no reload'")
        conf = {"topic": topic, "partitions": 3, "consumer_groups": [], "group_drivers": {group: DRIVER}}
        r = deployment.trigger(INCREASE, {**conf, "key_order": "relax"})
        assert r.status_code == 200, r.text
        run_id = r.json()["dag_run_id"]
        folder = views.owner_folder(INCREASE, run_id)
        _wait_file(deployment.home / "kstate-reports" / topic / folder / "progress.json", deployment, run_id)

        # While it runs: the step, the group out of its group, its downtime counting up (no reload).
        _open_run_in_progress(browser, topic, folder)
        _wait(
            browser,
            lambda d: d.find_element("css selector", _cell(group, "state")).text == "stopping",
            "the group stopping",
            timeout=STOP_S + 60,
        )
        summary = _text(browser, "#live-summary")
        assert "in progress" in summary and "step pause" in summary, summary
        assert _text(browser, _cell(group, "driver")) == f"command {DRIVER}"
        first, ticking = _downtime(browser, group)
        time.sleep(1.6)
        second, still = _downtime(browser, group)
        assert ticking and still and second >= first + 1.0, (first, second, ticking, still)
        browser.switch_to.default_content()
        _shot(browser, artifacts_dir / "kstate-ui-live.png")

        # It ends: the page stops polling and shows the outcome, the final downtime and the proof.
        browser.switch_to.frame(frame)
        _wait(browser, lambda d: d.find_elements("css selector", "#proof-summary"), "the proof", timeout=240)
        summary = _text(browser, "#live-summary")
        assert "success" in summary and "in progress" not in summary, summary
        assert _text(browser, _cell(group, "state")) in ("resumed", "passed")
        final, ticking = _downtime(browser, group)
        assert not ticking and final >= STOP_S, (final, ticking)
        assert "Proved" in browser.find_element("css selector", "#proof-summary").text
        assert "success" in _text(browser, f"#run-table tr[data-row='{folder}'] td.progress")
        assert browser.execute_script("return window.kstateWatched") == "no reload"
        browser.switch_to.default_content()
        _shot(browser, artifacts_dir / "kstate-ui-live-ended.png", docs=False)
        run = deployment.wait_for_run(INCREASE, run_id, timeout=60)
        assert run["state"] == "success", deployment.failure_report(INCREASE, run_id)
        assert fleet.running("live-m0"), "the driver's start command did not start the service again"
    finally:
        fleet.close()
        deployment.api.delete("/api/v2/variables/kstate_drivers")
        delete_topics(admin, [topic])
