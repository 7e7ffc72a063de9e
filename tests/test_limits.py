"""The limits' own rules: readable questions, their length, and per-user counts over a time window."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from copilot.config import Settings
from copilot.limits import LimitExceeded, check_question, readable
from copilot.storage import Store
from tests.conftest import ROOT, clean_env


def test_questions_lose_control_characters_and_keep_their_length_limit() -> None:
    settings = Settings(max_question_chars=100)
    assert readable("  What\x00 is\x1b a\tgraph?\n ") == "What is a\tgraph?"
    assert check_question("What is a graph?", settings) == "What is a graph?"
    with pytest.raises(ValueError, match="no readable text"):
        check_question("\x00\x01\x7f", settings)
    with pytest.raises(ValueError, match="Ask a question"):
        check_question("   ", settings)
    with pytest.raises(LimitExceeded, match="limited to 100 characters"):
        check_question("x" * 101, settings)


def test_escape_sequences_and_lone_accents_are_not_questions() -> None:
    settings = Settings()
    for text in ["\x1b[2J", "\u0301", " \u0301\u0308 ", "\x1b]0;a title\x07", "\x9b31m", "?!", "\x1b[31m...\x1b[0m"]:
        with pytest.raises(ValueError, match="no readable text"):
            check_question(text, settings)
    assert check_question("\x1b[1mWhat is S2ORC?\x1b[0m", settings) == "What is S2ORC?"
    for fine in ["é?", "Ω", "2+2?", "什么是图?"]:
        assert check_question(fine, settings) == fine


def test_usage_admits_up_to_the_limit_per_window(tmp_path: Path) -> None:
    with Store.open(Settings(data_dir=tmp_path)) as store:
        assert [store.usage.admit("u", "question", limit=2, window_s=60) for _ in range(3)] == [None, None, 2]
        assert store.usage.admit("v", "question", limit=2, window_s=60) is None  # per user
        assert store.usage.admit("u", "arxiv_add", limit=3, window_s=60, amount=3) is None  # per action
        assert store.usage.admit("u", "arxiv_add", limit=3, window_s=60, amount=1) == 3
        assert store.usage.count_since("u", "question", 60) == 2
        assert store.usage.count_since("u", "question", 0) == 0


def test_the_command_line_refuses_an_unreadable_question_before_loading_models(tmp_path: Path) -> None:
    env = clean_env() | {"COPILOT_DATA_DIR": str(tmp_path)}
    for question, why in [("", "Ask a question first"), ("\x01\x1b", "no readable text"),
                          ("\x1b[2J", "no readable text"), ("\u0301", "no readable text"), ("x" * 4001, "4,000")]:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "copilot", "ask", question], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and why in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert time.monotonic() - start < 15, "no model is loaded to refuse a question"


def test_cited_pages_drawn_are_counted_per_user(tmp_path: Path) -> None:
    from tests.library_support import make_copilot
    from tests.scripted_llm import ScriptedLLM

    copilot = make_copilot(tmp_path, ScriptedLLM(), pages_per_minute=2)
    copilot.admit("guest-a", "page")
    copilot.admit("guest-a", "page")
    with pytest.raises(LimitExceeded, match="2 cited pages in the last minute"):
        copilot.admit("guest-a", "page")
    copilot.admit("guest-b", "page")  # another user keeps their own allowance
