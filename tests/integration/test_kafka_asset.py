"""The increase emits the grown topic's Asset event in the Kafka provider's ``kafka://`` scheme.

``verify`` declares the alias ``kstate-topic-increased`` as its outlet (the topic is a runtime param) and,
once the increase is verified, adds ``kafka://<first bootstrap server>/<topic>``: the URI the Kafka
provider's ``create_asset`` builds and its ``sanitize_uri`` accepts. A repair run (nothing created)
emits nothing. Real parts: the embedded broker, ``dag.test()`` of ``kstate_partition_increase``, the
metadata database's asset tables.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from airflow.providers.apache.kafka.assets.kafka import create_asset, sanitize_uri
from sqlalchemy import select

from airflow_provider_kstate.assets import TOPIC_ALIAS

DAG_ID = "kstate_partition_increase"
VERIFY = "safe_partition_increase.verify"


def topic_events(topic: str) -> list[Any]:
    """The asset events of ``topic``'s ``kafka://`` assets, with their asset and aliases loaded."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri.like(f"kafka://%/{topic}"))
        ).all()
        return [(e.asset.uri, e.asset.name, e.source_dag_id, e.source_task_id, e.extra,
                 sorted(a.name for a in e.source_aliases)) for e in rows]  # fmt: skip


def test_increase_emits_the_kafka_asset_event_of_its_topic(
    make_topic: Any, run_dag: Any, kafka_config: dict[str, Any]
) -> None:
    topic = make_topic("asset", partitions=1)
    assert topic_events(topic) == [], "the topic has no asset event before the run"
    conf = {"topic": topic, "partitions": 3, "consumer_groups": [], "dry_run": False}

    dr = run_dag(DAG_ID, conf)

    assert dr.state == "success", {ti.task_id: ti.state for ti in dr.get_task_instances()}
    server = kafka_config["bootstrap.servers"].split(",")[0]
    uri = f"kafka://{server}/{topic}"
    assert create_asset(server=server, topic=topic).uri == uri  # the Kafka provider's own scheme
    assert sanitize_uri(urlsplit(uri)).geturl() == uri
    extra = {"original_partitions": 1, "partitions": 3}
    assert topic_events(topic) == [(uri, uri, DAG_ID, VERIFY, extra, [TOPIC_ALIAS])]

    # A repair (the target is the current count): nothing grew, no new event.
    again = run_dag(DAG_ID, conf)
    assert again.state == "success"
    assert len(topic_events(topic)) == 1
