"""A guest's work survives a restart: `python app.py` (what a Space runs) serves guests; one adds a paper and asks a
question with the real embedded model; the app is stopped and started again on the same data directory with the
same ``COPILOT_SECRET``; the same browser (the same cookie) still sees its paper and its kept conversation."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_DATA, free_port
from tests.test_browser import _tab, _wait_text
from tests.test_browser import browser  # noqa: F401 - the walk's chromium, a fixture shared with the full walk

pytestmark = [pytest.mark.slow, pytest.mark.browser]
QUESTION = "How is SPECTER trained?"


def _start(env: dict[str, str], url: str, log: Path) -> subprocess.Popen:
    with log.open("a") as out:
        app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return app
        except OSError:
            if app.poll() is not None:
                raise AssertionError(f"the app stopped: {log.read_text()[-2000:]}") from None
            time.sleep(0.5)
    app.kill()
    raise AssertionError("the app did not start within 180 s")


def _stop(app: subprocess.Popen) -> None:
    app.terminate()
    try:
        app.wait(30)
    except subprocess.TimeoutExpired:
        app.kill()


@pytest.mark.timeout(900)
def test_a_guest_finds_its_paper_and_conversation_after_a_restart(browser, tmp_path: Path) -> None:  # noqa: ANN001, F811
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPILOT_")}
    env |= {"HF_HUB_OFFLINE": "1", "COPILOT_DATA_DIR": str(tmp_path / "data"), "COPILOT_HOST": "127.0.0.1",
            "COPILOT_PORT": str(port), "COPILOT_USERS": "session", "COPILOT_SECRET": "s" * 64}
    log = tmp_path / "app.log"
    app = _start(env, url, log)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url, wait_until="domcontentloaded")
        _tab(page, "Library")
        page.locator("#upload-files input[type=file]").set_input_files([str(TEST_DATA / "papers" /
                                                                             "2020.acl-main.207.pdf")])
        page.wait_for_timeout(1500)
        page.locator("#upload-add").click()
        _wait_text(page, "#upload-notice", "added as pdf-", timeout=180_000)
        _tab(page, "Chat")
        page.locator("#message textarea").fill(QUESTION)
        page.locator("#message textarea").press("Enter")
        _wait_text(page, "#chat-status", "Thought:", timeout=240_000)

        _stop(app)
        app = _start(env, url, log)
        page.goto(url, wait_until="domcontentloaded")  # the same browser, so the same signed guest cookie
        _tab(page, "Library")
        _wait_text(page, "#papers-table", "SPECTER", timeout=60_000)
        _tab(page, "Chat")
        _wait_text(page, "#conversations", QUESTION.rstrip("?"), timeout=60_000)
        stranger = browser.new_context()  # another browser is another guest: it sees neither
        other = stranger.new_page()
        other.goto(url, wait_until="domcontentloaded")
        _tab(other, "Library")
        other.wait_for_timeout(2000)
        assert "SPECTER" not in other.locator("#papers-table").inner_text()
        stranger.close()
    finally:
        context.close()
        _stop(app)
