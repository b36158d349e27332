"""Every setting of the engine and its servers, each with one default, one flag and one
`SQLENV_*` environment variable, shared by every command, door and training config.

A value comes from the command line, else from the environment variable, else the default:

    --max-steps 20    SQLENV_MAX_STEPS=20    (default 15)

The variable of a setting is its flag in capitals, `SQLENV_` in front: `--idle-ttl` is
`SQLENV_IDLE_TTL`. Training configs name settings by their field (`max_rows = 30`), the step
budget excepted (`training.config.ENV_NAMES`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import ipaddress
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from env_core.command_line import RenamedFlag
from env_core.errors import shown
from env_core.rewards import PROFILES

GROUPS = ("data", "episodes", "sql", "server")
# The step budgets an episode may have, least and most: the flag's and an assessment request's.
STEP_BUDGET_RANGE = (1, 1000)
# The green agent's own settings, which only `sqlenv green` takes.
ASSESSMENT_GROUP = "assessment"


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"-?[0-9]+", text.strip()):
            raise ValueError(f"{shown(text)} is not a whole number")
        value = int(text)
        if value < low or (high is not None and value > high):
            limit = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise ValueError(f"{value} is out of range: give a whole number {limit}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{shown(text)} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{text} is out of range: give a number of seconds above 0")
    return value


def _switch(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("1", "true", "yes", "0", "false", "no", ""):
        raise ValueError(f"{shown(text)} is not true or false")
    return lowered in ("1", "true", "yes")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("an empty value is not allowed")
    return text


def _addresses(text: str) -> str:
    """Addresses or networks, comma-separated ("127.0.0.1,10.0.0.0/8"), as written."""
    for item in text.split(","):
        if item.strip() == "*":
            raise ValueError("'*' would trust every client's own word: name the proxy's addresses")
        try:
            ipaddress.ip_network(item.strip(), strict=False)
        except ValueError:
            raise ValueError(f"{shown(item.strip())} is not an address or network") from None
    return ",".join(item.strip() for item in text.split(","))


def _lower_case(text: str) -> str:
    return text.strip().lower()


@dataclass(frozen=True)
class Option:
    """How one setting is given: its flag (and so its variable), parser, group and help."""

    field: str
    flag: str
    parse: Callable[[str], Any]
    group: str
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    shown_default: str | None = None  # for a default that is not a value (None)
    secret: bool = False  # listed as set or not, never shown

    @property
    def variable(self) -> str:
        return variable_of(self.flag)


def variable_of(flag: str) -> str:
    return "SQLENV_" + flag.removeprefix("--").replace("-", "_").upper()


# Flags renamed to say what they count in the project's words (docs/design.md, "Words"): an
# old flag or variable is refused with its new name, never ignored.
RENAMED_FLAGS = {
    "--max-connections-per-client": "--max-sessions-per-client",
    "--idle-connection-timeout": "--idle-session-timeout",
}


@dataclass(frozen=True)
class Settings:
    # data
    data_dir: str | None = None
    databases_dir: str | None = None
    cache_dir: str | None = None
    split: str = "dev"
    evidence: bool = True
    # episodes
    max_steps: int = 15
    reward_profile: str = "shaped"
    max_episodes: int = 256
    max_episodes_per_client: int = 32
    idle_ttl_s: float = 900.0
    route_by_episode_id: bool = False
    # sql
    query_timeout_s: float = 2.0
    max_rows: int = 20
    sql_workers: int = 4
    sql_memory_mb: int = 64
    # server
    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions_per_client: int = 64
    max_sockets_per_client: int = 256
    trusted_proxies: str | None = None
    idle_session_timeout_s: float = 120.0
    log_level: str = "warning"
    # assessment
    assessment_token: str | None = None
    episode_detail: bool = False
    runs_dir: str | None = None

    def __post_init__(self) -> None:
        for option in OPTIONS:
            value = getattr(self, option.field)
            if value is not None and not isinstance(value, bool):
                _parsed(option, str(value), option.flag)

    def replace(self, **changes: Any) -> Settings:
        """These settings with some changed; unknown names are an error."""
        unknown = sorted(set(changes) - {field.name for field in fields(self)})
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """The defaults, with every `SQLENV_*` variable that is set applied."""
        for old, new in RENAMED_FLAGS.items():
            if variable_of(old) in environ:
                raise ValueError(f"{variable_of(old)} is now {variable_of(new)}: rename it")
        changes = {}
        for option in OPTIONS:
            if option.variable in environ:
                changes[option.field] = _parsed(option, environ[option.variable], option.variable)
        return cls(**changes)

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], where: str, names: Mapping[str, str] | None = None
    ) -> Settings:
        """Settings named by field, as a training config's [env] table gives them, or by the
        caller's own `names` (name: field) for the fields those rename."""
        names = names or {}
        renamed = set(names.values())
        known = {field: field for field in OPTIONS_BY_FIELD if field not in renamed} | dict(names)
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(
                f"{where}: unknown settings {', '.join(unknown)}; settings are: "
                f"{', '.join(sorted(known))}"
            )
        return cls.from_environment().replace(**{known[name]: v for name, v in values.items()})

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> Settings:
        """The settings a parser built by `add_arguments` read (absent groups: defaults and
        environment)."""
        base = cls.from_environment()
        return base.replace(
            **{o.field: getattr(args, o.field) for o in OPTIONS if hasattr(args, o.field)}
        )

    def arguments(self, groups: Iterable[str] = ("data", "episodes", "sql")) -> list[str]:
        """Command-line flags that give another process exactly these settings (whatever its
        environment holds)."""
        flags: list[str] = []
        for option in OPTIONS:
            value = getattr(self, option.field)
            if option.group not in groups or value is None:
                continue
            if isinstance(value, bool):
                flags.append(option.flag if value else f"--no-{option.flag[2:]}")
            else:
                flags += [option.flag, str(value)]
        return flags


OPTIONS: tuple[Option, ...] = (
    Option(
        "data_dir",
        "--data-dir",
        _text,
        "data",
        f"data directory (Spider, BIRD or your own layout), or several as [NAME=]DIR[@SPLIT] "
        f"joined by {os.pathsep!r} (docs/datasets.md)",
        "DIR",
        shown_default="the embedded demo",
    ),
    Option(
        "databases_dir",
        "--databases-dir",
        _text,
        "data",
        "databases a dataset does not ship (Spider's database/ for Spider-Syn and Spider-DK)",
        "DIR",
        shown_default="none",
    ),
    Option(
        "cache_dir",
        "--cache-dir",
        _text,
        "data",
        "catalog cache",
        "DIR",
        shown_default="~/.cache/sqlenv",
    ),
    Option("split", "--split", _text, "data", "question split to serve", "NAME"),
    Option(
        "evidence",
        "--evidence",
        _switch,
        "data",
        "show a question's evidence (BIRD's hint) with it; --no-evidence for ablations",
    ),
    Option(
        "max_steps",
        "--max-steps",
        whole(*STEP_BUDGET_RANGE),
        "episodes",
        "step budget per episode",
        "N",
    ),
    Option(
        "reward_profile",
        "--reward-profile",
        _text,
        "episodes",
        "reward profile",
        choices=tuple(sorted(PROFILES)),
    ),
    Option("max_episodes", "--max-episodes", whole(1), "episodes", "episodes open at once", "N"),
    Option(
        "max_episodes_per_client",
        "--max-episodes-per-client",
        whole(1),
        "episodes",
        "episodes one client (remote address) may hold open at once",
        "N",
    ),
    Option(
        "idle_ttl_s",
        "--idle-ttl",
        _seconds,
        "episodes",
        "seconds before an idle episode (and its session) is closed",
        "SECONDS",
    ),
    Option(
        "route_by_episode_id",
        "--route-by-episode-id",
        _switch,
        "episodes",
        "let any session act on an episode by its id, not only the one that started it "
        "(the id, random and made by the server, is then a capability; an MCP episode's id, "
        "its handle, always is)",
    ),
    Option(
        "query_timeout_s",
        "--query-timeout",
        _seconds,
        "sql",
        "seconds one query may run",
        "SECONDS",
    ),
    Option("max_rows", "--max-rows", whole(1, 1000), "sql", "rows shown per query", "N"),
    Option(
        "sql_workers",
        "--sql-workers",
        whole(1, 64),
        "sql",
        "worker processes that run agent SQL; at most this many queries run at once",
        "N",
    ),
    Option(
        "sql_memory_mb",
        "--sql-memory",
        whole(16, 65536),
        "sql",
        "memory one query may use, in MiB; a query that needs more is stopped",
        "MIB",
    ),
    Option("host", "--host", _text, "server", "address to bind", "ADDRESS"),
    Option("port", "--port", whole(1, 65535), "server", "port to listen on", "PORT"),
    Option(
        "max_sessions_per_client",
        "--max-sessions-per-client",
        whole(1),
        "server",
        "sessions (MCP sessions, OpenEnv WebSockets) one client may hold open",
        "N",
    ),
    Option(
        "max_sockets_per_client",
        "--max-sockets-per-client",
        whole(1),
        "server",
        "TCP connections one client (remote address) may have open at once; a trusted "
        "proxy's are not counted",
        "N",
    ),
    Option(
        "trusted_proxies",
        "--trusted-proxies",
        _addresses,
        "server",
        "proxies (addresses or networks, comma-separated) whose X-Forwarded-For names the "
        "client; any other connection's client is its own address",
        "ADDRESSES",
        shown_default="none",
    ),
    Option(
        "idle_session_timeout_s",
        "--idle-session-timeout",
        _seconds,
        "server",
        "seconds before an idle session holding no episode is closed",
        "SECONDS",
    ),
    Option(
        "log_level",
        "--log-level",
        _lower_case,
        "server",
        "log level; logs go to stderr",
        choices=("debug", "info", "warning", "error"),
    ),
    Option(
        "assessment_token",
        "--assessment-token",
        _text,
        ASSESSMENT_GROUP,
        "require 'Authorization: Bearer TOKEN' on A2A requests (give it by its variable: a "
        "flag shows in the process list)",
        "TOKEN",
        shown_default="none: anyone who reaches the agent may request",
        secret=True,
    ),
    Option(
        "episode_detail",
        "--episode-detail",
        _switch,
        ASSESSMENT_GROUP,
        "tell the requester each episode's question id and verdict, not only the summary",
    ),
    Option(
        "runs_dir",
        "--runs-dir",
        _text,
        ASSESSMENT_GROUP,
        "write each assessment's run folder (sqlenv eval's) here as its episodes finish",
        "DIR",
        shown_default="none",
    ),
)
OPTIONS_BY_FIELD = {option.field: option for option in OPTIONS}
_DEFAULTS = {field.name: field.default for field in fields(Settings)}
if set(OPTIONS_BY_FIELD) != set(_DEFAULTS):
    raise RuntimeError("every setting needs exactly one option")
# Servers that run side by side on one machine listen on ports of their own by default: a
# green agent (the assessor) and the agent it assesses.
COMMAND_DEFAULTS: dict[str, dict[str, Any]] = {
    "sqlenv green": {"port": 9009},
    "sqlenv purple": {"port": 9019},
}


def add_arguments(
    parser: argparse.ArgumentParser,
    groups: Iterable[str] = GROUPS,
    without: Iterable[str] = (),
    command: str | None = None,
) -> None:
    """The flags of the given groups (less the settings named in `without`, by field), their
    defaults read from the environment, else `command`'s own (`COMMAND_DEFAULTS`)."""
    left_out = set(without)
    own = COMMAND_DEFAULTS.get(command or "", {})
    for group_name in groups:
        group = parser.add_argument_group(f"{group_name} settings")
        for option in (o for o in OPTIONS if o.group == group_name and o.field not in left_out):
            default = _parser_default(option, own)
            listed = option.shown_default if default is None else shown_value(default)
            help_text = f"{option.help} (default: {listed}; ${option.variable})"
            if option.parse is _switch:
                group.add_argument(
                    option.flag,
                    dest=option.field,
                    action=argparse.BooleanOptionalAction,
                    default=default,
                    help=help_text,
                )
                continue
            group.add_argument(
                option.flag,
                dest=option.field,
                type=argument_type(option.parse),
                default=default,
                metavar=option.metavar,
                choices=option.choices,
                help=help_text,
            )
            for old in [old for old, new in RENAMED_FLAGS.items() if new == option.flag]:
                group.add_argument(old, action=RenamedFlag, new=option.flag)


def _parser_default(option: Option, own: Mapping[str, Any]) -> Any:
    """A flag's default: its variable's value, else the command's `own` default, else the
    setting's default. A bad variable is
    left to the command that reads its settings (`Settings.from_environment`) to report, so
    that it is reported once, under that command's name, and `--help` still works."""
    text = os.environ.get(option.variable)
    if text is not None:
        with contextlib.suppress(ValueError):
            return _parsed(option, text, option.variable)
    return own.get(option.field, _DEFAULTS[option.field])


def shown_value(value: object) -> str:
    """A setting's value as help texts and listings show it."""
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A parser of this module (e.g. `whole(1)`) as an argparse type: its ValueError's words
    become the usage error."""

    def checked(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return checked


def _parsed(option: Option, text: str, where: str) -> Any:
    try:
        value = option.parse(text)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if option.choices and value not in option.choices:
        raise ValueError(f"{where}: {shown(text)} is not one of {', '.join(option.choices)}")
    return value
