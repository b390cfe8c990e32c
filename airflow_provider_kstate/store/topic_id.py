"""A topic's identity: its KIP-516 topic id, read from the cluster and compared with the one stored offsets
were taken with.

A topic deleted and created again under the same name is a different log: every offset stored against the
old one (a snapshot's manifest, a streaming query's checkpoint, a consumer group's commits) points into
the new one by accident. Kafka gives each topic a unique id for exactly this reason; the documents that
store offsets record it next to the topic's name, and the readers compare it here.

An id is Kafka's own text of the UUID (22 characters of URL-safe base64, as ``kafka-topics --describe``
prints it). ``""`` (:data:`UNKNOWN`) is an id that cannot be read: a broker before KIP-516 (it answers the
all-zero id), a principal without DESCRIBE on the topic, a document written before ids were recorded. An
unknown id is never a verdict: the topic is named in a warning and checked by its offsets alone.

No Airflow and no Spark here: the admin verbs (:mod:`airflow_provider_kstate.cluster.admin`), the Spark
applications and the example pipeline call :func:`read_topic_ids` with their own AdminClient.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: The id of a topic whose id cannot be read (or was not recorded).
UNKNOWN = ""
#: The all-zero UUID: what a broker without topic ids answers.
ZERO_ID = "AAAAAAAAAAAAAAAAAAAAAA"

log = logging.getLogger(__name__)


def id_text(uuid: Any) -> str:
    """Return a topic id as text (:data:`UNKNOWN` for none or the all-zero UUID).

    :param uuid: a confluent-kafka ``Uuid`` (its ``str()`` is Kafka's base64 text), a string, or None.
    """
    text = "" if uuid is None else str(uuid)
    return UNKNOWN if text in ("", ZERO_ID, "None") else text


def read_topic_ids(client: Any, topics: Iterable[str], timeout: float = 30.0) -> dict[str, str]:
    """Return ``{topic: id}`` of ``topics`` from one DescribeTopics request (``""``: the id cannot be read).

    Never raises: a broker that cannot describe topics, a topic the principal may not describe or that does
    not exist gets ``""`` (logged with the broker's reason); the callers warn and fall back to offsets.

    :param client: a confluent-kafka ``AdminClient``.
    :param topics: the topic names.
    :param timeout: seconds to wait for the answer.
    """
    from confluent_kafka import TopicCollection

    names = list(dict.fromkeys(topics))
    out = dict.fromkeys(names, UNKNOWN)
    if not names:
        return out
    try:
        futures = client.describe_topics(TopicCollection(names), request_timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - a client or broker without DescribeTopics: unknown ids
        log.info("TOPIC ID of %s cannot be read: %s", names, exc)
        return out
    for topic, future in futures.items():
        try:
            out[topic] = id_text(getattr(future.result(timeout=timeout), "topic_id", None))
        except Exception as exc:  # noqa: BLE001 - authorization, unknown topic, timeout: unknown id
            log.info("TOPIC ID of %r cannot be read: %s", topic, exc)
    return out


def unknown_now(topic: str) -> str:
    """The warning for a topic whose id cannot be read now."""
    return (
        f"the topic id of {topic!r} cannot be read (a broker without topic ids, before Kafka 2.8, or no "
        "DESCRIBE permission on the topic): whether it was deleted and created again is not checked, only "
        "its offsets are"
    )


def unknown_recorded(topic: str, what: str) -> str:
    """The warning for stored offsets recorded without their topic's id (written before ids were kept)."""
    return (
        f"{what} records no topic id of {topic!r} (written before topic ids were recorded): whether the "
        "topic was deleted and created again since is not checked, only its offsets are; the next write "
        "records the id"
    )


@dataclass(frozen=True)
class IdVerdict:
    """How stored offsets' topic id compares with the topic's id now.

    :param recorded: the id stored with the offsets (``""``: unknown).
    :param now: the topic's id now (``""``: unknown).
    :param problem: the refusal's text when both are known and differ, else ``""``.
    :param warnings: what could not be checked, one sentence each.
    """

    recorded: str
    now: str
    problem: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def recreated(self) -> bool | None:
        """True: the topic was recreated; False: the same topic; None: cannot tell (an id unknown)."""
        if not self.recorded or not self.now:
            return None
        return self.recorded != self.now


def compare_ids(
    topic: str, recorded: str | None, now: str | None, what: str, stored_at: str = ""
) -> IdVerdict:
    """Compare the id stored with offsets (``recorded``) with the topic's id ``now``.

    :param topic: the topic's name.
    :param recorded: the id recorded with the offsets (None or ``""``: unknown).
    :param now: the topic's id now (None or ``""``: unknown).
    :param what: what stored the offsets, for the messages (``the snapshot's manifest``, ``the checkpoint``).
    :param stored_at: when they were stored (ISO-8601), named in the problem: the topic was recreated after it.
    """
    recorded, now = id_text(recorded), id_text(now)
    warnings = []
    if not now:
        warnings.append(unknown_now(topic))
    if not recorded:
        warnings.append(unknown_recorded(topic, what))
    problem = ""
    if recorded and now and recorded != now:
        since = f" after {stored_at}, when {what} was written" if stored_at else f" since {what} was written"
        problem = (
            f"topic {topic!r} was deleted and created again{since}: {what} was taken from topic id {recorded}, "
            f"the topic's id now is {now}, so its offsets point into a different log"
        )
    return IdVerdict(recorded, now, problem, warnings)
