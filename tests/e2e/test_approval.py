"""The approval step in a real deployment (the session's ``airflow standalone``): plan, approve, apply.

Runs of ``kstate_partition_increase`` with ``require_approval`` answered through Airflow's human-in-the-loop
REST API (``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/-1/hitlDetails``) and in the UI
(headless Chromium: the run's *Required actions*, the Reject and Approve buttons; through the REST API
where Chromium is missing). Each topic has a live group of
one :class:`~airflow_provider_kstate.client_piece.consumer.ControlledConsumer` (in this process) and an offline
group with committed offsets.

* reject (in the UI): the run ends (approve_plan success, the rest skipped), nobody was paused, the topic keeps its
  count, the lease is released: a second run on the topic plans at once, and its request expires after 6 s
  with no answer (approve_plan fails: ApprovalTimeoutError), again changing nothing;
* approve (REST): the increase completes (a share group reading the topic at ``latest`` is left alone, and the
  approval's re-plan agrees: issue 40's regression); the prompt of the next run shows that run's downtime; a
  partition and a group are added behind the next run's back and it is approved in the UI (its Required
  actions page, screenshot ``browser-approval-prompt.png`` to ``artifacts/`` and ``$KSTATE_DOCS_IMAGES``;
  through the REST API where Chromium is missing): it fails before pausing anyone, naming both changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from kstate_support.kafka import committed, log_starts
from kstate_support.traffic import ConsumerFleet

from airflow_provider_kstate.increase.report import progress_location
from tests.e2e import test_browser
from tests.e2e.deployment import AirflowDeployment, DeploymentError
from tests.e2e.test_deployment import commit_offsets, create_topic, delete_topics, produce
from tests.integration.test_share_groups import ShareReaders

pytestmark = [pytest.mark.deployment, pytest.mark.timeout(600)]

DAG_ID = "kstate_partition_increase"
GROUP = "safe_partition_increase"
APPROVE = f"{GROUP}.approve_plan"
WAITING = ("awaiting_input", "deferred")  # Airflow 3.3 parks the task; 3.1 and 3.2 defer it
RUN_TIMEOUT = 240.0
browser = test_browser.browser  # the fixture: headless Chromium (skips without it)


@pytest.fixture
def topic(admin: AdminClient, kafka_config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A topic of 2 partitions with records, a live group (one ControlledConsumer, running here) and an
    offline group with committed offsets."""
    tag = uuid.uuid4().hex[:8]
    name, live, offline = f"kstate-hitl-{tag}", f"kstate-hitl-{tag}-live", f"kstate-hitl-{tag}-offline"
    create_topic(admin, name, 2)
    produce(kafka_config, name, [(p, b"k%d" % i, b"%d" % (p * 10 + i)) for p in range(2) for i in range(5)])
    commit_offsets(kafka_config, offline, {(name, 0): 5, (name, 1): 2})
    fleet = ConsumerFleet(kafka_config, name, live, n=1, controlled=True)
    try:
        _wait_stable(admin, live)
        yield {"topic": name, "live": live, "offline": offline, "fleet": fleet}
    finally:
        fleet.stop()
        delete_topics(admin, [name])


def _wait_stable(admin: AdminClient, group: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        if desc.state.name == "STABLE" and desc.members:
            return
        time.sleep(0.5)
    raise AssertionError(f"group {group} not STABLE within {timeout}s")


def _members(admin: AdminClient, group: str) -> tuple[str, int]:
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return desc.state.name, len(desc.members)


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _trigger(dep: AirflowDeployment, topic: str, partitions: int, **conf: Any) -> str:
    body = {"topic": topic, "partitions": partitions, "require_approval": True, **conf}
    r = dep.trigger(DAG_ID, body)
    assert r.status_code == 200, r.text
    return str(r.json()["dag_run_id"])


def _hitl(run_id: str) -> str:
    return f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{APPROVE}/-1/hitlDetails"


def _states(dep: AirflowDeployment, run_id: str) -> dict[str, str]:
    return {t["task_id"].split(".", 1)[-1]: t["state"] for t in dep.task_instances(DAG_ID, run_id)}


def _request(dep: AirflowDeployment, run_id: str, timeout: float = 180.0) -> dict[str, Any]:
    """Wait until the run's approval request is waiting for an answer; return it (the REST API's view)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _states(dep, run_id).get("approve_plan") in WAITING:
            r = dep.api.get(_hitl(run_id))
            if r.status_code == 200:
                _wait_parked(dep, run_id, deadline)
                return dict(r.json())
        if dep.get_json(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")["state"] in ("success", "failed"):
            raise AssertionError(f"the run ended before asking:\n{dep.failure_report(DAG_ID, run_id)}")
        time.sleep(1)
    raise DeploymentError(f"no approval request within {timeout}s: {_states(dep, run_id)}")


def _wait_parked(dep: AirflowDeployment, run_id: str, deadline: float) -> None:
    """Wait until the scheduler has taken in the exit of the process that parked the task.

    An answer that lands before it is resumed at once, and the late executor event of the parking
    process (same try number) then fails the resumed task as "killed externally" (Airflow 3.3.2's
    scheduler exempts only a resume it finds still *scheduled*). A person never answers within that
    second; a test does, so it waits for the scheduler's ``TaskInstance Finished`` line of this task.
    """
    ti_id = next(t["id"] for t in dep.task_instances(DAG_ID, run_id) if t["task_id"] == APPROVE)
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if any(
                "TaskInstance Finished" in line and ti_id in line
                for line in dep.log_path.read_text(errors="replace").splitlines()
            ):
                return
        time.sleep(0.5)
    raise DeploymentError(f"the scheduler never took in the parking of {APPROVE} ({ti_id})")


def _answer(dep: AirflowDeployment, run_id: str, option: str) -> dict[str, Any]:
    r = dep.api.patch(_hitl(run_id), json={"chosen_options": [option], "params_input": {}})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _progress(dep: AirflowDeployment, topic: str, run_id: str) -> dict[str, Any]:
    path = progress_location(str(dep.home / "kstate-reports"), topic, f"{DAG_ID}/{run_id}")
    return dict(json.loads(Path(path).read_text()))


def _lease(topic: str) -> Any:
    from airflow_provider_kstate.hooks.lease import KStateLeaseHook

    return KStateLeaseHook("kafka_default", request_timeout=30).current(topic)


def _log(dep: AirflowDeployment, run_id: str) -> str:
    ti = next(t for t in dep.task_instances(DAG_ID, run_id) if t["task_id"] == APPROVE)
    return dep.task_log(DAG_ID, run_id, APPROVE, max(int(ti["try_number"]), 1))


def _unchanged(admin: AdminClient, t: dict[str, Any], partitions: int) -> None:
    """Nobody was paused and nothing was created: the live consumer never left its group."""
    assert "paused" not in t["fleet"].transitions, t["fleet"].transitions
    assert _members(admin, t["live"]) == ("STABLE", 1)
    assert _partitions(admin, t["topic"]) == partitions
    assert _lease(t["topic"]) is None, "the lease is released"


def test_reject_and_no_answer_change_nothing_and_release_the_lease(
    deployment: AirflowDeployment,
    admin: AdminClient,
    topic: dict[str, Any],
    artifacts_dir: Path,
    request: pytest.FixtureRequest,
) -> None:
    t = topic
    rejected = _trigger(deployment, t["topic"], 3, approval_timeout=300)
    asked = _request(deployment, rejected)
    assert asked["subject"] == f"Approve {t['topic']}: 2 -> 3 partitions?"
    assert asked["options"] == ["Approve", "Reject"] and not asked["response_received"]
    body = asked["body"]
    assert "**2 -> 3 partitions**: creates partitions 2 (1)" in body
    assert f"| `{t['live']}` | active (1 member) | control | barrier |" in body, body
    assert f"| `{t['offline']}` | empty | control | offline |" in body, body
    assert "**Expected downtime:** no earlier run of this topic." in body
    assert _progress(deployment, t["topic"], rejected)["step"] == "awaiting_approval"
    assert _lease(t["topic"]).owner == f"{DAG_ID}/{rejected}", "held while it waits"

    if test_browser._missing() is None:  # Reject pressed in Chromium (Approve is, below); the REST API's view
        _answer_in_the_browser(
            request.getfixturevalue("browser"), deployment, rejected, t, artifacts_dir, "Reject"
        )
        answered = _wait_answered(deployment, rejected)
        assert answered["responded_by_user"]["name"] == deployment.username, answered
    else:  # no Chromium here: the same answer through the REST API
        answered = _answer(deployment, rejected, "Reject")
    assert answered["chosen_options"] == ["Reject"]
    run = deployment.wait_for_run(DAG_ID, rejected, timeout=RUN_TIMEOUT)
    states = _states(deployment, rejected)
    assert run["state"] == "success", deployment.failure_report(DAG_ID, rejected)
    assert states["approve_plan"] == "success"
    for later in ("pause_window", "wait_groups_stable", "verify", "failure_guard"):
        assert states[later] == "skipped", states
    _unchanged(admin, t, 2)
    assert _progress(deployment, t["topic"], rejected)["outcome"] == "rejected"

    # A second run plans at once (the lease was free); nobody answers it within its 6 s deadline.
    expired = _trigger(deployment, t["topic"], 3, approval_timeout=6)
    _request(deployment, expired)
    run = deployment.wait_for_run(DAG_ID, expired, timeout=RUN_TIMEOUT)
    states = _states(deployment, expired)
    assert run["state"] == "failed" and states["approve_plan"] == "failed", states
    assert states["pause_window"] == "upstream_failed" and states["failure_guard"] == "skipped", states
    assert "ApprovalTimeoutError" in _log(deployment, expired)
    _unchanged(admin, t, 2)
    assert _progress(deployment, t["topic"], expired)["outcome"] == "expired"


def test_approve_completes_and_a_changed_cluster_stops_before_the_pause(
    deployment: AirflowDeployment,
    admin: AdminClient,
    kafka_config: dict[str, Any],
    topic: dict[str, Any],
    artifacts_dir: Path,
    request: pytest.FixtureRequest,
) -> None:
    t = topic
    # Issue 40's regression: a share group at its default share.auto.offset.reset=latest reads the topic too.
    # Apache Kafka 4.4 starts it on an added partition at its first record (the doctor's share_new_partitions
    # promise), so the plan leaves it alone (share-safe); the approval's re-plan once asked without the
    # broker's verdict, refused that group and failed the approved run with PlanChangedError on a cluster
    # nobody had changed. It plans again from the plan's own request now: approved, the run goes on.
    share = f"{t['topic']}-share"
    readers = ShareReaders(kafka_config, t["topic"], share)
    request.addfinalizer(readers.stop)
    _wait_share_reads(t["topic"], share)
    approved = _trigger(deployment, t["topic"], 3, approval_timeout=300)
    body = _request(deployment, approved)["body"]
    assert f"| `{share}` |" in body and "reads new partitions from their first record" in body, body
    answer = _answer(deployment, approved, "Approve")
    assert answer["responded_by"]["name"] == deployment.username
    run = deployment.wait_for_run(DAG_ID, approved, timeout=RUN_TIMEOUT)
    assert run["state"] == "success", deployment.failure_report(DAG_ID, approved)
    assert "PlanChangedError" not in _log(deployment, approved)
    assert _partitions(admin, t["topic"]) == 3
    assert t["fleet"].transitions[-2:] == ["paused", "running"], t["fleet"].transitions  # paused, back
    offsets = committed(admin, t["offline"], t["topic"])
    assert offsets.get(2) == log_starts(admin, t["topic"], [2])[2], offsets
    xcom = deployment.get_json(
        f"/api/v2/dags/{DAG_ID}/dagRuns/{approved}/taskInstances/{APPROVE}/xcomEntries/return_value"
    )
    assert xcom["value"] == {"required": True, "approved": True, "responded_by": deployment.username}
    assert _progress(deployment, t["topic"], approved)["outcome"] == "success"
    assert _lease(t["topic"]) is None

    # The next run's prompt shows the downtime the first one measured; behind its back, a partition and a
    # group appear; approved (in the browser), it fails before anyone is paused, naming both.
    changed = _trigger(deployment, t["topic"], 5, approval_timeout=300)
    body = _request(deployment, changed)["body"]
    assert f"the last `{DAG_ID}/{approved}`" in body, body
    assert "(1 run) |" in body.split(f"| `{t['live']}` |")[1].splitlines()[0], body
    transitions = list(t["fleet"].transitions)
    for future in admin.create_partitions([NewPartitions(t["topic"], 4)]).values():
        future.result(timeout=30)
    newcomer = f"{t['topic']}-newcomer"
    commit_offsets(kafka_config, newcomer, {(t["topic"], 0): 1})
    if test_browser._missing() is None:
        _answer_in_the_browser(
            request.getfixturevalue("browser"), deployment, changed, t, artifacts_dir, "Approve"
        )
    else:  # no Chromium here: the same answer through the REST API
        _answer(deployment, changed, "Approve")
    run = deployment.wait_for_run(DAG_ID, changed, timeout=RUN_TIMEOUT)
    states = _states(deployment, changed)
    assert run["state"] == "failed" and states["approve_plan"] == "failed", states
    assert states["pause_window"] == "upstream_failed" and states["failure_guard"] == "skipped", states
    detail = deployment.get_json(_hitl(changed))
    assert detail["chosen_options"] == ["Approve"]
    assert detail["responded_by_user"]["name"] == deployment.username
    log = _log(deployment, changed)
    assert "PlanChangedError" in log and "partition count: 3 at the plan, 4 now" in log, log[-3000:]
    assert f"new group at risk: {newcomer} (empty, 0 members)" in log, log[-3000:]
    assert t["fleet"].transitions == transitions, "nobody was paused"
    assert _members(admin, t["live"]) == ("STABLE", 1) and _partitions(admin, t["topic"]) == 4
    assert _lease(t["topic"]) is None
    progress = _progress(deployment, t["topic"], changed)
    assert (progress["step"], progress["outcome"]) == ("plan_changed", "failed")


def _wait_share_reads(topic: str, share: str, timeout: float = 60.0) -> None:
    """Wait until the broker names ``share`` among the share groups reading ``topic``."""
    from airflow_provider_kstate.hooks.admin import KStateAdminHook

    hook = KStateAdminHook("kafka_default", request_timeout=30)
    deadline = time.monotonic() + timeout
    while share not in (hook.share_groups_on_topic(topic, hook.group_types()) or {}):
        assert time.monotonic() < deadline, f"the share group {share} never showed as reading {topic}"
        time.sleep(0.5)


def _wait_answered(dep: AirflowDeployment, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """The run's approval request once it has its answer (the REST API's view)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        detail = dict(dep.get_json(_hitl(run_id)))
        if detail.get("response_received"):
            return detail
        time.sleep(0.5)
    raise DeploymentError(f"the answer given in the browser never reached {APPROVE} of {run_id}")


def _answer_in_the_browser(
    browser: Any, dep: AirflowDeployment, run_id: str, t: dict[str, Any], artifacts_dir: Path, option: str
) -> None:
    """Log in, open the run's Required actions for approve_plan, save the prompt, press ``option``."""
    from selenium.webdriver.common.by import By

    from tests.e2e.test_browser import _visible, _wait

    browser.get(f"{dep.base_url}/dags/{DAG_ID}")
    _visible(browser, "input[name=username]", "login form").send_keys(dep.username)
    _visible(browser, "input[name=password]", "password field").send_keys(dep.password)
    _visible(browser, "button[type=submit]", "sign-in button").click()
    _wait(browser, lambda d: "/auth/login" not in d.current_url, "redirect after login")
    browser.get(f"{dep.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/{APPROVE}/required_actions")
    button = _wait(
        browser,
        lambda d: next((b for b in d.find_elements(By.TAG_NAME, "button") if b.text.strip() == option), None),
        f"the {option} button",
    )
    _wait(browser, lambda d: t["live"] in d.find_element(By.TAG_NAME, "body").text, "the prompt's groups")
    time.sleep(1.0)  # let the Markdown finish rendering
    shot = artifacts_dir / ("browser-approval-prompt.png" if option == "Approve" else f"browser-{option}.png")
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000, "screenshot looks empty"
    docs = os.environ.get("KSTATE_DOCS_IMAGES")
    if docs and option == "Approve":
        shutil.copy2(shot, Path(docs) / shot.name)
    button.click()
