"""The real page in Debian's chromium, driven by Playwright: type a question, see the model's answer."""

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 - a Playwright browser
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "install Debian's chromium (make test does)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_chat_in_the_browser(browser, app_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(app_url, wait_until="networkidle")
    assert "Paper Copilot" in page.title()
    page.get_by_text("SmolLM2-135M-Instruct").first.wait_for(timeout=30_000)
    box = page.locator("#message textarea")
    box.fill("What is a literature graph? Answer briefly.")
    box.press("Enter")
    user = page.locator('#chatbot [data-testid="user"]')
    bot = page.locator('#chatbot [data-testid="bot"]')
    user.first.wait_for(timeout=30_000)
    assert "literature graph" in user.first.inner_text()
    page.wait_for_function(
        """() => { const b = document.querySelectorAll('#chatbot [data-testid="bot"]');
                   return b.length > 0 && b[b.length - 1].innerText.trim().split(/\\s+/).length >= 3; }""",
        timeout=120_000,
    )
    assert len(bot.last.inner_text().split()) >= 3
    assert box.input_value() == ""
    page.screenshot(path=str(tmp_path / "chat.png"))
    page.close()
