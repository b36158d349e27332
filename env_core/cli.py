"""`sqlenv`: prepare a data directory's catalog, or play an episode and print its transcript."""

from __future__ import annotations

import argparse
import functools
import logging
import shlex
import sys
from collections import Counter
from importlib.metadata import entry_points
from pathlib import Path

from env_core.catalog import Catalog, Split, question_files
from env_core.command_line import CommandParser, run_main
from env_core.demo import resolve_data_dir
from env_core.episode import Episode, ToolResult
from env_core.errors import DataError
from env_core.factory import open_manager
from env_core.layouts import detect_layout, in_difficulty_order
from env_core.mixed_catalog import data_entries
from env_core.oracle import play_oracle
from env_core.settings import OPTIONS, Settings, add_arguments, shown_value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format=f"{args.command}: %(message)s"
    )
    return run_main(args.command, lambda: args.run(args))


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="sqlenv", description="An SQL-exploration environment for LLM agents."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    data = commands.add_parser(
        "data",
        help="work with a data directory",
        description="Work with a data directory (--data-dir or $SQLENV_DATA_DIR; the embedded "
        "demo without one).",
    )
    data_commands = data.add_subparsers(required=True, metavar="ACTION")
    prepare = data_commands.add_parser(
        "prepare",
        help="run every gold query once, cache the catalog, print kept/excluded counts",
        description="Run every gold query of the split (or of every split) once, with the "
        "executor's limits, and cache the catalog keyed by the files' hashes; print the "
        "questions kept and excluded (with the reasons) and the cold and warm start times.",
    )
    add_arguments(prepare, groups=("data",))
    prepare.add_argument(
        "--all-splits",
        action="store_true",
        help="prepare every question file of the directory, not only --split",
    )
    prepare.add_argument(
        "--refresh", action="store_true", help="ignore the cache and re-run every gold query"
    )
    prepare.set_defaults(run=run_prepare, command="sqlenv data prepare")
    check = data_commands.add_parser(
        "check",
        help="run every gold query once and list each excluded question with its reason",
    )
    add_arguments(check, groups=("data",))
    check.set_defaults(run=run_check, command="sqlenv data check")

    play = commands.add_parser(
        "play",
        help="play one episode and print its transcript",
        description="Play one episode with the oracle (which knows the gold SQL), or with the "
        "calls you type (--interactive), and print every step with its reward.",
    )
    add_arguments(play, groups=("data", "episodes", "sql"))
    choice = play.add_mutually_exclusive_group()
    choice.add_argument("--question-id", help="a question id such as dev:12")
    choice.add_argument("--db-id", help="draw the question from this database only")
    play.add_argument("--seed", type=int, default=0, help="seed for the question choice (0)")
    play.add_argument(
        "--interactive",
        action="store_true",
        help="type the calls yourself (e.g. `describe singer`, `query SELECT ...`, `answer 42`) "
        "instead of the oracle, which knows the gold SQL",
    )
    play.set_defaults(run=run_play, command="sqlenv play")

    settings = commands.add_parser(
        "settings",
        help="list every shared setting: its flag, environment variable, default and value now",
        description="List every setting the commands and doors share: its flag, its SQLENV_* "
        "variable, its default and the value the environment gives it now.",
    )
    settings.set_defaults(run=run_settings, command="sqlenv settings")
    # Other packages add commands (e.g. `sqlenv eval`) through this entry-point group, so the
    # engine never imports them.
    for command in entry_points(group="sqlenv.commands"):
        command.load()(commands)
    return parser


def data_location(settings: Settings) -> tuple[Path, Path | None, Path | None]:
    """The data folder the settings name, its databases folder and the cache folder."""
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else None
    databases_dir = Path(settings.databases_dir) if settings.databases_dir else None
    data_dir = resolve_data_dir(settings.data_dir, cache_dir)
    if data_entries(str(data_dir), databases_dir) is not None:
        raise DataError("this command reads one dataset at a time: give it each folder on its own")
    return data_dir, databases_dir, cache_dir


def run_prepare(args: argparse.Namespace) -> int:
    settings = Settings.from_arguments(args)
    data_dir, databases_dir, cache_dir = data_location(settings)
    splits = list(question_files(data_dir, databases_dir)) if args.all_splits else [settings.split]
    load = functools.partial(
        Catalog.load, data_dir, cache_dir=cache_dir, databases_dir=databases_dir
    )
    layout = detect_layout(data_dir, databases_dir)
    print(f"data: {data_dir} ({layout.dataset} layout)", flush=True)
    prepared = []
    for name in splits:  # one at a time, each reported as soon as it is ready
        split = load([name], refresh=args.refresh).splits[name]
        print(split_report(split), flush=True)
        prepared.append(split)
    first = sum(split.load_seconds for split in prepared)
    warm = load(splits)
    second = sum(split.load_seconds for split in warm.splits.values())
    was_cold = not all(split.from_cache for split in prepared)
    label = "cold start (gold queries run)" if was_cold else "start (from cache)"
    print(f"{label}: {first:.2f} s; warm start: {second:.3f} s ({first / second:.0f}x faster)")
    return 0


def run_check(args: argparse.Namespace) -> int:
    data_dir, databases_dir, cache_dir = data_location(Settings.from_arguments(args))
    splits = list(question_files(data_dir, databases_dir))
    catalog = Catalog.load(data_dir, splits, cache_dir=cache_dir, databases_dir=databases_dir)
    print(f"data: {data_dir} ({catalog.layout.dataset} layout)")
    for split in catalog.splits.values():
        print(split_report(split))
        for exclusion in split.excluded:
            print(f"  - {exclusion.id} ({exclusion.db_id}) {exclusion.reason}: {exclusion.detail}")
    return 0


def split_report(split: Split) -> str:
    kept, excluded = len(split.questions), len(split.excluded)
    labels = Counter(q.hardness for q in split.questions)
    order = in_difficulty_order(labels)
    kinds = Counter(q.kind for q in split.questions)
    lines = [
        f"split {split.name} ({split.source.name}): {kept + excluded} questions, "
        f"{kept} kept, {excluded} excluded",
        "  kept by hardness: " + ", ".join(f"{h} {labels[h]}" for h in order),
        "  kept by answer kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
        f"  ordered answers: {sum(q.gold.ordered for q in split.questions)}",
    ]
    for reason, count in split.exclusion_counts().most_common():
        lines.append(f"  excluded, {reason}: {count}")
    return "\n".join(lines)


def run_settings(_args: argparse.Namespace) -> int:
    """The settings every command shares, with the values the environment gives them now."""
    now, defaults = Settings.from_environment(), Settings()
    rows = [("flag", "variable", "default", "now")]
    for option in OPTIONS:
        default, value = getattr(defaults, option.field), getattr(now, option.field)
        if option.secret and value is not None:
            value = "(set)"
        rows.append((option.flag, option.variable, shown_value(default), shown_value(value)))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for *padded, last in rows:
        print("  ".join([*map(str.ljust, padded, widths), last]))
    return 0


def run_play(args: argparse.Namespace) -> int:
    sessions = open_manager(Settings.from_arguments(args))
    episode = sessions.create(seed=args.seed, question_id=args.question_id, db_id=args.db_id)
    print(
        f"episode {episode.episode_id} · question {episode.question.id} "
        f"({episode.question.hardness})"
    )
    print(episode.start.text)
    if args.interactive:
        play_interactive(episode)
    else:
        play_oracle(episode)
        for step in episode.history:
            print_step(step.arguments, step.result)
    print(
        f"\ntotal reward {episode.total_reward:+.3f} after {episode.steps_used} steps; "
        f"{'correct' if episode.correct else 'not correct'}"
    )
    sessions.shutdown()
    return 0


def print_step(arguments: dict, result: ToolResult) -> None:
    shown = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
    print(f"\n> {result.tool}({shown})  reward {result.reward:+.3f}")
    print(result.text)


def play_interactive(episode: Episode) -> None:
    argument_names = {"describe": "table", "sample": "table", "query": "sql", "answer": "value"}
    while not episode.done:
        try:
            line = input("\ncall> ").strip()
        except EOFError:
            return
        tool, _, rest = line.partition(" ")
        if tool not in argument_names:
            print("type one of: describe TABLE | sample TABLE [N] | query SQL | answer VALUE")
            continue
        arguments: dict = {argument_names[tool]: rest.strip()}
        if tool == "sample":
            sampled = sample_arguments(rest)
            if sampled is None:
                print("sample takes a table and, if you like, a number of rows: sample books 3")
                continue
            arguments = sampled
        print_step(arguments, episode.call(tool, arguments))


def sample_arguments(typed: str) -> dict | None:
    """`TABLE [N]` as sample's arguments (a quoted table name may hold spaces); None when it is
    not of that form."""
    try:
        parts = shlex.split(typed)
    except ValueError:  # an unclosed quote
        return None
    if len(parts) == 1:
        return {"table": parts[0]}
    if len(parts) == 2 and parts[1].isascii() and parts[1].isdigit():
        return {"table": parts[0], "n": int(parts[1])}
    return None


if __name__ == "__main__":
    sys.exit(main())
