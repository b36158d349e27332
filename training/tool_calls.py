"""Is a model's first turn a well-formed tool call? The measure of the SFT learning check.

A turn is well-formed when TRL's response parser (the one GRPO uses) finds at least one tool
call in it, and every call names one of the environment's tools with arguments that fit the
tool's schema: the required ones present, no others, each of the declared JSON type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from trl.chat_template_utils import add_response_schema, get_training_chat_template, parse_response

from doors.trl import SQLEnvTRL
from env_core.catalog import Question
from training.transcripts import first_turn, tool_schemas

JSON_TYPES = {"string": str, "integer": int}


def _fits(arguments: Any, parameters: dict[str, Any]) -> bool:
    if not isinstance(arguments, dict):
        return False
    properties = parameters["properties"]
    if not set(parameters.get("required", [])) <= set(arguments) <= set(properties):
        return False
    return all(
        isinstance(value, JSON_TYPES[properties[name]["type"]]) and not isinstance(value, bool)
        for name, value in arguments.items()
    )


def is_well_formed(message: dict[str, Any], schemas: Sequence[dict[str, Any]]) -> bool:
    functions = [call.get("function", {}) for call in message.get("tool_calls") or []]
    parameters = {
        schema["function"]["name"]: schema["function"]["parameters"] for schema in schemas
    }
    return bool(functions) and all(
        function.get("name") in parameters
        and _fits(function.get("arguments"), parameters[function["name"]])
        for function in functions
    )


@torch.no_grad()
def well_formed_rate(
    model: Any,
    tokenizer: Any,
    environment: SQLEnvTRL,
    questions: Sequence[Question],
    max_new_tokens: int = 96,
) -> float:
    """The share of `questions` whose greedy first turn is a well-formed tool call.

    Prompts are rendered as `GRPOTrainer` renders them: TRL's training chat template, the tool
    schemas in TRL's order, and the generation prompt.
    """
    add_response_schema(tokenizer)
    template = get_training_chat_template(tokenizer) or tokenizer.chat_template
    schemas = tool_schemas(environment)
    model.eval()
    good = 0
    for question in questions:
        prompt_ids = tokenizer.apply_chat_template(
            first_turn(environment, question),
            tools=schemas,
            chat_template=template,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        output = model.generate(
            torch.tensor([prompt_ids]),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
        completion = output[0, len(prompt_ids) :].tolist()
        if tokenizer.eos_token_id in completion:
            completion = completion[: completion.index(tokenizer.eos_token_id) + 1]
        message = parse_response(tokenizer, completion, prefix=prompt_ids, tools=schemas)
        good += is_well_formed(message, schemas)
    return good / len(questions)
