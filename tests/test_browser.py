"""The real page in Debian's chromium, driven by Playwright, with the real embedded model (``make run``).

One walk through every tab on a library of the real shared papers: a first visit's hints and example papers,
upload them, filter the library and import a BibTeX file, choose the answer language, ask and get a cited
answer, ask a follow-up, see a cited passage on its page, find the conversation kept, see the thought on the
dashboard, move its confidence with feedback, draft an abstract and a related-work section, find trends and
ideas, build a profile, and remove papers several at a time. Screenshots are taken on the way; with
``UPDATE_SCREENSHOTS=1`` they are copied to ``docs/`` for the README and the docs.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS
from tests.conftest import ROOT, TEST_DATA

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAPERS = ["N18-3011.pdf", "2020.acl-main.207.pdf", "2020.acl-main.447.pdf", "2023.eacl-main.121.pdf"]
# A small model does not turn every answer into a thought worth keeping (the filter drops weak ones), so the walk
# asks until one is kept: five tries, each a question the test papers answer.
QUESTIONS = ["What is the literature graph of Semantic Scholar?",
             "What does LongEval recommend for human evaluation of faithfulness?",
             "How is SPECTER trained?", "Which sources does S2ORC collect its papers from?",
             "How does SPECTER use citations between papers?"]
GROUNDING_QUESTIONS = ["How is SPECTER trained?", "Which sources does S2ORC collect its papers from?",
                       "What are the open problems of the Semantic Scholar literature graph?",
                       "How many annotators does LongEval recommend?"]
# Asked first when the answers need a decline: the papers say nothing of it.
DECLINED_QUESTION = "What is the capital of France?"
# Asked after the first answer: it names no paper, so only the conversation says which one it is about.
FOLLOW_UP = "And what are its limitations?"
BIBTEX = ROOT / "tests" / "data" / "zotero_export.bib"
LLM_WAIT_MS = 240_000


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201 - a Playwright browser
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "install Debian's chromium (make test does)"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _shot(page, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(path, ROOT / "docs" / f"{name}.png")


TAB_IDS = {"Library": "library", "Chat": "chat", "Write": "write", "Trends & ideas": "ideas", "Profile": "profile",
           "Dashboard": "dashboard"}


def _tab(page, name: str) -> None:  # noqa: ANN001
    """Gradio also renders hidden copies of tab buttons (for its overflow menu): click the visible one."""
    page.locator(f'button[role="tab"][data-tab-id="{TAB_IDS[name]}"]:visible').first.click()


TOASTS = "() => Array.from(document.querySelectorAll('.toast-body')).map(t => t.innerText)"  # the notices shown


def _wait_text(page, selector: str, pattern: str, timeout: int = LLM_WAIT_MS) -> str:  # noqa: ANN001
    """Wait until the element's text matches ``pattern`` (a JS regular expression); return the text that matched
    (read in the same check: a later read could catch the element while it re-renders)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        matched = page.wait_for_function(
            "([sel, pat]) => { const e = document.querySelector(sel);"
            " return e && new RegExp(pat).test(e.innerText) ? {text: e.innerText} : null; }",
            arg=[selector, pattern], timeout=timeout)
    except PlaywrightTimeout as exc:
        shown = page.evaluate("s => document.querySelector(s)?.innerText ?? '(no element)'", selector)
        toasts = page.evaluate(TOASTS)
        raise AssertionError(f"{selector} never matched /{pattern}/; it shows {shown[-1500:]!r}; "
                             f"notices: {toasts}") from exc
    return matched.json_value()["text"]


def _pick(page, selector: str, option: str) -> None:  # noqa: ANN001
    page.locator(f"{selector} input").first.click()
    page.get_by_role("option", name=re.compile(re.escape(option), re.IGNORECASE)).first.click()
    page.keyboard.press("Escape")


def _thought_rows(page) -> list[list[str]]:  # noqa: ANN001
    return page.evaluate("""() => Array.from(document.querySelectorAll('#thought-table [role=row].virtual-row'))
        .map(row => Array.from(row.querySelectorAll('[role=gridcell]')).map(cell => cell.innerText.trim()))
        .filter(r => r.length > 2 && /^\\d+$/.test(r[0]))""")


@pytest.mark.timeout(1500)  # about 4 minutes on an idle 2-core machine; generous for a busy one
def test_every_tab_with_the_real_model(browser, app_url: str, tmp_path: Path) -> None:  # noqa: ANN001, PLR0915
    page = browser.new_page(viewport={"width": 1366, "height": 1000})
    page.goto(app_url, wait_until="domcontentloaded", timeout=120_000)
    page.get_by_text(EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL].title).first.wait_for(timeout=120_000)
    assert "Paper Copilot" in page.title()

    # A first visit: the empty library says what to do first and offers example papers (offline here, so it says
    # that uploading works instead); the dashboard gives a hint instead of empty charts.
    _tab(page, "Library")
    _wait_text(page, "#library-hint", "Start here", timeout=60_000)
    if page.locator("#add-examples").is_enabled():
        page.locator("#add-examples").click()
        _wait_text(page, "#examples-notice", r"arXiv is unavailable|added", timeout=120_000)
    else:  # arXiv's host accepted no connection: the hint offers the upload first
        _wait_text(page, "#library-hint", r"Upload PDFs[\s\S]*cannot be reached", timeout=60_000)
    _tab(page, "Dashboard")
    _wait_text(page, "#dashboard-summary", r"\S", timeout=60_000)
    assert not page.locator("#plot-growth").is_visible(), "an empty instance must not show empty charts"

    # Library: upload the four shared papers, with progress, and see them listed.
    _tab(page, "Library")
    page.locator("#upload-files input[type=file]").set_input_files([str(TEST_DATA / "papers" / p) for p in PAPERS])
    page.wait_for_timeout(1500)
    page.locator("#upload-add").click()
    notice = _wait_text(page, "#upload-notice", r"(added|already)[\s\S]*(added|already)[\s\S]*(added|already)"
                        r"[\s\S]*(added|already)")
    assert "failed" not in notice.lower()
    table = _wait_text(page, "#papers-table", "Semantic Scholar")
    assert re.search(r"\b20(18|20|23)\b", table) and "Cohan" in table, "uploads show their authors and year"
    _shot(page, tmp_path, "library")
    # The filter box narrows the table; emptied, it shows every paper again.
    page.locator("#papers-filter textarea, #papers-filter input").first.fill("LongEval")
    page.wait_for_function("() => !/SPECTER/.test(document.querySelector('#papers-table').innerText)",
                           timeout=30_000)
    assert "longeval" in page.locator("#papers-table").inner_text().lower()
    page.locator("#papers-filter textarea, #papers-filter input").first.fill("")
    _wait_text(page, "#papers-table", "SPECTER", timeout=30_000)

    # BibTeX: a Zotero export, each entry reported (arXiv entries need arXiv; a DOI is listed; a file is offered).
    page.get_by_text("Import a BibTeX file").first.click()
    page.locator("#bibtex-file input[type=file]").set_input_files(str(BIBTEX))
    page.wait_for_timeout(1500)
    page.locator("#bibtex-import").click()
    summary = _wait_text(page, "#bibtex-summary", r"\d+ entr", timeout=180_000)
    result = _wait_text(page, "#bibtex-result", r"DOI", timeout=30_000)
    assert re.search(r"file to upload|upload", result, re.I), result
    page.locator("#bibtex-result").evaluate("e => e.scrollIntoView({block: 'center'})")
    _shot(page, tmp_path, "bibtex")
    assert summary

    # Answers in the user's language: saved in the profile, asked for by every later answer and draft.
    _tab(page, "Profile")
    _pick(page, "#answer-language", "English")
    page.locator("#save-language").click()
    _wait_text(page, "#profile-status", r"English", timeout=60_000)

    # Chat: a streamed answer with followable sources, the retrieved items, then the thought.
    _tab(page, "Chat")
    box = page.locator("#message textarea")
    statuses = []
    for n, question in enumerate(QUESTIONS, start=1):
        box.fill(question)
        box.press("Enter")
        page.wait_for_function("n => document.querySelectorAll('#chatbot [data-testid=\"bot\"]').length >= n",
                               arg=n, timeout=LLM_WAIT_MS)
        page.wait_for_function(
            """() => { const b = document.querySelectorAll('#chatbot [data-testid="bot"]');
                       return /Sources[\\s\\S]*\\[1\\]/.test(b[b.length - 1].innerText); }""", timeout=LLM_WAIT_MS)
        answer = page.locator('#chatbot [data-testid="bot"]').last.inner_text()
        assert re.search(r"\[1\].*(LONGEVAL|LongEval|Semantic Scholar|SPECTER|S2ORC|p\. \d)", answer, re.S), answer
        _wait_text(page, "#retrieved", "chunk")
        status = _wait_text(page, "#chat-status", r"Thought: (\*\*)?(added|merged)|Thought: dropped")
        statuses.append(status)
        if re.search(r"added|merged", status):
            break
    _shot(page, tmp_path, "chat")
    assert re.search(r"added|merged", statuses[-1]), f"no thought kept from {len(statuses)} answers: {statuses}"

    # Dashboard: the thought is there with depth and confidence; its provenance shows the chunks.
    _tab(page, "Dashboard")
    page.locator("#dashboard-refresh").click()
    _wait_text(page, "#dashboard-summary", r"[1-9]\d* thoughts?\b")
    page.wait_for_function("() => document.querySelectorAll('#thought-table [role=gridcell]').length > 2",
                           timeout=30_000)
    rows = _thought_rows(page)
    assert rows, "no thought row on the dashboard"
    # The charts draw the new thought (a chart first drawn empty must still show data that arrives later).
    page.wait_for_function("""() => [...document.querySelectorAll('#plot-growth g.mark-line path')]
                                  .some(p => p.getAttribute('stroke') && /L/.test(p.getAttribute('d') || ''))""",
                           timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('#plot-depth g.mark-rect path').length > 0",
                           timeout=30_000)
    newest_id, before = rows[0][0], float(rows[0][2])
    page.locator("#thought-id input").fill(newest_id)
    page.locator("#thought-id input").press("Enter")  # typing an id and pressing Enter shows it
    _wait_text(page, "#thought-detail", r"Built from[\s\S]*chunk #")
    _shot(page, tmp_path, "dashboard")

    # Feedback: thumbs down on the answer lowers that thought's confidence.
    _tab(page, "Chat")
    page.locator("#thumbs-down").click()
    feedback = _wait_text(page, "#chat-status", r"→|no thought|made no thought")
    match = re.search(r"confidence (\d+\.\d+) → (\d+\.\d+)", feedback)
    assert match and float(match.group(2)) < float(match.group(1)), feedback
    _tab(page, "Dashboard")
    page.locator("#dashboard-refresh").click()
    page.wait_for_timeout(1500)
    after = {r[0]: float(r[2]) for r in _thought_rows(page)}
    changed = [tid for tid in after if abs(after[tid] - float(match.group(2))) < 0.006]  # shown to 2 places
    assert changed, (after, feedback)
    assert newest_id not in changed or after[newest_id] < before

    # A follow-up names no paper: its sources still come from the paper of the question before it.
    _tab(page, "Chat")
    asked = page.locator('#chatbot [data-testid="bot"]').count()
    topic = next(name for name in ("Semantic Scholar", "LongEval", "SPECTER", "S2ORC")
                 if name in QUESTIONS[len(statuses) - 1])
    box.fill(FOLLOW_UP)
    box.press("Enter")
    page.wait_for_function(
        """n => { const b = document.querySelectorAll('#chatbot [data-testid="bot"]');
                  return b.length > n && /Sources[\\s\\S]*\\[1\\]/.test(b[b.length - 1].innerText); }""",
        arg=asked, timeout=LLM_WAIT_MS)
    follow_up = page.locator('#chatbot [data-testid="bot"]').last.inner_text()
    sources = follow_up.split("Sources", 1)[1]
    assert topic.lower() in sources.lower(), sources
    _wait_text(page, "#chat-status", r"Thought: (\*\*)?(added|merged)|Thought: dropped")

    # A cited passage on its page: a retrieved chunk's row shows the PDF page with the passage highlighted.
    page.locator("#retrieved").get_by_text("chunk", exact=True).filter(visible=True).first.click()
    passage = _wait_text(page, "#passage-text", r"highlighted", timeout=60_000)
    assert re.search(r"p(age|\.) ?\d", passage), passage
    page.locator("#passage-image img").first.wait_for(timeout=30_000)
    page.locator("#passage-image").first.evaluate("e => e.scrollIntoView({block: 'center'})")
    _shot(page, tmp_path, "passage")

    # The conversation is kept: listed with its questions, and exported as Markdown.
    page.locator("#conversations-refresh").click()
    listed = _wait_text(page, "#conversations", r"\b[2-9]\b", timeout=30_000)
    assert any(q[:20] in listed for q in QUESTIONS), listed
    _pick(page, "#conversation-picker", QUESTIONS[0][:20])
    page.locator("#conversation-export-button").click()
    page.locator("#conversation-export a, #conversation-export [download]").first.wait_for(timeout=30_000)
    page.locator("#conversations-panel").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    _shot(page, tmp_path, "conversations")

    # Evidence and declines: an answer shows the verbatim source sentence of each supported sentence, with its
    # paper, section and page; a question the papers do not answer is declined with the nearest passages.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    _tab(page, "Chat")
    bots = page.locator('#chatbot [data-testid="bot"]')
    for question in [DECLINED_QUESTION, *GROUNDING_QUESTIONS]:
        texts = bots.all_inner_texts()
        if any("Supporting quotes" in t for t in texts) and any("papers in scope do not say" in t for t in texts):
            break
        asked = bots.count()
        box.fill(question)
        box.press("Enter")
        try:
            page.wait_for_function(
                """n => { const b = document.querySelectorAll('#chatbot [data-testid="bot"]');
                          return b.length > n
                                 && /Supporting quotes|do not support this answer|papers in scope do not say/
                                    .test(b[b.length - 1].innerText); }""",
                arg=asked, timeout=LLM_WAIT_MS)
        except PlaywrightTimeout as exc:  # what the page showed instead: the last answer, the status, the notices
            shown = bots.all_inner_texts()
            raise AssertionError(f"no checked answer to {question!r} ({len(shown)} answers, {asked} before); the last "
                                 f"shows {shown[-1][-1500:] if shown else '(none)'!r}; the box holds "
                                 f"{box.input_value()!r}; status {page.locator('#chat-status').inner_text()!r}; "
                                 f"notices {page.evaluate(TOASTS)}") from exc
        # the answer's chain (its sources listed, its thought's status) is done before the next question
        _wait_text(page, "#chat-status", r"Thought: (\*\*)?(added|merged)|Thought: dropped|^$")
    texts = bots.all_inner_texts()
    evidence = next((t for t in reversed(texts) if "Supporting quotes" in t), "")
    assert re.search(r"“.+” \(support \d\.\d\d\) — .+, p+\. \d+", evidence), texts
    bots.filter(has_text="Supporting quotes").last.evaluate("e => e.scrollIntoView({block: 'start'})")
    _shot(page, tmp_path, "evidence")
    declined = next((t for t in reversed(texts) if "papers in scope do not say" in t), "")
    assert "Nearest passages" in declined, texts
    bots.filter(has_text="papers in scope do not say").last.evaluate("e => e.scrollIntoView({block: 'start'})")
    _shot(page, tmp_path, "declined")

    # Write: an abstract for one paper, then related work with references; both download as Markdown.
    _tab(page, "Write")
    _pick(page, "#abstract-paper", "LongEval")
    page.locator("#draft-abstract").click()
    abstract = _wait_text(page, "#draft-output", r"\w+ \w+ \w+[\s\S]*LLM call")
    body = re.split(r"\n\s*(References|Sources)\s*\n", abstract.split("\n", 1)[1])[0]
    assert len(body.split()) >= 30 and re.search(r"(?<!\d)1 LLM call", abstract), abstract
    page.locator("#related-title textarea").fill("Evaluating faithfulness of long summaries of papers")
    page.locator("#related-abstract textarea").fill(
        "We study how to judge whether summaries of scientific papers are faithful, using annotated "
        "documents and citation graphs of scholarly literature.")
    page.locator("#draft-related").click()
    related = _wait_text(page, "#draft-output", r"References[\s\S]*\[1\]")
    # The text cites exactly the references listed under it.
    body, references = re.split(r"\n\s*References\s*\n", related, maxsplit=1)
    cited = {int(n) for group in re.findall(r"\[([\d, ]+)\]", body) for n in group.split(",") if n.strip()}
    listed = {int(n) for n in re.findall(r"\[(\d+)\]", references)}
    assert cited == listed == set(range(1, len(listed) + 1)), related
    page.locator("#draft-md a, #draft-md [download]").first.wait_for(timeout=30_000)
    _shot(page, tmp_path, "write")

    # A comparison table of two papers on two aspects: filled cell by cell, each with its evidence or "not stated"
    # (each cell is a call to the model; `make bench-compare` measures 20 cells of the four papers).
    for name in ("SPECTER", "LongEval"):
        # A multiselect's list stays open after a choice: it is opened again only when it has closed.
        option = page.get_by_role("option", name=re.compile(re.escape(name), re.IGNORECASE)).first
        if not option.is_visible():
            page.locator("#compare-papers input").first.click()
        option.click()
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.querySelectorAll('#compare-papers .token').length === 2", timeout=30_000)
    page.locator("#compare-aspects textarea").fill("task, data")
    page.locator("#compare-run").click()
    evidence = _wait_text(page, "#compare-table", r"Evidence[\s\S]*LLM call")
    rows = page.evaluate("""() => Array.from(document.querySelectorAll('#compare-table tbody tr'))
        .map(row => Array.from(row.querySelectorAll('td')).map(cell => cell.innerText.trim()))""")
    assert len(rows) == 2 and all(len(r) >= 3 and all(cell and cell != "…" for cell in r) for r in rows), rows
    assert re.search(r"\(\S+.*, p\. \d+\)", evidence), evidence
    page.locator("#compare-csv a, #compare-csv [download]").first.wait_for(timeout=30_000)
    page.locator("#compare-table").scroll_into_view_if_needed()
    _shot(page, tmp_path, "compare")

    # Trends and ideas from the library.
    _tab(page, "Trends & ideas")
    page.locator("#ideas-run").click()
    ideas = _wait_text(page, "#ideas-output", r"Trending keywords[\s\S]*Ideas[\s\S]*Papers")
    assert re.search(r"Ideas\s*\n\S[\s\S]*\[\d\][\s\S]*Papers", ideas), ideas
    _shot(page, tmp_path, "ideas")

    # Profile: a persona from pasted text, saved and editable; memories listed.
    _tab(page, "Profile")
    page.locator("#profile-text textarea").fill(
        "I research evaluation of summarisation and scholarly knowledge graphs at a university library.")
    page.locator("#profile-from-text").click()
    _wait_text(page, "#profile-status", "saved")
    assert page.locator("#persona textarea").input_value().strip()
    _shot(page, tmp_path, "profile")

    # Housekeeping: the two papers the filter shows, selected together and removed at once; the others stay.
    _tab(page, "Library")
    page.locator("#papers-filter textarea, #papers-filter input").first.fill("Semantic Scholar")
    page.wait_for_function("() => !/SPECTER/.test(document.querySelector('#papers-table').innerText)",
                           timeout=30_000)
    page.wait_for_timeout(1000)
    page.locator("#remove-select-all").click()
    page.wait_for_function("() => document.querySelectorAll('#remove-choices .token').length === 2",
                           timeout=30_000)
    page.locator("#remove-papers").click()
    _wait_text(page, "#remove-confirm-text", r"Remove 2 papers\?", timeout=30_000)
    page.locator("#remove-confirm").click()
    _wait_text(page, "#remove-notice", r"Removed 2 papers", timeout=60_000)
    page.locator("#papers-filter textarea, #papers-filter input").first.fill("")
    table = _wait_text(page, "#papers-table", "SPECTER", timeout=30_000)
    assert "longeval" in table.lower() and "S2ORC" not in table and "Literature Graph" not in table, table
    page.close()


def test_two_browsers_are_two_guests_with_private_cookies(browser, tmp_path: Path) -> None:  # noqa: ANN001
    """On a public instance, each browser gets its own signed guest cookie; the page's own requests carry it, and
    one browser's upload is never listed in the other's."""
    from copilot.config import Settings
    from copilot.ui.identity import COOKIE
    from tests.ui_harness import RoutedLLM, app_in_process

    settings = Settings(data_dir=tmp_path / "data", llm_backend="local", users="session")
    with app_in_process(settings, RoutedLLM()) as (url, _, _):
        a, b = browser.new_context(), browser.new_context()
        try:
            page_a, page_b = a.new_page(), b.new_page()
            for page in (page_a, page_b):
                page.goto(url, wait_until="domcontentloaded", timeout=60_000)
                _tab(page, "Library")
            page_a.locator("#upload-files input[type=file]").set_input_files([str(TEST_DATA / "papers" / PAPERS[0])])
            page_a.wait_for_timeout(1000)
            page_a.locator("#upload-add").click()
            _wait_text(page_a, "#upload-notice", "added as pdf-", timeout=120_000)
            _wait_text(page_a, "#papers-table", "Semantic Scholar", timeout=30_000)

            cookie_a = next(c for c in a.cookies() if c["name"] == COOKIE)
            cookie_b = next(c for c in b.cookies() if c["name"] == COOKIE)
            assert cookie_a["value"] != cookie_b["value"] and cookie_a["httpOnly"]
            assert COOKIE not in page_a.evaluate("() => document.cookie"), "scripts on the page cannot read it"
            page_a.reload(wait_until="domcontentloaded")  # the same browser is the same guest after a reload
            _tab(page_a, "Library")
            _wait_text(page_a, "#papers-table", "Semantic Scholar", timeout=30_000)
            page_b.reload(wait_until="domcontentloaded")
            _tab(page_b, "Library")
            page_b.wait_for_timeout(2000)
            assert "Semantic Scholar" not in page_b.locator("#papers-table").inner_text()
            toasts = page_b.evaluate("() => Array.from(document.querySelectorAll('.toast-body')).map(t => t.innerText)")
            assert not any("guest session" in t for t in toasts), toasts
        finally:
            a.close()
            b.close()
