"""The notebooks run top to bottom on the demo data, in a kernel of this environment's Python,
from a scratch folder (as a reader's would), and are stored without outputs.

training.ipynb runs before comparison.ipynb, which evaluates the model it trained."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ORDER = ("showcase", "training", "comparison")
TIMEOUT_S = 900


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


def execute(notebook: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    # Over IPC (files in the folder), not the kernel's default TCP on localhost.
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))
    client = NotebookClient(
        notebook, km=kernel, timeout=TIMEOUT_S, resources={"metadata": {"path": str(folder)}}
    )
    try:
        return client.execute()
    finally:
        if kernel.has_kernel:  # a kernel the client was given is the caller's to stop
            kernel.shutdown_kernel(now=True)


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )


def test_the_kernel_is_this_environments_python(tmp_path):
    probe = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")]
    )
    assert printed(execute(probe, tmp_path)).strip() == sys.executable


def test_every_notebook_is_known():
    assert sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb")) == sorted(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_the_notebook_runs_top_to_bottom(name, workdir, capsys):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    started = time.monotonic()
    executed = execute(notebook, workdir)
    seconds = time.monotonic() - started
    with capsys.disabled():
        print(f"\n{name}.ipynb ran in {seconds:.0f} s")
    text = printed(executed)
    expected = {
        "showcase": ("Question:", "correct: True", "oracle  all"),
        "training": ("training loss:", "mean reward", "saved to"),
        "comparison": ("trained", "base", "oracle"),
    }[name]
    for words in expected:
        assert words in text, (name, words)
    images = [
        o for c in executed.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert images or name == "training"


@pytest.mark.parametrize("name", ORDER)
def test_the_notebook_is_stored_without_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)
    colab = [cell.source for cell in notebook.cells if "Run on Colab" in cell.source]
    assert colab and "pip install" in colab[0]
