"""The MCP door in the verifiers environment, whose mcp is 2.0.0 (verifiers 0.4 pins it): a
full episode over stdio in both eras (`tests/sqlenv_mcp/mcp2/test_mcp_eras.py -k stdio`, which
make test runs here too), and over HTTP, which this SDK cannot serve as the door needs, a one-line
refusal that says which mcp does, rather than a traceback."""

import socket
import subprocess
import sys
from importlib.metadata import version


def test_http_on_an_sdk_that_cannot_serve_it_is_refused_in_one_line_naming_the_mcp_needed():
    assert version("mcp") == "2.0.0"
    with socket.socket() as probe:  # a free port, were the server to start after all
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [sys.executable, "-m", "sqlenv_mcp", "--transport", "http", "--port", port]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 1
    assert finished.stderr == (
        "sqlenv-mcp: serving MCP over HTTP needs mcp 2.3 or later, not 2.0.0 (stdio works on it): "
        "pip install -U 'mcp>=2.3'\n"
    )
