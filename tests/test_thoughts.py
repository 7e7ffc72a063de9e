"""Every branch of the thought pipeline with a scripted LLM and the real embedder."""

import threading

import numpy as np
import pytest

from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.engine import Copilot
from copilot.storage import Store
from copilot.thoughts import ThoughtMemory, parse_thought_reply
from copilot.types import Grounding, RetrievedItem, SentenceSupport, ThoughtSource
from tests.conftest import add_chunks, all_rows, count_rows, get_row
from tests.scripted_llm import ScriptedLLM, thought_reply

CHUNKS = [
    ("S2ORC is a large corpus of 81.1 million English-language academic papers spanning many disciplines.", "Intro"),
    ("SPECTER learns document embeddings with a triplet loss over the citation graph of scientific papers.", "Method"),
    ("LongEval gives guidelines for human evaluation of faithfulness in long-form summarization.", "Intro"),
]


@pytest.fixture
def store(open_store, embedder: Embedder) -> Store:  # noqa: ANN001 - on each backend
    s = open_store()
    add_chunks(s, embedder, {"p1": "Paper One"}, [("p1", section, text) for text, section in CHUNKS])
    return s


def settings(**kw) -> Settings:  # noqa: ANN003
    """The scripted model's probability alone (relevance off) unless a test turns the blend on."""
    return Settings(**({"min_confidence": 0.3, "relevance_weight": 0.0} | kw))


def chunk_items(store: Store) -> list[RetrievedItem]:
    return [RetrievedItem("chunk", r["id"], r["text"], 0.5, depth=0, paper_id="p1", section=r["section"])
            for r in all_rows(store, "chunks")]


reply = thought_reply


def memory(store: Store, embedder: Embedder, thoughts: list, **kw) -> tuple[ThoughtMemory, ScriptedLLM]:  # noqa: ANN001, ANN003
    llm = ScriptedLLM(thoughts=thoughts)
    return ThoughtMemory(store, embedder, llm, settings(**kw)), llm


def test_parse_reply_forms() -> None:
    assert parse_thought_reply("thought: A fact.\nanswered: yes\nconfidence: 0.8") == ("A fact.", "yes", 0.8)
    assert parse_thought_reply('{"thought": "B", "valid": false, "confidence": 0.1}') == ("B", "no", 0.1)
    assert parse_thought_reply("nothing useful") == ("", None, None)


def test_valid_thought_is_added_with_provenance_and_depth_1(store: Store, embedder: Embedder) -> None:
    mem, llm = memory(store, embedder, [(reply("SPECTER trains paper embeddings using a triplet loss defined on "
                                               "citations between papers."), 0.8)])
    items = chunk_items(store)
    out = mem.write(user_id="ada", question="How is SPECTER trained?",
                    answer="SPECTER uses a citation triplet loss [2].", items=items)
    assert out.outcome == "added" and out.depth == 1 and out.confidence == pytest.approx(0.8)
    assert out.llm_calls == 1 and len(llm.calls) == 1
    row = mem.get(out.thought_id)
    assert row.sources == [ThoughtSource("chunk", items[1].id)], "only the cited source is provenance"
    assert store.check_consistency()["thoughts"]


def test_invalid_low_confidence_short_refusal_unusable(store: Store, embedder: Embedder) -> None:
    items = chunk_items(store)
    mem, llm = memory(store, embedder, [
        (reply("S2ORC is a corpus of many papers from many disciplines.", "no"), None),  # stated: invalid
        (reply("S2ORC contains academic papers in English from many fields."), 0.1),  # probe: low confidence
        (reply("It is big."), 0.9),  # too short
        ("I cannot comply.", None),  # unusable: no thought in the reply
    ])
    outcomes = [mem.write(user_id="ada", question="What is S2ORC?", answer="S2ORC is a corpus [1].", items=items)
                for _ in range(4)]
    assert [o.outcome for o in outcomes] == ["dropped"] * 4
    assert [o.reason.split(":")[0] for o in outcomes] == ["invalid", "low_confidence", "too_short_or_empty",
                                                          "unusable_reply"]
    refusal = mem.write(user_id="ada", question="Who funded it?", answer="The sources do not say.", items=items)
    assert refusal.outcome == "dropped" and refusal.reason.startswith("refusal") and refusal.llm_calls == 0
    assert len(llm.calls) == 4, "a refusal needs no thought call"
    ungrounded = mem.write(user_id="ada", question="What is a citation?",
                           answer="A citation names the work an idea comes from.", items=[])
    assert ungrounded.outcome == "dropped" and ungrounded.reason.startswith("ungrounded")
    assert ungrounded.llm_calls == 0 and len(llm.calls) == 4, "an answer without sources needs no thought call"
    assert count_rows(store, "thoughts") == 0


INVENTED = "XAI stands for Exempliacetabular Impreciatibile."


def test_ungrounded_answer_makes_no_thought_and_no_llm_call(store: Store, embedder: Embedder) -> None:
    """An answer that invents a term no source holds is dropped before the thought call."""
    items = chunk_items(store)
    mem, llm = memory(store, embedder, [(reply("Researchers in many disciplines can study the papers collected in "
                                               "the S2ORC corpus."), 0.9)], thought_needs_grounding=True)
    invented = mem.write(user_id="ada", question="What does XAI stand for?", answer=INVENTED, items=items)
    assert invented.outcome == "dropped" and invented.reason.startswith("ungrounded: 1 of 1 sentences"), invented
    assert "Exempliacetabular" in invented.reason
    assert invented.llm_calls == 0 and llm.calls == [] and count_rows(store, "thoughts") == 0
    assert not mem.ground(INVENTED, items).grounded
    # A faithful answer (a source's sentence, paraphrased) passes the gate and makes its thought.
    faithful = mem.write(user_id="ada", question="What is S2ORC?",
                         answer="S2ORC is a large corpus of 81.1 million academic papers in English [1].",
                         items=items)
    assert faithful.outcome == "added", faithful.reason
    assert len(llm.calls) == 1 and count_rows(store, "thoughts") == 1


def test_grounding_gate_uses_a_given_check_reads_missing_texts_and_can_be_off(store: Store, embedder: Embedder
                                                                              ) -> None:
    items = chunk_items(store)
    mem, llm = memory(store, embedder, [(reply("S2ORC is a corpus of 81.1 million academic papers in English."),
                                         0.9)], thought_needs_grounding=True)
    # Sources known only by id (as a thought job reads them back) are read from the store before the check.
    bare = [RetrievedItem(i.kind, i.id, "", i.score) for i in items]
    assert mem.ground("S2ORC is a corpus of 81.1 million academic papers [1].", bare).grounded
    # A check the caller made already is used as it is: here it says no, so the faithful answer is dropped too.
    given = Grounding([SentenceSupport("S2ORC is a corpus [1].", 0.01, 1, "", 0, 22)], False, 0.5)
    out = mem.write(user_id="ada", question="What is S2ORC?", answer="S2ORC is a corpus [1].", items=items,
                    grounding=given)
    assert out.outcome == "dropped" and out.reason.startswith("ungrounded: 1 of 1") and llm.calls == []
    # With COPILOT_THOUGHT_NEEDS_GROUNDING off, the invented answer goes to the thought call.
    off, off_llm = memory(store, embedder, [(reply("XAI is a name for Exempliacetabular Impreciatibile models."),
                                             0.9)], thought_needs_grounding=False)
    assert off.write(user_id="ada", question="q", answer=INVENTED, items=items).outcome == "added"
    assert len(off_llm.calls) == 1


def test_engine_drops_the_thought_of_an_ungrounded_answer(store: Store, embedder: Embedder) -> None:
    """Through the engine: the answer's one LLM call, no thought call, and the query records why. (An answer none of
    whose sentences is supported is declined, so the thought is dropped as declined.)"""
    llm = ScriptedLLM(answers=[INVENTED], thoughts=[(reply("S2ORC is a corpus of academic papers in English."), 0.9)])
    copilot = Copilot(settings(thought_needs_grounding=True), store, embedder, llm)
    result = copilot.ask("What does S2ORC stand for?", user_id="ada")
    assert copilot.flush(timeout=30)
    assert result.thought.outcome == "dropped" and result.thought.reason.startswith("declined: no sentence")
    assert result.declined and result.draft == INVENTED
    assert len(llm.calls) == 1 and result.as_dict()["llm_calls"] == 1 and llm.thoughts
    assert llm.rechecked == [], "a declined answer is not rechecked"
    record = get_row(store, "queries", result.query_id)
    assert record["thought_outcome"] == "dropped" and record["thought_reason"].startswith("declined")
    assert count_rows(store, "thoughts") == 0


def test_restatement_of_one_chunk_is_dropped(store: Store, embedder: Embedder) -> None:
    mem, _ = memory(store, embedder, [(reply(CHUNKS[0][0]), 0.9)])
    out = mem.write(user_id="ada", question="What is S2ORC?", answer="S2ORC is a corpus [1].",
                    items=chunk_items(store))
    assert out.outcome == "dropped" and out.reason.startswith("restatement")


def test_redundant_thought_is_merged(store: Store, embedder: Embedder) -> None:
    items = chunk_items(store)
    first = "Researchers can mine the full text of papers with the S2ORC corpus."
    second = "The S2ORC corpus lets researchers mine the full text of many academic papers."
    assert float(embedder.encode_documents([first])[0] @ embedder.encode_documents([second])[0]) > 0.85
    mem, _ = memory(store, embedder, [(reply(first), 0.6), (reply(second), 0.9)])
    a = mem.write(user_id="ada", question="What is S2ORC?", answer="S2ORC is a corpus of academic papers [1].",
                  items=items)
    b = mem.write(user_id="ada", question="How big is S2ORC?",
                  answer="S2ORC holds 81.1 million English-language academic papers [1][3].", items=items)
    assert a.outcome == "added" and b.outcome == "merged" and b.thought_id == a.thought_id
    row = mem.get(a.thought_id)
    assert row.support == 2 and row.confidence == pytest.approx(0.9)
    assert row.text == second, "the more confident text is kept"
    assert {s.id for s in row.sources} == {items[0].id, items[2].id}, "provenance is the union"
    assert count_rows(store, "thoughts") == 1
    assert store.check_consistency()["thoughts"]
    # Another user's identical thought is theirs alone: no merge across users.
    other, _ = memory(store, embedder, [(reply(second), 0.9)])
    c = other.write(user_id="bob", question="q", answer="S2ORC holds 81.1 million academic papers [1].", items=items)
    assert c.outcome == "added" and c.thought_id != a.thought_id


def test_chains_reach_depth_3(store: Store, embedder: Embedder) -> None:
    texts = ["SPECTER embeds scientific papers by training a transformer with a citation triplet loss.",
             "Citation-informed embeddings such as SPECTER help recommend related papers to researchers.",
             "Paper recommendation systems for researchers can rank candidates with citation-aware vectors."]
    # Each level says more than its source (that is what a deeper thought is), so the grounding gate is off here.
    mem, _ = memory(store, embedder, [(reply(t), 0.8) for t in texts], thought_needs_grounding=False)
    sources: list[RetrievedItem] = chunk_items(store)[1:2]
    depths = []
    for text in texts:
        out = mem.write(user_id="ada", question="q", answer=f"{text} [1]", items=sources)
        assert out.outcome == "added", out.reason
        depths.append(out.depth)
        sources = [RetrievedItem("thought", out.thought_id, text, 0.9, depth=out.depth, confidence=0.8)]
    assert depths == [1, 2, 3]
    top = mem.get(out.thought_id)
    assert top.sources == [ThoughtSource("thought", out.thought_id - 1)]


def test_engine_feedback_and_background_writing(store: Store, embedder: Embedder) -> None:
    llm = ScriptedLLM(answers=["SPECTER is trained with a citation triplet loss [1]."],
                      thoughts=[(reply("SPECTER needs no manual labels because citations between papers provide "
                                       "its training signal."), 0.7)])
    copilot = Copilot(settings(), store, embedder, llm)
    llm.gate = threading.Event()
    result = copilot.ask("How is SPECTER trained?", user_id="ada")
    assert result.thought is None, "the answer returns before the thought is written"
    assert "thought_ms" not in result.timings
    llm.gate.set()
    assert copilot.flush(timeout=30)
    assert result.thought.outcome == "added" and result.as_dict()["llm_calls"] == 2
    record = get_row(store, "queries", result.query_id)
    assert record["thought_outcome"] == "added" and record["llm_calls"] == 2
    assert result.sources[0].kind == "chunk" and "triplet" in result.sources[0].text
    thought_id = result.thought.thought_id

    up = copilot.feedback(result.query_id, 1, user_id="ada")
    assert up["confidence"] == pytest.approx(0.8)
    down = copilot.feedback(result.query_id, -1, user_id="ada")
    assert down["confidence"] == pytest.approx(0.55)
    with pytest.raises(ValueError):
        copilot.feedback(result.query_id, -1, user_id="bob")
    # The thought is retrieved for a related question...
    related = copilot.retrieve("Does SPECTER need labelled data?", user_id="ada")
    assert any(i.kind == "thought" and i.id == thought_id for i in related)
    # ...until enough thumbs down push it under the threshold.
    copilot.feedback(result.query_id, -1, user_id="ada")
    assert get_row(store, "thoughts", thought_id)["confidence"] < 0.3
    assert not any(i.kind == "thought" for i in copilot.retrieve("Does SPECTER need labelled data?", user_id="ada"))
    assert count_rows(store, "feedback") == 3


def test_no_thoughts_mode(store: Store, embedder: Embedder) -> None:
    llm = ScriptedLLM(answers=["An answer [1]."])
    copilot = Copilot(settings(), store, embedder, llm)
    result = copilot.ask("What is S2ORC?", user_id="ada", use_thoughts=False, write_thought=False)
    assert result.thought.outcome == "dropped" and len(llm.calls) == 1
    assert np.all([s.kind == "chunk" for s in result.sources])


def test_trim_repetition() -> None:
    from copilot.engine import trim_repetition

    assert trim_repetition("One fact.\n\nAnother fact.\n\nOne fact.\n\nmore") == "One fact.\n\nAnother fact."
    assert trim_repetition("A long sentence about corpora here. Then another one follows. "
                           "A long sentence about corpora here. And") == (
        "A long sentence about corpora here. Then another one follows.")
    assert trim_repetition("No repetition. At all here. Still growing") is None


def test_merging_into_its_own_source_adds_no_depth(store: Store, embedder: Embedder) -> None:
    first = "Researchers can mine the full text of papers with the S2ORC corpus."
    second = "The S2ORC corpus lets researchers mine the full text of many academic papers."
    mem, _ = memory(store, embedder, [(reply(first), 0.6), (reply(second), 0.9)])
    a = mem.write(user_id="ada", question="q", answer="S2ORC is a corpus of academic papers in English [1].",
                  items=chunk_items(store)[:1])
    # The paper's passage comes too: an earlier finding alone never confirms a name such as S2ORC.
    again = mem.write(user_id="ada", question="q",
                      answer="Researchers can mine the full text of papers with S2ORC [1].",
                      items=[RetrievedItem("thought", a.thought_id, first, 0.9, depth=1, confidence=0.6),
                             chunk_items(store)[0]])
    assert again.outcome == "merged" and again.depth == 1
    assert mem.get(a.thought_id).sources == [ThoughtSource("chunk", chunk_items(store)[0].id)]


def test_conversational_filler_is_dropped(store: Store, embedder: Embedder) -> None:
    mem, _ = memory(store, embedder, [(reply("I'm glad you're happy with the answer about the corpus."), 0.9)])
    out = mem.write(user_id="ada", question="q", answer="S2ORC is a corpus [1].", items=chunk_items(store))
    assert out.outcome == "dropped" and out.reason.startswith("too_short_or_empty")


def test_warm_up_asks_simulated_questions(store: Store, embedder: Embedder) -> None:
    from copilot.tasks.warmup import parse_questions, warm_up

    assert parse_questions("A: How does SPECTER work?\nB) What loss does it use?\nnot a question\n"
                           "Question 3 - Why citations?\n1. Is it fast enough?") == [
        "How does SPECTER work?", "What loss does it use?", "Is it fast enough?"]
    llm = ScriptedLLM(
        answers=["1. What corpus does S2ORC provide?\n2. How many papers are in it?",  # abstract: 2 of 2 asked
                 "- What does the paragraph say about SPECTER?",  # paragraph: 1 question
                 "S2ORC is a corpus of academic papers [1].", "S2ORC holds 81.1 million academic papers [1].",
                 "SPECTER learns document embeddings from the citation graph of scientific papers."],
        thoughts=[(reply("S2ORC provides a corpus of academic papers for text mining research."), 0.8),
                  (reply("S2ORC holds about 81 million academic papers in English."), 0.2),
                  (reply("SPECTER learns document representations from citation links."), 0.7)])
    store.conn.execute("UPDATE papers SET abstract = ? WHERE id = ?", ["S2ORC is a corpus.", "p1"])
    copilot = Copilot(settings(), store, embedder, llm)
    report = warm_up(copilot, "p1", user_id="ada", n_abstract=2, n_paragraph=1)
    assert report.questions == ["What corpus does S2ORC provide?", "How many papers are in it?",
                                "What does the paragraph say about SPECTER?"]
    assert report.outcomes == ["added", "dropped", "added"]
    assert report.llm_calls == 2 + 3 * 2 + 2, "question writing, answers and thoughts, the number's two rechecks"
    assert count_rows(store, "thoughts") == 2


def test_relevance_blend_keeps_on_topic_answers_and_drops_answers_to_another_question(
        store: Store, embedder: Embedder) -> None:
    """With the blend, a low model probability no longer sinks a relevant answer, and a high one no longer
    saves an answer that belongs to another question."""
    items = chunk_items(store)
    mem, _ = memory(store, embedder, [
        (reply("SPECTER trains a transformer on citation triplets to embed scientific papers."), 0.3),
        (reply("LongEval recommends partial annotation for judging faithfulness of long summaries."), 0.9),
    ], min_confidence=0.5, relevance_weight=0.5, thought_needs_grounding=False)  # the blend alone is measured
    on_topic = mem.write(user_id="ada", question="How is SPECTER trained?",
                         answer="SPECTER is trained with a triplet loss over the citation graph of papers [2].",
                         items=items)
    assert on_topic.outcome == "added", on_topic.reason
    assert on_topic.model_confidence == pytest.approx(0.3) and on_topic.relevance > 0.9
    assert on_topic.confidence == pytest.approx(0.5 * 0.3 + 0.5 * on_topic.relevance, abs=1e-3)
    off_topic = mem.write(user_id="ada", question="How is SPECTER trained?",
                          answer="LongEval recommends partial annotation when judging long summaries [3].",
                          items=items)
    assert off_topic.outcome == "dropped" and off_topic.reason.startswith("low_confidence"), off_topic
    assert off_topic.model_confidence == pytest.approx(0.9) and off_topic.relevance < 0.2


def test_chit_chat_and_off_topic_thoughts_are_dropped(store: Store, embedder: Embedder) -> None:
    """Distillations the embedded model really produced: a pleasantry, a sentence about editing, a bare lead-in."""
    items = chunk_items(store)
    mem, _ = memory(store, embedder, [
        (reply("I hope these additional points help you with the literature graph."), 0.9),
        (reply("The original text was edited to remove this part and make it more concise."), 0.9),
        (reply("The answer to this question about the literature graph is:"), 0.9),
    ], relevance_weight=0.5, thought_needs_grounding=False)  # the answers' sources are not the papers they name
    polite = mem.write(user_id="ada", question="What is the literature graph of Semantic Scholar?",
                       answer="The literature graph links papers, authors and entities [1].", items=items)
    assert polite.outcome == "dropped" and polite.reason.startswith("too_short_or_empty"), polite.reason
    edited = mem.write(user_id="ada", question="What does LongEval recommend for human evaluation of faithfulness?",
                       answer="LongEval recommends fine-grained annotation [3].", items=items)
    assert edited.outcome == "dropped" and edited.reason.startswith("off_topic"), edited.reason
    lead_in = mem.write(user_id="ada", question="What is the literature graph of Semantic Scholar?",
                        answer="The literature graph is a graph of papers [1].", items=items)
    assert lead_in.outcome == "dropped" and lead_in.reason.startswith("too_short_or_empty"), lead_in.reason
    assert count_rows(store, "thoughts") == 0
