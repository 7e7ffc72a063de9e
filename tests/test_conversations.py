"""Kept conversations: in the store on both backends (created with their first turn, listed newest first, read,
renamed and deleted only by their owner), in the engine (continued, follow-ups searched for with their subject,
exported) and on the command line."""

from __future__ import annotations

import json

import pytest

from copilot.errors import NotFound, UserError
from copilot.storage import Store
from tests.conftest import count_rows
from tests.library_support import add_paper, make_copilot
from tests.scripted_llm import ScriptedLLM


def test_a_conversation_keeps_its_turns_in_order_for_its_owner_only(store: Store) -> None:
    repo = store.conversations
    first = repo.start("ada", "What is SPECTER?", "What is SPECTER?", "A model [1].", 11)
    second = repo.start("ada", "What is S2ORC?", "What is S2ORC?", "A corpus [1].", 12)
    assert repo.add_turn(first, "ada", "How is it trained?", "With citations [2].", 13) is not None
    listed = repo.list("ada")
    assert [c.id for c in listed] == [first, second], "the one that last grew comes first"
    assert [c.n_turns for c in listed] == [2, 1] and listed[0].title == "What is SPECTER?"
    turns = repo.turns(first, "ada")
    assert [(t.question, t.query_id) for t in turns] == [("What is SPECTER?", 11), ("How is it trained?", 13)]
    assert [t.question for t in repo.turns(first, "ada", last=1)] == ["How is it trained?"]

    # Another user's id behaves as a missing one, and changes nothing.
    assert repo.list("bob") == [] and repo.get(first, "bob") is None and repo.turns(first, "bob") == []
    assert repo.add_turn(first, "bob", "Mine now?", "No.", None) is None
    assert not repo.rename(first, "bob", "stolen") and not repo.delete(first, "bob")
    assert repo.get(first, "ada").title == "What is SPECTER?" and repo.get(first, "ada").n_turns == 2

    assert repo.rename(second, "ada", "Corpora")
    assert repo.get(second, "ada").title == "Corpora"
    assert repo.delete(first, "ada")
    assert repo.get(first, "ada") is None and [c.id for c in repo.list("ada")] == [second]
    assert count_rows(store, "conversation_turns") == 1, "a deleted conversation's turns go with it"
    assert repo.get(10**9, "ada") is None and not repo.delete(10**9, "ada")


# ----- the engine: chats kept as conversations, follow-ups searched for with their subject -----------------

@pytest.fixture
def copilot(tmp_path):  # noqa: ANN001, ANN201 - a Copilot with two papers
    engine = make_copilot(tmp_path, ScriptedLLM(), max_conversation_title_chars=24)
    add_paper(engine, "2004.07180", "SPECTER", arxiv_id="2004.07180", sections=[
        ("Method", "SPECTER is trained on citation triples with a triplet margin loss."),
        ("Limitations", "SPECTER embeddings ignore the full text of the papers.")])
    add_paper(engine, "1911.02782", "S2ORC", arxiv_id="1911.02782", sections=[
        ("Corpus", "S2ORC holds 81.1M papers with full text."),
        ("Limitations", "The corpus limitations: parses of old PDFs are noisy.")])
    yield engine
    engine.flush(timeout=30)
    engine.store.close()


def ask(engine, message: str, conversation_id=None, user_id: str = "ada"):  # noqa: ANN001, ANN201
    result = None
    for update in engine.chat_stream(user_id, message, conversation_id=conversation_id, write_thought=False):
        result = update
    return result


def test_a_chat_is_kept_as_a_conversation_and_continued(copilot) -> None:  # noqa: ANN001
    first = ask(copilot, "How is SPECTER trained with citation triples?")
    assert first.conversation_id is not None and first.searched_for is None
    (kept,) = copilot.conversations("ada")
    assert kept.title == "How is SPECTER trained…" and kept.n_turns == 1, "titled from the first question, cut"
    second = ask(copilot, "And what are its limitations?", first.conversation_id)
    assert second.conversation_id == first.conversation_id
    assert second.searched_for == "And what are its limitations? specter"
    assert second.question == "And what are its limitations?", "answered as asked"
    assert second.sources[0].paper_id == "2004.07180", "the limitations of the paper the chat is about"
    assert copilot.llm.calls[-1][-1]["content"].count("And what are its limitations?") == 1

    conversation, turns = copilot.open_conversation(str(first.conversation_id), "ada")
    assert [t["question"] for t in turns] == ["How is SPECTER trained with citation triples?",
                                              "And what are its limitations?"]
    assert [t["query_id"] for t in turns] == [first.query_id, second.query_id]
    assert [s.id for s in turns[1]["sources"]] == [s.id for s in second.sources]
    assert turns[0]["thought"]["outcome"] == "dropped"

    # The same follow-up in a new chat has nothing to lean on: searched for as asked.
    alone = ask(copilot, "And what are its limitations?")
    assert alone.searched_for is None and alone.conversation_id != first.conversation_id
    assert [c.id for c in copilot.conversations("ada")] == [alone.conversation_id, first.conversation_id]


def test_rename_export_and_delete_are_the_owners_only(copilot) -> None:  # noqa: ANN001
    first = ask(copilot, "How is SPECTER trained?")
    conversation_id = first.conversation_id
    for call in (lambda: copilot.open_conversation(conversation_id, "bob"),
                 lambda: copilot.export_conversation(conversation_id, "bob"),
                 lambda: copilot.rename_conversation(conversation_id, "Mine", "bob"),
                 lambda: copilot.delete_conversation(conversation_id, "bob"),
                 lambda: ask(copilot, "And its limitations?", conversation_id, user_id="bob")):
        with pytest.raises(NotFound, match=f"No conversation #{conversation_id} of yours"):
            call()
    with pytest.raises(NotFound, match="No conversation #999999 of yours"):
        copilot.open_conversation(999999, "ada")  # a missing id reads the same as another user's
    assert copilot.conversations("bob") == [] and copilot.conversations("ada")[0].n_turns == 1
    with pytest.raises(UserError, match="Choose a conversation"):
        copilot.export_conversation(None, "ada")
    with pytest.raises(UserError, match="limited to 24 characters"):
        copilot.rename_conversation(conversation_id, "x" * 25, "ada")
    with pytest.raises(UserError, match="Type a title"):
        copilot.rename_conversation(conversation_id, "   ", "ada")
    assert copilot.rename_conversation(conversation_id, "  SPECTER\n training ", "ada").title == "SPECTER training"

    conversation, text = copilot.export_conversation(conversation_id, "ada")
    assert text.startswith("# SPECTER training\n") and "## 1. How is SPECTER trained?" in text
    assert first.answer in text and "**References**" in text
    assert "- [1] *SPECTER*, Method, p. 1 [arXiv:2004.07180](https://arxiv.org/abs/2004.07180)" in text
    assert "Thought: dropped (disabled: thoughts are off for this question)" in text

    copilot.delete_conversation(conversation_id, "ada")
    assert copilot.conversations("ada") == []
    with pytest.raises(NotFound):
        copilot.open_conversation(conversation_id, "ada")
    assert copilot.query(first.query_id, "ada")["text"] == "How is SPECTER trained?", "the answer's record stays"


def test_the_command_line_continues_lists_and_exports_conversations(copilot, monkeypatch, tmp_path) -> None:  # noqa: ANN001
    from click.testing import CliRunner

    from copilot.cli import cli
    from copilot.engine import Copilot

    monkeypatch.setattr(Copilot, "open", classmethod(lambda cls, settings, **kwargs: copilot))
    runner = CliRunner()
    first = runner.invoke(cli, ["ask", "How is SPECTER trained?", "--user", "ada", "--no-thoughts"])
    assert first.exit_code == 0, first.output
    (kept,) = copilot.conversations("ada")
    assert f"conversation #{kept.id} (continue it with --conversation {kept.id})" in first.output
    second = runner.invoke(cli, ["ask", "And its limitations?", "--user", "ada", "--no-thoughts", "--json",
                                 "--conversation", str(kept.id)])
    assert second.exit_code == 0, second.output
    record = json.loads(second.output[second.output.index("{"):])
    assert record["conversation_id"] == kept.id and record["searched_for"] == "And its limitations? specter"
    listed = runner.invoke(cli, ["conversations", "list", "--user", "ada"])
    assert f"#{kept.id}" in listed.output and "2 question(s)" in listed.output
    out = tmp_path / "chat.md"
    exported = runner.invoke(cli, ["conversations", "export", str(kept.id), "--user", "ada", "--out", str(out)])
    assert exported.exit_code == 0 and out.read_text().startswith("# How is SPECTER trained?")
    refused = runner.invoke(cli, ["conversations", "export", str(kept.id), "--user", "bob"])
    assert refused.exit_code == 1 and f"No conversation #{kept.id} of yours" in refused.output
