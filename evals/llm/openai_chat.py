"""Any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, Ollama, llama.cpp
server, hosted APIs) as a policy."""

from __future__ import annotations

import time
from typing import Any

import httpx

from env_core.contract import Message
from env_core.hermes import ModelTurn, RawToolCall
from evals.llm.chat_loop import ChatPolicy
from evals.llm.settings import GenerationSettings

RETRIES = 4


class OpenAIChatBackend:
    def __init__(
        self, base_url: str, model: str, api_key: str, generation: GenerationSettings
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.generation = generation
        self._client: httpx.Client | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    def complete(self, messages: list[Message], tools: list[dict], seed: int) -> ModelTurn:
        body = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
            "temperature": self.generation.temperature,
            "max_tokens": self.generation.max_new_tokens,
            "seed": seed,
        }
        message = self._post(body)["choices"][0]["message"]
        calls = [
            RawToolCall(
                call.get("id") or f"call_{number}",
                call.get("function", {}).get("name", ""),
                call.get("function", {}).get("arguments"),
            )
            for number, call in enumerate(message.get("tool_calls") or [])
        ]
        return ModelTurn(message.get("content") or "", calls)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries on connection errors, 429 and 5xx; the last attempt's error
        propagates."""
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.Client(headers=headers, timeout=300)
        for attempt in range(RETRIES - 1):
            try:
                response = self._client.post(self.url, json=body)
                if response.status_code != 429 and response.status_code < 500:
                    break
            except httpx.TransportError:
                pass
            time.sleep(2**attempt)
        else:
            response = self._client.post(self.url, json=body)
        response.raise_for_status()
        return response.json()


class OpenAIChatPolicy(ChatPolicy):
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        generation: GenerationSettings | None = None,
    ) -> None:
        backend = OpenAIChatBackend(base_url, model, api_key, generation or GenerationSettings())
        super().__init__(f"openai:{model}", backend)
