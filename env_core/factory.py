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
    max_episodes_per_client: int = 32,
    route_by_episode_id: bool = False,
    idle_ttl_s: float = 900.0,
    reward_profile: str = "shaped",
    query_timeout_s: float = 2.0,
    max_rows: int = 20,
    sql_workers: int = 4,
    sql_memory_mb: int = 64,
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
        max_episodes_per_client=max_episodes_per_client,
        route_by_episode_id=route_by_episode_id,
        idle_ttl_s=idle_ttl_s,
        rewards=RewardConfig.profile(reward_profile),
        limits=limits,
        sql_workers=sql_workers,
        sql_memory_mb=sql_memory_mb,
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
        "--max-episodes-per-client",
        type=int,
        default=32,
        help="episodes one client (remote address) may hold open at once (32)",
    )
    parser.add_argument(
        "--route-by-episode-id",
        action="store_true",
        help="let any connection act on an episode by its id, not only the one that started "
        "it (for deployments that route calls by episode id)",
    )
    parser.add_argument(
        "--idle-ttl", type=float, default=900.0, help="seconds before an idle episode closes (900)"
    )
    parser.add_argument(
        "--query-timeout", type=float, default=2.0, help="seconds a query may run (2)"
    )
    parser.add_argument("--max-rows", type=int, default=20, help="rows shown per query (20)")
    parser.add_argument(
        "--sql-workers",
        type=int,
        default=4,
        help="worker processes that run agent SQL; at most this many queries run at once (4)",
    )
    parser.add_argument(
        "--sql-memory",
        type=int,
        default=64,
        metavar="MIB",
        help="memory one query may use, in MiB; a query that needs more is stopped (64)",
    )


def sessions_from(args: argparse.Namespace) -> SessionManager:
    return open_sessions(
        args.data_dir,
        split=args.split,
        cache_dir=args.cache_dir,
        max_steps=args.max_steps,
        max_sessions=args.max_sessions,
        max_episodes_per_client=args.max_episodes_per_client,
        route_by_episode_id=args.route_by_episode_id,
        idle_ttl_s=args.idle_ttl,
        reward_profile=args.reward_profile,
        query_timeout_s=args.query_timeout,
        max_rows=args.max_rows,
        sql_workers=args.sql_workers,
        sql_memory_mb=args.sql_memory,
    )
