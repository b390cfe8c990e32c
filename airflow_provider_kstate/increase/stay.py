"""Consumers that stay in their groups while the topics grow (``consumers_stay``).

Kafka loses records on a partition increase for one reason (KAFKA-12261): a record written to a new
partition before a ``latest``-reset consumer has a position there. If no producer writes to the new
partitions until every group has a position on each, the log end is offset 0 there, nothing is skipped, and
no consumer has to leave its group. The run then:

1. pins every producer of the topics on the old layout (keys keep their old partitions; the producers go on
   writing there) and pauses only the offline groups' starters (EMPTY groups, seeded at 0 as always);
2. creates the partitions and announces the grow on the control topic (client-piece consumers refresh their
   metadata and take the new partitions at once, rule 8 of ``docs/control-protocol.md``);
3. waits until every group that stays holds a **committed offset on every partition**, read from the broker:
   positive evidence, never a guess. A client-piece consumer commits its start on every partition it is
   assigned without an offset (rule 7); a Java consumer with ``enable.auto.commit=true`` commits the
   position of every assigned partition on its own (measured on Apache Kafka 4.4: 0.1-0.2 s after it holds
   one). An assignment the broker reports is **not** evidence: a KIP-848 member is listed with a partition
   before its client has resolved a position there (measured), and librdkafka's auto-commit commits nothing
   on an empty partition. A group without evidence in time is paused and seeded alone, as the window does,
   while the others stay;
4. switches the producers through the key-order barrier (client-piece groups hold at it in their group) or,
   for groups that cannot hold, the drain by committed offsets, as before.

The plan decides per group, and says why (``GroupPlan.stay`` and ``stay_reason``): with ``auto`` a live
group stays when every live member runs the client piece (``client-piece``) or the request names it in
``committing_groups`` (``commits``), and is paused otherwise; ``always`` refuses the plan instead
(:class:`~airflow_provider_kstate.errors.StayRefusedError`). A Kafka Streams application never stays (its
state is partitioned by its input: ``kstate_streams_resize`` grows it). Consumers can stay only while
every producer is held: the request must name the topics' producers (``producer_drivers``: ``control``
for ControlledProducers, which the layout pins and which go on writing to the old partitions, or a command
pair, which stops a service from before the create to the switch).
"""

from __future__ import annotations

from airflow_provider_kstate.defaults import ConsumersStay
from airflow_provider_kstate.errors import StayRefusedError
from airflow_provider_kstate.increase.plan import GroupClass, GroupPlan, GroupRole, Plan
from airflow_provider_kstate.increase.request import PlanRequest

#: ``GroupPlan.stay``: the evidence a staying group gives.
CLIENT_PIECE = "client-piece"
COMMITS = "commits"

NO_PRODUCERS = (
    "no producer of the topics is named (producer_drivers): the run cannot know that every producer is held "
    "on the old layout, and a record written to a new partition before a staying group has a position "
    "there would be lost"
)


def evidence(entry: GroupPlan, group: str, request: PlanRequest) -> tuple[str, str]:
    """Return ``(evidence, reason)`` for one live group: the evidence it gives (empty: none) and why."""
    if entry.role == GroupRole.STREAMS:
        return (
            "",
            "a Kafka Streams application: its state is partitioned by its input (kstate_streams_resize)",
        )
    if entry.client_piece:
        return (
            CLIENT_PIECE,
            "every live member runs the client piece: each commits its start on new partitions",
        )
    if group in request.committing_groups:
        return COMMITS, "named in committing_groups: its consumers commit the position of every partition"
    return "", (
        "no evidence of its position: its live members do not all run the client piece and it is not named "
        "in committing_groups"
    )


def mark_stay(plan: Plan, request: PlanRequest) -> Plan:
    """Return ``plan`` with each live group that stays marked (``stay``, ``stay_reason``; neither paused
    nor waited for: its consumers commit their own positions), the others given the reason they are paused.

    :raises StayRefusedError: ``always``, and a live group gives no evidence, or no producer is named.
    """
    mode = ConsumersStay(request.consumers_stay)
    if mode == ConsumersStay.NEVER:
        return plan
    live = [g for g in plan.where("seed") if plan.groups[g].cls == GroupClass.ACTIVE]
    if not request.producer_drivers:
        return _refuse_or_pause(plan, mode, dict.fromkeys(live, NO_PRODUCERS))
    groups = dict(plan.groups)
    refused: dict[str, str] = {}
    for group in live:
        kind, reason = evidence(groups[group], group, request)
        if not kind:
            refused[group] = reason
            continue
        note = f"; no fallback: {groups[group].driver_problem}" if groups[group].driver_problem else ""
        groups[group] = groups[group].replace(
            stay=kind, stay_reason=reason + note, pause=False, wait=False, driver_problem=""
        )
    return _refuse_or_pause(plan.replace(groups=groups), mode, refused)


def _refuse_or_pause(plan: Plan, mode: ConsumersStay, refused: dict[str, str]) -> Plan:
    """``always``: refuse the plan, naming each group; ``auto``: those groups are paused, with the reason."""
    if not refused:
        return plan
    if mode == ConsumersStay.ALWAYS:
        lines = "; ".join(f"group {g!r}: {why}" for g, why in refused.items())
        raise StayRefusedError(
            f"consumers_stay=always, but these groups cannot stay in their groups while "
            f"{plan.topic_names} grow: {lines}. Nothing was paused or changed. Ways out: run the client piece "
            "in their services, name the groups whose consumers commit every assigned partition's position "
            "(Java enable.auto.commit=true) in committing_groups, name the topics' producers in "
            "producer_drivers, or let them pause (consumers_stay=auto)."
        )
    groups = dict(plan.groups)
    for group, why in refused.items():
        groups[group] = groups[group].replace(stay_reason=f"paused: {why}")
    return plan.replace(groups=groups)
