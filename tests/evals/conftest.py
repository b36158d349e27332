"""Fixtures of the harness tests: door specs over the Spider dev split, sharing one cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evals.doors import DoorSpec


@pytest.fixture(scope="session")
def spec_for(dev_door_spec):
    def make(kind: str) -> DoorSpec:
        return replace(dev_door_spec, kind=kind)

    return make


@pytest.fixture(scope="session", autouse=True)
def run_keys(tmp_path_factory):
    """The run folders' keys in a folder of the test session's, for this process and the
    commands it runs (set before any run folder fixture makes one)."""
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(state))
        yield state / "sqlenv" / "run-keys"
