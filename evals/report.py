"""Summary tables (printed and in Markdown) and `report.md` with its plots, for one run or for
several side by side."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.metrics import GroupSummary, Proportion
from evals.official import METRICS
from evals.plots import TOOLS, draw_all
from evals.run_folder import Run


def percent(p: Proportion) -> str:
    if p.n == 0:
        return "-"
    return f"{100 * p.rate:.1f}% [{100 * p.low:.1f}, {100 * p.high:.1f}]"


def signed(value: float) -> str:
    """A signed number to 3 places; a value that rounds to zero is shown as 0.000."""
    shown = f"{value:+.3f}"
    return "0.000" if float(shown) == 0 else shown


def _group_cells(group: GroupSummary, official: bool) -> list[str]:
    return [
        str(group.episodes),
        percent(group.success),
        *([percent(group.official) if group.official else "-"] if official else []),
        signed(group.avg_reward),
        f"{group.avg_steps:.2f}",
    ]


def summary_rows(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]]:
    """One row per run and hardness: the table the CLI prints and the report opens with. Beside
    the success (the environment's verdict), the official metric of a dataset that has one of
    another kind (`evals.official`), named in its column's header. A run over several datasets
    has a row per dataset and each of its own difficulty labels."""
    names = official_metrics(runs)
    official = [f"{' / '.join(names)} [95% CI]"] if names else []
    columns = ["episodes", "success [95% CI]", *official, "avg reward", "avg steps"]
    if any(len(run.summary.by_dataset) > 1 for run in runs):
        return _mixed_rows(runs, columns, bool(names))
    header = ["run", "hardness", *columns]
    rows = []
    for run in runs:
        rows.append([run.label, "all", *_group_cells(run.summary.overall, bool(names))])
        for level, group in run.summary.by_hardness.items():
            if group.episodes:  # a level the run did not meet has nothing to show
                rows.append(["", level, *_group_cells(group, bool(names))])
    return header, rows


def official_metrics(runs: Sequence[Run]) -> list[str]:
    """The names of the official metrics the runs' datasets are scored by beside the verdict."""
    datasets = {record.dataset for run in runs for record in run.records}
    return [name for dataset, (name, _) in METRICS.items() if dataset in datasets]


def _mixed_rows(
    runs: Sequence[Run], columns: list[str], official: bool
) -> tuple[list[str], list[list[str]]]:
    """One row per run, then per dataset and its difficulty labels: a run over several."""
    header = ["run", "dataset", "hardness", *columns]
    rows = []
    for run in runs:
        rows.append([run.label, "all", "all", *_group_cells(run.summary.overall, official)])
        for dataset, groups in run.summary.by_dataset.items():
            shown = [(level, group) for level, group in groups.items() if group.episodes]
            for index, (level, group) in enumerate(shown):
                cells = _group_cells(group, official)
                rows.append(["", "" if index else dataset, level, *cells])
    return header, rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    )


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _details_rows(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]]:
    header = ["", *(run.label for run in runs)]
    rows = [
        ["answered", *(f"{r.summary.answered}/{r.summary.overall.episodes}" for r in runs)],
        *(
            [f"{tool} calls", *(str(r.summary.tool_use.get(tool, 0)) for r in runs)]
            for tool in TOOLS
        ),
    ]
    kinds = sorted({kind for run in runs for kind in run.summary.errors})
    rows += [[f"errors: {k}", *(str(r.summary.errors.get(k, 0)) for r in runs)] for k in kinds]
    notes = sorted({note for run in runs for note in run.summary.notes})
    rows += [[n.replace("_", " "), *(str(r.summary.notes.get(n, 0)) for r in runs)] for n in notes]
    return header, rows


def _config_rows(runs: Sequence[Run]) -> tuple[list[str], list[list[str]]]:
    keys = sorted({key for run in runs for key in run.config})
    return ["", *(run.label for run in runs)], [
        [key, *(_setting(key, run.config.get(key, "")) for run in runs)] for key in keys
    ]


def _setting(key: str, value: object) -> str:
    if value is None and key == "data_dir":
        return "the embedded demo"
    return "" if value is None else str(value)


def write_report(runs: Sequence[Run], folder: str | Path) -> Path:
    """`report.md` and the PNG plots in `folder`; returns the report's path."""
    folder = Path(folder)
    plots = draw_all(runs, folder)
    title = " vs ".join(run.label for run in runs)
    sections = [
        f"# Evaluation: {title}",
        "Success is a correct `answer`; intervals are Wilson 95% score intervals. Rewards are "
        "episode totals (shaping plus 1 for a correct answer)."
        + (
            " Beside it, the dataset's official metric on the same answers (BIRD EX: result "
            "rows as sets, exact values; Spider 2.0 EX: each condition column found among the "
            "answer's columns): see docs/datasets.md."
            if official_metrics(runs)
            else ""
        ),
        markdown_table(*summary_rows(runs)),
        "## Tool use and errors",
        markdown_table(*_details_rows(runs)),
        "## Runs",
        markdown_table(*_config_rows(runs)),
        "## Plots",
        *(f"![{plot.stem.replace('_', ' ')}]({plot.name})" for plot in plots),
    ]
    report = folder / "report.md"
    report.write_text("\n\n".join(sections) + "\n")
    return report
