"""The prompts: sources are numbered by one function, the same way for every prompt that shows them."""

from __future__ import annotations

from copilot import prompts

SOURCES = ["(SPECTER, Introduction) Embeddings of papers.", "(earlier finding) A corpus of papers."]
NUMBERED = "[1] (SPECTER, Introduction) Embeddings of papers.\n\n[2] (earlier finding) A corpus of papers."


def test_sources_are_numbered_from_one_and_separated_by_blank_lines() -> None:
    assert prompts.numbered(SOURCES) == NUMBERED
    assert prompts.numbered([]) == ""


def test_each_prompt_shows_its_sources_as_before() -> None:
    # The answer (engine), the drafts and ideas (tasks) and the evaluation's tasks: exact texts, since decoding
    # is greedy and a changed character changes the replies.
    assert prompts.answer_user("Who?", SOURCES) == f"Sources:\n{NUMBERED}\n\nQuestion: Who?"
    assert prompts.answer_user("Who?", SOURCES, "A researcher.") == \
        f"Sources:\n{NUMBERED}\n\nAbout the asker: A researcher.\n\nQuestion: Who?"
    assert prompts.synthesis_user(SOURCES) == \
        f"Papers:\n{NUMBERED}\n\nWrite a synthesis of these papers, citing them like [1]."
    assert prompts.related_user("T", "A", SOURCES) == (
        f"Our paper:\nTitle: T\nAbstract: A\n\nSources:\n{NUMBERED}\n\n"
        "Write the Related Work section for our paper, citing the sources like [1].")
    assert prompts.ideas_user(None, SOURCES, ["graphs"]) == (
        f"Recent papers:\n{NUMBERED}\n\nTrending topics: graphs\n\nWrite 3 to 5 research ideas, one per line.")
    assert prompts.persona_from_papers_user("Ada", SOURCES) == \
        f"Papers by Ada:\n{NUMBERED}\n\nDescribe Ada as a researcher in 2 or 3 sentences."
    assert prompts.task_user("Who?", SOURCES) == prompts.answer_user("Who?", SOURCES)
    assert prompts.task_user("Who?", []) == "Question: Who?"
    assert prompts.claim_user("C", SOURCES) == f"Sources:\n{NUMBERED}\n\nClaim: C\nIs the claim true or false?"
    assert prompts.summary_user(SOURCES) == f"Passages:\n{NUMBERED}\n\nSummary:"
    assert prompts.navigate_user("Who?", SOURCES) == f"Summaries:\n{NUMBERED}\n\nQuestion: Who?\nNumber:"


def test_drafts_and_the_evaluation_keep_their_own_system_prompts() -> None:
    assert prompts.DRAFT_ABSTRACT_SYSTEM != prompts.ABSTRACT_SYSTEM
    assert prompts.SYNTHESIS_SYSTEM == prompts.ANSWER_SYSTEM, "the evaluation answers as the product does"
