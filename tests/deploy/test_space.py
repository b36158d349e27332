"""The Hugging Face Space folder scripts/stage-space.sh assembles, as `openenv push` takes it:
card metadata, port, user, manifest, and every file the Dockerfile copies."""

from __future__ import annotations

import re
import runpy
import subprocess
from pathlib import Path

import pytest
import yaml
from docker_host import REPOSITORY
from openenv.cli._cli_utils import validate_env_structure
from openenv.cli.commands.push import _prepare_staging_directory


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("space")
    subprocess.run([str(REPOSITORY / "scripts" / "stage-space.sh"), str(folder)], check=True)
    return folder


def card_metadata(readme: Path) -> dict:
    _, front_matter, _ = readme.read_text().split("---\n", 2)
    return yaml.safe_load(front_matter)


def test_the_card_declares_a_docker_space_on_the_servers_port_with_the_web_page(space):
    card = card_metadata(space / "README.md")
    manifest = yaml.safe_load((space / "openenv.yaml").read_text())
    dockerfile = (space / "Dockerfile").read_text()
    assert card["sdk"] == "docker"
    assert card["app_port"] == manifest["port"] == 8000
    assert re.search(r"^EXPOSE 8000$", dockerfile, re.MULTILINE)
    assert card["base_path"] == "/web"
    assert "openenv" in card["tags"]
    assert len(card["short_description"]) <= 60  # the Hub's limit


def test_the_image_runs_as_the_user_spaces_run_containers_as(space):
    (user,) = re.findall(r"^USER (\S+)$", (space / "Dockerfile").read_text(), re.MULTILINE)
    assert user == "1000"


def test_the_image_turns_off_what_would_call_home(space):
    # The /web page's Gradio: its version check and analytics; the Hub client's telemetry.
    dockerfile = (space / "Dockerfile").read_text()
    for setting in ("GRADIO_ANALYTICS_ENABLED=False", "HF_HUB_DISABLE_TELEMETRY=1"):
        assert re.search(rf"^    {setting} \\$", dockerfile, re.MULTILINE), setting


def test_every_file_the_dockerfile_copies_is_there(space):
    dockerfile = (space / "Dockerfile").read_text()
    sources = [
        source
        for line in re.findall(r"^COPY (.+)$", dockerfile, re.MULTILINE)
        for source in line.split()[:-1]
    ]
    assert sources and all((space / source).exists() for source in sources), sources


def test_openenv_push_accepts_the_folder_and_turns_the_web_page_on(space, tmp_path):
    # What `openenv push` does before uploading: check the layout, then stage the Space.
    assert validate_env_structure(space) is not None
    _prepare_staging_directory(space, "sqlenv", tmp_path, ignore_patterns=[])
    pushed = (tmp_path / "Dockerfile").read_text()
    assert "ENV ENABLE_WEB_INTERFACE=true\nCMD " in pushed
    assert (tmp_path / "README.md").read_text() == (space / "README.md").read_text()


def test_the_spaces_client_module_is_the_typed_client(space):
    from doors.openenv.client import SQLEnvClient

    assert runpy.run_path(str(space / "client.py"))["SQLEnvClient"] is SQLEnvClient
