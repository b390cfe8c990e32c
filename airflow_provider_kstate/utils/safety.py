"""The safety rule: consumers never resume while a group lacks an offset on a partition that exists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.utils.plan import groups_where

if TYPE_CHECKING:
    from airflow_provider_kstate.hooks.admin import KStateAdminHook


def unseeded(hook: KStateAdminHook, plan: dict[str, Any]) -> dict[str, list[int]]:
    """Return ``{group: [partitions]}``: new partitions that exist now but where a seeded group has no offset."""
    current = hook.partition_count(plan["topic"])
    new = range(int(plan["original_partitions"]), current)
    missing: dict[str, list[int]] = {}
    for group in groups_where(plan, "seed"):
        committed = hook.committed_offsets(group, plan["topic"])
        gaps = [p for p in new if p not in committed]
        if gaps:
            missing[group] = gaps
    return missing


def partial_increase_runbook(plan: dict[str, Any], missing: dict[str, list[int]]) -> str:
    """Return the loud message for a run that stopped between creating partitions and seeding them."""
    return (
        f"UNSAFE TO RESUME: topic {plan['topic']!r} was grown {plan['original_partitions']} -> "
        f"{plan['target_partitions']} partitions, but these groups have no committed offset on these new "
        f"partitions: {missing}. Resuming now would make latest-reset consumers skip what producers already "
        "wrote there (KAFKA-12261). Consumers stay paused and the topic's lease stays held by "
        f"{plan.get('owner')}. Next: fix the cause, then clear this DAG run's failed tasks from the seed step "
        "on ('pause_window', or 'seed_offsets' with one task per step); every step is idempotent and "
        "continues from where the cluster stands."
    )
