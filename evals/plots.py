"""The report's figures, drawn with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

from env_core.tools import tool_table
from evals.metrics import HARDNESS_LEVELS
from evals.run_folder import Run

# The tools in the order an agent is told of them.
TOOLS = tuple(spec.name for spec in tool_table())


def draw_all(runs: Sequence[Run], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    drawers = {
        "success_by_hardness.png": success_by_hardness,
        "steps_distribution.png": steps_distribution,
        "reward_distribution.png": reward_distribution,
        "tool_use.png": tool_use,
    }
    written = []
    for name, draw in drawers.items():
        figure, axes = plt.subplots(figsize=(8, 4.5), layout="constrained")
        draw(runs, axes)
        figure.legend(title="run", fontsize="small", loc="outside right upper")
        axes.grid(axis="y", alpha=0.3)
        figure.savefig(folder / name, dpi=120)
        plt.close(figure)
        written.append(folder / name)
    return written


def _bar_offsets(count: int, width: float) -> np.ndarray:
    return (np.arange(count) - (count - 1) / 2) * width


def success_by_hardness(runs: Sequence[Run], axes) -> None:
    groups = ("all", *HARDNESS_LEVELS)
    x = np.arange(len(groups))
    width = 0.8 / len(runs)
    for offset, run in zip(_bar_offsets(len(runs), width), runs, strict=True):
        summaries = [run.summary.overall, *(run.summary.by_hardness[h] for h in HARDNESS_LEVELS)]
        # A group with no episodes has no rate: no bar rather than a 0% bar.
        rates = np.array([100 * s.success.rate if s.episodes else np.nan for s in summaries])
        below = np.nan_to_num(rates - np.array([100 * s.success.low for s in summaries]))
        above = np.nan_to_num(np.array([100 * s.success.high for s in summaries]) - rates)
        bars = axes.bar(x + offset, rates, width, yerr=[below, above], capsize=3, label=run.label)
        # Labelled with its rate, a 0% bar is seen as one rather than as no bar.
        labels = ["" if np.isnan(rate) else f"{rate:.0f}%" for rate in rates]
        axes.bar_label(bars, labels, fontsize="x-small", padding=2)
    counts = [run.summary.overall.episodes] + [
        runs[0].summary.by_hardness[h].episodes for h in HARDNESS_LEVELS
    ]
    axes.set_xticks(x, [f"{g}\n(n={n})" for g, n in zip(groups, counts, strict=True)])
    axes.set_ylim(0, 105)
    axes.set_xlabel("Spider hardness (n = episodes of the first run)")
    axes.set_ylabel("success rate (%)")
    axes.set_title("Success by hardness, with Wilson 95% intervals")


def steps_distribution(runs: Sequence[Run], axes) -> None:
    longest = max(r.steps_used for run in runs for r in run.records)
    steps = np.arange(1, longest + 1)
    width = 0.8 / len(runs)
    for offset, run in zip(_bar_offsets(len(runs), width), runs, strict=True):
        counts = np.bincount([r.steps_used for r in run.records], minlength=longest + 1)[1:]
        axes.bar(steps + offset, 100 * counts / len(run.records), width, label=run.label)
    axes.set_xticks(steps)
    axes.set_xlabel("tool calls (steps) per episode")
    axes.set_ylabel("episodes (%)")
    axes.set_title("Steps per episode")


def reward_distribution(runs: Sequence[Run], axes) -> None:
    rewards = [r.total_reward for run in runs for r in run.records]
    bins = np.linspace(min([*rewards, 0.0]), max([*rewards, 1.0]), 41)
    for run in runs:
        weights = np.full(len(run.records), 100 / len(run.records))
        totals = [r.total_reward for r in run.records]
        axes.hist(totals, bins=bins, weights=weights, histtype="step", linewidth=2, label=run.label)
    axes.set_xlabel("total reward per episode (shaping + 1 for a correct answer)")
    axes.set_ylabel("episodes (%)")
    axes.set_title("Episode reward")


def tool_use(runs: Sequence[Run], axes) -> None:
    x = np.arange(len(TOOLS))
    width = 0.8 / len(runs)
    for offset, run in zip(_bar_offsets(len(runs), width), runs, strict=True):
        per_episode = [run.summary.tool_use.get(t, 0) / len(run.records) for t in TOOLS]
        axes.bar(x + offset, per_episode, width, label=run.label)
    axes.set_xticks(x, TOOLS)
    axes.set_xlabel("tool")
    axes.set_ylabel("calls per episode")
    axes.set_title("Tool-use mix")
