"""One way for every door to build its session manager, from settings or command-line flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from env_core.catalog import Catalog
from env_core.demo import resolve_data_dir
from env_core.executor import ExecutorLimits
from env_core.rewards import PROFILES, RewardConfig
from env_core.sessions import SessionConfig, SessionManager


def open_sessions(
    data_dir: str | Path | None = None,
    *,
    split: str = "dev",
    cache_dir: Path | None = None,
    max_steps: int = 15,
    max_sessions: int = 256,
    idle_ttl_s: float = 900.0,
    reward_profile: str = "shaped",
    query_timeout_s: float = 2.0,
    max_rows: int = 20,
) -> SessionManager:
    """A session manager over `data_dir` (default: $SQLENV_DATA_DIR, else the embedded demo).

    Only `split` is prepared (or read from the cache); other splits of the directory can be
    loaded by building a `Catalog` directly.
    """
    limits = ExecutorLimits(timeout_s=query_timeout_s, max_rows=max_rows)
    root = resolve_data_dir(data_dir, cache_dir)
    catalog = Catalog.load(root, [split], cache_dir=cache_dir, limits=limits)
    config = SessionConfig(
        split=split,
        max_steps=max_steps,
        max_sessions=max_sessions,
        idle_ttl_s=idle_ttl_s,
        rewards=RewardConfig.profile(reward_profile),
        limits=limits,
    )
    return SessionManager(catalog, config)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-dir and --cache-dir, the same for every command."""
    parser.add_argument(
        "--data-dir",
        help="Spider-format data directory (default: $SQLENV_DATA_DIR, else the embedded demo)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="catalog cache (default: $SQLENV_CACHE_DIR, else ~/.cache/sqlenv)",
    )


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """The data and session flags every door's command line takes, read by `sessions_from`."""
    add_data_arguments(parser)
    parser.add_argument("--split", default="dev", help="question split to serve (dev)")
    parser.add_argument("--max-steps", type=int, default=15, help="step budget per episode (15)")
    parser.add_argument(
        "--reward-profile", choices=sorted(PROFILES), default="shaped", help="rewards (shaped)"
    )
    parser.add_argument("--max-sessions", type=int, default=256, help="episodes open at once (256)")
    parser.add_argument(
        "--idle-ttl", type=float, default=900.0, help="seconds before an idle episode closes (900)"
    )
    parser.add_argument(
        "--query-timeout", type=float, default=2.0, help="seconds a query may run (2)"
    )
    parser.add_argument("--max-rows", type=int, default=20, help="rows shown per query (20)")


def sessions_from(args: argparse.Namespace) -> SessionManager:
    return open_sessions(
        args.data_dir,
        split=args.split,
        cache_dir=args.cache_dir,
        max_steps=args.max_steps,
        max_sessions=args.max_sessions,
        idle_ttl_s=args.idle_ttl,
        reward_profile=args.reward_profile,
        query_timeout_s=args.query_timeout,
        max_rows=args.max_rows,
    )
