"""A guest's work survives a restart: `python app.py` (what a Space runs) serves guests; one adds a paper and asks a
question with the real embedded model; the app is stopped and started again on the same data directory with the
same ``COPILOT_SECRET``; the same browser (the same cookie) still sees its paper and its kept conversation; then it
makes an access token in the Profile tab, and its agent asks over MCP, answered by the embedded model.

The test starts Debian's chromium itself and attaches Playwright to it, so that whatever happens the browser is
killed at the end: a browser that stops answering can never hold the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_DATA, clean_env, free_port
from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL
from copilot.ui.agent_tools import NEEDS_TOKEN
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _tab, _wait_text
from tests.test_mcp import Agent

pytestmark = [pytest.mark.slow, pytest.mark.browser]
QUESTION = "How is SPECTER trained?"


def _serving(url: str, proc: subprocess.Popen, log: Path, what: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"{what} stopped: {log.read_text(errors='replace')[-2000:]}") from None
            time.sleep(0.5)
    raise AssertionError(f"{what} did not answer within {seconds:.0f} s")


def _start(env: dict[str, str], url: str, log: Path) -> subprocess.Popen:
    with log.open("a") as out:
        app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _serving(url, app, log, "the app")
    except AssertionError:
        app.kill()
        app.wait(30)
        raise
    return app


def _stop(proc: subprocess.Popen, group: bool = False) -> None:
    """Stop a process (its whole group if it leads one); kill it if it has not gone within 30 s."""
    send = (lambda sig: os.killpg(proc.pid, sig)) if group else proc.send_signal
    try:
        send(signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait(30)
    except ProcessLookupError:
        pass


@contextmanager
def _chromium(tmp_path: Path) -> Iterator:
    """Debian's chromium in its own process group, attached over CDP; killed on the way out, whatever happened."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    log = tmp_path / "chromium.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(CHROMIUM), "--headless", f"--remote-debugging-port={port}",
                                 "--remote-debugging-address=127.0.0.1", f"--user-data-dir={tmp_path / 'profile'}",
                                 *CHROMIUM_ARGS, "about:blank"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _serving(f"http://127.0.0.1:{port}/json/version", proc, log, "chromium", seconds=60)
        with sync_playwright() as p:
            browser = p.chromium.connect_over_cdp(f"http://127.0.0.1:{port}", timeout=60_000)
            try:
                yield browser
            finally:
                _stop(proc, group=True)  # before Playwright lets go: nothing waits on a browser that hangs
    finally:
        _stop(proc, group=True)


@pytest.mark.timeout(900)
def test_a_guest_finds_its_paper_and_conversation_after_a_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = clean_env() | {"COPILOT_DATA_DIR": str(tmp_path / "data"), "COPILOT_HOST": "127.0.0.1",
                         "COPILOT_PORT": str(port), "COPILOT_USERS": "session", "COPILOT_SECRET": "s" * 64,
                         "COPILOT_MAX_ANSWER_TOKENS": "80"}  # short answers: what is tested is what is kept
    log = tmp_path / "app.log"
    app = _start(env, url, log)
    try:
        with _chromium(tmp_path) as browser:
            page = browser.new_context().new_page()
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

            page.goto("about:blank")  # a page left open would try to reconnect, and reload itself, on its own
            _stop(app)
            app = _start(env, url, log)
            page.goto(url, wait_until="domcontentloaded")  # the same browser, so the same signed guest cookie
            _tab(page, "Library")
            _wait_text(page, "#papers-table", "SPECTER", timeout=60_000)
            _tab(page, "Chat")
            _wait_text(page, "#conversations", QUESTION.rstrip("?"), timeout=60_000)
            other = browser.new_context().new_page()  # another browser is another guest: it sees neither
            other.goto(url, wait_until="domcontentloaded")
            _tab(other, "Library")
            # The page's own sign that it has read this guest's library, and found it empty.
            _wait_text(other, "#library-hint", "Start here", timeout=60_000)
            assert "SPECTER" not in other.locator("#papers-table").inner_text()
            # The same guest's agent: a token made in the Profile tab, then the MCP tool `ask`, answered by the
            # embedded model from the guest's own upload (its sources and evidence, or a decline with the nearest).
            _tab(page, "Profile")
            page.locator("#agents").get_by_text("Agents (MCP)").click()
            page.locator("#token-name input, #token-name textarea").first.fill("laptop")
            page.locator("#token-create").click()
            _wait_text(page, "#token-status", "created", timeout=60_000)
            token = page.locator("#token-secret input, #token-secret textarea").first.input_value()
            answer = Agent(url, token).call("ask", question=QUESTION)
            assert answer["model"] == f"local:{DEFAULT_EMBEDDED_MODEL}" and answer["sources"], answer
            assert all(s["title"] and s["paper_id"].startswith("pdf-") for s in answer["sources"])
            assert answer["evidence"] if not answer["declined"] else answer["nearest"], answer
            assert NEEDS_TOKEN in Agent(url).refusal("ask", question=QUESTION)
    except Exception as exc:
        raise AssertionError(f"{exc}\n--- the app's log ---\n{log.read_text(errors='replace')[-3000:]}") from exc
    finally:
        _stop(app)
