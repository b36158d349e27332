"""A small OpenAI-compatible chat-completions server over a local `transformers` model, or
over scripted turns.

    python -m tests.llm_server --model runs/tiny-model --port 8001

Test support: it exists so the OpenAI-compatible policy can be tested end to end against a
real HTTP server running a real model on this machine: `POST /v1/chat/completions` (with
`tools`, answering with `tool_calls` parsed from the model's `<tool_call>` blocks, as vLLM's
hermes parser does), `GET /v1/models` and `GET /health`. One request generates at a time.
`scripted_app` answers from scripts instead, for a harness that needs an endpoint but no model.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Awaitable, Callable

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
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


def streamed(response: dict) -> str:
    """A completion as a chat-completions stream: one chunk holding the whole reply, then the
    end of the stream."""
    choice = response["choices"][0]
    delta = dict(choice["message"])
    if "tool_calls" in delta:
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
    chunk = {
        **response,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"


def _as_json_text(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def build_app(model_path: str, model_name: str) -> Starlette:
    backend = HFChatBackend(model_path, GenerationSettings())

    async def generate(body: dict) -> ModelTurn:
        generation = GenerationSettings(
            float(body.get("temperature") or 0.0), int(body.get("max_tokens") or 512)
        )
        return await anyio.to_thread.run_sync(
            backend.generate_turn,
            body["messages"],
            body.get("tools") or [],
            int(body.get("seed") or 0),
            generation,
        )

    return chat_app(model_name, generate)


def scripted_app(
    scripts: dict[str, list[ModelTurn]], model_name: str, requests: list[dict]
) -> Starlette:
    """Answers a conversation whose first user message is a key of `scripts` with that
    script's turns in order (the next one after as many as it has replied), then with a reply
    that makes no call; records each request's body in `requests`."""
    ending = ModelTurn(content="That is all.", tool_calls=[])

    async def play(body: dict) -> ModelTurn:
        requests.append(body)
        messages = body["messages"]
        opening = next(m["content"] for m in messages if m["role"] == "user")
        turns = scripts[opening]
        replied = sum(m["role"] == "assistant" for m in messages)
        return turns[replied] if replied < len(turns) else ending

    return chat_app(model_name, play)


def chat_app(model_name: str, next_turn: Callable[[dict], Awaitable[ModelTurn]]) -> Starlette:
    numbers = itertools.count()

    async def chat_completions(request: Request) -> JSONResponse:
        body = await request.json()
        if not isinstance(body.get("messages"), list):
            return JSONResponse({"error": {"message": "messages must be a list"}}, 400)
        turn = await next_turn(body)
        response = completion_response(model_name, next(numbers), turn)
        if body.get("stream"):
            return Response(streamed(response), media_type="text/event-stream")
        return JSONResponse(response)

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
