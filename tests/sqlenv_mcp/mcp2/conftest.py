"""Tests through the mcp 2.x client, run in the environment of the plain install (`make test`
builds it as .venv-mcp2): on mcp 1.x they fail at once rather than pass unrun."""

from importlib.metadata import version

if int(version("mcp").partition(".")[0]) < 2:
    raise RuntimeError(
        f"tests/sqlenv_mcp/mcp2 needs the mcp 2.x SDK (found {version('mcp')}): run them with "
        ".venv-mcp2/bin/pytest, as make test does"
    )
