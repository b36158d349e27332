"""What an assessment request holds, checked with a reason a sender can act on.

{"participants": {"agent": "http://purple.example:9019/"},
 "config": {"episodes": 20, "seed": 0, "split": "dev", "max_steps": 15}}
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator

from env_core.errors import listed, shown
from env_core.settings import STEP_BUDGET_RANGE

AGENT_ROLE = "agent"
SPLIT_NAME = r"^[A-Za-z0-9_.-]+$"  # a question file's name, as the data directory lists them
MAX_REASONS = 5


class RequestError(ValueError):
    """A request the green agent rejects; the message says why."""


class AssessmentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    episodes: int | Literal["all"] = "all"
    seed: int = 0
    split: Annotated[str, Field(min_length=1, max_length=100, pattern=SPLIT_NAME)] | None = None
    dataset: Annotated[str, Field(min_length=1, max_length=100, pattern=SPLIT_NAME)] | None = None
    max_steps: Annotated[int, Field(ge=STEP_BUDGET_RANGE[0], le=STEP_BUDGET_RANGE[1])] | None = None
    episode_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0

    # Numbers are JSON numbers: "1" is no more a count of episodes than "7" a seed.
    @field_validator("episodes", mode="before")
    @classmethod
    def _episode_count(cls, value: object) -> object:
        if value == "all" or (type(value) is int and value >= 1):
            return value
        raise ValueError(
            f"{shown(value)} is not a number of episodes: give a whole number from 1, or 'all'"
        )

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, value: object) -> object:
        if type(value) is int:
            return value
        raise ValueError(f"{shown(value)} is not a seed: give a whole number")


class AssessmentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    participants: dict[str, HttpUrl]
    config: AssessmentConfig = AssessmentConfig()

    @property
    def assessed_agent(self) -> str:
        return str(self.participants[AGENT_ROLE])


def parse_request(payload: str | dict) -> AssessmentRequest:
    """The request a message carries (as JSON text or a data part), or `RequestError`."""
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except (ValueError, RecursionError):
            raise RequestError(
                'the request is not JSON: send {"participants": {"agent": "<A2A URL>"}, '
                '"config": {...}}'
            ) from None
    try:
        request = AssessmentRequest.model_validate(payload)
    except ValidationError as error:
        reasons = "; ".join(
            f"{'.'.join(map(str, problem['loc'])) or 'request'}: "
            f"{problem['msg'].removeprefix('Value error, ')}"
            for problem in error.errors(include_url=False)[:MAX_REASONS]
        )
        raise RequestError(f"invalid assessment request: {reasons}") from None
    if set(request.participants) != {AGENT_ROLE}:
        named = listed(request.participants) or "none"
        raise RequestError(
            f"participants must name one agent under the role {AGENT_ROLE!r} (got: {named})"
        )
    return request
