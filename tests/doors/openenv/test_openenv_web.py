"""The /web page in headless Chromium (Debian's, driven by Playwright): one episode, by hand;
and the server behind it, which keeps nothing it is sent and calls no one."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from openenv_testing import running_server
from web_player import browser_page, play_gold_episode

from doors.openenv.web import NO_EPISODE, STORED
from env_core.demo import demo_data_dir
from env_core.settings import Settings
from serving.local_server import LocalServer

QUESTION = "dev:15"

# `sqlenv-openenv`, reporting on stderr every connection and name lookup the process attempts
# (Python's audit events, raised by the socket module itself).
OBSERVED_SERVER = """
import sys
def report(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        print("outbound", event, args[1] if event == "socket.connect" else args[:2],
              file=sys.stderr, flush=True)
sys.addaudithook(report)
from doors.commands import openenv
sys.exit(openenv(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def settings(cache_dir) -> Settings:
    return Settings(data_dir=str(demo_data_dir(cache_dir)), cache_dir=str(cache_dir))


@pytest.fixture(scope="module")
def web_url(settings):
    with running_server(settings, web=True) as url:
        yield url


@pytest.fixture
def page(web_url):
    with browser_page(f"{web_url}/web/") as page:
        yield page


def test_play_one_episode_in_the_browser(page, demo_catalog):
    play_gold_episode(page, demo_catalog, QUESTION, "books")


def test_a_fresh_page_picks_describe_and_run_first_asks_for_an_episode(settings):
    asked = []
    with running_server(settings, web=True) as url, browser_page(f"{url}/web/") as page:
        page.on("request", lambda request: asked.append(request.url))
        page.reload()
        assert page.locator("#tool input:checked").get_attribute("value") == "describe"
        page.locator("#argument textarea").fill("books")
        page.click("#run")
        page.wait_for_selector("#observation .sqlenv-text")
        assert page.inner_text("#observation .sqlenv-text") == f"Error: {NO_EPISODE}"
        assert page.locator("#transcript li").count() == 0
        assert page.inner_text("#stored").strip() == STORED
    # The browser asked the server alone (no fonts from elsewhere, say).
    assert asked and [address for address in asked if not address.startswith(url)] == []


@pytest.fixture(scope="module")
def observed_server(tmp_path_factory, cache_dir):
    """The server as a process of its own, with Gradio's analytics asked for in its
    environment and its temporary folders where the test can see them."""
    temporary = tmp_path_factory.mktemp("web-temporary")
    environment = {
        "GRADIO_ANALYTICS_ENABLED": "True",
        "GRADIO_TEMP_DIR": str(temporary / "gradio"),
        "TMPDIR": str(temporary),
    }
    command = [sys.executable, "-c", OBSERVED_SERVER, "--web"]
    command += ["--data-dir", str(demo_data_dir(cache_dir)), "--cache-dir", str(cache_dir)]
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        server = LocalServer(command, "/health")
    try:
        yield server, temporary
    finally:
        server.stop()


def test_the_page_refuses_uploads_and_keeps_nothing(observed_server):
    server, temporary = observed_server
    assert httpx.get(f"{server.url}/web/").status_code == 200
    upload = httpx.post(
        f"{server.url}/web/gradio_api/upload",
        files=[("files", (f"note{n}.html", b"<p>hosted here</p>" * 1000)) for n in range(5)],
    )
    assert upload.status_code == 404, upload.text
    assert upload.json() == {"detail": "not found: the /web page serves only its own requests"}
    for path in ("gradio_api/file=/etc/hostname", "gradio_api/proxy=https://example.com/"):
        assert httpx.get(f"{server.url}/web/{path}").status_code == 404
    # Gradio makes its (empty) folders there at start-up.
    assert [path for path in Path(temporary).rglob("*") if not path.is_dir()] == []


def test_the_server_makes_no_outbound_connection(observed_server):
    server, _ = observed_server
    assert httpx.get(f"{server.url}/web/").status_code == 200
    attempts = [line for line in server.output().splitlines() if line.startswith("outbound")]
    assert attempts == []
