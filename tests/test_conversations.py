"""Kept conversations in the store, on both backends: created with their first turn, listed newest first, read,
renamed and deleted only by their owner."""

from __future__ import annotations

from copilot.storage import Store
from tests.conftest import count_rows


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
