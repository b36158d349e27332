"""`inspect eval` from the command line, offline: the door's task on Spider questions with a
scripted mockllm model (`oracle_task.py`) writes its log, and the log's accuracy is the
engine's success on the same calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from inspect_ai.log import list_eval_logs, read_eval_log

from env_core.holder import EpisodeHolder
from tests.conftest import SPIDER_DEV
from tests.doors.inspect.oracle_task import scripted_calls

ROOT = Path(__file__).resolve().parents[3]
INSPECT = Path(sys.executable).parent / "inspect"
QUESTIONS = 4
WRONG = 1


def engine_verdicts(manager, plays) -> list[bool]:
    """Each play's calls made on the engine in process: whether its episode was answered right."""
    verdicts = []
    for question, calls in zip(manager.catalog.questions(SPIDER_DEV), plays, strict=False):
        holder = EpisodeHolder(manager, idle="done")
        episode = holder.start(question_id=question.id)
        for call in calls:
            holder.call(call.tool, call.arguments)
        verdicts.append(bool(episode.correct))
        holder.close("done")
    return verdicts


def test_inspect_eval_on_the_command_line_scores_the_engines_success(
    spider_dir, spider_manager, tmp_path
):
    # Inspect makes a task in its file's folder: the data directory is given whole.
    command = [
        str(INSPECT),
        "eval",
        "tests/doors/inspect/oracle_task.py",
        *("-T", f"data_dir={spider_dir}", "-T", f"split={SPIDER_DEV}"),
        *("-T", f"limit={QUESTIONS}", "-T", f"wrong={WRONG}"),
        *("--max-samples", "1", "--log-dir", str(tmp_path), "--display", "plain"),
    ]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]

    [written] = list_eval_logs(str(tmp_path))
    log = read_eval_log(written)
    assert log.status == "success", log.error
    question_ids = [q.id for q in spider_manager.catalog.questions(SPIDER_DEV)[:QUESTIONS]]
    verdicts = engine_verdicts(spider_manager, scripted_calls(spider_manager, question_ids, WRONG))
    by_id = {sample.id: sample.scores["engine_verdict"].value for sample in log.samples}
    assert [by_id[question_id] == "C" for question_id in question_ids] == verdicts
    assert verdicts.count(False) == 1
    accuracy = log.results.scores[0].metrics["accuracy"].value
    assert accuracy == sum(verdicts) / QUESTIONS
