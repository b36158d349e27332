"""`sqlenv-mcp` plus no-op tools, the SDK floor for bench_mcp.py.

`noop` returns a result of the same shape and output schema as the episode tools; `noop_plain`
the same content without an output schema, which the Python client then does not validate.

python benchmarks/mcp_floor_server.py [sqlenv-mcp options]
"""

import logging
import sys
from typing import Annotated

from mcp.types import CallToolResult

from sqlenv_mcp.cli import build_parser, build_server, serve
from sqlenv_mcp.results import StepOutput, tool_result

NOOP_OUTPUT = {
    "episode_id": "",
    "tool": "noop",
    "ok": True,
    "reward": 0.0,
    "done": False,
    "data": {},
}


def main() -> None:
    args = build_parser().parse_args()
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    served = build_server(args)
    server = served.server

    @server.tool(description="Do nothing; returns a result shaped like the episode tools'.")
    async def noop() -> Annotated[CallToolResult, StepOutput]:
        return tool_result("ok", NOOP_OUTPUT)

    @server.tool(description="Do nothing, with no output schema for the client to validate.")
    async def noop_plain() -> CallToolResult:
        return tool_result("ok", NOOP_OUTPUT)

    serve(served, args)


if __name__ == "__main__":
    main()
