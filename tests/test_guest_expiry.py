"""Guests who stopped coming are forgotten after ``COPILOT_GUEST_DAYS``: everything they kept goes (uploads with
their files and passages, thoughts, memories, questions, conversations), and nobody else's record is touched. On
each storage backend, with the real library and a scripted LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import Copilot
from copilot.library import Library
from copilot.limits import GUEST_PREFIX
from copilot.types import ThoughtSource
from tests.conftest import TEST_DATA
from tests.scripted_llm import ScriptedLLM

PAPER = TEST_DATA / "papers" / "N18-3011.pdf"
OLD = "2020-01-01T00:00:00+00:00"
# Every table a guest's records live in, and the column naming its owner.
OWNED = ["papers", "queries", "memories", "thoughts", "conversations", "conversation_turns", "profiles", "follows",
         "usage_events", "access_tokens", "zotero_connections"]


@pytest.fixture
def copilot(open_store, tmp_path: Path, embedder: Embedder) -> Copilot:  # noqa: ANN001 - on each backend
    settings = Settings(data_dir=tmp_path / "data", llm_backend="local", guest_days=30, min_confidence=0.0,
                        relevance_weight=0.0, min_bearing=0.0)
    store = open_store()
    engine = Copilot(settings, store, embedder, ScriptedLLM())
    engine.library = Library.open(settings, store=store, embedder=embedder)
    return engine


def _spend_a_visit(copilot: Copilot, user_id: str) -> str:
    paper = copilot.library.add_pdf(PAPER, user_id=user_id)
    copilot.remember("I work on citation graphs.", user_id=user_id)
    copilot.save_persona(user_id, "A librarian.", "typed")
    copilot.follow(user_id, ["cs.DL"])
    copilot.store.usage.record(user_id, "question")
    _token, secret = copilot.create_access_token(user_id, "agent")
    assert copilot.token_user(secret) == user_id  # an agent's call, noted as the token's last use
    copilot.connect_zotero(user_id, "475425", "ZoteroKey0123")  # a connection never synced
    for _ in copilot.chat_stream(user_id, "What is the literature graph?", paper_ids=[paper.paper_id]):
        pass
    copilot.flush(timeout=30)
    return paper.paper_id


def _owned(copilot: Copilot, user_id: str) -> dict[str, int]:
    return {t: copilot.store.conn.execute(f"SELECT COUNT(*) FROM {t} WHERE user_id = ?", [user_id]).fetchone()[0]
            for t in OWNED}


def test_idle_guests_are_forgotten_and_everyone_else_is_kept(copilot: Copilot) -> None:
    store = copilot.store
    gone, recent, member = f"{GUEST_PREFIX}old", f"{GUEST_PREFIX}recent", "hf:carol"
    papers = {user: _spend_a_visit(copilot, user) for user in (gone, recent, member)}
    before = {user: _owned(copilot, user) for user in papers}
    assert all(before[gone][t] > 0 for t in ("papers", "queries", "memories", "conversations", "profiles"))
    for user in (gone, member):  # both quiet since 2020; only the guest expires
        for table, column in [("papers", "added_at"), ("queries", "created_at"), ("memories", "created_at"),
                              ("thoughts", "updated_at"), ("conversations", "updated_at"),
                              ("profiles", "updated_at"), ("follows", "created_at"), ("usage_events", "at"),
                              ("access_tokens", "last_used_at"), ("zotero_connections", "created_at")]:
            store.conn.execute(f"UPDATE {table} SET {column} = ? WHERE user_id = ?", [OLD, user])
    # Another user's thought built on one of the idle guest's: the edge goes with it, nothing dangles.
    def thought(user: str, text: str, sources: list[ThoughtSource]) -> int:
        return store.thoughts.add(user_id=user, text=text, confidence=0.8, depth=1, public=False,
                                  vector=copilot.embedder.encode_documents([text]), sources=sources)

    theirs = thought(gone, "The literature graph links papers, authors and entities.",
                     [ThoughtSource("chunk", store.chunks.ids_of(papers[gone])[0])])
    mine = thought(recent, "The graph's entities come from entity linking.", [ThoughtSource("thought", theirs)])
    before[recent] = _owned(copilot, recent)
    stored_pdf = store.conn.execute("SELECT pdf_path FROM papers WHERE id = ?", [papers[gone]]).fetchone()[0]
    chunks_before = len(store.chunks.ids_of(papers[gone]))
    files, rows = store.guests.footprint(GUEST_PREFIX)

    store.conn.execute("UPDATE thoughts SET updated_at = ? WHERE user_id = ?", [OLD, gone])
    report = copilot.expire_idle_guests()

    assert report["guests"] == 1 and report["papers"] == 1 and report["rows"] >= chunks_before
    assert _owned(copilot, gone) == dict.fromkeys(OWNED, 0)
    assert store.chunks.ids_of(papers[gone]) == []
    assert _owned(copilot, recent) == before[recent] and _owned(copilot, member) == before[member]
    dangling = store.conn.execute("SELECT COUNT(*) FROM thought_sources WHERE thought_id NOT IN (SELECT id FROM "
                                  "thoughts) OR (source_kind = 'thought' AND source_id NOT IN (SELECT id FROM "
                                  "thoughts))").fetchone()[0]
    assert dangling == 0 and store.thoughts.get_many([mine]), "the other user's thought stays, without the edge"
    assert store.check_consistency() == dict.fromkeys(store.check_consistency(), True)
    left_files, left_rows = store.guests.footprint(GUEST_PREFIX)
    assert len(left_files) == len(files) - 1 and left_rows < rows
    # The other guest's copy of the same PDF keeps the shared file; nothing more expires on a second run.
    assert Path(stored_pdf).exists() == (store.conn.execute("SELECT COUNT(*) FROM papers WHERE pdf_path = ?",
                                                            [stored_pdf]).fetchone()[0] > 0)
    assert copilot.expire_idle_guests() == {"guests": 0, "papers": 0, "rows": 0}
