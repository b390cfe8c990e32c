"""The demo report's chart: per partition, messages produced vs consumed, and the consumers' downtime.

Top row: for the naive and the safe increase, one pair of bars per partition (produced since the consumers
were warm, consumed of those). Bottom row: for each consumer, the spans during which it held no partition
(paused, left the group, rebalancing), with the increases marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PRODUCED, CONSUMED, DOWN, MARK = "#9ecae1", "#08519c", "#de2d26", "#fdd0a2"


def downtime(events: list[tuple[float, str, str, frozenset[int]]], member: str) -> list[tuple[float, float]]:
    """Spans during which ``member`` held no partition after it first held one: ``[(start, end), ...]``;
    an open span ends at +inf.

    :param events: a :class:`traffic.Timeline`'s events ``(t, member, kind, partitions)``.
    :param member: the member's name.
    """
    held: frozenset[int] = frozenset()
    spans: list[tuple[float, float]] = []
    down_since: float | None = None
    for t, who, kind, parts in sorted(events, key=lambda e: e[0]):
        if who != member:
            continue
        before = bool(held)
        held = held | parts if kind == "assign" else held - parts if kind == "revoke" else held
        if kind == "stop":
            held = frozenset()
        if before and not held:
            down_since = t
        elif not before and held and down_since is not None:
            spans.append((down_since, t))
            down_since = None
    if down_since is not None:
        spans.append((down_since, float("inf")))
    return spans


def _bars(ax: Any, story: dict[str, Any], title: str) -> None:
    traffic = story["traffic"]
    parts = sorted(traffic["produced"])
    produced = [traffic["produced"].get(p, 0) for p in parts]
    consumed = [traffic["consumed"].get(p, 0) for p in parts]
    xs = range(len(parts))
    ax.bar([x - 0.2 for x in xs], produced, 0.4, color=PRODUCED, label="produced")
    ax.bar([x + 0.2 for x in xs], consumed, 0.4, color=CONSUMED, label="consumed")
    for x, (p, c) in enumerate(zip(produced, consumed, strict=True)):
        if p > c:
            ax.annotate(f"lost {p - c}", (x, p), ha="center", va="bottom", color=DOWN, fontweight="bold")
    ax.set_xticks(list(xs), [str(p) for p in parts])
    ax.set_xlabel("partition")
    ax.set_ylabel("messages")
    ax.set_title(f"{title}: lost {story['lost']} of {story['produced']}")
    ax.set_ylim(0, max(produced or [1]) * 1.18)
    ax.legend(loc="upper right")


def discovered(
    events: list[tuple[float, str, str, frozenset[int]]], partition: int, after: float
) -> float | None:
    """The first time after ``after`` a consumer was assigned ``partition`` (None if never).

    :param events: a :class:`traffic.Timeline`'s events.
    :param partition: the partition.
    :param after: a ``time.monotonic()`` instant.
    """
    return min(
        (t for t, _m, kind, parts in events if kind == "assign" and partition in parts and t > after),
        default=None,
    )


def _timeline(ax: Any, story: dict[str, Any], title: str) -> None:
    traffic, marks = story["traffic"], story["marks"]
    t0 = min(m[0] for m in marks) - 3.0
    t1 = story.get("traffic_end", max(m[1] for m in marks) + 6.0)
    for i, (start, end, label) in enumerate(marks):
        ax.axvspan(
            start - t0,
            max(end - t0, start - t0 + 0.1),
            color=MARK if i % 2 == 0 else "#fdae6b",
            alpha=0.7,
            lw=0,
        )
        ax.annotate(label, (start - t0 + 0.1, -0.95), fontsize=8, va="top")
    unseen = story.get("unseen")
    if unseen:
        ax.axvspan(unseen[0] - t0, unseen[1] - t0, color=DOWN, alpha=0.12, lw=0)
        ax.annotate(
            "new partition written to,\nnot yet seen by consumers",
            ((unseen[0] + unseen[1]) / 2 - t0, len(traffic["members"]) - 0.05),
            ha="center",
            va="bottom",
            fontsize=8,
            color=DOWN,
        )
    labels = []
    for row, member in enumerate(traffic["members"]):
        spans = [
            (max(s, t0), min(e, t1)) for s, e in downtime(traffic["events"], member) if e > t0 and s < t1
        ]
        ax.broken_barh([(s - t0, max(e - s, 0.08)) for s, e in spans], (row - 0.3, 0.6), color=DOWN)
        labels.append(f"consumer {member}\ndown {sum(e - s for s, e in spans):.1f} s")
    ax.set_yticks(range(len(traffic["members"])), labels)
    ax.set_ylim(len(traffic["members"]) + 0.1, -1.0)
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("seconds (shaded: the increase / each DAG run)")
    ax.set_title(f"{title}: consumer downtime (red: holds no partition)")


def traffic_chart(naive: dict[str, Any], safe: dict[str, Any], path: Path) -> Path:
    """Draw the 2x2 chart of the naive and the safe increase into ``path`` (PNG).

    :param naive: the demo's naive-increase result (``traffic``, ``marks``, ``lost``, ``produced``).
    :param safe: the demo's safe-increase result, same keys.
    :param path: where to write the PNG.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 7.5), gridspec_kw={"height_ratios": [3, 2]})
    _bars(axes[0][0], naive, "Naive increase 1 -> 2")
    _bars(axes[0][1], safe, "Safe increase 1 -> 2 -> 4 -> 8")
    _timeline(axes[1][0], naive, "Naive")
    _timeline(axes[1][1], safe, "Safe")
    fig.suptitle("KAFKA-12261 under live traffic: messages per partition and consumer downtime")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
