"""The client piece in a Python service: confluent-kafka's clients wrapped (docs: the client piece).

``serve`` is the example; tests/docs/test_examples.py runs it against the test broker (there ``bootstrap``,
``topic``, ``group`` are the test's and ``stop`` ends the loop once a record came; in a service they are
your cluster, topic and group, and ``lambda: False``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def serve(
    bootstrap: str,
    handle: Callable[[Any], None],
    stop: Callable[[], bool],
    topic: str = "orders",
    group: str = "billing",
) -> None:
    # [START client_piece]
    from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
    from airflow_provider_kstate.client_piece.producer import ControlledProducer

    consumer = ControlledConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest"}, [topic]
    )
    producer = ControlledProducer({"bootstrap.servers": bootstrap}, [topic])
    while not stop():
        producer.produce(topic, key=b"acct-42", value=b"...")  # murmur2 over the live partition count
        msg = consumer.poll(1.0)  # returns None while paused (out of the group)
        if msg is not None and not msg.error():
            handle(msg)
    # [END client_piece]
    consumer.close()
    producer.close()
