"""The `/web` page (with ENABLE_WEB_INTERFACE=true): a person plays one episode at a time.

OpenEnv's web manager holds a single environment shared by every browser, so this is a demo
and debugging surface, not a multi-user one. Each observation is drawn the way an agent reads
it: the engine's text, then the step's reward.

The page keeps nothing on disk and calls no one: only the requests the page itself makes reach
Gradio (`PageRequests`; its uploads, files and API are refused), Gradio's version check
and usage analytics are off, and the page links no fonts from elsewhere (`own_fonts`).
"""

from __future__ import annotations

import html
import os
import re
from typing import Any

import gradio as gr
from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from doors.openenv.models import observation_text, tool_arguments
from env_core.errors import UnknownEpisodeError
from env_core.render import error_text
from env_core.tools import TOOLS, TOOLS_BY_NAME

ARGUMENT_HELP = "table for describe and sample, one SELECT for query, the answer for answer"
MAX_SEED_DIGITS = 18
# Picked when the page opens: a table's columns, the usual first step (`answer` would end the
# episode with whatever is typed).
FIRST_TOOL = "describe"
NO_EPISODE = 'no episode is running: press "New episode" first'
STORED = (
    "This page stores nothing on disk and accepts no uploads. The episode (one, shared by "
    "every browser) and this tab's list of calls live in the server's memory until the next "
    "episode or the server's end."
)

# Gradio checks for a newer version and sends usage analytics (to its vendor and the Hugging
# Face Hub) from each page built, unless this is off; it is read as each page is built.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

# What the page's own script asks for: the page, its scripts and styles, and the queue that
# runs a button's call (join, then read the events). Gradio serves more (uploads, files,
# proxied URLs, its API), none of which the page needs.
PAGE_READS = re.compile(
    r"/web(/|/(assets|static)/[^?]+|/theme\.css|/favicon\.ico|/config/?"
    r"|/gradio_api/heartbeat/[^/]+|/gradio_api/queue/data)?"
)
PAGE_CALLS = ("/web/gradio_api/queue/join",)


def seed_option(typed: str) -> dict[str, Any]:
    """The reset option for the seed typed on the page (none if blank); ValueError unless it
    is a plain whole number (`isdigit` alone admits "²", which `int` refuses)."""
    seed = typed.strip()
    if not seed:
        return {}
    if not (seed.isascii() and seed.isdigit() and len(seed) <= MAX_SEED_DIGITS):
        raise ValueError(f"the seed must be a whole number of at most {MAX_SEED_DIGITS} digits")
    return {"seed": int(seed)}


def observation_html(observation: dict[str, Any]) -> str:
    """An observation (fields plus top-level reward and done) as HTML: text, then outcome."""
    outcome = []
    if observation.get("reward") is not None:
        outcome.append(f"reward <b>{observation['reward']:+.3f}</b>")
    total = (observation.get("metadata") or {}).get("total_reward")
    if total is not None:
        outcome.append(f"total <b>{total:+.3f}</b>")
    if observation.get("done"):
        outcome.append("<b>episode over</b>")
    text = html.escape(observation_text(observation))
    return (
        f'<pre class="sqlenv-text" style="white-space: pre-wrap">{text}</pre>'
        f'<p class="sqlenv-outcome">{" · ".join(outcome)}</p>'
    )


class PageRequests:
    """ASGI middleware: under /web, only the requests the page makes (`PAGE_READS`,
    `PAGE_CALLS`); anything else there is answered 404 before Gradio reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not page_request(scope["method"], scope["path"]):
            refusal = {"detail": "not found: the /web page serves only its own requests"}
            await JSONResponse(refusal, status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def page_request(method: str, path: str) -> bool:
    """Whether a request is outside /web or one the page itself makes."""
    if path != "/web" and not path.startswith("/web/"):
        return True
    if method in ("GET", "HEAD"):
        return PAGE_READS.fullmatch(path) is not None
    return method == "POST" and path in PAGE_CALLS


def own_fonts(app: FastAPI) -> None:
    """The theme OpenEnv mounts the page with links its fonts from Google's font service,
    which every visitor's browser would then ask for them; the page uses the system's fonts
    instead (the theme names them after those)."""
    for route in app.routes:
        if isinstance(route, Mount) and route.path == "/web":
            blocks = route.app.get_blocks()
            blocks.stylesheets = []
            blocks.config["stylesheets"] = []


def _flatten(served: dict[str, Any]) -> dict[str, Any]:
    """The web manager's {observation, reward, done} as one observation dict."""
    return {**served["observation"], "reward": served["reward"], "done": served["done"]}


def _transcript_html(lines: list[str]) -> str:
    items = "".join(f"<li><code>{html.escape(line)}</code></li>" for line in lines)
    return f'<ol class="sqlenv-transcript">{items}</ol>' if lines else ""


def build_play_ui(
    web_manager: Any,
    action_fields: list[dict[str, Any]],
    metadata: Any,
    is_chat_env: bool,
    title: str,
    quick_start_md: str | None,
) -> gr.Blocks:
    """OpenEnv's `gradio_builder` hook: reset, pick a tool, read the observation and reward.

    Observations are drawn by the environment's `render_web` hook (`observation_html`).
    """
    render = web_manager.env.render_web

    async def start(question_id: str, seed: str) -> tuple[str, str, list[str], str]:
        try:
            options = seed_option(seed)
        except ValueError as error:
            return render({"text": error_text(error)}), "", [], ""
        if question_id.strip():
            options["question_id"] = question_id.strip()
        served = await web_manager.reset_environment(options)
        return render(_flatten(served)), "", [], ""

    async def run(
        tool: str, argument: str, n: float | None, lines: list[str]
    ) -> tuple[str, list[str], str]:
        if not web_manager.env.state.episode_id:
            refused = error_text(UnknownEpisodeError(NO_EPISODE))
            return render({"text": refused}), lines, _transcript_html(lines)
        sample_size = int(n) if tool == "sample" and n is not None else None
        arguments = tool_arguments(tool, argument, sample_size)
        action = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
        observation = _flatten(await web_manager.step_environment(action))
        call = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        reward = observation.get("reward")
        lines = [*lines, f"{tool}({call})" + ("" if reward is None else f"  reward {reward:+.3f}")]
        return render(observation), lines, _transcript_html(lines)

    with gr.Blocks(title=title) as blocks:
        transcript_lines = gr.State([])
        gr.Markdown(
            "## SQL exploration\nStart an episode to get a question about a database whose "
            "schema is hidden. Explore it with `describe`, `sample` and `query`, then `answer` "
            "once. Every call is one step of the budget."
        )
        with gr.Row(equal_height=True):
            question_id = gr.Textbox(
                label="Question id (optional)", placeholder="dev:12", elem_id="question-id"
            )
            seed = gr.Textbox(label="Seed (optional)", placeholder="7", elem_id="seed")
            reset_button = gr.Button("New episode", elem_id="reset")
        episode_view = gr.HTML(elem_id="episode")
        with gr.Row(equal_height=True):
            tool = gr.Radio(
                choices=[(f"{spec.name}: {spec.description}", spec.name) for spec in TOOLS],
                value=FIRST_TOOL,
                label="Tool",
                elem_id="tool",
            )
            sample_size = gr.Number(
                value=TOOLS_BY_NAME["sample"].parameters["properties"]["n"]["default"],
                precision=0,
                minimum=1,
                maximum=20,
                label="n (sample only)",
                elem_id="sample-n",
            )
        argument = gr.Textbox(label=f"Argument: {ARGUMENT_HELP}", lines=3, elem_id="argument")
        run_button = gr.Button("Run", variant="primary", elem_id="run")
        observation_view = gr.HTML(elem_id="observation")
        transcript_view = gr.HTML(elem_id="transcript")
        gr.Markdown(STORED, elem_id="stored")

        # One call to the shared environment at a time.
        busy = {"concurrency_id": "sqlenv", "concurrency_limit": 1}
        reset_button.click(
            start,
            inputs=[question_id, seed],
            outputs=[episode_view, observation_view, transcript_lines, transcript_view],
            **busy,
        )
        run_button.click(
            run,
            inputs=[tool, argument, sample_size, transcript_lines],
            outputs=[observation_view, transcript_lines, transcript_view],
            **busy,
        )
    return blocks
