"""The base of every operator and sensor of the provider that talks to Kafka: one connection id, one
per-request timeout, the task edge.

The step operators, the plan, the broker doctor, the state-store operators (the fast check and the Spark
applications) and the sensors all take the same two parameters, under the same names:
``kafka_config_id`` (the connection, as the Airflow Kafka provider names it) and ``request_timeout``
(seconds per request to the cluster). A subclass of another Airflow operator (``SparkSubmitOperator``,
``BaseSensorOperator``, ``ApprovalOperator``) puts this class first among its bases.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.sdk import BaseOperator

from airflow_provider_kstate.increase.model import DEFAULT_CONN_ID
from airflow_provider_kstate.task_edge import TranslatesDomainErrors

#: Seconds each request to the cluster may take, unless a class says otherwise (``default_request_timeout``).
DEFAULT_REQUEST_TIMEOUT = 30.0


class KStateKafkaOperator(TranslatesDomainErrors, BaseOperator):
    """Base of the provider's operators and sensors that talk to Kafka (errors leave through
    :mod:`airflow_provider_kstate.task_edge`). The constructor only stores: nothing reaches the network
    before the task runs.

    :param kafka_config_id: the Airflow connection id (``kafka`` type of the Kafka provider); default
        ``kafka_default``.
    :param request_timeout: seconds to wait for each request to the cluster; None: the class's
        :attr:`default_request_timeout`.
    """

    #: ``request_timeout`` when none is given.
    default_request_timeout: ClassVar[float] = DEFAULT_REQUEST_TIMEOUT

    def __init__(
        self,
        *,
        kafka_config_id: str = DEFAULT_CONN_ID,
        request_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_config_id = kafka_config_id
        self.request_timeout = float(
            self.default_request_timeout if request_timeout is None else request_timeout
        )
