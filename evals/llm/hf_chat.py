"""A local `transformers` chat model as a policy: its own chat template renders the prompt and
the tools, and tool calls are read back in the Hermes/Qwen `<tool_call>` format."""

from __future__ import annotations

import threading
from typing import Any

from env_core.contract import Message
from env_core.hermes import ModelTurn, parse_hermes
from evals.llm.chat_loop import ChatPolicy
from evals.llm.settings import GenerationSettings


class HFChatBackend:
    """Loads the model on first use, so the backend (and the policy) pickle to workers cheaply."""

    def __init__(self, model_path: str, generation: GenerationSettings) -> None:
        self.model_path = model_path
        self.generation = generation
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "generation": self.generation}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model_path"], state["generation"])

    def _model(self) -> tuple[Any, Any]:
        if self._loaded is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            model = AutoModelForCausalLM.from_pretrained(self.model_path)
            model.eval()
            self._loaded = tokenizer, model
        return self._loaded

    def complete(self, messages: list[Message], tools: list[dict], seed: int) -> ModelTurn:
        return self.generate_turn(messages, tools, seed, self.generation)

    def generate_turn(
        self,
        messages: list[Message],
        tools: list[dict],
        seed: int,
        generation: GenerationSettings,
    ) -> ModelTurn:
        import torch

        with self._lock:
            tokenizer, model = self._model()
            inputs = tokenizer.apply_chat_template(
                messages,
                tools=tools,
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
            sampling = generation.temperature > 0
            options = {"do_sample": sampling}
            if sampling:
                torch.manual_seed(seed)
                options["temperature"] = generation.temperature
            with torch.no_grad():
                output = model.generate(
                    **inputs,
                    max_new_tokens=generation.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    **options,
                )
        new_tokens = output[0, inputs["input_ids"].shape[1] :]
        return parse_hermes(tokenizer.decode(new_tokens, skip_special_tokens=True))


class HFChatPolicy(ChatPolicy):
    def __init__(self, model_path: str, generation: GenerationSettings | None = None) -> None:
        super().__init__(
            f"hf:{model_path}", HFChatBackend(model_path, generation or GenerationSettings())
        )
