"""Draw ``docs/images/safe-order.png``: the naive and the safe partition increase, with the danger window.

    .venv/bin/python scripts/draw_safe_order.py

Top: the naive order — producers see the new partitions within their metadata refresh, latest-reset
consumers later, and everything written in between is skipped (KAFKA-12261). Bottom: the provider's
order — consumers are out of their groups from before the create until every group is seeded, so the
danger window (partitions exist, offsets not yet seeded) has no consumer in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "docs" / "images" / "safe-order.png"
RUN, DOWN, OLD, NEW, DANGER, STEP = "#74c476", "#bdbdbd", "#9ecae1", "#3182bd", "#de2d26", "#fdd0a2"


def _lane(ax: Any, y: float, spans: list[tuple[float, float, str, str]]) -> None:
    for start, end, color, label in spans:
        ax.broken_barh([(start, end - start)], (y - 0.32, 0.64), color=color, edgecolor="white")
        ax.text((start + end) / 2, y, label, ha="center", va="center", fontsize=8.5)


def _danger(ax: Any, start: float, end: float, text: str, y: float) -> None:
    ax.axvspan(start, end, color=DANGER, alpha=0.12, lw=0)
    ax.axvline(start, color=DANGER, lw=1.2, ls="--")
    ax.axvline(end, color=DANGER, lw=1.2, ls="--")
    ax.text((start + end) / 2, y, text, ha="center", va="top", color=DANGER, fontsize=9, fontweight="bold")


def _axes(ax: Any, title: str, lanes: list[str], width: float, bottom: float) -> None:
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(-0.6, bottom)
    ax.set_xlim(0, width)
    ax.set_xticks([])
    ax.invert_yaxis()
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def naive(ax: Any) -> None:
    """The naive order: CreatePartitions under live traffic."""
    lanes = ["partitions", "producers", "consumers (latest reset)"]
    _lane(ax, 0, [(0, 3, OLD, "N"), (3, 12, NEW, "N + M (CreatePartitions at t=3)")])
    _lane(
        ax,
        1,
        [(0, 3.6, OLD, "write N"), (3.6, 12, NEW, "see new partitions (metadata refresh), write N + M")],
    )
    _lane(
        ax,
        2,
        [
            (0, 8, RUN, "consume N only: the new partitions are unknown to them"),
            (8, 12, RUN, "discover, start at END"),
        ],
    )
    _danger(ax, 3.6, 8, "written to new partitions before discovery = skipped", 2.42)
    _axes(ax, "Naive: add partitions while everything runs  (KAFKA-12261)", lanes, 12, 2.85)


def safe(ax: Any) -> None:
    """The provider's order: plan, pause, increase, seed, scale, resume, verify."""
    lanes = ["steps", "partitions", "producers (client piece)", "consumers (client piece)"]
    steps = [
        (0, 1.4, "plan + lease"),
        (1.4, 2.9, "pause, wait EMPTY"),
        (2.9, 4.1, "increase"),
        (4.1, 5.6, "seed earliest"),
        (5.6, 6.8, "scale"),
        (6.8, 8.3, "resume, STABLE"),
        (8.3, 10, "verify, release"),
    ]
    _lane(ax, 0, [(s, e, STEP, label) for s, e, label in steps])
    _lane(ax, 1, [(0, 3.5, OLD, "N"), (3.5, 10, NEW, "N + M")])
    _lane(ax, 2, [(0, 6.2, OLD, "pinned to the old N"), (6.2, 10, NEW, "write N + M")])
    _lane(
        ax,
        3,
        [
            (0, 1.6, RUN, "run"),
            (1.6, 7.4, DOWN, "out of the group (committed, left)"),
            (7.4, 10, RUN, "rejoin at seeded offsets"),
        ],
    )
    _danger(ax, 3.5, 5.6, "danger window: partitions exist, offsets not seeded yet", 3.4)
    ax.text(
        4.55,
        3.72,
        "a failure here: failure_guard keeps consumers paused (UnsafeResumeError)",
        ha="center",
        va="top",
        fontsize=8,
        color=DANGER,
    )
    _axes(ax, "Safe: the provider's order (one pause_window task by default)", lanes, 10, 4.05)


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 6.6), gridspec_kw={"height_ratios": [3, 4]})
    naive(top)
    safe(bottom)
    fig.tight_layout()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, dpi=110)
    plt.close(fig)
    print(OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
