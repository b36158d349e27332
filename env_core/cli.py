"""`sqlenv`: prepare a data directory's catalog, or play an episode and print its transcript."""

from __future__ import annotations

import argparse
import functools
import logging
import shlex
import sys
from collections import Counter
from importlib.metadata import entry_points

from env_core.catalog import Split, question_files
from env_core.command_line import CommandParser, run_main
from env_core.episode import Episode, ToolResult
from env_core.factory import load_catalog, one_dataset, open_manager
from env_core.layouts import detect_layout, in_difficulty_order
from env_core.oracle import play_oracle
from env_core.progress import PreparationProgress
from env_core.settings import OPTIONS, Settings, add_arguments, shown_value
from env_core.tools import ToolSpec, tool_table


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
        description="Run every gold query of the split (or of every split) once, under the "
        "agent's limits (--query-timeout, --sql-memory; --sql-workers at once), and cache the "
        "catalog keyed by the files' hashes and the limits; print the questions kept and "
        "excluded (with the reasons) and the cold and warm start times.",
    )
    add_arguments(prepare, groups=("data", "sql"))
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
    add_arguments(check, groups=("data", "sql"))
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


def run_prepare(args: argparse.Namespace) -> int:
    settings = Settings.from_arguments(args)
    data_dir, databases_dir, _ = one_dataset(settings)
    splits = list(question_files(data_dir, databases_dir)) if args.all_splits else [settings.split]
    load = functools.partial(load_catalog, settings)
    layout = detect_layout(data_dir, databases_dir)
    print(f"data: {data_dir} ({layout.dataset} layout)", flush=True)
    prepared = []
    progress = PreparationProgress()
    for name in splits:  # one at a time, each reported as soon as it is ready
        split = load([name], refresh=args.refresh, progress=progress).splits[name]
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
    settings = Settings.from_arguments(args)
    data_dir, databases_dir, _ = one_dataset(settings)
    splits = list(question_files(data_dir, databases_dir))
    catalog = load_catalog(settings, splits, progress=PreparationProgress())
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
    manager = open_manager(Settings.from_arguments(args))
    episode = manager.create(seed=args.seed, question_id=args.question_id, db_id=args.db_id)
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
    manager.shutdown()
    return 0


def print_step(arguments: dict, result: ToolResult) -> None:
    shown = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
    print(f"\n> {result.tool}({shown})  reward {result.reward:+.3f}")
    print(result.text)


def play_interactive(episode: Episode) -> None:
    tools = {spec.name: spec for spec in tool_table()}
    while not episode.done:
        try:
            line = input("\ncall> ").strip()
        except EOFError:
            return
        tool, _, rest = line.partition(" ")
        if tool not in tools:
            print(f"type one of: {' | '.join(map(typed_form, tools.values()))}")
            continue
        arguments = typed_arguments(tools[tool], rest)
        if arguments is None:
            print(f"type {typed_form(tools[tool])} (a quoted name may hold spaces)")
            continue
        print_step(arguments, episode.call(tool, arguments))


def typed_form(spec: ToolSpec) -> str:
    """How a call of the tool is typed: "sample TABLE [N]"."""
    required = spec.parameters.get("required", [])
    words = [
        name.upper() if name in required else f"[{name.upper()}]"
        for name in spec.parameters["properties"]
    ]
    return " ".join([spec.name, *words])


def typed_arguments(spec: ToolSpec, typed: str) -> dict | None:
    """The arguments of a typed call: the whole text for a tool of one parameter (SQL, an
    answer), else words (a quoted one may hold spaces) filling the parameters in order, whole
    numbers where a parameter takes one; None when the text is not of the tool's form."""
    properties = spec.parameters["properties"]
    if len(properties) == 1:
        return {next(iter(properties)): typed.strip()}
    try:
        words = shlex.split(typed)
    except ValueError:  # an unclosed quote
        return None
    if not len(spec.parameters.get("required", [])) <= len(words) <= len(properties):
        return None
    arguments: dict = {}
    for (name, schema), word in zip(properties.items(), words, strict=False):
        if schema["type"] == "integer":
            if not (word.isascii() and word.isdigit()):
                return None
            arguments[name] = int(word)
        else:
            arguments[name] = word
    return arguments


if __name__ == "__main__":
    sys.exit(main())
