"""Each [n] of an answer links to its source, so that a click opens that passage beside the chat."""

from __future__ import annotations

from copilot.engine import AskResult
from copilot.types import EvidenceQuote, RetrievedItem
from copilot.ui.chat_tab import _answer_markdown
from copilot.ui.passage_view import first_quoted, linked

ITEMS = [RetrievedItem("chunk", 12, "a passage", 0.5), RetrievedItem("thought", 7, "a thought", 0.4)]


def test_markers_of_sources_become_links_and_others_stay() -> None:
    text = "SPECTER uses citations [1][2], as [3] says. [arXiv:2104.12255](https://arxiv.org/abs/2104.12255)"
    shown = linked(text, ITEMS)
    assert shown == ("SPECTER uses citations [[1]](#cite-1-chunk-12)[[2]](#cite-2-thought-7), as [3] says. "
                     "[arXiv:2104.12255](https://arxiv.org/abs/2104.12255)")
    assert linked(shown, ITEMS) == shown, "a link is never linked twice"


def test_the_view_follows_the_first_quote_of_an_answer_or_a_declined_questions_nearest_passage() -> None:
    answer = linked("It is trained on citations [2].\n\n**Supporting quotes**\n1. [2] “Citations…” (support 0.91)"
                    "\n\n**Sources**\n- [1] *SPECTER*, body, p. 2", ITEMS)
    assert first_quoted(answer) == "2-thought-7"
    nearest = EvidenceQuote(1, "SPECTER is trained on citation triplets.", "pdf-1", 3, "Method", "SPECTER")
    declined = AskResult(1, "What GPU?", "", ITEMS, declined=True, decline_reason="no answer", nearest=[nearest])
    assert first_quoted(_answer_markdown(declined.to_markdown(), ITEMS)) == "1-chunk-12"
    nothing = AskResult(2, "What GPU?", "", ITEMS, declined=True, decline_reason="no answer")
    assert first_quoted(_answer_markdown(nothing.to_markdown(), ITEMS)) is None, "never a link of the source list"
