"""Research personas and personal memories: storage, LLM summaries, arXiv author look-ups, isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot.engine import Copilot
from copilot.tasks.profile import (
    MAX_PERSONA_CHARS,
    delete_memory,
    extract_self_statements,
    get_profile,
    list_memories,
    persona_for_prompt,
    profile_from_author,
    profile_from_text,
    save_profile,
)
from tests.library_support import make_copilot, recorded_client
from tests.scripted_llm import ScriptedLLM

LONG_BIO = ("Jane Doe is an associate professor of computer science. " * 3 + "Her group builds tools that help "
            "scientists find and read papers, including citation recommendation, scientific document "
            "summarisation and question answering over full text. She previously worked on information "
            "extraction from biomedical literature and on evaluation of summarisation systems with human judges. "
            "She teaches natural language processing and advises six PhD students.")


@pytest.fixture
def copilot(tmp_path: Path, llm: ScriptedLLM) -> Copilot:
    c = make_copilot(tmp_path, llm)
    yield c
    c.store.close()


def test_save_get_and_replace_a_profile(copilot: Copilot) -> None:
    store = copilot.store
    assert get_profile(store, "ada") is None and persona_for_prompt(store, "ada") is None
    saved = save_profile(store, "ada", "  A researcher   on citation graphs. ", "manual")
    assert saved.persona == "A researcher on citation graphs." and saved.source == "manual"
    assert saved.updated_at and saved.user_id == "ada"
    save_profile(store, "ada", "A researcher on summarisation.", "author:Jane Doe")
    assert get_profile(store, "ada").persona == "A researcher on summarisation."
    assert get_profile(store, "ada").source == "author:Jane Doe"
    assert persona_for_prompt(store, "ada") == "A researcher on summarisation."
    assert get_profile(store, "bob") is None, "profiles are per user"
    assert store.db["profiles"].count == 1
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="empty"):
            save_profile(store, "ada", bad)
    with pytest.raises(ValueError, match=str(MAX_PERSONA_CHARS)):
        save_profile(store, "ada", "x" * (MAX_PERSONA_CHARS + 1))
    assert get_profile(store, "ada").persona == "A researcher on summarisation.", "a refused save changes nothing"


def test_persona_from_text(copilot: Copilot, llm: ScriptedLLM) -> None:
    short = "I work on citation recommendation and scientific summarisation."
    assert profile_from_text(copilot, short, user_id="ada") == short
    assert llm.calls == [], "short text is already a persona: no LLM call"
    llm.answers = ["A researcher who builds tools for finding and reading scientific papers, from citation "
                   "recommendation to summarisation. A researcher who builds tools"]
    persona = profile_from_text(copilot, LONG_BIO, user_id="ada")
    assert persona == ("A researcher who builds tools for finding and reading scientific papers, from citation "
                       "recommendation to summarisation.")
    assert len(llm.calls) == 1 and "citation recommendation" in llm.calls[0][-1]["content"]
    llm.answers = ["..."]
    fallback = profile_from_text(copilot, LONG_BIO, user_id="ada")
    assert fallback.startswith("Jane Doe is an associate professor") and len(fallback) <= 402, \
        "when the model writes nothing usable, the user's own words are kept"
    with pytest.raises(ValueError, match="Paste"):
        profile_from_text(copilot, "  ", user_id="ada")


def test_persona_from_author_papers(copilot: Copilot, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    client = recorded_client(monkeypatch)
    llm.answers = ["A researcher on software testing of deep learning models and test generation."]
    persona = profile_from_author(copilot, "Jane Doe", user_id="ada", arxiv_client=client, max_papers=5)
    assert persona == "A researcher on software testing of deep learning models and test generation."
    assert "search_query=au%3A%22Jane+Doe%22" in client.recorded.urls[0] or 'au:"Jane Doe"' in \
        client.recorded.urls[0].replace("%3A", ":").replace("%22", '"').replace("+", " ")
    prompt = llm.calls[0][-1]["content"]
    assert "Papers by Jane Doe" in prompt and "[1] Testing Deep Learning Models" in prompt


def test_author_lookup_failures_are_readable(copilot: Copilot, llm: ScriptedLLM,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    offline = recorded_client(monkeypatch, None)
    with pytest.raises(RuntimeError, match="Could not search arXiv for papers by Jane Doe.*could not be reached"):
        profile_from_author(copilot, "Jane Doe", user_id="ada", arxiv_client=offline)

    class NoPapers:
        def by_author(self, name: str, max_results: int = 10) -> list:
            return []

    with pytest.raises(ValueError, match="no papers by \"Nobody Atall\""):
        profile_from_author(copilot, "Nobody Atall", user_id="ada", arxiv_client=NoPapers())
    with pytest.raises(ValueError, match="author's name"):
        profile_from_author(copilot, " ", user_id="ada", arxiv_client=NoPapers())
    assert llm.calls == []


def test_memories_are_listed_and_deleted_per_user(copilot: Copilot) -> None:
    ada_1 = copilot.remember("My camera-ready is due on the 14th.", user_id="ada")
    ada_2 = copilot.remember("I work on citation graphs.", user_id="ada")
    bob_1 = copilot.remember("I prefer short answers.", user_id="bob")
    assert [m.id for m in list_memories(copilot.store, "ada")] == [ada_2, ada_1], "newest first"
    assert [m.text for m in list_memories(copilot.store, "bob")] == ["I prefer short answers."]

    assert delete_memory(copilot, ada_1, "bob") is False, "nobody deletes another user's memory"
    assert delete_memory(copilot.store, 9999, "ada") is False
    assert len(list_memories(copilot.store, "ada")) == 2 and len(copilot.store.index("memories")) == 3

    assert delete_memory(copilot, ada_1, "ada") is True
    assert [m.id for m in list_memories(copilot.store, "ada")] == [ada_2]
    assert len(copilot.store.index("memories")) == 2, "the vector went with the row"
    assert copilot.store.check_consistency()["memories"]
    assert [r["id"] for r in copilot.recall("When is my deadline?", user_id="ada")] == [ada_2]
    assert delete_memory(copilot.store, ada_1, "ada") is False, "already gone"
    assert [m.id for m in list_memories(copilot.store, "bob")] == [bob_1]


@pytest.mark.parametrize(("message", "expected"), [
    ("I work on citation recommendation. Can you summarise SPECTER?", ["I work on citation recommendation."]),
    ("My camera-ready is due on the 14th", ["My camera-ready is due on the 14th"]),
    ("Also, I'm a second-year PhD student in Edinburgh! I prefer short answers.",
     ["I'm a second-year PhD student in Edinburgh!", "I prefer short answers."]),
    ("Hi! I am allergic to long papers; my advisor wants a survey by May.",
     ["I am allergic to long papers", "my advisor wants a survey by May."]),
    ("I think the method is wrong.", []),
    ("I want you to list the results.", []),
    ("I would like to know how SPECTER is trained.", []),
    ("What is my deadline?", []),
    ("Can you help me with my thesis?", []),
    ("I'm not sure what S2ORC is.", []),
    ("Please summarise my paper.", []),
    ("SPECTER uses a citation loss. We propose a method.", []),
    ("", []),
])
def test_self_statements(message: str, expected: list[str]) -> None:
    assert extract_self_statements(message) == expected
