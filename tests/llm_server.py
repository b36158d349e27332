"""A small OpenAI-compatible chat-completions server over a local `transformers` model.

    python -m tests.llm_server --model runs/tiny-model --port 8001

Test support: it exists so the OpenAI-compatible policy can be tested end to end against a
real HTTP server running a real model on this machine: `POST /v1/chat/completions` (with
`tools`, answering with `tool_calls` parsed from the model's `<tool_call>` blocks, as vLLM's
hermes parser does), `GET /v1/models` and `GET /health`. One request generates at a time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from env_core.hermes import ModelTurn
from evals.llm.hf_chat import HFChatBackend
from evals.llm.settings import GenerationSettings
from serving.asgi import listening_socket


def completion_response(model: str, number: int, turn: ModelTurn) -> dict:
    tool_calls = [
        {
            "id": f"call_{number}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": _as_json_text(call.arguments)},
        }
        for index, call in enumerate(turn.tool_calls)
    ]
    message = {"role": "assistant", "content": turn.content or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
    }


def _as_json_text(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def build_app(model_path: str, model_name: str) -> Starlette:
    backend = HFChatBackend(model_path, GenerationSettings())
    numbers = itertools.count()

    async def chat_completions(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("messages"), list):
            return JSONResponse({"error": {"message": "messages must be a list"}}, 400)
        generation = GenerationSettings(
            float(body.get("temperature") or 0.0), int(body.get("max_tokens") or 512)
        )
        turn = await anyio.to_thread.run_sync(
            backend.generate_turn,
            body["messages"],
            body.get("tools") or [],
            int(body.get("seed") or 0),
            generation,
        )
        return JSONResponse(completion_response(model_name, next(numbers), turn))

    async def models(_request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": model_name, "object": "model"}]})

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models),
            Route("/health", health),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.llm_server", description=__doc__)
    parser.add_argument("--model", required=True, help="a local transformers model folder")
    parser.add_argument("--name", default="local", help="the model name clients send (local)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    app = build_app(args.model, args.name)
    listener = listening_socket(args.host, args.port)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


if __name__ == "__main__":
    main()
