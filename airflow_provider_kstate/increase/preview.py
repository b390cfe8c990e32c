"""What a run to N partitions would do, shown before anyone runs it: the plan of a dry run with each
group's driver, key-order mark and lag, and the broker check's last verdict. No Airflow and no lease: the
kstate page (``plugins/views.py``) and the ``kstate plan`` command show the same document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kstate.increase.plan import KeyOrderMark, Plan, describe
from airflow_provider_kstate.increase.report import ranges

if TYPE_CHECKING:
    from airflow_provider_kstate.increase.ports import AdminPort


def group_lag(admin: AdminPort, topic: str, groups: list[str], count: int) -> dict[str, dict[str, Any]]:
    """Return, per group, its committed-offset lag on ``topic`` and how many partitions hold no offset."""
    if not groups or not count:
        return {}
    ends = {p: high for p, (_low, high) in admin.watermarks(topic, range(count)).items()}
    out: dict[str, dict[str, Any]] = {}
    for group, committed in admin.committed_offsets_many(groups, topic, count):
        lag = sum(max(ends[p] - o, 0) for p, o in committed.items() if p in ends)
        out[group] = {"lag": lag, "without_offset": count - len(committed)}
    return out


def preview(admin: AdminPort, plan: Plan, verdict: dict[str, Any]) -> dict[str, Any]:
    """The document of a previewed plan: partitions now and after, each group (class, type, state, members,
    what the run would do, driver, key order, lag) and the broker check's verdict (``{"checked": False}``
    when the doctor has none)."""
    current = plan.original_partitions
    lags = group_lag(admin, plan.topic, plan.where("seed"), current)
    groups = [{"group": name, **_group(entry), **lags.get(name, {})} for name, entry in plan.groups.items()]
    new = plan.new_partitions
    return {
        "topic": plan.topic,
        "partitions": current,
        "target": plan.target_partitions,
        "mode": str(plan.mode),
        "new_partitions": ranges(new) if len(new) else "none",
        "groups": groups,
        "would_pause": plan.where("pause"),
        "would_seed": plan.where("seed"),
        "would_wait": plan.where("wait"),
        "would_stay": plan.staying(),
        "left_alone": [g["group"] for g in groups if not g["seed"]],
        "cannot_drive": plan.undrivable(),
        "relaxed": plan.marked(KeyOrderMark.RELAXED),
        "planned_at": plan.planned_at,
        "broker_check": verdict,
    }


def _group(entry: Any) -> dict[str, Any]:
    return {
        "class": str(entry.cls),
        "type": entry.type,
        "state": entry.state,
        "member_count": entry.member_count,
        "members": list(entry.members),
        "pause": entry.pause,
        "seed": entry.seed,
        "wait": entry.wait,
        "driver": entry.driver.describe() if entry.seed else "",
        "driver_problem": entry.driver_problem,
        "key_order": str(entry.key_order),
        "key_order_reason": entry.key_order_reason,
        "stay": entry.stay,
        "stay_reason": entry.stay_reason,
    }


def preview_lines(document: dict[str, Any], plan: Plan) -> list[str]:
    """The preview for a terminal: the plan's runbook lines, each group's lag, the verdict, the refusal."""
    lines = describe(plan)
    for group in document["groups"]:
        if "lag" in group:
            lines.append(
                f"  group {group['group']}: lag {group['lag']:,}, {group['without_offset']} partitions without an offset"
            )
    verdict = document["broker_check"]
    if not verdict.get("checked"):
        lines.append("broker check: not checked yet (kstate doctor checks it)")
    else:
        broken = verdict.get("broken") or []
        lines.append(f"broker check: {'broken: ' + ', '.join(broken) if broken else 'every promise kept'}")
    for group, why in document["cannot_drive"].items():
        lines.append(
            f"REFUSED: group {group}: {why}; give it a driver, exclude it, or adopt the client piece"
        )
    return lines
