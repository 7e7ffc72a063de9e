"""Every prompt the evaluation sends, in one place: task answers, tree summaries, tree navigation, the judge.

Every method of a task answers with the same prompt; only the numbered sources differ. The embedded model
is tiny (135M parameters), so prompts stay short and replies are capped or constrained by a grammar.
"""

from __future__ import annotations

from copilot import prompts as product_prompts

# ----- answering a task item --------------------------------------------------------------------------------

ABSTRACT_SYSTEM = (
    "You write the abstract of a research paper from passages of its body. "
    "Write one paragraph of about 150 words: the problem, the method, the main results."
)
SYNTHESIS_SYSTEM = product_prompts.ANSWER_SYSTEM
CLAIM_SYSTEM = "You check a scientific claim against the numbered sources. Say if the claim is true or false."
CLAIM_MARKER = "verdict:"
CLAIM_GRAMMAR = r'''root ::= "verdict: " ("true" | "false")'''


def abstract_task(title: str) -> str:
    """The query of abstract-single: it names the paper (the title is no part of the reference)."""
    return f'Write the abstract of the paper "{title}".'


def sources_block(sources: list[str]) -> str:
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(sources, start=1))


def task_user(query: str, sources: list[str]) -> str:
    """The user turn of every generation task: numbered sources (when there are any), then the task."""
    if not sources:
        return f"Question: {query}"
    return product_prompts.answer_user(query, sources)


def claim_user(claim: str, sources: list[str]) -> str:
    head = f"Sources:\n{sources_block(sources)}\n\n" if sources else ""
    return f"{head}Claim: {claim}\nIs the claim true or false?"


# ----- building and walking a summary tree ------------------------------------------------------------------

SUMMARY_SYSTEM = "Summarise the passages in three sentences. Keep names, numbers and findings."
SUMMARY_MAX_TOKENS = 96


def summary_user(passages: list[str]) -> str:
    return f"Passages:\n{sources_block(passages)}\n\nSummary:"


NAVIGATE_SYSTEM = "Pick the numbered summary most likely to hold what the question needs. Reply with its number."


def navigate_user(query: str, summaries: list[str]) -> str:
    return f"Summaries:\n{sources_block(summaries)}\n\nQuestion: {query}\nNumber:"


def navigate_grammar(n: int) -> str:
    """Only the numbers 1..n can be written (a tiny model otherwise writes prose)."""
    return "root ::= " + " | ".join(f'"{i}"' for i in range(1, n + 1))


# ----- the pairwise judge -----------------------------------------------------------------------------------

JUDGE_SYSTEM = "You compare two answers with a reference answer. Say which answer is closer to the reference."
JUDGE_MARKER = "better:"
JUDGE_GRAMMAR = r'''root ::= "better: " ("1" | "2")'''


def judge_user(query: str, reference: str, first: str, second: str) -> str:
    return (f"Task: {query}\n\nReference: {reference}\n\nAnswer 1: {first}\n\nAnswer 2: {second}\n\n"
            "Which answer is closer to the reference, 1 or 2?")
