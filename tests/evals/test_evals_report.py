"""`sqlenv eval` writes a run's report and plots; `sqlenv eval-compare` puts runs side by side."""

import json

import matplotlib.pyplot as plt
import pytest
from matplotlib.image import imread

from env_core.cli import main as sqlenv
from evals import plots
from evals.run_folder import Run

EPISODES = 60
PLOTS = ("success_by_hardness", "steps_distribution", "reward_distribution", "tool_use")


@pytest.fixture(scope="module")
def run_folders(dev_door_spec, tmp_path_factory):
    folders = {}
    for policy in ("oracle", "random"):
        out = tmp_path_factory.mktemp(policy)
        data = dev_door_spec.settings.arguments()
        run = ["--episodes", str(EPISODES), "--seed", "2", "--out", str(out), "--no-progress"]
        code = sqlenv(["eval", "--policy", policy, *data, *run])
        assert code == 0
        folders[policy] = out
    return folders


def test_a_run_folder_holds_records_summary_report_and_plots(run_folders):
    out = run_folders["oracle"]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == EPISODES
    first = records[0]
    assert set(first) >= {"question_id", "hardness", "steps", "total_reward", "correct"}
    assert set(first["steps"][0]) == {
        "tool", "arguments", "ok", "reward", "done", "observation", "error"
    }  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["success"]["successes"] == EPISODES
    report = (out / "report.md").read_text()
    assert "| oracle (inprocess) | all | 60 | 100.0% [94.0, 100.0] |" in report
    for name in PLOTS:
        assert f"({name}.png)" in report
        assert imread(out / f"{name}.png").shape[:2] == (540, 960)


def test_compare_puts_runs_side_by_side(run_folders, tmp_path, capsys):
    folders = [str(run_folders["oracle"]), str(run_folders["random"])]
    code = sqlenv(["eval-compare", *folders, "--labels", "Oracle,Random", "--out", str(tmp_path)])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].split() == [
        "run", "hardness", "episodes", "success", "[95%", "CI]", "avg", "reward", "avg", "steps"
    ]  # fmt: skip
    assert "Oracle  all       60        100.0% [94.0, 100.0]" in printed
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("# Evaluation: Oracle vs Random")
    assert "|  | Oracle | Random |" in report
    assert all((tmp_path / f"{name}.png").is_file() for name in PLOTS)


def test_every_plot_has_a_title_axis_labels_and_a_legend(run_folders):
    runs = [Run.load(run_folders["oracle"], "Oracle"), Run.load(run_folders["random"], "Random")]
    for name in PLOTS:
        figure, axes = plt.subplots()
        getattr(plots, name)(runs, axes)
        assert axes.get_title() and axes.get_xlabel() and axes.get_ylabel(), name
        labels = axes.get_legend_handles_labels()[1]
        assert labels == ["Oracle", "Random"], name
        plt.close(figure)


def test_each_success_bar_is_labelled_with_its_rate_zero_included(run_folders):
    runs = [Run.load(run_folders["oracle"], "Oracle"), Run.load(run_folders["random"], "Random")]
    figure, axes = plt.subplots()
    plots.success_by_hardness(runs, axes)
    expected = []
    for run in runs:
        summaries = [run.summary.overall, *run.summary.by_hardness.values()]
        expected += [f"{100 * s.success.rate:.0f}%" if s.episodes else "" for s in summaries]
    assert [text.get_text() for text in axes.texts] == expected
    assert "0%" in expected  # the random run fails every question of some level
    plt.close(figure)


def test_the_summary_has_no_negative_zero_no_empty_levels_and_names_the_demo():
    from evals.metrics import Summary
    from evals.play import EpisodeRecord
    from evals.report import _config_rows, signed, summary_rows

    assert (signed(-0.0004), signed(0.25), signed(-1.5)) == ("0.000", "+0.250", "-1.500")
    record = EpisodeRecord(
        0, "dev:0", "db", "easy", "p", "Question: ...", [], -0.0001, False, False
    )
    run = Run("demo run", {"data_dir": None, "seed": 0}, Summary.of([record]), [record])
    _, rows = summary_rows([run])
    assert [row[1] for row in rows] == ["all", "easy"]
    assert rows[0][4] == "0.000"
    _, config = _config_rows([run])
    assert ["data_dir", "the embedded demo"] in config
