"""What a run was asked to do: the request the one planner (:mod:`~airflow_provider_kstate.increase.planner`)
turns into a plan, stored in the plan it made.

Every caller that plans (the plan step, the approval's re-plan, ``kstate plan``, the kstate page's preview
and the Kafka Streams resize) builds a :class:`PlanRequest` from its own inputs and hands it to
:func:`~airflow_provider_kstate.increase.planner.plan_increase`. The plan keeps it (``Plan.request``), so a
later step that plans again (the approval, once a human has answered) asks for exactly the same thing: the
same groups, exclusions, acknowledgements, drivers, key order and broker verdict.

A topic is a set of one: ``topics`` always names every topic the run grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator

from airflow_provider_kstate.defaults import DEFAULT_SPARK_PREFIXES, ConsumersStay, KeyOrder
from airflow_provider_kstate.documents import Document
from airflow_provider_kstate.errors import InvalidArgumentError
from airflow_provider_kstate.increase.drivers import DriverField


class PlanRequest(Document):
    """The request of an increase (or a repair): its topics, target and every choice that shapes the plan.

    :param topics: the co-partitioned topics grown together, in the order given (one topic: a set of one).
    :param partitions: the target partition count; None: the topics' count now (a repair, or a preview).
    :param consumer_groups: the groups to protect; empty: every group at risk.
    :param exclude_groups: groups at risk the run leaves alone (a risk accepted).
    :param allow_unknown_groups: accept named groups the cluster does not know.
    :param acknowledge_streams_groups: Kafka Streams applications the run may pause and seed.
    :param spark_group_prefixes: group-id prefixes of Spark Structured Streaming sources (left alone).
    :param key_order: ``preserve``, ``drain`` or ``relax``.
    :param group_drivers: ``{group: driver}`` resolved against the registry when the request was made.
    :param producer_drivers: ``{service: driver}``: the producer services the run may stop.
    :param own_tasks: your own pause and resume tasks drive every group without a driver.
    :param share_new_partitions_kept: the broker's verdict as the plan uses it: it starts a share group on
        an added partition at its first record (the doctor's ``share_new_partitions`` promise).
    :param consumers_stay: ``never``, ``auto`` or ``always``: whether live groups stay in their groups
        while the topics grow (:mod:`~airflow_provider_kstate.increase.stay`).
    :param committing_groups: groups whose consumers commit the position of every partition they are
        assigned (the Java client with ``enable.auto.commit=true``): the evidence that lets them stay.
    """

    model_config = ConfigDict(title="kstate increase: the request a plan was made from")
    # Stored inside the plan (its schema), not a document of its own.
    schema_name: ClassVar[str] = ""

    topics: tuple[str, ...] = Field(min_length=1, description="the topics grown together (a set of one)")
    partitions: int | None = Field(
        default=None, ge=1, description="the target partition count (absent: the count now, a repair)"
    )
    consumer_groups: tuple[str, ...] = Field(default=(), description="the groups to protect (empty: all)")
    exclude_groups: tuple[str, ...] = Field(default=(), description="groups at risk left alone")
    allow_unknown_groups: bool = False
    acknowledge_streams_groups: tuple[str, ...] = Field(
        default=(), description="Kafka Streams applications the run may pause and seed"
    )
    resize_streams_groups: tuple[str, ...] = Field(
        default=(),
        description="Kafka Streams applications this run resizes with their state (kstate_streams_resize); "
        "the others acknowledged are paused and seeded like consumer groups, their state not moved",
    )
    spark_group_prefixes: tuple[str, ...] = Field(
        default=DEFAULT_SPARK_PREFIXES, description="group-id prefixes of Spark sources (left alone)"
    )
    key_order: KeyOrder = Field(default=KeyOrder.PRESERVE, description="preserve, drain or relax")
    group_drivers: dict[str, DriverField] = Field(default_factory=dict, description="group -> its driver")
    producer_drivers: dict[str, DriverField] = Field(
        default_factory=dict, description="producer service -> its driver"
    )
    own_tasks: bool = Field(default=False, description="your own tasks drive groups without a driver")
    share_new_partitions_kept: bool = Field(
        default=False, description="the broker starts share groups on added partitions at their first record"
    )
    consumers_stay: ConsumersStay = Field(
        default=ConsumersStay.NEVER, description="never, auto or always: live groups stay in their groups"
    )
    committing_groups: tuple[str, ...] = Field(
        default=(),
        description="groups whose consumers commit the position of every partition they are assigned "
        "(Java enable.auto.commit=true): evidence for staying",
    )

    read_error: ClassVar[type[Exception]] = InvalidArgumentError

    @field_validator(
        "consumer_groups",
        "exclude_groups",
        "acknowledge_streams_groups",
        "resize_streams_groups",
        "committing_groups",
        mode="before",
    )
    @classmethod
    def _names(cls, value: Any) -> Any:
        """A list of names keeps its order, each once (None: none)."""
        if value is None:
            return ()
        if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
            return tuple(dict.fromkeys(str(v) for v in value))
        return value

    @classmethod
    def what(cls) -> str:
        return "plan request"

    @property
    def topic(self) -> str:
        """The first topic (the plan's ``topic``)."""
        return self.topics[0]

    def both_named(self) -> list[str]:
        """The groups both protected and excluded (a request refused: pick one)."""
        return sorted(set(self.consumer_groups) & set(self.exclude_groups))
