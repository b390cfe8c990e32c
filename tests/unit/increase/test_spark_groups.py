"""The group ids of Spark's Kafka source, as the plan would recognise them."""

from __future__ import annotations

from airflow_provider_kstate.increase.plan import DEFAULT_SPARK_PREFIXES
from airflow_provider_kstate.increase.spark_groups import is_source_group, source_group_names


def test_the_default_prefixes_are_the_plans() -> None:
    prefixes, exact = source_group_names({"subscribe": "t"})
    assert prefixes == DEFAULT_SPARK_PREFIXES and exact == ()
    assert is_source_group("spark-kafka-source-2b0c-41-driver-0", {})
    assert not is_source_group("spark-kafka-sourcerer", {})


def test_a_group_id_prefix_and_a_fixed_group_id() -> None:
    assert is_source_group("totals-5f1e-executor", {"groupIdPrefix": "totals"})
    assert not is_source_group("spark-kafka-source-1", {"groupIdPrefix": "totals"})
    assert source_group_names({"kafka.group.id": "g", "groupIdPrefix": "x"}) == ((), ("g",))
    assert is_source_group("g", {"kafka.group.id": "g"}) and not is_source_group(
        "g-1", {"kafka.group.id": "g"}
    )
