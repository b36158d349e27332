"""Fixtures of the harness tests: door specs over the Spider dev split, sharing one cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evals.door_clients import DoorSpec


@pytest.fixture(scope="session")
def spec_for(dev_door_spec):
    def make(kind: str) -> DoorSpec:
        return replace(dev_door_spec, kind=kind)

    return make
