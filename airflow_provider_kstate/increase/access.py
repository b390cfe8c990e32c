"""The ACLs a run needs, checked at plan time: a principal that could not finish the run is refused before
anyone is paused, with each missing operation and resource named and the ``kafka-acls`` command that grants it.

Kafka's authorizer answers for itself: DescribeTopics and DescribeGroups with
``include_authorized_operations`` (KIP-430) return what the connection's principal may do on each topic and
group, so nothing is written and no ACL needs to be readable (reading ACLs needs ``Describe`` on the cluster).
What each step needs (:data:`TOPIC_NEEDS`, :data:`INTERNAL_NEEDS`, :data:`GROUP_NEEDS`) is the README's ACL
list; a refusal is :class:`~airflow_provider_kstate.errors.KafkaAuthorizationError` (not retryable).

Not checked here: ``Create`` on the provider's own topics when they do not exist yet (Kafka cannot answer
for a topic that does not exist; their creation in the plan step names its own error), and the groups the
principal may not ``Describe``: Kafka lists only the groups a principal may describe (unless it may
``Describe`` the cluster), so discovery cannot see them. Named groups are checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_kstate.errors import KafkaAuthorizationError

__all__ = [
    "GROUP_NEEDS",
    "INTERNAL_NEEDS",
    "TOPIC_NEEDS",
    "Missing",
    "check_access",
    "missing_access",
    "principal_of",
]

#: The operations on the topic to grow, and the steps that need each (plan reads, increase alters, seed
#: and verify read and commit offsets for it).
TOPIC_NEEDS: dict[str, str] = {
    "DESCRIBE": "plan, seed, verify: metadata and offsets",
    "DESCRIBE_CONFIGS": "plan: min.insync.replicas",
    "READ": "seed: committing offsets of the topic for a group",
    "ALTER": "increase: CreatePartitions",
}
#: The operations on the provider's own topics (the lease and the control topic).
INTERNAL_NEEDS: dict[str, str] = {
    "DESCRIBE": "plan: metadata",
    "READ": "every step: reading the lease and the consumers' acknowledgements",
    "WRITE": "every step: writing the lease and the pause/resume commands",
}
#: The operations on each group the run protects.
GROUP_NEEDS: dict[str, str] = {
    "DESCRIBE": "plan, pause, verify: its members, state and committed offsets",
    "READ": "seed: committing its offsets on the new partitions",
}
#: kafka-acls' spelling of an operation.
_CLI_NAMES = {"DESCRIBE_CONFIGS": "DescribeConfigs", "ALTER_CONFIGS": "AlterConfigs"}


class AccessPort(Protocol):
    """What the check asks of the cluster (``ClusterAdmin`` and the admin hook implement it)."""

    def authorized_operations(
        self, topics: Iterable[str] = (), groups: Iterable[str] = ()
    ) -> dict[tuple[str, str], frozenset[str] | None]: ...


@dataclass(frozen=True)
class Missing:
    """An operation the principal may not perform on a resource, and why the run needs it."""

    resource: str  # "topic" | "group"
    name: str
    operation: str
    why: str

    def describe(self) -> str:
        return f"{_cli(self.operation)} on {self.resource} {self.name!r} ({self.why})"


def _cli(operation: str) -> str:
    return _CLI_NAMES.get(operation, operation.capitalize())


def principal_of(config: Mapping[str, Any]) -> str:
    """The connection's principal as ``kafka-acls`` names it, when the config says it (``sasl.username``);
    ``User:<principal>`` otherwise (a TLS client's principal is its certificate's name, as the broker maps it)."""
    user = config.get("sasl.username")
    return f"User:{user}" if user else "User:<principal>"


def missing_access(
    admin: AccessPort,
    topic: str,
    internal_topics: Iterable[str] = (),
    groups: Iterable[str] = (),
    increase: bool = True,
) -> list[Missing]:
    """Return what the principal lacks to run the increase of ``topic`` (``increase``: partitions are
    created; a repair needs no ``Alter``), with the provider's own topics and the protected groups.

    A resource the broker does not answer for (a topic that does not exist yet, a broker before KIP-430) is
    not judged here.
    """
    internal = [t for t in dict.fromkeys(internal_topics) if t != topic]
    group_list = list(dict.fromkeys(groups))
    answers = admin.authorized_operations([topic, *internal], group_list)
    wanted: list[tuple[str, str, dict[str, str]]] = [
        ("topic", topic, {k: v for k, v in TOPIC_NEEDS.items() if increase or k != "ALTER"}),
        *(("topic", t, INTERNAL_NEEDS) for t in internal),
        *(("group", g, GROUP_NEEDS) for g in group_list),
    ]
    missing = []
    for kind, name, needs in wanted:
        allowed = answers.get((kind, name))
        if allowed is None:
            continue
        missing += [Missing(kind, name, op, why) for op, why in needs.items() if op not in allowed]
    return missing


def grant_commands(missing: Iterable[Missing], principal: str, servers: str = "<servers>") -> list[str]:
    """The ``kafka-acls`` commands that grant ``missing``, one per resource."""
    by_resource: dict[tuple[str, str], list[str]] = {}
    for m in missing:
        by_resource.setdefault((m.resource, m.name), []).append(_cli(m.operation))
    commands = []
    for (kind, name), ops in by_resource.items():
        operations = " ".join(f"--operation {op}" for op in ops)
        commands.append(
            f"kafka-acls.sh --bootstrap-server {servers} --command-config <admin.properties> --add "
            f"--allow-principal {principal} {operations} --{kind} {name}"
        )
    return commands


def check_access(
    admin: AccessPort,
    topic: str,
    internal_topics: Iterable[str] = (),
    groups: Iterable[str] = (),
    increase: bool = True,
    config: Mapping[str, Any] | None = None,
    name: str = "",
) -> None:
    """Refuse the run when the principal lacks an ACL it needs (see :func:`missing_access`).

    :param config: the connection's librdkafka settings (for the principal and the servers; never logged).
    :param name: how the message names the connection.
    :raises KafkaAuthorizationError: naming each missing operation and resource, and the commands that grant
        them; nothing was changed, nobody paused.
    """
    missing = missing_access(admin, topic, internal_topics, groups, increase)
    if not missing:
        return
    config = config or {}
    principal = principal_of(config)
    servers = str(config.get("bootstrap.servers") or "<servers>")
    lacks = "; ".join(m.describe() for m in missing)
    commands = " ; ".join(grant_commands(missing, principal, servers))
    raise KafkaAuthorizationError(
        f"Kafka {name + ' ' if name else ''}principal {principal} lacks ACLs the run needs: {lacks}. "
        f"Grant them (the README's ACL list): {commands}. Nothing was changed: nobody was paused."
    )
