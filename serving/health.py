"""The health check every server answers, in OpenEnv's words (its providers and `openenv
validate` poll `GET /health` and expect "healthy"): 200 and "healthy" while the server can
serve, 503 and "unhealthy" while it cannot (its SQL workers cannot start, say)."""

from __future__ import annotations

HEALTH_PATH = "/health"
HEALTHY = "healthy"
UNHEALTHY = "unhealthy"


def health_status(reason: str | None) -> tuple[str, int]:
    """The status word and HTTP status code of a server kept from serving by `reason` (None:
    it can serve)."""
    return (HEALTHY, 200) if reason is None else (UNHEALTHY, 503)
