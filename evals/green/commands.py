"""`sqlenv green` and `sqlenv purple`, added to `sqlenv` through the `sqlenv.commands` entry
point. The A2A SDK is imported only when one of them runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from env_core.command_line import RenamedFlag
from env_core.extras import require_extra
from env_core.settings import ASSESSMENT_GROUP, GROUPS, Settings, add_arguments, argument_type
from evals.cli import POLICIES, add_llm_arguments, build_policy, episode_count
from evals.green.origins import origin_of
from serving.asgi import listening_socket

A2A_PROTOCOL = "A2A protocols 1.0 and 0.3.0"
TOKEN_VARIABLE = "SQLENV_ASSESSMENT_TOKEN"


def register(commands: argparse._SubParsersAction) -> None:
    green = commands.add_parser(
        "green",
        help="serve the green agent: SQL-exploration assessments over A2A",
        description="Serve an A2A agent that assesses other agents: send it "
        '{"participants": {"agent": "<A2A URL>"}, "config": {"episodes": N, "seed": S, '
        '"split": NAME, "max_steps": N}} and it plays each episode with the assessed agent '
        f"through assigned MCP tools, scores it with the engine and returns the records and "
        f"summary ({A2A_PROTOCOL}).",
    )
    add_serving_arguments(green)
    green.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra Host header the episodes' MCP endpoints accept (repeatable); only localhost "
        "names pass unless listed, e.g. green.example.org:*",
    )
    add_arguments(green, groups=(*GROUPS, ASSESSMENT_GROUP), command="sqlenv green")
    green.set_defaults(run=run_green, command="sqlenv green")

    purple = commands.add_parser(
        "purple",
        help="serve a reference assessed agent (a purple agent) for assessments over A2A",
        description="Serve an A2A agent that plays each episode a green agent sends it through "
        f"the episode's MCP tools, with a policy ({A2A_PROTOCOL}).",
    )
    purple.add_argument(
        "--policy",
        choices=POLICIES,
        required=True,
        help="oracle (looks the gold up in its own catalog: tests), random, openai (an "
        "OpenAI-compatible endpoint), hf (a local transformers model)",
    )
    purple.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random: the seed of its draws; with an assessment's seed, each episode draws what "
        "`sqlenv eval --policy random` draws for it (0)",
    )
    purple.add_argument(
        "--allowed-mcp-origin",
        action="append",
        default=[],
        type=argument_type(origin_of),
        metavar="ORIGIN",
        help="an address (scheme://host[:port]) whose MCP tools it may be sent to play with, "
        "e.g. https://green.example.org (repeatable); with none, only loopback addresses "
        "(localhost, 127.0.0.0/8, ::1): an episode's brief names where the policy's calls go",
    )
    add_serving_arguments(purple)
    add_arguments(purple, groups=("data", "server"), command="sqlenv purple")
    add_llm_arguments(purple)
    purple.set_defaults(run=run_purple, command="sqlenv purple")
    register_assess(commands)


def register_assess(commands: argparse._SubParsersAction) -> None:
    assess = commands.add_parser(
        "assess",
        help="run an assessment: ask a green agent to assess an agent, print the result",
        description="Ask a green agent (--green URL, or one started here on a free port) for an "
        "assessment of an agent (--agent URL, or --policy: our reference agent started here), "
        "show its progress as it comes and print its summary. Exit status 1 "
        f"when the assessment did not complete ({A2A_PROTOCOL}).",
    )
    add_assess_arguments(assess)
    add_arguments(assess, groups=("data", "episodes"))
    assess.set_defaults(run=run_assess, command="sqlenv assess")


def run_assess(args: argparse.Namespace) -> int:
    require_extra("green", "sqlenv assess")
    from evals.green.assess import run_assess

    return run_assess(args)


def add_assess_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--green", metavar="URL", help="a running green agent (default: start one)")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--agent", metavar="URL", help="the A2A agent to assess")
    who.add_argument(
        "--policy",
        choices=("oracle", "random"),
        help="assess our reference agent (sqlenv purple) with this policy, started here",
    )
    parser.add_argument("--participant", action=RenamedFlag, new="--agent")
    parser.add_argument("--episodes", default=5, type=episode_count, help="'all' or N (5)")
    parser.add_argument("--seed", type=int, default=0, help="the episode plan's seed (0)")
    parser.add_argument(
        "--episode-timeout", type=float, metavar="SECONDS", help="per episode (the agent's: 300)"
    )
    parser.add_argument(
        "--token-env",
        default=TOKEN_VARIABLE,
        metavar="NAME",
        help=f"the variable holding the green agent's token, if it needs one ({TOKEN_VARIABLE})",
    )
    parser.add_argument("--out", type=Path, help="write the result (config, summary) as JSON")


def add_serving_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--card-url",
        help="the URL other agents reach this one at, advertised in its card "
        "(default: http://HOST:PORT/)",
    )


def run_green(args: argparse.Namespace) -> int:
    require_extra("green", "sqlenv green")
    from env_core.factory import check_split
    from evals.green.green_agent import green_app

    settings = Settings.from_arguments(args)
    check_split(settings)
    card_url = card_url_of(args, settings)
    serve(green_app(settings, card_url, tuple(args.allowed_host)), settings, "green", card_url)
    return 0


def run_purple(args: argparse.Namespace) -> int:
    require_extra("green", "sqlenv purple")
    from env_core.factory import load_catalog
    from evals.green.purple_agent import known_questions, purple_app

    settings = Settings.from_arguments(args)
    known = None
    if args.policy == "oracle":
        known = known_questions(load_catalog(settings), settings.split)
    card_url = card_url_of(args, settings)
    origins = tuple(args.allowed_mcp_origin)
    app = purple_app(build_policy(args), known, args.seed, card_url, origins)
    serve(app, settings, "purple", card_url)
    return 0


def card_url_of(args: argparse.Namespace, settings: Settings) -> str:
    return args.card_url or f"http://{settings.host}:{settings.port}/"


def serve(app, settings: Settings, name: str, card_url: str) -> None:
    from serving.http_protocol import serve as serve_http

    listener = listening_socket(settings.host, settings.port)
    print(f"sqlenv {name}: serving A2A at {card_url}", file=sys.stderr, flush=True)
    serve_http(app, listener, settings, settings.log_level)
