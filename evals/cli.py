"""`sqlenv eval` and `sqlenv eval-compare`, added to the `sqlenv` command through the
`sqlenv.commands` entry point.

Every `sqlenv` invocation imports this module to build its parser, so the harness itself
(matplotlib, the MCP and OpenEnv clients, the models) is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from env_core.command_line import CommandError
from env_core.extras import require_extra
from env_core.rewards import PROFILES
from env_core.settings import Settings, add_arguments, argument_type, whole
from evals.door_clients import DOOR_KINDS, DoorSpec, open_door
from serving.local_server import check_reachable

if TYPE_CHECKING:
    from evals.policy import Policy

POLICIES = ("oracle", "random", "openai", "hf")
# The doors that take --url, and the server each starts on a free port without one.
SERVER_DOORS = {"mcp-http": "sqlenv-mcp --transport http", "openenv": "sqlenv-openenv"}


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser(
        "eval",
        help="evaluate a policy over a seeded set of episodes; writes JSONL, report and plots",
        description="Play N episodes (the same questions for the same seed) with a policy "
        "through a door, print a summary table and write episodes.jsonl, summary.json, "
        "report.md and plots to --out. Re-running on the same --out resumes.",
    )
    run.add_argument(
        "--policy",
        choices=POLICIES,
        required=True,
        help="oracle (knows the gold SQL), random, openai (an OpenAI-compatible endpoint), "
        "hf (a local transformers model)",
    )
    run.add_argument("--door", choices=DOOR_KINDS, default="inprocess", help="(inprocess)")
    run.add_argument(
        "--url",
        help="mcp-http/openenv: base URL of a running server on the same data and step budget "
        "(default: start one on a free 127.0.0.1 port)",
    )
    run.add_argument(
        "--episodes",
        type=episode_count,
        default="all",
        help="number of episodes, or 'all' for every kept question once (all)",
    )
    run.add_argument("--seed", type=int, default=0, help="seed of the episode plan (0)")
    run.add_argument(
        "--workers",
        type=argument_type(whole(1, 64)),
        default=1,
        metavar="N",
        help="episodes in parallel processes (1)",
    )
    run.add_argument("--out", type=folder, required=True, help="run folder (resumed if it exists)")
    run.add_argument("--label", help="the run's name in tables and plots")
    run.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bar on stderr"
    )
    add_arguments(run, groups=("data", "episodes", "sql"))
    add_llm_arguments(run)
    run.set_defaults(run=run_eval, command="sqlenv eval")

    compare = commands.add_parser(
        "eval-compare",
        help="put several run folders side by side in one report",
        description="Write report.md and plots comparing run folders (e.g. base vs trained).",
    )
    compare.add_argument("runs", nargs="+", type=Path, help="run folders, each with run.json")
    compare.add_argument("--labels", help="comma-separated names for the runs")
    compare.add_argument("--out", type=folder, required=True, help="folder for the report")
    compare.set_defaults(run=run_compare, command="sqlenv eval-compare")

    audit = commands.add_parser(
        "audit-reward",
        help="check that each reward profile is a sound learning signal; prints a table",
        description="Play every question of the split with the oracle, a near miss and "
        "degenerate strategies under each reward profile, in process, and check that no "
        "episode without a correct answer out-earns the cheapest correct one and that a noisy "
        "oracle's mean reward rises strictly with its skill; also report how many GRPO groups "
        "carry a learning signal. Exits with 1 if a profile fails a check.",
    )
    audit.add_argument(
        "--profiles",
        type=profile_names,
        default=tuple(PROFILES),
        metavar="NAME[,NAME]",
        help=f"reward profiles to audit ({','.join(PROFILES)})",
    )
    audit.add_argument(
        "--questions",
        type=argument_type(whole(1)),
        metavar="N",
        help="audit N questions drawn with the seed (default: every kept question)",
    )
    audit.add_argument("--seed", type=int, default=0, help="seed of the draws (0)")
    add_arguments(audit, groups=("data", "episodes", "sql"), without=("reward_profile",))
    audit.set_defaults(run=run_audit, command="sqlenv audit-reward")


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    llm = parser.add_argument_group("LLM policies (openai, hf)")
    llm.add_argument(
        "--model", help="openai: model name; hf: a local model folder (or $SQLENV_EVAL_MODEL)"
    )
    llm.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        help="openai: chat-completions endpoint root ($OPENAI_BASE_URL, else local :8000/v1)",
    )
    llm.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="openai: environment variable holding the API key (OPENAI_API_KEY)",
    )
    llm.add_argument("--temperature", type=float, default=0.0, help="(0: greedy)")
    llm.add_argument("--max-new-tokens", type=int, default=512, help="per model turn (512)")


def episode_count(text: str) -> int | str:
    if text == "all":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a positive whole number, or 'all'")
    return int(text)


def folder(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder; give the folder's path")
    return Path(text)


def profile_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in PROFILES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown reward profile {', '.join(unknown) or repr(text)}; "
            f"choose from {', '.join(PROFILES)}"
        )
    return names


def build_policy(args: argparse.Namespace) -> Policy:
    if args.policy == "oracle":
        from evals.policies import OraclePolicy

        return OraclePolicy()
    if args.policy == "random":
        from evals.policies import RandomPolicy

        return RandomPolicy()
    from evals.llm.settings import GenerationSettings

    model = args.model or os.environ.get("SQLENV_EVAL_MODEL")
    if not model:
        raise CommandError(f"--policy {args.policy} needs --model")
    generation = GenerationSettings(args.temperature, args.max_new_tokens)
    if args.policy == "openai":
        from evals.llm.openai_chat import OpenAIChatPolicy

        check_reachable(args.base_url, "model endpoint", "/models")
        api_key = os.environ.get(args.api_key_env, "")
        return OpenAIChatPolicy(args.base_url, model, api_key, generation)
    require_extra("train", "--policy hf")
    if not Path(model).is_dir():
        raise CommandError(
            f"--policy hf: no model folder {model} (--model names a local folder holding a "
            "transformers model and its tokenizer, as python -m training.sft saves it)"
        )
    from evals.llm.hf_chat import HFChatPolicy

    return HFChatPolicy(model, generation)


def run_eval(args: argparse.Namespace) -> int:
    require_extra("eval", "sqlenv eval")
    if args.door == "openenv":
        require_extra("openenv", "--door openenv")
    if args.url and args.door not in SERVER_DOORS:
        raise CommandError(f"--url goes with --door {' or '.join(SERVER_DOORS)}")
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(f"--out {args.out} is a file, not a run folder")
    from evals.evaluate import RunInterrupted, evaluate
    from evals.report import summary_rows, text_table, write_report
    from evals.run_folder import Run

    spec = DoorSpec(args.door, Settings.from_arguments(args), args.url)
    policy = build_policy(args)
    if args.door in SERVER_DOORS and args.url is None:
        # Its catalog and libraries load for seconds before the first episode's progress.
        started = SERVER_DOORS[args.door]
        print(f"{args.command}: starting {started} on a free port ...", file=sys.stderr, flush=True)
    door = open_door(spec)
    try:
        kept = len(door.catalog.questions(spec.settings.split))
        n_episodes = kept if args.episodes == "all" else args.episodes
        result = evaluate(
            door,
            policy,
            n_episodes,
            args.seed,
            out_dir=args.out,
            workers=args.workers,
            progress=args.progress,
        )
    except RunInterrupted as interrupted:
        print(f"{args.command}: {interrupted}", file=sys.stderr)
        raise
    finally:
        door.close()
    run = Run(
        args.label or f"{policy.name} ({args.door})", result.config, result.summary, result.records
    )
    print(text_table(*summary_rows([run])))
    print(f"report: {write_report([run], args.out)}")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from evals.report import summary_rows, text_table, write_report
    from evals.run_folder import Run

    labels = args.labels.split(",") if args.labels else [None] * len(args.runs)
    if len(labels) != len(args.runs):
        raise CommandError("give one label per run folder")
    runs = [Run.load(path, label) for path, label in zip(args.runs, labels, strict=True)]
    print(text_table(*summary_rows(runs)))
    print(f"report: {write_report(runs, args.out)}")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    from evals.reward_audit import audit

    settings = Settings.from_arguments(args)
    audits = audit(
        settings,
        {name: PROFILES[name] for name in args.profiles},
        args.seed,
        args.questions,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    n = len(audits[0].questions)
    print(
        f"reward audit: {n} questions of split {settings.split}, "
        f"budget {settings.max_steps} steps, seed {args.seed}"
    )
    for result in audits:
        print(f"\n{result.report()}")
    return 0 if all(result.passed for result in audits) else 1
