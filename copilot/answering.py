"""Answering: a question answered from paper chunks and thoughts, then the thought memory grown in the background.

``ask_stream`` retrieves (one query embedding, both indices) and packs the context, yields the sources at once
(they are known long before the model is free: retrieval takes tens of milliseconds, an answer seconds),
waits for the model in line (yielding its place while it waits), streams an answer with numbered citations
and records the query. Thought writing is queued to a background worker whose LLM calls run at background
priority, so they never go before anyone's answer; ``flush`` waits for the queue (tests, the CLI).

The job of writing a thought lives in the database, not only in the worker's queue: the recorded query, 'pending'
with its sources and share flag, is the job, claimed by the worker of the process that answered (renewed while
it lives). The worker wakes on its own submissions at once; the web app's worker also claims, at start and every
``COPILOT_THOUGHT_POLL_S``, the jobs whose claim ran out (``COPILOT_THOUGHT_LEASE_S``: their replica died after
answering), so a thought is written even when the process that answered is gone, and written once.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from copilot import grounding, prompts, table_reader
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.evidence import Compressed, SentenceVectors, compress, table_captions
from copilot.followups import FollowUp
from copilot.limits import admit_answer, check_question
from copilot.llm import ChatModel, LLMError, Priority, Ticket, TokenTrace, scheduling
from copilot.retrieval import pack_context, retrieval_options, retrieve_mixture
from copilot.storage import Store
from copilot.thoughts import REFUSAL, ThoughtMemory, ThoughtOutcome, ThoughtTaken, ungrounded_reason
from copilot.types import AnswerSources, EvidenceQuote, Grounding, QueuePosition, RetrievedItem, ThoughtJob

log = logging.getLogger(__name__)

DEFAULT_USER = "local"
QUEUE_POLL_S = 1.0  # how often a waiting answer re-reads its place in line
WARM_USER = "copilot:warming"  # whose background slots read a new paper's sentences ahead of its questions


@dataclass
class AskResult:
    """One answered question: what the user saw, what it was built from, and what it cost."""

    query_id: int
    question: str
    answer: str
    sources: list[RetrievedItem]
    timings: dict[str, float] = field(default_factory=dict)
    thought: ThoughtOutcome | None = None  # None while the background worker has not written it
    grounding: Grounding | None = None  # each sentence's support in the sources
    conversation_id: int | None = None  # the kept conversation this turn belongs to (the chat's)
    searched_for: str | None = None  # a follow-up's self-contained retrieval query, when it was one
    declined: bool = False  # the papers in scope do not say: ``answer`` says so, ``draft`` is what the model wrote
    decline_reason: str = ""
    evidence: list[EvidenceQuote] = field(default_factory=list)  # the verbatim sentences that support the answer
    nearest: list[EvidenceQuote] = field(default_factory=list)  # a declined question's nearest passages
    draft: str = ""  # the model's own text when the answer was declined ("" when the model was not asked)
    model: str = ""  # the model that wrote the answer ("" when none was asked)
    fallback: str = ""  # why the model asked for failed and the instance's own model answered instead
    rechecks: int = 0  # the answers the model wrote again to recheck this one (COPILOT_RECHECK_SAMPLES)
    table_cell: bool = False  # the answer is a table's cell, read without the model (copilot.table_reader)

    @property
    def answer_calls(self) -> int:
        """The LLM calls that wrote the answer: the answer and its rechecks (the thought's come on top)."""
        return 0 if self.table_cell else 1 + self.rechecks

    def as_dict(self) -> dict[str, Any]:
        checked = self.grounding.as_dict() if self.grounding else {"grounding": [], "grounded": False}
        return {
            "query_id": self.query_id,
            "answer": self.answer,
            "declined": self.declined,
            "decline_reason": self.decline_reason,
            "evidence": [e.as_dict() for e in self.evidence],
            "nearest": [e.as_dict() for e in self.nearest],
            "draft": self.draft,
            "model": self.model,
            "fallback": self.fallback,
            "table_cell": self.table_cell,
            "sources": [{"n": n, "kind": s.kind, "id": s.id, "paper_id": s.paper_id, "section": s.section,
                         "page_start": s.page_start, "page_end": s.page_end, "depth": s.depth,
                         "confidence": s.confidence, "score": round(s.score, 4), "recalled_by": s.recalled_by,
                         "label": s.label}
                        for n, s in enumerate(self.sources, start=1)],
            "thought": self.thought.as_dict() if self.thought else {"outcome": "pending"},
            # the answer, its rechecks, then the thought
            "llm_calls": self.answer_calls + (self.thought.llm_calls if self.thought else 0),
            "rechecks": self.rechecks,
            "timings": self.timings,
            **checked,
        }

    def to_markdown(self) -> str:
        """The answer as every view shows it (the chat, ``ask``, a kept conversation and its export): a declined
        question says the papers in scope do not say and shows the nearest passages; an answer shows its
        unsupported sentences marked (⚠️) and, under it, the verbatim source sentence of each sentence with its
        paper, section and page."""
        if self.declined:
            lines = "\n".join(f"- {quote_line(q)}" for q in self.nearest)
            return (f"**{prompts.DECLINE}** ({self.decline_reason}.)"
                    + (f"\n\n**Nearest passages**\n{lines}" if lines else ""))
        if self.grounding is None:
            return self.answer
        return grounding.markdown(self.answer, self.grounding, where=[item_place(i) for i in self.sources])


def source_text(item: RetrievedItem, *, titled: bool = True) -> str:
    """How one source is shown to the LLM: where it comes from, then its text. ``titled``: name the paper (the
    first source of each paper does; the others name only their section, which saves a small model's prompt)."""
    if item.kind == "thought":
        return f"(earlier finding) {item.text}"
    if not titled:
        return f"({item.section}) {item.text}"
    return f"({item.paper_title or item.paper_id}, {item.section}) {item.text}"


def source_texts(items: list[RetrievedItem]) -> list[str]:
    """The sources as the model reads them: each paper named at its first source only."""
    seen: set[str | None] = set()
    out = []
    for item in items:
        out.append(source_text(item, titled=item.paper_id not in seen))
        if item.kind == "chunk":
            seen.add(item.paper_id)
    return out


def item_place(item: RetrievedItem) -> str:
    """Where a source stands, in words: its paper, section and page (a thought: an earlier finding)."""
    if item.kind == "thought":
        return f"earlier finding #{item.id}"
    pages = (f"p. {item.page_start}" if item.page_start == item.page_end or item.page_end is None
             else f"pp. {item.page_start}–{item.page_end}")
    return f"*{item.paper_title or item.paper_id}*, {item.section or 'body'}, {pages}"


def quote_line(quote: EvidenceQuote) -> str:
    """One quoted source sentence and where it stands."""
    where = (f"earlier finding #{quote.item_id}" if quote.kind == "thought" else
             f"*{quote.paper_title or quote.paper_id}*, {quote.section or 'body'}, p. {quote.page}")
    return f"[{quote.n}] {grounding.quoted(quote.quote)} — {where}"


def source_heads(items: list[RetrievedItem]) -> list[str]:
    """What the model reads of each source beside its text (the paper's title and the section): names an answer
    may repeat without a source sentence stating them."""
    return [f"{i.paper_title or ''} {i.section or ''}" for i in items if i.kind == "chunk"]


def names_its_row(sentence: str, quote: str, question: str) -> bool:
    """Does an answer ``sentence`` name, as the question does, something of the table row ``quote`` it rests on (its
    row's label or a column's name: "With LM; F1: 54.1" names F1)? A bare "92.1", or "The model gets 54.1", does
    not say which row and column it read."""
    said = {t for t in grounding.terms(grounding.strip_citations(sentence)) if not t[:1].isdigit()}
    return bool(said & grounding.terms(question) & grounding.terms(quote))


# What a small model says of its sources before it answers: "According to the information provided in sources [1]
# and [2], …", "Based on the information provided in the sources, we can conclude that …". No part of an answer.
_ABOUT_SOURCES = re.compile(
    r"^\s*(?:according\s+to|based\s+on)\b(?=[^,]*(?:\b(?:information|sources?|passages?|context|provided|given)\b"
    r"|\[\d+\]))[^,]{0,100},\s*(?:(?:we|it)\s+can\s+(?:be\s+)?(?:conclude[d]?|seen|said)\s+that\s+)?", re.IGNORECASE)


def says_nothing_new(answer: str, question: str) -> bool:
    """Does ``answer`` only repeat the question's own words ("SPECTER is implemented in [1].", "According to the
    information provided in sources [1] and [2], BERT-Base gets on NCBI-disease when it is fine-tuned.")? What it
    says of its sources first is left out, and the question's words count with their stop words ("gets" repeats
    "get")."""
    said = grounding.terms(grounding.strip_citations(_ABOUT_SOURCES.sub("", answer, count=1)))
    return not (said - grounding.terms(question, every_word=True))


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


def unaddressed(question: str, answer: str, quotes: list[str], subjects: list[str] = ()) -> list[str]:
    """The names the question asks about (acronyms, mixed-case terms, capitalised words: "MeSH", "F1"), beside the
    papers' own names (``subjects``: their titles), that neither the answer nor its evidence mentions. An answer
    that leaves one out answers another question ("SPECTER reaches 83.8 MAP on co-view" does not answer "What F1
    does SPECTER get on MeSH?")."""
    subject = _squash(" ".join(subjects))
    asked = {name.removesuffix("'s").removesuffix("’s") for name in grounding.names_in(question)}
    said = _squash(" ".join([answer, *quotes]))
    return sorted(n for n in asked if _squash(n) and _squash(n) not in said and _squash(n) not in subject)


def _mentions(text: str, name: str) -> bool:
    """Does ``text`` (case-folded) name ``name`` as a word of its own, written with or without its hyphens and spaces
    ("TREC-COVID", "trec covid"), or in the singular ("GPUs": "GPU")?"""
    letters = _squash(name)
    forms = {letters, letters[:-1]} if len(letters) > 2 and letters.endswith("s") else {letters}
    return any(re.search(r"(?<![^\W_])" + r"[\W_]*".join(map(re.escape, form)) + r"s?(?![^\W_])", text)
               for form in forms if form)


def unmentioned(question: str, items: list[RetrievedItem]) -> list[str]:
    """The names the question asks about (acronyms, mixed-case and digit-bearing terms: "TREC-COVID", "GovReport",
    "GPUs") that no paper's passage sent mentions, nor its title or section. An answer about one of them would rest
    on the question's word alone, so the model is not asked. A capitalised word is left aside: in a language that
    capitalises its nouns, it names nothing; so is a metric's name ("F1"), which a table of results need not say
    (SciBERT's never does). An earlier finding (a thought) does not count: only a paper's own text tells what the
    paper says."""
    text = " \n ".join(source_text(i) for i in items if i.kind != "thought").casefold()
    asked = dict.fromkeys(n.removesuffix("'s").removesuffix("’s") for n in grounding.names_in(question))
    return [n for n in asked if (any(ch.isupper() for ch in n[1:]) or any(ch.isdigit() for ch in n))
            and not table_reader.is_metric(n) and not _mentions(text, n)]


# A question that asks for a count, an amount or a score ("How many …", "What F1 does … reach", "What percentage of
# …", "What does X score on …", "What does X get on …", "What R@3 does X reach", "How well does X do …", "How large
# is …", "Which result is reported for …"): its answer must state one.
_QUANTITY_NOUNS = (r"(?:percentage|percent|fraction|proportion|number|amount|count|ratio|size|rate|score|f1|"
                   r"accuracy|precision|recall|auc|bleu|rouge|ndcg|perplexity|average|median|total)s?")
_ASKS_QUANTITY = re.compile(
    r"\bhow\s+(?:many|much|often)\b"
    r"|\bwhat(?:'s|’s)?\s+(?:(?:is|was|are|were)\s+)?(?:the\s+)?"
    r"(?:(?!(?:does|do|did|is|was|are|were)\b)[\w-]+\s+){0,3}?" + _QUANTITY_NOUNS
    + r"\s+(?:of|on|for|in|at|does|did|do|is|was|are|were|has|have|had|can|could|would|will)\b"
    r"|\bwhat\s+(?:does|did|do)\s+[^?]{1,60}?\s+score\s+(?:on|in|for|at|against|with)\b"
    # "What does BERT get on NCBI-disease": on a named dataset or task, not "in this work" or "at each step"
    r"|\bwhat\s+(?:does|did|do)\s+[^?]{1,60}?\s+(?:get|reach|achieve|obtain|attain)\s+(?:on|in|for|at|against|with)"
    r"\s+(?:the\s+)?(?-i:[A-Z\d])"
    # a metric by its name: "What R@3 does X reach", "What mAP …", "What BLEU-4 …" (not "What GNN does X use to …")
    r"|\bwhat\s+(?-i:[A-Za-z]{0,3}[@\d][\w@.-]*|[a-z]{0,3}[A-Z]{2,}[\w@.-]*|[A-Z][A-Z\d@.-]+)\s+(?:does|did|do)\s+"
    r"(?:(?!\b(?:use[sd]?|to)\b)[^?]){1,60}?\s+(?:reach|achieve|score|attain)\b"
    r"|\bhow\s+(?:well|accurate(?:ly)?|fast|large|big|long|high|low)\s+"  # not "how large language models"
    r"(?:is|was|are|were|does|did|do|can|could|would|will|has|have|had)\b"
    r"|\b(?:which|what)\s+(?:[\w-]+\s+){0,3}?results?\s+(?:(?:is|are|was|were)\s+)?(?:reported|listed|given|shown)"
    r"\s+(?:for|on)\s+(?:the\s+)?(?-i:[A-Z\d])",  # "… reported for BioBERT", not "… shown in Figure 4"
    re.IGNORECASE)


def asks_for_quantity(question: str) -> bool:
    """Does ``question`` ask for a count, an amount or a score (see :data:`_ASKS_QUANTITY`)?"""
    return _ASKS_QUANTITY.search(question) is not None


def decline_reason(answer: str, checked: Grounding | None, unbearing: bool, threshold: float,
                   question: str = "", subjects: list[str] = (), captions: list[str] = ()) -> str:
    """Why the question is declined ("" when it is answered): nothing in scope bears on it, the model said the
    sources do not say or only repeated the question, or no sentence of its answer is supported by them.
    ``subjects``: the papers' titles; ``captions``: each source's table caption
    (:func:`copilot.evidence.table_captions`), with which a table row's evidence is read when the answer's sentence
    names something of the row (:func:`names_its_row`)."""
    if unbearing:
        return "nothing in the papers in scope bears on the question"
    if not answer or REFUSAL.search(answer) or (question and says_nothing_new(answer, question)):
        return "the model found no answer in the sources"
    if checked is None:
        return ""
    sourced = [s for s in checked.sentences if s.sourced(threshold)]
    if not sourced:
        return "no sentence of the answer is supported by the sources"
    quotes = [s.quote for s in sourced]
    quotes += [captions[s.source_n - 1] for s in sourced if 0 < (s.source_n or 0) <= len(captions)
               and names_its_row(s.sentence, s.quote, question)]
    missing = unaddressed(question, answer, quotes, subjects) if question else []
    if missing:
        return f"the answer found does not address {', '.join(missing)}"
    if question and asks_for_quantity(question) and not any(grounding.states_quantity(s.sentence) for s in sourced):
        return "the question asks for a number, and no supported sentence of the answer states one"
    return ""


def plain_facts(facts: list[str]) -> str:
    """Facts as the model wrote them, for a notice in Markdown: plain text only, at most three of 40 characters."""
    return " and ".join(re.sub(r"[\[\]()<>!*_`#|\\]", "", raw)[:40] for raw in facts[:3])


def unsure_reason(answer: str, trace: TokenTrace, floor: float, question: str) -> str:
    """Why a short answer that states a fact is declined although its sources state its facts: the model wrote one
    of them with a probability below ``floor`` (:func:`copilot.grounding.unsure_facts`), as a guess or a number read
    from the wrong row is written; "" otherwise, or without token probabilities (a remote model). Only an answer of
    at most :data:`RECHECK_MAX_ANSWER_TOKENS` is read so (a longer one fills its ``trace``): a look-up's answer,
    whose one fact decides it."""
    if not trace.tokens or trace.full or floor <= 0:
        return ""
    unsure = grounding.unsure_facts(answer, trace.tokens, floor, question)
    if not unsure:
        return ""
    facts = plain_facts([raw for raw, _ in unsure])
    chances = " and ".join(f"{p:.2f}" if p >= 0.01 else "under 0.01" for _, p in unsure[:3])
    many = "probabilities" if len(unsure[:3]) > 1 else "a probability"
    return (f"the model was not sure of {facts}, written with {many} of {chances}: a guess, or a fact read from the "
            "wrong place")


def _quote_at(item: RetrievedItem, n: int, quote: str) -> EvidenceQuote:
    quote = " ".join(quote.split()).strip(" …")  # the gap marks of a compressed source are not the paper's words
    return EvidenceQuote(n, quote, item.paper_id, item.page_start, item.section, item.paper_title, item.kind,
                         item.id)


def supporting_quotes(checked: Grounding | None, items: list[RetrievedItem], settings: Settings
                      ) -> list[EvidenceQuote]:
    """The verbatim source sentences that support the answer's supported sentences, once each, in answer order."""
    if checked is None:
        return []
    out: list[EvidenceQuote] = []
    seen: set[tuple[int, str]] = set()
    for s in checked.sentences:
        if not s.supported(settings.grounding_threshold) or not s.source_n or not s.quote:
            continue
        key = (s.source_n, s.quote)
        if key not in seen and 1 <= s.source_n <= len(items):
            seen.add(key)
            out.append(_quote_at(items[s.source_n - 1], s.source_n, s.quote))
    return out


def nearest_quotes(found: Compressed, checked: Grounding | None, limit: int = 3) -> list[EvidenceQuote]:
    """A declined question's nearest passages: the first sentence kept of each of the best sources."""
    out = []
    for n, item in enumerate(found.items[:limit], start=1):
        first = grounding.split_sentences(item.text.replace("…", " "))
        quote = " ".join((first[0] if first else item.text).split())
        if quote:
            out.append(_quote_at(item, n, quote))
    return out


def drained(jobs: queue.Queue, deadline: float | None) -> bool:
    """Wait until every job put on ``jobs`` is done; False if the monotonic ``deadline`` (None: none) passed first."""
    if deadline is None:
        jobs.join()
        return True
    while jobs.unfinished_tasks:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def trim_repetition(text: str) -> str | None:
    """``text`` cut before its first repeated paragraph or sentence, or None when nothing repeats yet."""
    paragraphs = [p.strip() for p in text.split("\n\n")]
    seen: set[str] = set()
    for i, paragraph in enumerate(paragraphs[:-1]):  # the last one may still be growing
        if paragraph and paragraph in seen:
            return "\n\n".join(paragraphs[:i]).strip()
        seen.add(paragraph)
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ")]
    complete = sentences[:-1]
    if len(complete) >= 2 and len(complete[-1]) > 20 and complete[-1] in complete[:-1]:
        cut = text.rfind(complete[-1])
        return text[:cut].strip()
    return None


# An answer never opens with a citation: asked to cite its sources, a small model sometimes answers "[1]" and nothing
# else (8 look-ups of 54 in one run of the QA benchmark); kept from opening so, it states what the source says.
ANSWER_NEVER_OPENS = ("[",)

RECHECK_TEMPERATURE = 0.7  # a recheck samples: what the model read it repeats, what it guessed it changes
# Only answers up to this long are rechecked: a look-up's answer, whose one fact a recheck either repeats or not. A
# longer answer, written again, tells its story in another order and leaves out facts it did not guess.
RECHECK_MAX_ANSWER_TOKENS = 100


def rechecks(llm: ChatModel, messages: list[dict[str, str]], answer: str, *, samples: int, max_tokens: int,
             user: str) -> list[str]:
    """The answer written ``samples`` times more from the same ``messages`` (sampled, as an answer of ``user``;
    each no longer than the answer needs, about 1.5 times its length): what :func:`copilot.grounding.rechecked` reads
    to find the facts the model does not repeat. Empty when off, or when the answer is a refusal or longer than
    :data:`RECHECK_MAX_ANSWER_TOKENS`; when the model fails, those written before (the answer stands unrechecked
    without them). The caller asks only for answers it does not decline that state a checkable fact."""
    length = llm.count_tokens(answer) if answer else 0
    if samples <= 0 or not answer or REFUSAL.search(answer) or length > RECHECK_MAX_ANSWER_TOKENS:
        return []
    cap = min(max_tokens, int(1.5 * length) + 16)
    out = []
    try:
        for _ in range(samples):
            out.append(llm.chat(messages, max_tokens=cap, temperature=RECHECK_TEMPERATURE, user=user,
                                priority=Priority.ANSWER, never_opens=ANSWER_NEVER_OPENS))
    except LLMError as exc:
        log.warning("the recheck of an answer failed: %s", exc)  # those written before it still count
    return out


# Where a line of the answer starts as a source of the prompt does: "[2] (Node Types) … The literature graph …".
_NUMBERED_LINE = re.compile(r"^[ \t]*\[(\d+)\][ \t]*(?=\()", re.MULTILINE)
_ECHO_CHARS = 12  # so many characters of a source's head, copied, make an echo


def echo_start(text: str, sources: list[str]) -> int | None:
    """Where ``text`` starts copying one of its numbered ``sources`` as the prompt shows them ("[1] (Title, Section)
    …"), a small model's way of pasting its sources instead of answering; None when it does not (yet)."""
    for match in _NUMBERED_LINE.finditer(text):
        n = int(match.group(1))
        if not 1 <= n <= len(sources):
            continue
        copied = " ".join(text[match.end():].split()).casefold()
        head = " ".join(sources[n - 1].split()).casefold()
        size = min(len(head), _ECHO_CHARS)
        if len(copied) >= size and copied[:size] == head[:size]:
            return match.start()
    return None


def stream_until_repeating(llm: ChatModel, messages: list[dict[str, str]], *, max_tokens: int,
                           temperature: float, ticket: Ticket | None = None, trace: TokenTrace | None = None,
                           sources: list[str] | None = None) -> Iterator[str]:
    """The growing text of one streamed call, cut (and the stream closed) where the model starts repeating
    itself: a small model that loops has nothing more to say. Given the ``sources`` the prompt numbers (an answer's
    call), it never opens with a citation (:data:`ANSWER_NEVER_OPENS`) and is cut where it starts copying one of them
    (:func:`echo_start`). ``ticket``: the slot the caller waited for;
    ``trace``: filled with the tokens' probabilities where the backend can."""
    text = ""
    stream = llm.stream(messages, max_tokens=max_tokens, temperature=temperature, ticket=ticket, trace=trace,
                        never_opens=ANSWER_NEVER_OPENS if sources else ())
    for piece in stream:
        text += piece
        echo = echo_start(text, sources) if sources else None
        trimmed = text[:echo].strip() if echo is not None else trim_repetition(text)
        if trimmed is not None:
            stream.close()
            yield trimmed
            return
        yield text


class ThoughtWorker:
    """One background thread that writes thoughts in order, from jobs kept in the database (the answered
    queries). Their LLM calls run at background priority (``Answerer._write_thought``), so a thought never goes
    before a waiting answer.

    ``submit`` queues a job this process answered (already claimed by ``name``) and wakes the thread. While it
    holds jobs, a second thread renews their claims every third of the lease. With ``adopt``, the thread also
    claims, at start and every ``poll_s``, the oldest job nobody holds (a dead replica's), one between each of
    its own.
    """

    def __init__(self, store: Store, write: Callable[[ThoughtJob], None], *, lease_s: float, poll_s: float,
                 adopt: bool = False, done: Callable[[int], None] = lambda query_id: None) -> None:
        self.store = store
        self._done = done  # told of every submitted job once it is over, written here or not
        self.name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.adopt = adopt
        self._write = write
        self._queue: queue.Queue[int] = queue.Queue()
        self._held: set[int] = set()  # jobs claimed by this worker and not yet done
        self._held_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="thought-writer", daemon=True)
        self._thread.start()
        threading.Thread(target=self._renew, name="thought-lease", daemon=True).start()

    def submit(self, query_id: int) -> None:
        with self._held_lock:
            self._held.add(query_id)
        self._queue.put(query_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted thought is written (or was taken over by another worker); False if
        ``timeout`` passed first."""
        return drained(self._queue, None if timeout is None else time.monotonic() + timeout)

    def _run(self) -> None:
        next_sweep = time.monotonic()
        while True:
            if self.adopt and time.monotonic() >= next_sweep:
                adopted = self._guarded(lambda: self.store.queries.claim_next(self.name, self.lease_s))
                if adopted is not None:
                    self._do(adopted)
                # Another left-over job may wait right behind this one: look again after the next own job.
                next_sweep = time.monotonic() + (0.0 if adopted is not None else self.poll_s)
            try:
                wait = max(0.0, next_sweep - time.monotonic()) if self.adopt else None
                query_id = self._queue.get(timeout=wait) if wait != 0.0 else self._queue.get_nowait()
            except queue.Empty:
                continue
            try:
                job = self._guarded(lambda: self.store.queries.claim(query_id, self.name, self.lease_s))
                if job is not None:  # else written meanwhile, or taken over by another worker
                    self._do(job)
            finally:
                with self._held_lock:
                    self._held.discard(query_id)
                self._done(query_id)
                self._queue.task_done()

    def _do(self, job: ThoughtJob) -> None:
        with self._held_lock:
            self._held.add(job.query_id)
        try:
            self._write(job)
        except ThoughtTaken:
            pass  # another worker wrote it first: nothing was stored twice
        except Exception as exc:  # noqa: BLE001 - a failed thought must not stop the worker
            log.exception("thought writing failed")
            # Recorded as dropped, so the job is not retried for ever; if even that fails, the claim runs out and
            # the job is claimed again later.
            self._guarded(lambda: self.store.queries.record_outcome(
                job.query_id, thought_id=None, outcome="dropped", reason=f"error: {exc}"[:300],
                timings=job.timings, llm_calls=1))
        finally:
            with self._held_lock:
                self._held.discard(job.query_id)

    def _renew(self) -> None:
        while True:
            time.sleep(self.lease_s / 3)
            with self._held_lock:
                held = sorted(self._held)
            if held:
                self._guarded(lambda: self.store.queries.renew(held, self.name))

    @staticmethod
    def _guarded(step: Callable[[], Any]) -> Any:  # noqa: ANN401 - what ``step`` returns
        """``step``, or None when the store failed (logged; the job stays pending and is claimed again later)."""
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - a database that is away now: try again later
            log.warning("a thought job could not be read or recorded: %s", exc)
            return None


class Answerer:
    """Questions in, cited answers out, thoughts remembered (the pipeline under :class:`copilot.engine.Copilot`)."""

    def __init__(self, settings: Settings, store: Store, embedder: Embedder, llm: ChatModel, *,
                 adopt_jobs: bool = False, read_ahead: bool = False) -> None:
        """``adopt_jobs``: the background worker also writes the thoughts other processes answered and left
        (a replica of the web app; a command that asks one question leaves them to it). ``read_ahead``: a process
        that lives on to answer (the web app) has the model read now what its answers' options need, so that its
        first question does not wait for it; a command that may ask nothing leaves it to its first answer."""
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.llm = llm
        if read_ahead:
            llm.prepare(never_opens=ANSWER_NEVER_OPENS)
        self.memory = ThoughtMemory(store, embedder, llm, settings)
        self.sentence_vectors = SentenceVectors(embedder)
        self._warm_queue: queue.Queue[str] = queue.Queue()
        self._warmer: threading.Thread | None = None
        self._warm_lock = threading.Lock()
        self._results: dict[int, tuple[AskResult, float]] = {}  # this process's answers whose thought is pending
        self.worker = ThoughtWorker(store, self._write_thought, lease_s=settings.thought_lease_s,
                                    poll_s=settings.thought_poll_s, adopt=adopt_jobs,
                                    done=lambda query_id: self._results.pop(query_id, None))
        self.association = None
        if settings.association:
            from copilot.association import AssociativeScorer, load_adapter

            self.association = AssociativeScorer(embedder, load_adapter(settings.association_adapter or None,
                                                                        getattr(embedder, "model_path", None)))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the newly added papers' sentences are read (:meth:`warm_paper`) and every submitted thought is
        written; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return drained(self._warm_queue, deadline) and self.worker.flush(
            None if deadline is None else max(0.0, deadline - time.monotonic()))

    def warm_paper(self, paper_id: str) -> None:
        """Read the sentence vectors of a newly added paper in the background, so the first questions about it
        embed none of its sentences: on 2 cores that is most of a second of each of their first words. Each batch
        waits for the model's background slot, so it never runs while the model computes an answer (a question's
        own retrieval may wait for one batch of :data:`copilot.evidence.WARM_BATCH` chunks, a fraction of a
        second); the scheduler counts the batches as background work."""
        with self._warm_lock:
            if self._warmer is None:
                self._warmer = threading.Thread(target=self._warm_loop, name="sentence-warmer", daemon=True)
                self._warmer.start()
        self._warm_queue.put(paper_id)

    def _warm_loop(self) -> None:
        while True:
            paper_id = self._warm_queue.get()
            try:
                chunks = [(c.id, c.text) for c in self.store.chunks.of_paper(paper_id) if c.id is not None]
                self.sentence_vectors.warm(
                    chunks, before_batch=lambda: self.llm.scheduler.slot(WARM_USER, Priority.BACKGROUND))
            except Exception:  # noqa: BLE001 - a question reads what was not warmed itself
                log.exception("reading the sentences of %s ahead failed", paper_id)
            finally:
                self._warm_queue.task_done()

    def retrieve(self, question: str, *, user_id: str, use_thoughts: bool = True, include_public: bool = False,
                 paper_ids: list[str] | None = None, query_vector: np.ndarray | None = None,
                 follow_up: FollowUp | None = None, whole_chunks: bool = False) -> list[RetrievedItem]:
        """The sources sent with ``question`` (see :meth:`gather`). ``whole_chunks``: the top-K items packed whole
        into the budget, as every method of the evaluation packs them (its comparison of memories holds the
        packing fixed)."""
        if not whole_chunks:
            return self.gather(question, user_id=user_id, use_thoughts=use_thoughts, include_public=include_public,
                               paper_ids=paper_ids, query_vector=query_vector, follow_up=follow_up).items
        s = self.settings
        _, _, candidates = self._candidates(question, s.top_k, user_id=user_id, use_thoughts=use_thoughts,
                                            include_public=include_public, paper_ids=paper_ids,
                                            query_vector=query_vector, follow_up=follow_up)
        return pack_context(candidates, k=s.top_k, budget_tokens=s.context_budget_tokens,
                            dedup_threshold=s.dedup_threshold, count_tokens=self.llm.count_tokens).items

    def _candidates(self, question: str, k: int, *, user_id: str, use_thoughts: bool, include_public: bool,
                    paper_ids: list[str] | None, query_vector: np.ndarray | None, follow_up: FollowUp | None
                    ) -> tuple[str, np.ndarray, list[tuple[RetrievedItem, np.ndarray]]]:
        """The text searched for (a follow-up's self-contained query, else ``question``), its vector, and the
        first ``k`` of the hybrid retrieval for it, thoughts only where their papers are in scope."""
        s = self.settings
        text = follow_up.query if follow_up is not None else question
        vector = self.embedder.encode_query(text) if follow_up is not None or query_vector is None else query_vector
        candidates = retrieve_mixture(self.store, vector, user_id=user_id, k=k, include_thoughts=use_thoughts,
                                      include_public=include_public, min_confidence=s.min_confidence,
                                      paper_ids=paper_ids, thought_query_vector=self.associative_vector(vector, text),
                                      query_text=text, **retrieval_options(s))
        return text, vector, self._thoughts_in_scope(candidates, paper_ids)

    def gather(self, question: str, *, user_id: str, use_thoughts: bool = True, include_public: bool = False,
               paper_ids: list[str] | None = None, query_vector: np.ndarray | None = None,
               follow_up: FollowUp | None = None) -> Compressed:
        """The evidence for ``question``: the first ``COPILOT_RETRIEVAL_CANDIDATES`` of a wide hybrid retrieval
        (near-duplicates skipped, thoughts only when their papers are in scope), compressed to the sentences that
        bear on it within the context budget (:func:`copilot.evidence.compress`). ``query_vector`` is its embedding
        when the caller already has it; a ``follow_up`` (:mod:`copilot.followups`) is searched for by its
        self-contained query instead."""
        s = self.settings
        text, vector, candidates = self._candidates(
            question, max(s.top_k, s.retrieval_candidates), user_id=user_id, use_thoughts=use_thoughts,
            include_public=include_public, paper_ids=paper_ids, query_vector=query_vector, follow_up=follow_up)
        pool = pack_context(candidates, k=s.retrieval_candidates, budget_tokens=10**9,
                            dedup_threshold=s.dedup_threshold).items
        return compress(text, vector, pool, self.sentence_vectors, budget_tokens=s.context_budget_tokens,
                        count_tokens=self.llm.count_tokens, max_sources=s.top_k)

    def _thoughts_in_scope(self, candidates: list[tuple[RetrievedItem, np.ndarray]],
                           paper_ids: list[str] | None) -> list[tuple[RetrievedItem, np.ndarray]]:
        """``candidates`` without the thoughts built from papers outside ``paper_ids`` (a question about one paper
        never hears what was found in another); a library-wide question (``paper_ids`` None) keeps them all."""
        if paper_ids is None:
            return candidates
        scope = set(paper_ids)
        behind = self.store.thoughts.papers_behind_many([item.id for item, _ in candidates if item.kind == "thought"])
        kept = []
        for item, vector in candidates:
            if item.kind == "thought":
                papers = behind.get(int(item.id), set())
                if not papers or not papers <= scope:
                    continue
            kept.append((item, vector))
        return kept

    def ask_stream(self, question: str, *, user_id: str = DEFAULT_USER, use_thoughts: bool = True,
                   write_thought: bool = True, include_public: bool = False,
                   paper_ids: list[str] | None = None, share_thought: bool = False,
                   about_user: str | None = None, query_vector: np.ndarray | None = None,
                   follow_up: FollowUp | None = None, language: str | None = None, llm: ChatModel | None = None
                   ) -> Iterator[AnswerSources | QueuePosition | str | AskResult]:
        """Yield the sources (:class:`AnswerSources`, as soon as retrieval is done), the answer's place in line
        while it waits for the model (:class:`QueuePosition`, when it changes), the answer text as it grows,
        then the final :class:`AskResult`.

        ``share_thought`` puts the new thought in the public pool; ``about_user`` (a persona, recalled
        memories) personalises the answer without touching retrieval; ``query_vector`` is the question's
        embedding when the caller has already computed it (the chat recalls memories with it first);
        ``follow_up``: how to search for a question that leans on the turns before it (see :meth:`retrieve`).
        ``language`` is the one the answer is asked in (:func:`copilot.prompts.in_language`): retrieval still
        embeds the question as it was asked (or, for a follow-up, as its self-contained query). ``llm`` writes the
        answer instead of the instance's model (a signed-in visitor's own remote one); if it fails before its first
        word, the instance's model answers and :attr:`AskResult.fallback` says why.
        """
        question = check_question(question, self.settings)
        t0 = time.perf_counter()
        found = self.gather(question, user_id=user_id, use_thoughts=use_thoughts, include_public=include_public,
                            paper_ids=paper_ids, query_vector=query_vector, follow_up=follow_up)
        items = found.items
        t1 = time.perf_counter()
        yield AnswerSources(items, round(1000 * (t1 - t0), 1))
        answer = ""
        first_word = None
        trace = TokenTrace()  # the token probabilities of the answer, when the unsure-fact rule reads them
        t_slot = t1
        model, fallback = llm or self.llm, ""
        # Nothing in scope bears on the question: the model is not asked (it would answer from its own recollection).
        unbearing = not items or found.bearing < self.settings.min_bearing
        # Nor when it names something ("TREC-COVID") that no passage sent mentions: the sources say nothing of it.
        unnamed = [] if unbearing else unmentioned(question, items)
        unbearing = unbearing or bool(unnamed)
        # A question that names one row and one column of a table sent is answered with that cell, not by the model.
        cell, cell_checked = (None if unbearing else self._table_cell(question, found, language)) or (None, None)
        if cell is not None:
            answer = table_reader.answer(cell)
            first_word = time.perf_counter()
            yield answer
        elif not unbearing:
            # The fixed part first (system prompt, instructions), the question last: see prompts.answer_user.
            sent = source_texts(items)
            messages = [{"role": "system", "content": prompts.ANSWER_SYSTEM},
                        {"role": "user", "content": prompts.answer_user(question, sent, about_user, language=language)}]
            while True:
                line = model.scheduler
                ticket = line.enqueue(user_id, Priority.ANSWER)
                try:
                    yield from self._wait_in_line(ticket, model)
                    t_slot = time.perf_counter()
                    trace = TokenTrace(most=RECHECK_MAX_ANSWER_TOKENS)
                    reading = trace if self.settings.fact_min_probability > 0 else None
                    for answer in stream_until_repeating(model, messages, max_tokens=self.settings.max_answer_tokens,
                                                         temperature=self.settings.temperature, ticket=ticket,
                                                         trace=reading, sources=sent):
                        if first_word is None and answer.strip():
                            first_word = time.perf_counter()
                        yield answer
                    break
                except LLMError as exc:
                    if model is self.llm or first_word is not None:
                        raise
                    log.warning("%s failed; the instance's model answers instead: %s", model.name, exc)
                    admit_answer(self.llm, self.settings)  # its line's limit holds for fallbacks too
                    model, fallback = self.llm, str(exc)
                finally:
                    line.release(ticket)  # also when the caller stops listening while in line
        answer = answer.strip()
        t2 = time.perf_counter()
        timings = {"retrieve_ms": round(1000 * (t1 - t0), 1), "answer_ms": round(1000 * (t2 - t1), 1),
                   "wait_ms": round(1000 * (t_slot - t1), 1),
                   "first_word_ms": round(1000 * ((first_word or t2) - t0), 1)}
        # A table cell's answer was checked, and would have been left to the model if it failed, before it was shown.
        checked: Grounding | None = cell_checked
        reason = ""
        if cell is None:
            capped = model.count_tokens(answer) >= self.settings.max_answer_tokens - 1
            try:
                checked = grounding.check(answer, items, self.embedder, self.settings.grounding_threshold,
                                          capped=capped, heads=source_heads(items), question=question)
            except Exception:  # noqa: BLE001 - the answer was streamed already: keep it, unchecked
                log.exception("the grounding check of an answer failed")
                checked = None
            reason = (f"no passage found in the papers in scope mentions {', '.join(unnamed)}" if unnamed else
                      decline_reason(answer, checked, unbearing, self.settings.grounding_threshold, question,
                                     [i.paper_title or "" for i in items], table_captions(items)))
            if not reason and checked is not None:
                reason = unsure_reason(answer, trace, self.settings.fact_min_probability, question)
        t_check = time.perf_counter()
        timings["grounding_ms"] = round(1000 * (t_check - t2), 1)
        draft = answer
        # A recheck changes no decline (an unstable sentence is still shown): only an answer that stands, states a
        # fact and is short is written again, and what the rechecks did not repeat is marked.
        again: list[str] = []
        if cell is None and not reason and checked is not None and grounding.has_facts(answer, question):
            again = rechecks(model, messages, answer, samples=self.settings.recheck_samples,
                             max_tokens=self.settings.max_answer_tokens, user=user_id)
            checked = grounding.rechecked(checked, [t for t in again if not REFUSAL.search(t)], question)
        timings["recheck_ms"] = round(1000 * (time.perf_counter() - t_check), 1)
        if reason:
            answer = prompts.DECLINE
        query_id = self._record(user_id, question, answer, items, timings, share_thought)
        result = AskResult(query_id, question, answer, items, timings, grounding=None if reason else checked,
                           searched_for=follow_up.query if follow_up else None, declined=bool(reason),
                           decline_reason=reason, draft=draft if reason else "",
                           evidence=[] if reason else supporting_quotes(checked, items, self.settings),
                           nearest=nearest_quotes(found, checked) if reason else [],
                           model="" if unbearing or cell is not None else model.name, fallback=fallback,
                           rechecks=len(again), table_cell=cell is not None)
        grounded = checked is not None and (checked.grounded or not self.settings.thought_needs_grounding)
        if not reason and write_thought and grounded:
            self._results[query_id] = (result, t2)
            self.worker.submit(query_id)
        else:
            # A declined or unchecked answer states nothing the sources show; an answer with an unsupported
            # sentence would spread it: no thought is written from either.
            why = ("disabled: thoughts are off for this question" if not write_thought else
                   f"declined: {reason}" if reason else
                   "ungrounded: the answer could not be checked" if checked is None else
                   ungrounded_reason(checked))
            result.thought = ThoughtOutcome("dropped", why)
            result.timings["thought_ms"] = 0.0
            if write_thought:
                result.timings["thought_lag_ms"] = 0.0
            self._record_outcome(result)
        yield result

    def _table_cell(self, question: str, found: Compressed, language: str | None
                    ) -> tuple[table_reader.Cell, Grounding] | None:
        """The table cell that answers ``question`` (:func:`copilot.table_reader.read_cell`) with its answer's
        check, if the setting is on, the answer is asked in the language the tables are read in (English, or the
        question's own), and the cell's answer passes the check every answer goes through (else the model
        answers); the check is the answer's own, not done again."""
        if not self.settings.table_cells or (language and language != prompts.LANGUAGE_OF_QUESTION
                                             and not language.casefold().startswith("english")):
            return None
        cell = table_reader.read_cell(question, found.items, found.originals)
        if cell is None:
            return None
        said = table_reader.answer(cell)
        checked = grounding.check(said, found.items, self.embedder, self.settings.grounding_threshold,
                                  heads=source_heads(found.items))
        reason = decline_reason(said, checked, False, self.settings.grounding_threshold, "", [],
                                table_captions(found.items))
        return None if reason or not checked.grounded else (cell, checked)

    def _wait_in_line(self, ticket: Ticket, model: ChatModel | None = None) -> Iterator[QueuePosition]:
        """Until ``ticket`` is granted, its place in the line of ``model`` (the instance's): at once, then whenever
        it changes."""
        scheduler = (model or self.llm).scheduler
        shown: tuple[int, int] | None = None
        while not ticket.granted.is_set():
            position = scheduler.position(ticket)
            if (position.ahead, round(position.estimate_s)) != shown and not ticket.granted.is_set():
                shown = (position.ahead, round(position.estimate_s))
                yield position
            ticket.wait(QUEUE_POLL_S)

    def ask(self, question: str, **kwargs) -> AskResult:  # noqa: ANN003 - see ask_stream
        result = None
        for update in self.ask_stream(question, **kwargs):
            result = update
        assert isinstance(result, AskResult)
        return result

    def _record(self, user_id: str, question: str, answer: str, items: list[RetrievedItem],
                timings: dict[str, float], share_thought: bool = False) -> int:
        """The answered query, which is also the job of writing its thought (claimed by this worker)."""
        retrieved = [{"kind": i.kind, "id": i.id, "depth": i.depth, "confidence": i.confidence,
                      "score": round(i.score, 4), "paper_id": i.paper_id} for i in items]
        return self.store.queries.add(user_id, question, answer, retrieved, timings, public=share_thought,
                                      claim=self.worker.name)

    def _write_thought(self, job: ThoughtJob) -> None:
        """Write the thought of one answered query, from its job (this process's answer, or one a replica that
        died left); the outcome is recorded in the transaction that stores the thought."""
        mine = self._results.pop(job.query_id, None)
        start = time.perf_counter()
        items = [RetrievedItem(r["kind"], int(r["id"]), "", float(r.get("score") or 0.0),
                               depth=int(r.get("depth") or 0), confidence=r.get("confidence"),
                               paper_id=r.get("paper_id")) for r in job.retrieved]
        timings = dict(job.timings)

        def finish(outcome: ThoughtOutcome) -> bool:
            end = time.perf_counter()
            timings["thought_ms"] = round(1000 * (end - start), 1)
            if mine is not None:  # queued behind other thoughts and answers, then written
                timings["thought_lag_ms"] = round(1000 * (end - mine[1]), 1)
            elif job.created_at:
                timings["thought_lag_ms"] = round(1000 * (time.time() - datetime.fromisoformat(job.created_at)
                                                          .timestamp()), 1)
            return self.store.queries.record_outcome(job.query_id, thought_id=outcome.thought_id,
                                                     outcome=outcome.outcome, reason=outcome.reason, timings=timings,
                                                     llm_calls=(mine[0].answer_calls if mine else 1)
                                                     + outcome.llm_calls)

        with scheduling(job.user_id, Priority.BACKGROUND):  # its LLM calls go after every waiting answer
            outcome = self.memory.write(user_id=job.user_id, question=job.question, answer=job.answer, items=items,
                                        public=job.public, finish=finish,
                                        grounding=mine[0].grounding if mine is not None else None)
        if mine is not None:
            mine[0].timings.update(timings)
            mine[0].thought = outcome

    def _record_outcome(self, result: AskResult) -> None:
        """Complete the query's record with its thought outcome, timings and LLM calls."""
        outcome = result.thought
        assert outcome is not None
        self.store.queries.record_outcome(result.query_id, thought_id=outcome.thought_id, outcome=outcome.outcome,
                                          reason=outcome.reason, timings=result.timings,
                                          llm_calls=result.as_dict()["llm_calls"])

    def associative_vector(self, plain: np.ndarray, text: str) -> np.ndarray | None:
        """The combined (plain + learned association) query vector of ``text`` (whose plain vector is ``plain``),
        or None when association is off. The adapted encoder reads ``text`` once per question: thoughts and
        memories of the same turn share that pass."""
        if self.association is None:
            return None
        return self.association.query_vector(text, plain)
