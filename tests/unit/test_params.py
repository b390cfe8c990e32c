"""Unit tests of params.py: parameters as Airflow renders them, checked with errors naming the argument."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_kstate.errors import KStateConfigError
from airflow_provider_kstate.params import as_bool, as_int, as_str_list, as_topic


@pytest.mark.parametrize("value,expected", [(3, 3), ("4", 4), (" 5 ", 5)])
def test_as_int_accepts(value: Any, expected: int) -> None:
    assert as_int("partitions", value) == expected


@pytest.mark.parametrize("value", ["three", "2.5", True, 0, -1, None])
def test_as_int_names_the_argument(value: Any) -> None:
    with pytest.raises(KStateConfigError, match="partitions"):
        as_int("partitions", value)


def test_as_bool_and_lists_and_topics() -> None:
    assert (
        as_bool("dry_run", "True") is True
        and as_bool("dry_run", "false") is False
        and as_bool("d", False) is False
    )
    with pytest.raises(KStateConfigError, match="dry_run"):
        as_bool("dry_run", "maybe")
    assert (
        as_str_list("g", "['a', 'b']") == ["a", "b"]
        and as_str_list("g", "a,b") == ["a", "b"]
        and as_str_list("g", []) == []
    )
    with pytest.raises(KStateConfigError, match="empty names"):
        as_str_list("g", ["a", ""])
    with pytest.raises(KStateConfigError, match="legal"):
        as_topic("topic", "bad topic!")
    with pytest.raises(KStateConfigError, match="non-empty"):
        as_topic("topic", "")
