"""String enums and the one coercer of a choice: a value given as text (a DAG param, an XCom, a plan
written by hand) becomes a member, or is refused with an error that names the choices.

No Airflow import (the domain, the client piece and the Spark applications use it). Callers may pass
another error class (a driver's, a plan's).
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import TypeVar

from airflow_provider_kstate.errors import InvalidChoiceError

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same, by hand (members equal their values and print as them)

    class StrEnum(str, Enum):
        """A string enum: each member equals its value, so params, XCom and templates keep working."""

        def __str__(self) -> str:
            return str(self.value)


E = TypeVar("E", bound=Enum)


def choice(what: str, value: object, choices: type[E], error: type[Exception] = InvalidChoiceError) -> E:
    """Return ``value`` as a member of the string enum ``choices``, else raise ``error`` naming them.

    Surrounding blanks are ignored; an empty member reads "or empty" in the message.

    :param what: the value's name in the message (``key_order``, ``group role`` ...).
    :param error: the exception class to raise (:class:`InvalidChoiceError` by default).
    """
    text = value.value if isinstance(value, Enum) else str(value if value is not None else "").strip()
    members = [str(c.value) for c in choices]
    if text not in members:
        named = ", ".join(m for m in members if m)
        empty = " or empty" if "" in members else ""
        raise error(f"{what} must be one of {named}{empty}, got {value!r}")
    return choices(text)


__all__ = ["StrEnum", "choice"]
