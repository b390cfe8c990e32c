"""The partition increase triggered from the Airflow UI in headless Chromium, like an operator does it.

Log in on the simple auth manager's login page, open the DAG, open its trigger form, fill in the params
(topic, target partition count, consumer groups; dry run left off), press Trigger, follow the UI to the
run page, wait for the run to finish and save screenshots (the filled form, the finished run and its
graph) to ``artifacts/`` (and to ``$KSTATE_DOCS_IMAGES`` when set: the README's pictures). The run's
success and its effect on the cluster are asserted through the API and Kafka.

Needs ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` (Debian: ``apt-get install -y chromium
chromium-driver``) and ``selenium``; skipped with that reason when they are missing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.deployment import AirflowDeployment
from tests.e2e.test_deployment import (
    commit_offsets,
    committed,
    create_topic,
    delete_topics,
    log_starts,
    produce,
)

DAG_ID = "kstate_partition_increase"
INSTALL = "apt-get install -y chromium chromium-driver"
CHROMIUM = os.environ.get("KSTATE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KSTATE_CHROMEDRIVER", "/usr/bin/chromedriver")
UI_TIMEOUT = 45.0
RUN_TIMEOUT = 240.0


def _missing() -> str | None:
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not (Path(exe).is_file() and os.access(exe, os.X_OK)):
            return f"{exe} is not installed (Debian/Ubuntu, as root: {INSTALL})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (.venv/bin/uv pip install -p .venv/bin/python selenium)"
    return None


# Skipped before the session's deployment is started for it.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.deployment,
    pytest.mark.timeout(420),
    pytest.mark.skipif(_missing() is not None, reason=str(_missing())),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager look for drivers online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kstate-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1600,1100",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(UI_TIMEOUT)
    driver.set_script_timeout(UI_TIMEOUT)
    try:
        yield driver
    finally:
        driver.quit()  # also stops chromedriver and every chromium process it started
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver: Any, condition: Any, what: str, timeout: float = UI_TIMEOUT) -> Any:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    # WebDriverException too: a look that lands during a navigation (the login redirect) is "aborted by
    # navigation"; the next look, 0.25 s later, sees the new page.
    wait = WebDriverWait(driver, timeout, poll_frequency=0.25, ignored_exceptions=(WebDriverException,))
    return wait.until(condition, message=f"UI: {what}")


def _visible(driver: Any, css: str, what: str) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    return _wait(driver, ec.element_to_be_clickable((By.CSS_SELECTOR, css)), what)


def _type(element: Any, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    element.click()
    element.send_keys(Keys.CONTROL, "a")
    element.send_keys(Keys.DELETE)
    element.send_keys(text)


def test_trigger_partition_increase_from_the_ui(
    deployment: AirflowDeployment,
    browser: Any,
    admin: Any,
    kafka_config: dict[str, Any],
    artifacts_dir: Path,
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"kstate-ui-{tag}", f"kstate-ui-{tag}-svc"
    create_topic(admin, topic, 1)
    produce(kafka_config, topic, [(0, f"k{i}".encode(), b"v") for i in range(4)])
    commit_offsets(kafka_config, group, {(topic, 0): 4})
    shots = artifacts_dir
    try:
        # Log in through the login page (simple auth manager), as a user would.
        browser.get(f"{deployment.base_url}/dags/{DAG_ID}")
        _visible(browser, "input[name=username]", "login form").send_keys(deployment.username)
        _visible(browser, "input[name=password]", "password field").send_keys(deployment.password)
        _visible(browser, "button[type=submit]", "sign-in button").click()
        _wait(browser, lambda d: "/auth/login" not in d.current_url, "redirect after login")
        if f"/dags/{DAG_ID}" not in browser.current_url:
            browser.get(f"{deployment.base_url}/dags/{DAG_ID}")

        # The trigger form, generated from the DAG's Params.
        _visible(browser, "[data-testid=trigger-dag-button]", "Trigger button").click()
        _type(_visible(browser, "input[name=element_topic]", "topic field"), topic)
        _type(_visible(browser, "input[name=element_partitions]", "partitions field"), "3")
        _type(_visible(browser, "textarea[name=element_consumer_groups]", "consumer groups field"), group)
        submit = _visible(browser, "[data-testid=trigger-dag-submit]", "Trigger submit button")
        _wait(browser, lambda d: submit.is_enabled(), "the form to validate")
        browser.save_screenshot(str(shots / "browser-trigger-form.png"))
        submit.click()

        # The UI follows the new run: /dags/<dag>/runs/<run_id>.
        _wait(
            browser,
            lambda d: re.search(rf"/dags/{DAG_ID}/runs/[^/?]+", d.current_url),
            "navigation to the run",
        )
        run_id = _run_id_from_url(browser.current_url)
        run = deployment.wait_for_run(DAG_ID, run_id, timeout=RUN_TIMEOUT)

        # Show the finished run: reload until the page shows the final state, then keep the screenshot.
        browser.refresh()
        _wait(
            browser,
            lambda d: run["state"] in d.find_element("tag name", "body").text.lower(),
            "final state shown",
        )
        time.sleep(1.0)  # let the grid finish rendering
        shot = shots / f"browser-{DAG_ID}-run.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000, "screenshot looks empty"

        assert run["state"] == "success", deployment.failure_report(DAG_ID, run_id)
        expected = {"topic": topic, "partitions": 3, "consumer_groups": [group], "dry_run": False}
        assert {k: run["conf"].get(k) for k in expected} == expected, run["conf"]
        assert not run["conf"].get("exclude_groups"), run["conf"]  # left empty in the form
        assert run["triggered_by"] == "ui"
        assert sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions) == [0, 1, 2]
        offsets = committed(admin, group, topic)
        assert {p: offsets.get(p) for p in (1, 2)} == log_starts(admin, topic, [1, 2]), offsets
        assert offsets[0] == 4, offsets
        _save_graph(browser, shots / "browser-run-graph.png")
    finally:
        delete_topics(admin, [topic])


def _save_graph(browser: Any, shot: Path) -> None:
    """Switch the run page to its graph view with the task group open (the UI keeps both in local storage)
    and save it; with ``KSTATE_DOCS_IMAGES=<folder>`` (e.g. ``docs/images``) copy the form's and the
    graph's screenshots there for the README."""
    browser.execute_script(
        "window.localStorage.setItem('default_dag_view', JSON.stringify('graph'));"
        f"window.localStorage.setItem('{DAG_ID}/open-groups', JSON.stringify(['safe_partition_increase']));"
    )
    browser.refresh()
    _wait(browser, lambda d: d.find_elements("css selector", ".react-flow__node"), "the graph's nodes")
    time.sleep(1.5)  # let the layout settle
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000, "graph screenshot looks empty"
    docs = os.environ.get("KSTATE_DOCS_IMAGES")
    if docs:
        for name in ("browser-trigger-form.png", shot.name):
            shutil.copy2(shot.parent / name, Path(docs) / name)


def _run_id_from_url(url: str) -> str:
    from urllib.parse import unquote

    match = re.search(rf"/dags/{DAG_ID}/runs/([^/?#]+)", url)
    assert match, url
    return unquote(match.group(1))
