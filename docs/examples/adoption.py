"""Adopting the control protocol in a Python service that reads ``orders`` and writes ``orders-enriched``
(docs: the control protocol, "Python adoption").

``enrich_forever`` is the example; tests/docs/test_docs_examples.py runs it against the test broker with its
own topics and a ``running`` that ends the loop once a record was enriched (in a service: ``lambda: True``).
"""

from __future__ import annotations

from collections.abc import Callable


def enrich_forever(
    conf: dict[str, str],
    enrich: Callable[[bytes], bytes],
    running: Callable[[], bool] = lambda: True,
    orders: str = "orders",
    enriched: str = "orders-enriched",
    group: str = "orders-svc",
) -> None:
    # [START adoption]
    from airflow_provider_kstate.client_piece.consumer import ControlledConsumer
    from airflow_provider_kstate.client_piece.producer import ControlledProducer

    consumer = ControlledConsumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest"},
        [orders],
        client_id="orders-svc-0",  # stable per instance (pod name)
    )
    producer = ControlledProducer(conf, [enriched], client_id="orders-svc-0")
    try:
        while running():
            msg = consumer.poll(1.0)  # None while paused: the loop just keeps polling
            if msg is None or msg.error():
                continue
            producer.produce(enriched, value=enrich(msg.value()), key=msg.key())
            producer.poll(0)
    finally:
        consumer.close()
        producer.close()
    # [END adoption]
