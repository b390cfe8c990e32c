"""Unit tests of the kstate page for a run of several co-partitioned topics: the plan form asks for them,
the plan and the proof show them as one run (the rendering code is on the page; the data in
tests/integration/test_cli.py)."""

from __future__ import annotations


def test_the_page_asks_for_co_partitioned_topics_and_shows_a_set_as_one_run() -> None:
    from airflow_provider_kstate.plugins.page import PAGE

    assert 'id="more-topics"' in PAGE and 'p.set("topics", $("more-topics").value)' in PAGE
    assert 'id="plan-topics"' in PAGE, "the plan of a set lists each topic's count now and after"
    assert 'id="proof-topics"' in PAGE, "the proof of a set lists each topic's verdict"
    assert "one plan, one lease set, one window" in PAGE


def test_the_plan_route_takes_the_co_partitioned_topics(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from airflow_provider_kstate.plugins import app, views

    seen: dict[str, object] = {}

    def topic_view(hook: object, conn_id: str, topic: str, target: object, topics: object = None) -> dict:  # type: ignore[type-arg]
        seen.update(topic=topic, target=target, topics=topics)
        return {"topic": topic}

    monkeypatch.setattr(views, "topic_view", topic_view)
    monkeypatch.setattr(app, "_admin", lambda conn_id: object())
    monkeypatch.setattr(app, "_auth", lambda: {"page": [], "topics": [], "runs": [], "snapshots": []})
    client = TestClient(app.create_app())
    answer = client.get("/api/plan", params={"topic": "orders", "partitions": 8, "topics": "payments, audit"})
    assert answer.status_code == 200, answer.text
    assert seen == {"topic": "orders", "target": 8, "topics": ["payments", "audit"]}
