"""The same user gets the same personalised ask from the Chat tab and from ``python -m copilot ask``: persona and
recalled memories in the prompt, the user's self statements kept afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from copilot.cli import cli
from copilot.engine import Copilot
from copilot.tasks.profile import save_profile
from copilot.ui import build_app
from copilot.ui.services import Services
from tests.library_support import add_paper, make_copilot
from tests.scripted_llm import ScriptedLLM

PERSONA = "I study citation graphs for digital libraries."
MEMORY = "I maintain the citation graph of a digital library at my university."
QUESTION = "How are citation graphs of a digital library built? I work on scholarly search."


def prepared(tmp_path: Path) -> Copilot:
    """A copilot with one paper and the user's persona and memory, identical for both shells."""
    copilot = make_copilot(tmp_path, ScriptedLLM())
    add_paper(copilot, "2301.00001", "The Literature Graph", sections=[
        ("Method", "The citation graph of the digital library links papers, authors and venues.")])
    save_profile(copilot.store, "local", PERSONA, "text")
    copilot.remember(MEMORY, user_id="local")
    return copilot


def chat_turn(copilot: Copilot) -> None:
    demo = build_app(copilot.settings, Services(copilot.settings, copilot), warm_up=False)
    chat = next(fn for fn in demo.fns.values() if fn.api_name == "chat").fn
    for _ in chat(QUESTION, [], None, False, False, None):
        pass
    assert copilot.flush(timeout=30)


def cli_turn(copilot: Copilot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Copilot, "open", classmethod(lambda cls, settings, **kwargs: copilot))
    done = CliRunner().invoke(cli, ["ask", QUESTION, "--user", "local",
                                    "--data-dir", str(copilot.settings.data_dir)])
    assert done.exit_code == 0, done.output


def test_the_command_line_and_the_chat_build_the_same_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    in_chat, on_cli = prepared(tmp_path / "chat"), prepared(tmp_path / "cli")
    chat_turn(in_chat)
    cli_turn(on_cli, monkeypatch)
    chat_prompt, cli_prompt = in_chat.llm.calls[0], on_cli.llm.calls[0]
    assert cli_prompt == chat_prompt
    asked = chat_prompt[-1]["content"]
    assert PERSONA in asked and MEMORY in asked, "persona and recalled memory personalise both"
    for copilot in (in_chat, on_cli):
        kept = [m.text for m in copilot.memories.list("local")]
        assert any("I work on scholarly search" in text for text in kept), "the self statement is kept by both"
