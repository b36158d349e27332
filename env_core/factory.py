"""One way for every door to build its session manager from plain settings."""

from __future__ import annotations

from pathlib import Path

from env_core.catalog import Catalog
from env_core.demo import resolve_data_dir
from env_core.executor import ExecutorLimits
from env_core.rewards import RewardConfig
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
