"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, run with the
Node of npm's `node` package: the suite needs Node 22) against the HTTP server, in episode and
assessment modes. Every scenario passes but those in mcp_conformance_baseline.yml, which name
capabilities the server does not claim or fixtures of the suite's reference server; a scenario
in the baseline that passes fails the run too (the suite's rule), so the list stays exact."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "node_modules" / ".bin" / "node"
SUITE = ROOT / "node_modules" / ".bin" / "conformance"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")
DEV = "dev_without_wta_1"


def run_suite(url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    if not (NODE.exists() and SUITE.exists()):
        pytest.fail(f"{SUITE} or {NODE} is missing: run `npm ci` (make test does)")
    command = [str(NODE), str(SUITE), "server", "--url", url]
    command += ["--expected-failures", str(BASELINE), "--output-dir", str(tmp_path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("mode", ["episodes", "assess"])
def test_the_official_conformance_suite_passes_but_the_listed_scenarios(
    mode, http_server, tmp_path
):
    if mode == "assess":
        server = http_server("--assess", f"{DEV}:0")
        url = re.search(r"assessing \S+ at (http://\S+/mcp)", server.output()).group(1)
    else:
        url = f"{http_server().url}/mcp"
    done = run_suite(url, tmp_path)
    summary = done.stdout[done.stdout.rfind("=== SUMMARY ===") :]
    assert done.returncode == 0, summary + done.stderr[-2000:]
    assert re.search(r"Total: [1-9]\d* passed", summary), summary
