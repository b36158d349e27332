"""Real output for the docs, for cog: each helper runs the program the way a reader would and
returns what it printed as a Markdown block. `make docs` fails when a page differs from what
the program prints now (`cog --check`); `make docs-update` rewrites the pages.

Commands run in a fresh folder as from a clone's root: `spider`, `spider-syn` and `spider-dk`
there are those datasets (`../shared/data/<name>` beside this repository), `docs` and `scripts`
are this repository's, run folders land in `runs/`, and the catalog cache and the run folders'
keys are the folder's own, so every check starts cold and the same. Settings variables are
cleared, so defaults are the defaults.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPIDER = (REPO / ".." / "shared" / "data" / "spider").resolve()
ROBUSTNESS_VARIANTS = (SPIDER.with_name("spider-syn"), SPIDER.with_name("spider-dk"))
BIN = Path(sys.executable).parent
# Random per run: shown masked, and said so where they appear. An episode id: an MCP episode's
# handle (sqlenv_mcp.handles) or another door's.
EPISODE_ID = (re.compile(r"\b(?:[0-9a-f]{8}\.)?[0-9a-f]{32}(?:\.[0-9a-f]{16})?\b"), "<episode-id>")
Mask = tuple[re.Pattern[str], str]
# Durations and speed-ups, which vary with the machine.
TIMES: tuple[Mask, ...] = (
    (re.compile(r"\b\d+(\.\d+)? s\b"), "N s"),
    (re.compile(r"\(\d+x faster\)"), "(Nx faster)"),
)
# Servers started for a check listen on a free port; shown as the default.
PORT = (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:8000")
ELAPSED = (re.compile(r'"elapsed_ms": [\d.]+'), '"elapsed_ms": …')


@functools.cache
def workdir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="sqlenv-docs-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for name in ("docs", "scripts"):
        (folder / name).symlink_to(REPO / name)
    for data in (SPIDER, *ROBUSTNESS_VARIANTS):
        if data.is_dir():
            (folder / data.name).symlink_to(data)
    return folder


def environment() -> dict[str, str]:
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SQLENV_", "OPENAI_")) and name != "ENABLE_WEB_INTERFACE"
    }
    return {
        **kept,
        "PATH": f"{BIN}{os.pathsep}{kept.get('PATH', '')}",
        "COLUMNS": "100",
        # The catalog cache goes to the folder's own cache without a setting that would show
        # in help texts and `sqlenv settings`.
        "XDG_CACHE_HOME": str(workdir() / "cache"),
        "XDG_STATE_HOME": str(workdir() / "state"),  # the run folders' keys
        "HF_HUB_OFFLINE": "1",
    }


def run(command: str, *, stderr: bool = False, status: int = 0, masks: Sequence[Mask] = ()) -> str:
    """What `command` prints on stdout (then stderr, with `stderr`), masked; it must exit
    with `status`. A command shown twice (on two pages) runs once."""
    output = _run(command, stderr, status)
    for pattern, replacement in (EPISODE_ID, *masks):
        output = pattern.sub(replacement, output)
    return output


@functools.cache
def _run(command: str, stderr: bool, status: int) -> str:
    if re.search(r"\bspider\b", command) and not SPIDER.is_dir():
        raise RuntimeError(f"{command!r} needs the Spider data at {SPIDER}")
    result = subprocess.run(
        command,
        shell=True,
        cwd=workdir(),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != status:
        raise RuntimeError(
            f"{command!r} exited with {result.returncode}, not {status}:\n{result.stderr[-3000:]}"
        )
    return result.stdout + (result.stderr if stderr else "")


def fence(text: str, language: str = "text") -> str:
    return f"```{language}\n{text.rstrip()}\n```\n"


def shell(*commands: str, masks: Sequence[Mask] = (), **options) -> str:
    """Each command after `$ `, then its output, in one text block (the masks apply to the
    command too)."""
    shown = []
    for command in commands:
        output = run(command, masks=masks, **options)
        for pattern, replacement in masks:
            command = pattern.sub(replacement, command)
        shown.append(f"$ {command}\n{output}")
    return fence("".join(shown))


def source(path: str, language: str = "python") -> str:
    """A file of this repository, whole, as a code block."""
    return fence((REPO / path).read_text(), language)


@functools.cache
def openenv_server() -> str:
    """The URL of `sqlenv-openenv` on the demo data, on a free 127.0.0.1 port; one server for
    the whole check, stopped when it ends."""
    return _local_server([str(BIN / "sqlenv-openenv")], "/health")


@functools.cache
def mcp_http_server() -> str:
    """The URL of the MCP server as `make run` serves it, on a free 127.0.0.1 port; one server
    for the whole check, stopped when it ends."""
    command = [str(BIN / "sqlenv-mcp"), "--transport", "http", "--route-by-episode-id"]
    return _local_server(command, "/health")


def _local_server(command: list[str], health_path: str) -> str:
    sys.path.insert(0, str(REPO))
    from serving.local_server import LocalServer

    previous = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment())
    try:
        server = LocalServer(command, health_path)
    finally:
        os.environ.clear()
        os.environ.update(previous)
    atexit.register(server.stop)
    return server.url


def inspector_session(calls: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The MCP Inspector CLI playing an episode by hand against `mcp_http_server`: each call
    (a tool and its `key=value` arguments) is a command of its own, so a new MCP session, and
    acts on the episode the first call started by passing its id."""
    if not (REPO / "node_modules").is_dir():
        raise RuntimeError(f"the MCP Inspector is missing: run `npm ci` in {REPO}")
    with contextlib.suppress(FileExistsError):
        (workdir() / "node_modules").symlink_to(REPO / "node_modules")
    inspector = (
        f"npx @modelcontextprotocol/inspector --cli {mcp_http_server()}/mcp --transport http"
    )
    commands: list[str] = []
    episode_id = ""
    for tool, arguments in calls:
        if episode_id:
            arguments = [*arguments, f"episode_id={episode_id}"]
        given = "".join(f" --tool-arg {shlex.quote(argument)}" for argument in arguments)
        command = f"{inspector} --method tools/call --tool-name {tool}{given}"
        commands.append(command)
        if not episode_id:
            episode_id = json.loads(_run(command, False, 0))["structuredContent"]["episode_id"]
    return shell(*commands, masks=(PORT, EPISODE_ID, ELAPSED))


def mcp_session(calls: Sequence[tuple[str, dict]], structured_last: bool = True) -> str:
    """The calls made by an MCP client to `sqlenv-mcp` over stdio, on the demo data: each as
    `> tool {arguments}` and the text the server answers (`(isError)` when it is a tool
    error), then the last call's structured result."""
    return fence(asyncio.run(_mcp_session(calls, structured_last)))


async def _mcp_session(calls: Sequence[tuple[str, dict]], structured_last: bool) -> str:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(
        command=str(BIN / "sqlenv-mcp"), env=environment(), cwd=str(workdir())
    )
    lines: list[str] = []
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for tool, arguments in calls:
            result = await session.call_tool(tool, arguments)
            flag = "   (isError)" if result.isError else ""
            lines.append(f"> {tool} {json.dumps(arguments, ensure_ascii=False)}{flag}")
            lines += [block.text for block in result.content if block.type == "text"]
            lines.append("")
        if structured_last:
            lines.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return masked_json("\n".join(lines))


def openenv_messages(url: str, messages: Sequence[dict]) -> str:
    """Each message sent over the server's WebSocket `/ws` (`>`) and the one it answers (`<`),
    as JSON."""
    return fence(asyncio.run(_openenv_messages(url, messages)))


async def _openenv_messages(url: str, messages: Sequence[dict]) -> str:
    import websockets

    lines = []
    async with websockets.connect(url.replace("http", "ws", 1) + "/ws") as socket:
        for message in messages:
            await socket.send(json.dumps(message))
            answer = json.loads(await socket.recv())
            lines += [f"> {json.dumps(message)}", f"< {json.dumps(answer, indent=2)}", ""]
    return masked_json("\n".join(lines))


def masked_json(text: str) -> str:
    """Episode ids and measured times masked."""
    for pattern, replacement in (EPISODE_ID, ELAPSED):
        text = pattern.sub(replacement, text)
    return text


def definition(path: str, name: str) -> str:
    """The source of a top-level function or class of this repository, as a code block."""
    import ast

    text = (REPO / path).read_text()
    for node in ast.parse(text).body:
        if getattr(node, "name", None) == name:
            return fence(ast.get_source_segment(text, node) or "", "python")
    raise LookupError(f"{path} defines no {name}")


# The baseline runs on Spider dev that the evaluation and story pages show.
SPIDER_DEV = "--data-dir spider --split dev_without_wta_1"
ORACLE_RUN = f"sqlenv eval --policy oracle {SPIDER_DEV} --out runs/oracle --no-progress"
RANDOM_RUN = f"sqlenv eval --policy random {SPIDER_DEV} --out runs/random --no-progress"


def docstring(path: str) -> str:
    """A module's docstring, verbatim: the precise rules live in the code, once."""
    import ast

    return (ast.get_docstring(ast.parse((REPO / path).read_text())) or "") + "\n"


def reward_profiles() -> str:
    """The reward profiles as the engine defines them, one column each."""
    import dataclasses

    sys.path.insert(0, str(REPO))
    from env_core.rewards import PROFILES

    names = list(PROFILES)
    rows = ["| setting | " + " | ".join(f"`{name}`" for name in names) + " |"]
    rows.append("|---" * (len(names) + 1) + "|")
    for field in dataclasses.fields(next(iter(PROFILES.values()))):
        values = [getattr(PROFILES[name], field.name) for name in names]
        shown = [f"{value:g}" if isinstance(value, float) else str(value) for value in values]
        rows.append(f"| `{field.name}` | " + " | ".join(shown) + " |")
    return "\n".join(rows) + "\n"


def tools_table() -> str:
    """The tools table the pages show, as `scripts/docs/tools_table.py` prints it."""
    return run("python scripts/docs/tools_table.py")
