"""`evaluate`: play a seeded plan of episodes through a door and summarise them."""

from __future__ import annotations

import atexit
import contextlib
import json
import multiprocessing
import signal
import sys
import threading
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.door_clients import DoorClient, DoorSpec, open_door
from evals.metrics import Summary
from evals.plan import EpisodeTask, plan_episodes
from evals.play import EpisodeRecord, play_episode
from evals.policy import Policy
from evals.run_folder import RunFolder


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run recorded in a run folder, which the same command resumes."""

    def __init__(self, finished: int, total: int) -> None:
        super().__init__(
            f"interrupted after {finished} of {total} episodes; run the same command to resume"
        )


@dataclass(frozen=True)
class EvalResult:
    config: dict[str, Any]
    summary: Summary
    records: list[EpisodeRecord]


def evaluate(
    env: DoorClient,
    policy: Policy,
    n_episodes: int,
    seed: int = 0,
    *,
    out_dir: str | Path | None = None,
    workers: int = 1,
    progress: bool = False,
) -> EvalResult:
    """Play `n_episodes` episodes of `policy` through `env`, the same ones for the same seed.

    With `out_dir`, each finished episode is appended to `episodes.jsonl` there, and a run
    restarted on the same folder plays only the episodes it is missing. With `workers` > 1,
    episodes run in that many processes, each opening its own door from `env.worker_spec()`
    (the policy is pickled to them).
    """
    spec = env.worker_spec()
    settings = spec.settings
    tasks = plan_episodes(env.catalog.questions(settings.split), n_episodes, seed)
    config = {
        "policy": policy.name,
        "door": spec.kind,
        "split": settings.split,
        "seed": seed,
        "episodes": n_episodes,
        "data_dir": settings.data_dir,
        "catalog": env.catalog.splits[settings.split].fingerprint,
        "max_steps": settings.max_steps,
        "reward_profile": settings.reward_profile,
    }
    folder = RunFolder(out_dir) if out_dir is not None else None
    finished = folder.open(config) if folder else {}
    finished = {i: r for i, r in finished.items() if i < n_episodes}
    todo = [task for task in tasks if task.index not in finished]
    if workers > 1 and len(todo) > 1:
        played = _run_in_processes(spec, policy, todo, seed, workers)
    else:
        played = (play_episode(env, policy, task, seed) for task in todo)
    bar = _progress_bar(n_episodes, len(finished), policy.name, progress)
    try:
        for record in played:
            finished[record.index] = record
            if folder:
                folder.append(record)
            bar.update(1)
    except KeyboardInterrupt:
        if folder:
            # What the folder holds, which a resume skips: Ctrl-C may come between counting an
            # episode and its line reaching the file.
            saved = [index for index in folder.read_episodes() if index < n_episodes]
            raise RunInterrupted(len(saved), n_episodes) from None
        raise
    finally:
        played.close()  # the workers stop now, on Ctrl-C too, not when this frame is freed
        bar.close()
    records = [finished[index] for index in sorted(finished)]
    summary = Summary.of(records)
    if folder:
        folder.summary_file.write_text(json.dumps(summary.to_dict(), indent=2) + "\n")
    return EvalResult(config, summary, records)


def _progress_bar(total: int, done: int, label: str, shown: bool):
    from tqdm import tqdm

    return tqdm(
        total=total, initial=done, desc=label, unit="ep", disable=not shown, file=sys.stderr
    )


# Each worker process holds one door and the policy, set up once by the pool's initializer.
_worker: dict[str, Any] = {}


def _start_worker(spec: DoorSpec, policy: Policy, seed: int) -> None:
    _end_on_ctrl_c()
    door = open_door(spec)
    atexit.register(door.close)
    _worker.update(door=door, policy=policy, seed=seed)


def _play_in_worker(task: EpisodeTask) -> EpisodeRecord:
    return play_episode(_worker["door"], _worker["policy"], task, _worker["seed"])


def _end_on_ctrl_c() -> None:
    """Ctrl-C reaches the workers too (it signals the whole process group): a worker then ends
    at once and in silence, whatever its threads are doing (the system ends it, not Python), and
    leaves the main process to report the interrupt. A worker starts with the signal blocked
    (see `_ctrl_c_held`), so one that came earlier ends it here."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Hold Ctrl-C back while worker processes may start, so that none is left half started:
    they inherit it blocked, and this process (its main thread) takes it on leaving."""
    held: list[int] = []
    in_main_thread = threading.current_thread() is threading.main_thread()  # handlers run there
    handler = (
        signal.signal(signal.SIGINT, lambda number, _frame: held.append(number))
        if in_main_thread
        else None
    )
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        if in_main_thread:
            signal.signal(signal.SIGINT, handler)
            if held:
                signal.raise_signal(signal.SIGINT)


def _run_in_processes(
    spec: DoorSpec, policy: Policy, tasks: Iterable[EpisodeTask], seed: int, workers: int
) -> Generator[EpisodeRecord, None, None]:
    """Records as episodes finish, in whatever order; a few tasks queued per worker at a time."""
    pending_tasks = iter(tasks)
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(spec, policy, seed)
    )
    running: set[Future] = set()
    try:
        while True:
            with _ctrl_c_held():
                for task in pending_tasks:
                    running.add(pool.submit(_play_in_worker, task))
                    if len(running) >= 2 * workers:
                        break
            if not running:
                return
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:
        # The pool's own thread cancels the queued episodes: cancelling them from here races
        # with it marking them failed when Ctrl-C has stopped the workers.
        pool.shutdown(cancel_futures=True)
