"""Our clients read what a server sends within bounds, and a server that is not what it claims,
or fails mid-call, gives one clear error naming its URL; a TRL rollout's episode is then lost,
not its trainer. Each server here is a real one on 127.0.0.1 (tests/hostile_server.py)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_server import CUT, ENDLESS, SILENT, HostileServer
from process_memory import MIB, PeakRSS, tree_rss

from doors.openenv.client import SQLEnvClient
from doors.trl.remote import LOST, RemoteSQLEnvTRL
from serving.local_server import check_reachable
from serving.server_reads import BODY_LIMIT, ServerError, get_json

SQLENV = str(Path(sys.executable).parent / "sqlenv")
# What reading up to the bounds may cost: a 1 MiB body, a 16 MiB frame and their copies.
MEMORY_MIB = 80

# A step answered with each of these fails the call (and so does no answer, within the client's
# message timeout).
BAD_STEPS = {
    "not JSON": "<html>hello</html>",
    "an error frame": '{"type": "error", "data": {"message": "boom", "code": "X"}}',
    "no step result": '{"type": "observation", "data": {"observation": 5}}',
    "no message": "[1, 2]",
    "deep nesting": "[" * 100_000,
    "a frame cut off": CUT,
    "an endless frame": ENDLESS,
}
NO_ANSWER = {**BAD_STEPS, "no answer": SILENT}


def test_an_endless_body_is_read_to_its_bound_and_no_further():
    with HostileServer(http={"/health": ENDLESS, "/catalog": ENDLESS}) as server:
        with PeakRSS() as peak:
            started = time.monotonic()
            with pytest.raises(ServerError) as health:
                check_reachable(server.url, "OpenEnv server", "/health")
            with pytest.raises(ServerError) as catalog:
                get_json(server.url, "/catalog", "OpenEnv server")
            elapsed = time.monotonic() - started
        after = tree_rss(os.getpid())
    assert str(health.value) == (
        f"the OpenEnv server at {server.url} sent more than {BODY_LIMIT:,} bytes for /health: "
        "is that URL the OpenEnv server?"
    )
    assert f"sent more than {BODY_LIMIT:,} bytes for /catalog" in str(catalog.value)
    assert elapsed < 5
    assert peak.growth_mib < MEMORY_MIB
    print(
        f"RSS before {peak.before / MIB:.0f} MiB, peak {peak.bytes / MIB:.0f}, after "
        f"{after / MIB:.0f}; {elapsed:.2f} s"
    )


def test_a_body_that_never_ends_is_given_up_at_the_deadline():
    with HostileServer(http={"/catalog": SILENT}) as server:
        started = time.monotonic()
        with pytest.raises(ServerError) as silent:
            get_json(server.url, "/catalog", "OpenEnv server", deadline_s=0.5)
        assert time.monotonic() - started < 2
    assert str(silent.value) == (
        f"cannot reach the OpenEnv server at {server.url}: no complete answer within 0.5 s"
    )


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>hello</html>", "no JSON object (Expecting value: line 1 column 1 (char 0))"),
        (b"[1, 2]", "JSON that is no object (list)"),
        (b"[" * 100_000, "no JSON object (a message may nest arrays and objects at most 32"),
    ],
)
def test_sqlenv_eval_on_a_url_that_is_no_sqlenv_server_says_so(body, problem, tmp_path):
    with HostileServer(http={"/catalog": body}) as server:
        command = [SQLENV, "eval", "--policy", "oracle", "--door", "openenv", "--url", server.url]
        command += ["--episodes", "1", "--out", str(tmp_path / "run"), "--no-progress"]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith(
        f"sqlenv eval: the OpenEnv server at {server.url} answered /catalog with {problem}"
    ), refused.stderr
    assert refused.stderr.endswith(": is that URL the OpenEnv server?\n")
    assert len(refused.stderr.splitlines()) == 1


@pytest.mark.parametrize("name", NO_ANSWER)
def test_the_typed_client_fails_a_bad_answer_with_one_error_naming_the_url(name):
    with (
        HostileServer(ws_step=NO_ANSWER[name]) as server,
        SQLEnvClient(base_url=server.url, message_timeout_s=1).sync() as env,
    ):
        assert env.reset().observation.episode_id == "e1"
        with PeakRSS() as peak, pytest.raises(ServerError) as failed:
            env.query("SELECT 1")
    assert str(failed.value).startswith(f"the OpenEnv server at {server.url} ")
    assert peak.growth_mib < MEMORY_MIB


@pytest.mark.parametrize("name", BAD_STEPS)
def test_a_remote_rollout_meeting_a_bad_answer_is_lost_not_raised(name, caplog):
    with (
        HostileServer(ws_step=BAD_STEPS[name]) as server,
        caplog.at_level(logging.WARNING, "doors.trl.remote"),
        RemoteSQLEnvTRL(server.url) as remote,
    ):
        assert remote.reset().startswith("Question: ")
        assert remote.describe("t") == LOST
        assert remote.query("SELECT 1") == LOST
    (warning,) = caplog.messages
    assert f"episode e1 on {server.url} was lost" in warning
    assert f"the OpenEnv server at {server.url} " in warning


def test_a_remote_rollout_on_a_url_that_is_no_sqlenv_server_is_refused_at_reset():
    with (
        HostileServer(http={"/catalog": ENDLESS}) as server,
        RemoteSQLEnvTRL(server.url) as remote,
        pytest.raises(ServerError, match=f"the OpenEnv server at {server.url} sent more"),
    ):
        remote.reset()
