"""Operator parameters: templated or UI-given values turned into typed ones, with errors (not retryable)
that name the argument."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, TypeVar

from airflow_provider_kstate.enums import choice
from airflow_provider_kstate.errors import InvalidChoiceError, KStateConfigError

E = TypeVar("E", bound=Enum)


def as_choice(name: str, value: Any, choices: type[E]) -> E:
    """Return ``value`` as a member of the string enum ``choices`` or raise :class:`InvalidChoiceError` (a
    :class:`KStateConfigError`) naming them: the one coercer, :func:`airflow_provider_kstate.enums.choice`."""
    return choice(name, value, choices, InvalidChoiceError)


def as_int(name: str, value: Any, minimum: int = 1) -> int:
    """Return ``value`` as an int ≥ ``minimum`` or raise KStateConfigError naming ``name``."""
    if isinstance(value, bool):
        raise KStateConfigError(f"{name} must be an integer, got {value!r}")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise KStateConfigError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise KStateConfigError(f"{name} must be at least {minimum}, got {number}")
    return number


def as_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a bool (accepting "true"/"false" strings from templates)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "", "none"):
        return False
    raise KStateConfigError(f"{name} must be a boolean, got {value!r}")


def as_str_list(name: str, value: Any) -> list[str]:
    """Return ``value`` as a list of non-empty strings (a list, a JSON list, or a comma-separated string)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text.replace("'", '"')) if text.startswith("[") else text.split(",")
    if not isinstance(value, (list, tuple)):
        raise KStateConfigError(f"{name} must be a list of strings, got {value!r}")
    items = [str(v).strip() for v in value]
    if any(not item for item in items):
        raise KStateConfigError(f"{name} must not contain empty names, got {value!r}")
    return items


def as_mapping(name: str, value: Any) -> dict[str, Any]:
    """Return ``value`` as a dict (a mapping, or a JSON object string from a template); None and "" are {}."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise KStateConfigError(f"{name} must be a JSON object, got {value!r}") from None
    if not isinstance(value, dict):
        raise KStateConfigError(f"{name} must be a mapping, got {value!r}")
    return {str(k): v for k, v in value.items()}


def as_topic(name: str, value: Any) -> str:
    """Return ``value`` as a topic name or raise naming what is wrong with it."""
    topic = str(value or "").strip()
    if not topic:
        raise KStateConfigError(f"{name} must be a non-empty topic name")
    if len(topic) > 249 or any(not (c.isalnum() or c in "._-") for c in topic):
        raise KStateConfigError(f"{name} {topic!r} is not a legal Kafka topic name")
    return topic


def as_partitions(name: str, value: Any) -> list[int] | None:
    """Return a sorted partition list (a list, an int, a comma-separated or JSON list string), None for none.

    :param name: the argument's name for errors.
    :param value: the value (templated fields arrive as strings unless rendered as native objects).
    """
    if value is None or value == "" or value == "None" or value == []:
        return None
    if isinstance(value, str):
        text = value.strip().strip("[]")
        items: list[Any] = [v for v in (s.strip() for s in text.split(",")) if v]
    elif isinstance(value, int):
        items = [value]
    else:
        items = list(value)
    try:
        parts = sorted({int(v) for v in items})
    except (TypeError, ValueError) as exc:
        raise KStateConfigError(f"{name} {value!r} is not a list of partition numbers") from exc
    if any(p < 0 for p in parts):
        raise KStateConfigError(f"{name} {value!r} has negative partition numbers")
    return parts or None


def as_optional_count(name: str, value: Any) -> int | None:
    """Return an optional positive count (None, "", "None" mean: not given) or raise naming ``name``."""
    if value is None or value == "" or value == "None":
        return None
    try:
        count = int(value)
    except (TypeError, ValueError) as exc:
        raise KStateConfigError(f"{name} {value!r} is not an integer") from exc
    if count < 1:
        raise KStateConfigError(f"{name} must be at least 1, got {count}")
    return count
