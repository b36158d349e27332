"""The project's import graph, read from the source: no module imports itself back through
others, dependencies flow one way (the engine imports no door; doors import the engine), and the
engine and the MCP server's start-up path import no heavy framework."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("env_core", "serving", "sqlenv_mcp", "doors", "training", "evals")
HEAVY = ("torch", "transformers", "trl", "datasets", "openenv", "gradio", "matplotlib")
# What serves HTTP: the serving kit's business, never the engine's.
SERVING = ("starlette", "uvicorn", "h11", "httpx", "fastapi", "websockets", "sse_starlette")
# What each package may import of the others (the design's one-way flow).
MAY_IMPORT = {
    "env_core": set(),
    "serving": {"env_core"},
    "sqlenv_mcp": {"env_core", "serving"},
    "doors": {"env_core", "serving"},
    "training": {"env_core", "serving", "doors"},
    "evals": {"env_core", "serving", "doors", "sqlenv_mcp"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at the top, inside functions or for type checkers only (a
    name a module needs only to be checked is still a name it depends on)."""
    found = set()
    pending = [ast.parse(path.read_text(), str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return found


MODULES = {
    module_name(path): imports_of(path)
    for package in PACKAGES
    for path in (ROOT / package).rglob("*.py")
}


def project_imports(module: str) -> set[str]:
    return {name for name in MODULES[module] if name in MODULES and name != module}


def floors() -> tuple[dict[str, int], list[list[str]]]:
    """Each module's floor (0: it imports no project module; n: it imports modules of floors
    below n only), and the circles found on the way, which leave floors meaningless."""
    visiting, floor, cycles = [], {}, []

    def visit(module: str) -> int:
        if module in visiting:
            cycles.append([*visiting[visiting.index(module) :], module])
            return 0
        if module not in floor:
            visiting.append(module)
            # A package's __init__ importing its own submodules is not a circle.
            below = [
                visit(imported)
                for imported in sorted(project_imports(module))
                if not imported.startswith(module + ".")
            ]
            visiting.pop()
            floor[module] = 1 + max(below, default=-1)
        return floor[module]

    for module in sorted(MODULES):
        visit(module)
    return floor, cycles


def floors_text(floor: dict[str, int]) -> str:
    lines = ["The import graph by floor (n: imports only modules of floors below n):"]
    for package in PACKAGES:
        lines.append(package)
        modules = [module for module in sorted(floor) if module.split(".")[0] == package]
        for level in sorted({floor[module] for module in modules}):
            names = [module for module in modules if floor[module] == level]
            lines.append(f"  {level:2}  {', '.join(names)}")
    return "\n".join(lines)


def test_no_module_imports_itself_back():
    """With -s, prints each package's modules by floor."""
    floor, cycles = floors()
    assert cycles == []
    print(f"\n{floors_text(floor)}")


@pytest.mark.parametrize("package", PACKAGES)
def test_dependencies_flow_one_way(package):
    wrong = {
        (module, imported)
        for module in MODULES
        if module.split(".")[0] == package
        for imported in project_imports(module)
        if imported.split(".")[0] not in {package, *MAY_IMPORT[package]}
    }
    assert wrong == set()


@pytest.mark.parametrize("frameworks", [HEAVY, SERVING], ids=["heavy", "serving"])
def test_the_engine_imports_no_framework(frameworks):
    found = {
        (module, imported)
        for module, imported_names in MODULES.items()
        if module.startswith("env_core")
        for imported in imported_names
        if imported.split(".")[0] in frameworks
    }
    assert found == set()


def test_the_mcp_server_starts_without_heavy_frameworks():
    import subprocess

    check = (
        "import sys; import sqlenv_mcp.cli; "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert loaded.stdout.strip() == "[]"
