"""One settings model: every command takes the shared settings under the same flags, with the
same defaults, read the same way from `SQLENV_*` variables; tools are described under the limits
in force."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from env_core.settings import GROUPS, OPTIONS, Settings, add_arguments

ENGINE_GROUPS = ("data", "episodes", "sql")


def parsers() -> dict[str, tuple[argparse.ArgumentParser, tuple[str, ...]]]:
    """Every command's parser, with the setting groups it must take."""
    from doors.commands import openenv_parser
    from env_core.cli import build_parser as sqlenv_parser
    from sqlenv_mcp.cli import build_parser as mcp_parser

    commands = sqlenv_parser()._subparsers._group_actions[0].choices
    return {
        "sqlenv-mcp": (mcp_parser(), GROUPS),
        "sqlenv-openenv": (openenv_parser(), GROUPS),
        "sqlenv play": (commands["play"], ENGINE_GROUPS),
        "sqlenv eval": (commands["eval"], ENGINE_GROUPS),
        "sqlenv audit-reward": (commands["audit-reward"], ENGINE_GROUPS),
        "sqlenv data prepare": (
            commands["data"]._subparsers._group_actions[0].choices["prepare"],
            ("data", "sql"),  # golds run under the agent's limits
        ),
    }


# Settings a command leaves out of its groups, because an option of its own stands for them.
LEFT_OUT = {"sqlenv audit-reward": {"reward_profile"}}  # --profiles: every profile at once


def flags_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


@pytest.fixture(autouse=True)
def no_settings_in_the_environment(monkeypatch):
    for option in OPTIONS:
        monkeypatch.delenv(option.variable, raising=False)


@pytest.mark.parametrize("command", parsers().keys())
def test_every_command_takes_the_shared_flags_with_the_shared_defaults(command):
    parser, groups = parsers()[command]
    flags = flags_of(parser)
    defaults = Settings()
    for option in OPTIONS:
        if option.group not in groups or option.field in LEFT_OUT.get(command, ()):
            assert option.flag not in flags, f"{command} takes {option.flag}"
            continue
        action = flags[option.flag]
        assert action.dest == option.field
        assert action.default == getattr(defaults, option.field), option.flag
        assert f"${option.variable}" in action.help


def test_the_settings_a_command_reads_are_the_settings_model():
    parser, _ = parsers()["sqlenv-mcp"]
    assert Settings.from_arguments(parser.parse_args([])) == Settings()
    given = parser.parse_args(["--max-steps", "7", "--idle-ttl", "30", "--route-by-episode-id"])
    assert Settings.from_arguments(given) == Settings(
        max_steps=7, idle_ttl_s=30.0, route_by_episode_id=True
    )


def test_green_and_purple_listen_on_ports_of_their_own_unless_told(monkeypatch):
    from env_core.cli import build_parser

    commands = {"green": ["green"], "purple": ["purple", "--policy", "oracle"]}
    parser = build_parser()
    ports = {
        name: Settings.from_arguments(parser.parse_args(c)).port for name, c in commands.items()
    }
    assert ports == {"green": 9009, "purple": 9019}
    assert (
        "(default: 9009; $SQLENV_PORT)"
        in flags_of(parser._subparsers._group_actions[0].choices["green"])["--port"].help
    )
    monkeypatch.setenv("SQLENV_PORT", "7000")
    assert Settings.from_arguments(build_parser().parse_args(commands["purple"])).port == 7000


def test_variables_set_the_defaults_and_flags_win(monkeypatch):
    monkeypatch.setenv("SQLENV_MAX_STEPS", "9")
    monkeypatch.setenv("SQLENV_REWARD_PROFILE", "sparse")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert Settings.from_arguments(parser.parse_args([])).max_steps == 9
    assert Settings.from_arguments(parser.parse_args(["--max-steps", "3"])).max_steps == 3
    assert Settings.from_environment().reward_profile == "sparse"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-steps", "0", "0 is out of range: give a whole number from 1 to 1000"),
        ("--port", "99999", "99999 is out of range: give a whole number from 1 to 65535"),
        ("--query-timeout", "-1", "-1 is out of range: give a number of seconds above 0"),
        ("--max-rows", "many", "'many' is not a whole number"),
        ("--max-rows", "²", "'²' is not a whole number"),
        ("--split", "", "an empty value is not allowed"),
        ("--reward-profile", "generous", "invalid choice: 'generous'"),
        ("--trusted-proxies", "*", "'*' would trust every client's own word"),
        ("--trusted-proxies", "10.0.0.1,proxy", "'proxy' is not an address or network"),
    ],
)
def test_a_bad_flag_is_one_clear_line(flag, value, message, capsys):
    parser = argparse.ArgumentParser(prog="sqlenv-mcp")
    add_arguments(parser)
    with pytest.raises(SystemExit) as exit:
        parser.parse_args([flag, value])
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"sqlenv-mcp: error: argument {flag}") and message in error


def test_a_bad_variable_is_reported_by_the_command_that_reads_the_settings(monkeypatch):
    monkeypatch.setenv("SQLENV_MAX_STEPS", "lots")
    parser = argparse.ArgumentParser(prog="sqlenv-openenv")
    add_arguments(parser)  # building a parser reports nothing: `--help` must work
    assert parser.parse_args([]).max_steps == Settings().max_steps
    with pytest.raises(ValueError, match=r"^SQLENV_MAX_STEPS: 'lots' is not a whole number$"):
        Settings.from_arguments(parser.parse_args(["--max-steps", "3"]))


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SQLENV_MAX_STEPS", "²", "'²' is not a whole number"),
        ("SQLENV_MAX_STEPS", "--5", "'--5' is not a whole number"),
        ("SQLENV_PORT", "٣", "'٣' is not a whole number"),
        ("SQLENV_SPLIT", "", "an empty value is not allowed"),
        ("SQLENV_HOST", "  ", "an empty value is not allowed"),
    ],
)
def test_a_bad_variable_is_one_clear_sentence(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as error:
        Settings.from_environment()
    assert str(error.value) == f"{variable}: {message}"


def test_the_log_level_takes_any_case(monkeypatch):
    monkeypatch.setenv("SQLENV_LOG_LEVEL", "INFO")
    assert Settings.from_environment().log_level == "info"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert Settings.from_arguments(parser.parse_args(["--log-level", "Debug"])).log_level == "debug"


def test_settings_reject_bad_values_and_unknown_names():
    with pytest.raises(ValueError, match="--max-episodes: 0 is out of range"):
        Settings(max_episodes=0)
    with pytest.raises(ValueError, match="unknown settings: max_sessions"):
        Settings().replace(max_sessions=3)
    with pytest.raises(ValueError, match=r"run.toml \[env\]: unknown settings steps"):
        Settings.from_mapping({"steps": 3}, "run.toml [env]")


def test_another_process_gets_the_same_settings_from_the_arguments():
    settings = Settings(data_dir="/data", max_steps=7, route_by_episode_id=True, sql_memory_mb=32)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    received = Settings.from_arguments(parser.parse_args(settings.arguments()))
    assert received == dataclasses.replace(settings)


@pytest.fixture
def manager_with_few_rows(demo_catalog):
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(demo_catalog, Settings(max_rows=7))
    yield manager
    manager.shutdown()


@pytest.mark.anyio
async def test_every_door_describes_the_tools_under_the_limits_in_force(manager_with_few_rows):
    from mcp.shared.memory import create_connected_server_and_client_session as connect
    from openenv.core.env_server.mcp_types import ListToolsAction

    from doors.openenv.environment import SQLExploreEnvironment
    from doors.trl import environment_factory
    from env_core.contract import chat_tools
    from sqlenv_mcp.server import build_episode_server

    expected = [(spec.name, spec.description) for spec in manager_with_few_rows.tools]
    assert dict(expected)["query"].endswith("at most 7 rows, with a note when more exist.")
    async with connect(build_episode_server(manager_with_few_rows)) as client:
        listed = (await client.list_tools()).tools
    engine_tools = [(t.name, t.description) for t in listed if t.name in dict(expected)]
    assert engine_tools == expected  # the contract's order too
    environment = SQLExploreEnvironment(manager_with_few_rows)
    listed = environment.step(ListToolsAction()).tools
    assert [(tool.name, tool.description) for tool in listed] == expected
    trl = environment_factory(manager_with_few_rows)()
    described = [
        (f["function"]["name"], f["function"]["description"]) for f in chat_tools(trl.tools)
    ]
    assert described == expected


@pytest.mark.parametrize("command", parsers().keys())
def test_every_command_tells_its_version(command, capsys):
    from importlib.metadata import version

    parser, _ = parsers()[command]
    with pytest.raises(SystemExit):
        parser.parse_args(["--version"])
    assert capsys.readouterr().out.strip().endswith(version("sqlenv-mcp"))


def test_the_settings_command_lists_every_variable_and_its_value(monkeypatch, capsys):
    from env_core.cli import main

    monkeypatch.setenv("SQLENV_MAX_STEPS", "9")
    assert main(["settings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["flag", "variable", "default", "now"]
    listed = {line.split()[1]: line.split()[2:] for line in lines[1:]}
    assert set(listed) == {option.variable for option in OPTIONS}
    assert listed["SQLENV_MAX_STEPS"] == ["15", "9"]


def test_the_settings_command_never_shows_the_assessment_token(monkeypatch, capsys):
    from env_core.cli import main

    monkeypatch.setenv("SQLENV_ASSESSMENT_TOKEN", "operator-secret")
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "operator-secret" not in out
    [line] = [line for line in out.splitlines() if "SQLENV_ASSESSMENT_TOKEN" in line]
    assert line.split()[2:] == ["-", "(set)"]
