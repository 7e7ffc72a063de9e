"""Pairwise LLM judging: which of two answers is closer to the reference, asked in both presentation orders.

LLM judges favour a position; asking twice with the answers swapped and counting disagreement as a tie
removes that bias from the win rate. With the embedded model the pick is read from the model's own
probabilities of "1" and "2" after "better:" (the reply format is enforced by a grammar).
"""

from __future__ import annotations

import re

from copilot import prompts
from copilot.eval.metrics import combine_orders
from copilot.eval.tree import clip_words
from copilot.llm import ChatModel, ChoiceProbe

REFERENCE_WORDS = 120
ANSWER_WORDS = 120


def prefer(llm: ChatModel, query: str, reference: str, first: str, second: str) -> int | None:
    """1 or 2: the answer the judge finds closer to ``reference`` (None when the reply names neither)."""
    probe = ChoiceProbe(prompts.JUDGE_MARKER, choices=("1", "2"))
    reply = llm.chat([{"role": "system", "content": prompts.JUDGE_SYSTEM},
                      {"role": "user", "content": prompts.judge_user(
                          query, clip_words(reference, REFERENCE_WORDS), clip_words(first, ANSWER_WORDS),
                          clip_words(second, ANSWER_WORDS))}],
                     max_tokens=5, temperature=0.0, grammar=prompts.JUDGE_GRAMMAR, probe=probe)
    if probe.probabilities:
        return 1 if probe.probabilities["1"] >= probe.probabilities["2"] else 2
    match = re.search(r"better:\s*([12])", reply) or re.search(r"\b([12])\b", reply)
    return int(match.group(1)) if match else None


def compare(llm: ChatModel, query: str, reference: str, a: str, b: str) -> float:
    """Score of answer ``a`` against ``b``: 1 win, 0.5 tie, 0 loss (identical answers tie without a call)."""
    if " ".join(a.split()) == " ".join(b.split()):
        return 0.5
    return combine_orders(prefer(llm, query, reference, a, b), prefer(llm, query, reference, b, a))
