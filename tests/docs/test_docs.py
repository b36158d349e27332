"""The docs against the program: the command-line reference covers every command, flag and
environment variable; the drift check fails on an example that no longer matches; optional
pages join the site when they exist; measurements are recorded with their provenance."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "scripts" / "docs"
sys.path.insert(0, str(TOOLS))

import cli_reference  # noqa: E402
import print_help  # noqa: E402
import record  # noqa: E402

REFERENCE = ROOT / "docs" / "reference" / "cli.md"
REGENERATE = "; run `make docs-update`"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
ENVIRONMENT_READS = ("get", "getenv", "pop", "setdefault")
NOT_SETTINGS = {"PATH"}  # passed through to the processes a door starts


def reference_sections() -> dict[str, str]:
    """Each command's section of the reference page, by command."""
    text = REFERENCE.read_text()
    parts = re.split(r"^### `([^`]+)`\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_command_has_its_section_in_the_reference():
    sections = reference_sections()
    commands = cli_reference.commands()
    assert {"sqlenv eval", "sqlenv-mcp", "python -m training.sft"} <= set(commands)
    missing = [command for command in commands if command not in sections]
    assert not missing, f"commands missing from {REFERENCE.name}: {missing}{REGENERATE}"
    gone = [command for command in sections if command not in commands]
    assert not gone, f"{REFERENCE.name} documents commands that no longer exist: {gone}"


def test_every_flag_of_every_command_is_in_its_reference_section(monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # each command's --help sets its own
    sections = reference_sections()
    for command in cli_reference.commands():
        flags = set(FLAG.findall(print_help.help_text(command)))
        assert flags >= {"--help"}, command
        documented = set(FLAG.findall(sections.get(command, "")))
        missing = sorted(flags - documented)
        assert not missing, f"{command}: {missing} not in {REFERENCE.name}{REGENERATE}"


# What a command's --help must not wait for: the doors' and training's libraries.
HEAVY_LIBRARIES = {"torch", "transformers", "trl", "datasets", "gradio", "fastapi", "openenv"}


def test_every_command_answers_help_before_loading_a_heavy_library():
    """--help (and so a mistake in the arguments) is read before the libraries load: each
    command's help, in a process of its own, imports none of them."""
    for command in cli_reference.commands():
        printed = subprocess.run(
            [sys.executable, "-X", "importtime", str(TOOLS / "print_help.py"), command],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        imported = {
            line.split("|")[-1].strip().split(".")[0] for line in printed.stderr.splitlines()
        }
        assert not imported & HEAVY_LIBRARIES, (
            f"{command} --help imports {imported & HEAVY_LIBRARIES}"
        )


def environment_variables_read() -> set[str]:
    """Every environment variable the package's code names: `SQLENV_*` strings anywhere, and
    the names read through `os.environ` or `os.getenv` (a literal or a module constant)."""
    names: set[str] = set()
    for package in cli_reference.SOURCE_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            source = path.read_text()
            names |= set(re.findall(r"\bSQLENV_[A-Z0-9_]+\b", source))
            tree = ast.parse(source)
            constants = {
                target.id: node.value.value
                for node in tree.body
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(tree):
                for argument in read_arguments(node):
                    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                        names.add(argument.value)
                    elif isinstance(argument, ast.Name) and argument.id in constants:
                        names.add(constants[argument.id])
    return names - NOT_SETTINGS


def read_arguments(node: ast.AST) -> list[ast.expr]:
    """The name argument of `os.environ.get(NAME)`, `os.getenv(NAME)`, `os.environ[NAME]`,
    `NAME in os.environ`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        owner = ast.unparse(node.func.value)
        if node.func.attr in ENVIRONMENT_READS and owner in ("os.environ", "os", "environ"):
            return [node.args[0]]
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
        return [node.slice]
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.ops[0], ast.In)
        and ast.unparse(node.comparators[0]) in ("os.environ", "environ")
    ):
        return [node.left]
    return []


def test_every_environment_variable_the_commands_read_is_in_the_reference():
    from env_core.settings import OPTIONS

    variables = environment_variables_read() | {option.variable for option in OPTIONS}
    assert {"SQLENV_DATA_DIR", "SQLENV_MCP_TOKEN", "OPENAI_BASE_URL"} <= variables
    page = REFERENCE.read_text()
    missing = sorted(name for name in variables if f"`{name}`" not in page and name not in page)
    assert not missing, f"environment variables missing from {REFERENCE.name}: {missing}"


def cog(*arguments: str | Path) -> subprocess.CompletedProcess:
    command = [
        str(Path(sys.executable).parent / "cog"),
        "-I",
        str(TOOLS),
        "-p",
        "import cli_reference; from doc_examples import *",
        *map(str, arguments),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_drift_check_fails_when_an_example_no_longer_matches_the_program(tmp_path):
    page = tmp_path / "README.md"
    shutil.copy(ROOT / "README.md", page)
    assert cog("--check", page).returncode == 0, "README.md is not current" + REGENERATE
    text = page.read_text()
    assert "total reward +1.030 after 3 steps; correct" in text
    page.write_text(text.replace("after 3 steps; correct", "after 2 steps; correct"))
    checked = cog("--check", "--diff", page)
    assert checked.returncode != 0
    assert "-total reward +1.030 after 2 steps; correct" in checked.stdout + checked.stderr
    assert cog("-r", page).returncode == 0
    assert page.read_text() == (ROOT / "README.md").read_text()


def test_a_measurement_is_recorded_with_its_command_date_machine_and_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "MEASUREMENTS", tmp_path)
    assert record.record("echo", [sys.executable, "-c", "print('1.5 ms')"]) == 0
    header, command, output, took = (tmp_path / "echo.txt").read_text().splitlines()
    assert re.fullmatch(
        r"# recorded \d{4}-\d\d-\d\d \d\d:\d\d UTC on \d+ cores .+; commit \w+.*", header
    )
    assert command == "$ " + shlex.join([sys.executable, "-c", "print('1.5 ms')"])
    assert output == "1.5 ms"
    assert re.fullmatch(r"# took \d+\.\d s", took)
    assert record.record("failed", [sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not (tmp_path / "failed.txt").exists()
