"""Thought memory: past answers distilled into thoughts, filtered, merged and stored with provenance.

An answer whose sentences its sources do not all support (the grounding check of :mod:`copilot.grounding`) is
dropped first, before any LLM call: a thought made of it would be recalled later as a finding. After a grounded
answer, ONE LLM call restates (question, answer) as a self-contained thought and gives a verdict on whether the
answer really answers. Meaningless thoughts are dropped (invalid, low confidence, too short, a
refusal, or a near copy of one source chunk); a thought close to a stored one is merged into it (support +1,
confidence max, provenance union, the better text kept) instead of being stored twice. A stored thought
records which chunks and thoughts it came from and its abstraction depth: 1 + the deepest of its sources.

The merge check and the insert (or merge) are one write transaction, serialised per user (``Store.serialize``:
an advisory lock on PostgreSQL; SQLite's write transactions run one at a time anyway), so writers racing on one
user's memory, in any number of threads, processes or replicas, neither lose a thought nor store one twice. The
answer's job is completed in that same transaction (``finish``), so a job two workers took never adds twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from copilot import grounding as grounding_check
from copilot import prompts
from copilot.config import Settings
from copilot.embeddings import Embedder
from copilot.llm import ChatModel, ChoiceProbe, LLMError, extract_json_object
from copilot.llm.json_reply import NoJSONObject
from copilot.storage import Store
from copilot.types import Grounding, RetrievedItem, Thought, ThoughtSource, VectorFilter

MIN_THOUGHT_WORDS = 6
THOUGHT_MAX_TOKENS = 120
FEEDBACK_UP = 0.1
FEEDBACK_DOWN = 0.25
# Relevance of an answer to its question: P(the answer belongs to the question | their cosine), a
# logistic curve fitted on ScholarQA-Multi expert answers paired with their own and with other questions
# (``python -m copilot.tools.calibration`` reproduces both numbers).
RELEVANCE_SLOPE = 10.4
RELEVANCE_BIAS = -3.13
# Answers that only say the sources cannot tell carry no knowledge worth keeping.
REFUSAL = re.compile(
    r"\b(sources? (do|does) not (say|contain|mention|provide|answer|state|specify)|"
    r"do(es)? not (say|mention|answer|state|specify|provide)|don'?t (say|mention|answer|state|specify)|"
    r"(i|we) (do not|don't) know|no (information|mention|details?)|not (enough|sufficient) information|"
    r"cannot (be )?(determined|answer(ed)?|found)|(is|are|was|were) not (explicitly |directly |clearly )?"
    r"(stated|mentioned|specified|provided|given|reported|described|discussed|available)|not mentioned)\b",
    re.IGNORECASE,
)
# Conversational filler (a small model sometimes talks about the exchange instead of the subject).
_CHITCHAT = re.compile(r"^\s*(i'?m glad|i am glad|you'?ve|you have|thank|sure\b|(i )?hope (this|that|these|it)\b|"
                       r"happy to help|let me know|feel free|the answer is:?\s*$|as an ai)", re.IGNORECASE)
# A thought nearly orthogonal to its question is about something else (a tiny model sometimes distils a
# sentence about editing text instead of the fact); on-topic thoughts measured 0.26-0.69.
MIN_THOUGHT_QUESTION_COSINE = 0.1
# One clause that ends in a colon ("The answer to this question is:") announces knowledge it never gives.
_LEAD_IN = re.compile(r"^[^.!?\n]{0,120}:\s*$")
_CITATION = re.compile(r"\[(\d{1,2})\]")


class ThoughtTaken(Exception):
    """The answer's thought was written meanwhile by another worker (which took over its job); nothing was
    stored."""


@dataclass
class Distilled:
    """What the one thought call returned."""

    thought: str
    valid: bool
    confidence: float
    source: str  # "probe": the model's token probability; "stated": what it wrote


@dataclass
class ThoughtOutcome:
    """What happened to one answer's thought: added, merged or dropped (and why)."""

    outcome: str  # "added" | "merged" | "dropped"
    reason: str = ""
    thought_id: int | None = None
    depth: int | None = None
    confidence: float | None = None
    text: str = ""
    llm_calls: int = 0
    sources: list[dict[str, Any]] = field(default_factory=list)
    model_confidence: float | None = None  # the LLM's own part of ``confidence``
    relevance: float | None = None  # the question-answer relevance part

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clamp(value: float) -> float:
    return float(min(1.0, max(0.0, value)))


def parse_thought_reply(reply: str) -> tuple[str, str | None, float | None]:
    """(thought, stated verdict, stated confidence) from a JSON object or ``key: value`` lines."""
    try:
        data = extract_json_object(reply)
        thought = str(data.get("thought") or "").strip()
        verdict = data.get("answered", data.get("valid"))
        verdict = None if verdict is None else ("yes" if verdict in (True, "yes", "true", "Yes") else "no")
        confidence = data.get("confidence")
        return thought, verdict, float(confidence) if isinstance(confidence, int | float) else None
    except NoJSONObject:
        pass
    fields: dict[str, str] = {}
    for line in reply.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("thought", "answered", "valid", "confidence"):
            fields.setdefault(key.strip().lower(), value.strip())
    verdict_text = (fields.get("answered") or fields.get("valid") or "").lower()
    verdict = "yes" if verdict_text.startswith(("yes", "true")) else "no" if verdict_text else None
    confidence = None
    if "confidence" in fields:
        match = re.search(r"\d*\.?\d+", fields["confidence"])
        confidence = float(match.group()) if match else None
    return fields.get("thought", "").strip(), verdict, confidence


def distill(llm: ChatModel, question: str, answer: str) -> Distilled | None:
    """The one thought call. None when the reply holds no usable thought."""
    probe = ChoiceProbe(prompts.THOUGHT_MARKER)
    reply = llm.chat(prompts.thought_messages(question, answer), max_tokens=THOUGHT_MAX_TOKENS, temperature=0.0,
                     stop=["\n\n", "Question:"], probe=probe, grammar=prompts.THOUGHT_GRAMMAR)
    thought, verdict, stated = parse_thought_reply(reply)
    if not thought:
        return None
    if probe.probabilities is not None:
        confidence = probe.probabilities.get("yes", 0.0)
        return Distilled(thought, valid=verdict is not None, confidence=_clamp(confidence), source="probe")
    if verdict is None:
        return None
    if stated is None:
        stated = 0.7 if verdict == "yes" else 0.2
    return Distilled(thought, valid=verdict == "yes", confidence=_clamp(stated), source="stated")


def relevance_probability(cosine: float | np.ndarray, slope: float = RELEVANCE_SLOPE,
                          bias: float = RELEVANCE_BIAS) -> float | np.ndarray:
    """How likely an answer with this question-answer cosine really belongs to the question (a float, or an
    array for an array of cosines); ``slope`` and ``bias`` default to the curve fitted by copilot.tools.calibration."""
    probability = 1.0 / (1.0 + np.exp(-(slope * np.asarray(cosine) + bias)))
    return float(probability) if np.ndim(probability) == 0 else probability


def combined_confidence(model: float, relevance: float, relevance_weight: float) -> float:
    """The thought's confidence: the model's verdict probability, blended with the answer's relevance.

    SmolLM2-135M's probability of "yes" does not tell real answers from answers to another question (ROC AUC
    0.50 on ScholarQA-Multi pairs); the embedding relevance does (0.94), and the blend does best (0.96). The
    weight was fitted with SmolLM2, the default then; it is not refitted for the 0.5B default yet.
    """
    return _clamp((1.0 - relevance_weight) * model + relevance_weight * relevance)


def ungrounded_reason(grounding: Grounding) -> str:
    """Why an ungrounded answer makes no thought: how many sentences fall short, and the least supported one."""
    if not grounding.sentences:
        return "ungrounded: the answer has no sentence its sources could support"
    stating = [s for s in grounding.sentences if s.missing]
    if stating:
        text = " ".join(stating[0].sentence.split())
        return (f"ungrounded: {len(grounding.unsupported)} of {len(grounding.sentences)} sentences unsupported "
                f"({', '.join(stating[0].missing[:3])} in no source: {text[:120]})")
    guessed = [s for s in grounding.sentences if s.unstable and s.support >= grounding.threshold]
    if guessed:
        text = " ".join(guessed[0].sentence.split())
        return (f"ungrounded: {len(grounding.unsupported)} of {len(grounding.sentences)} sentences unsupported "
                f"({', '.join(guessed[0].unstable[:3])} not said again when the model answered again: {text[:120]})")
    weakest = min(grounding.sentences, key=lambda s: s.support)
    text = " ".join(weakest.sentence.split())
    return (f"ungrounded: {len(grounding.unsupported)} of {len(grounding.sentences)} sentences below support "
            f"{grounding.threshold:.2f} (weakest {weakest.support:.2f}: {text[:120]})")


def cited_items(answer: str, items: list[RetrievedItem]) -> list[RetrievedItem]:
    """The sources an answer cites as [n]; all of them when it cites none (small models often do not)."""
    numbers = {int(n) for n in _CITATION.findall(answer)}
    cited = [items[n - 1] for n in sorted(numbers) if 1 <= n <= len(items)]
    return cited or list(items)


class ThoughtMemory:
    """Writes, merges, scores and deletes the thoughts of a store."""

    def __init__(self, store: Store, embedder: Embedder, llm: ChatModel, settings: Settings) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.settings = settings

    # ----- writing -----------------------------------------------------------------------------------

    def write(self, *, user_id: str, question: str, answer: str, items: list[RetrievedItem],
              public: bool = False, finish: Callable[[ThoughtOutcome], bool] | None = None,
              grounding: Grounding | None = None) -> ThoughtOutcome:
        """Distil, filter, merge or store the thought of one answered question.

        ``grounding`` is the answer's grounding check when the caller has made it already (else it is made here,
        when ``COPILOT_THOUGHT_NEEDS_GROUNDING`` asks for it). ``finish`` completes the answer's job with the
        outcome, inside the transaction that stores the thought (or records a drop); when it returns False (the
        job was completed elsewhere) the transaction is rolled back and :class:`ThoughtTaken` raised.
        """
        outcome, plan = self._decide(user_id, question, answer, items, public, grounding)
        if plan is None and finish is None:
            return outcome
        with self.store.transaction():
            if plan is not None:
                self.store.serialize(f"copilot.thoughts.{user_id}")
                outcome = self._store_thought(user_id, *plan, public=public, annotations=outcome)
            if finish is not None and not finish(outcome):
                raise ThoughtTaken("the thought of this answer was written by another worker")
        return outcome

    def _decide(self, user_id: str, question: str, answer: str, items: list[RetrievedItem], public: bool,
                grounding: Grounding | None = None) -> tuple[ThoughtOutcome, tuple | None]:
        """Everything before the store: the grounding gate, the LLM call and the filters. (a drop, None), or (the
        outcome's annotations, what to store)."""
        if REFUSAL.search(answer) or not answer.strip():
            return ThoughtOutcome("dropped", "refusal: the answer says the sources cannot tell"), None
        if not items:
            # Nothing was retrieved (an empty library, say): the answer is the model's own recollection, and a
            # thought made of it would be remembered and cited later as if it had sources.
            return (ThoughtOutcome("dropped", "ungrounded: nothing was retrieved, so the answer rests on no source"),
                    None)
        if self.settings.thought_needs_grounding:
            grounding = grounding or self.ground(answer, items, question)
            if not grounding.grounded:
                return ThoughtOutcome("dropped", ungrounded_reason(grounding)), None
        try:
            distilled = distill(self.llm, question, answer)
        except LLMError as exc:
            return ThoughtOutcome("dropped", f"llm_error: {exc}", llm_calls=1), None
        if distilled is None:
            return (ThoughtOutcome("dropped", "unusable_reply: no thought could be read from the reply",
                                   llm_calls=1), None)
        model_confidence = distilled.confidence
        relevance = question_vector = None
        if self.settings.relevance_weight > 0:
            # The question's vector serves twice: relevance of the answer, then topicality of the thought.
            question_vector, answer_vector = self.embedder.encode_documents([question, answer])
            relevance = relevance_probability(float(question_vector @ answer_vector))
            distilled.confidence = combined_confidence(model_confidence, relevance, self.settings.relevance_weight)
        outcome, plan = self._filter(distilled, answer, items, question_vector, question)
        outcome.model_confidence = round(model_confidence, 3)
        outcome.relevance = None if relevance is None else round(relevance, 3)
        outcome.llm_calls = 1
        return outcome, plan

    def ground(self, answer: str, items: list[RetrievedItem], question: str = "") -> Grounding:
        """The grounding check of ``answer`` against ``items`` (and their papers' titles, which the model read too);
        items known only by id (a thought job read back from the database) are read from the store first."""
        read = self._with_texts(items)
        return grounding_check.check(answer, read, self.embedder, self.settings.grounding_threshold,
                                     heads=self._titles(read), question=question)

    def _titles(self, items: list[RetrievedItem]) -> list[str]:
        """What the model read of each chunk beside its text: its paper's title and its section."""
        return sorted({f"{c.paper_title or ''} {c.section or ''}"
                       for c in self.store.chunks.get_many([i.id for i in items if i.kind == "chunk"])})

    def _with_texts(self, items: list[RetrievedItem]) -> list[RetrievedItem]:
        """``items`` with the text of each one that came without it (a source deleted since keeps none)."""
        missing = [i for i in items if not i.text]
        if not missing:
            return items
        chunks = {c.id: c.text for c in self.store.chunks.get_many([i.id for i in missing if i.kind == "chunk"])}
        thoughts = {t.id: t.text for t in self.store.thoughts.get_many([i.id for i in missing if i.kind == "thought"])}
        texts = {"chunk": chunks, "thought": thoughts}
        return [i if i.text else replace(i, text=texts[i.kind].get(i.id) or "") for i in items]

    def _filter(self, distilled: Distilled, answer: str, items: list[RetrievedItem],
                question_vector: np.ndarray | None = None, question: str = "") -> tuple[ThoughtOutcome, tuple | None]:
        """(a drop, None) or (a blank outcome for the annotations, (text, vector, confidence, sources))."""
        text, confidence = distilled.thought, distilled.confidence
        base = {"text": text, "confidence": round(confidence, 3)}
        if not distilled.valid:
            return ThoughtOutcome("dropped", "invalid: the answer does not really answer", **base), None
        if confidence < self.settings.min_confidence:
            return ThoughtOutcome("dropped", f"low_confidence: {confidence:.2f} < {self.settings.min_confidence}",
                                  **base), None
        if (len(text.split()) < MIN_THOUGHT_WORDS or REFUSAL.search(text) or _CHITCHAT.search(text)
                or _LEAD_IN.match(text.strip())):
            return ThoughtOutcome("dropped", "too_short_or_empty: the thought carries no knowledge", **base), None
        vector = self.embedder.encode_documents([text])[0]
        if question_vector is not None and float(question_vector @ vector) < MIN_THOUGHT_QUESTION_COSINE:
            return ThoughtOutcome("dropped", "off_topic: the thought is not about the question", **base), None
        sources = cited_items(answer, items)
        # The restatement may add what the answer did not say: its facts must be in the sources too.
        added = self._unstated(text, items, question) if self.settings.thought_needs_grounding else []
        if added:
            return ThoughtOutcome("dropped", f"unsupported: the thought states {', '.join(added[:3])}, which its "
                                  "sources do not", **base), None
        chunk_vectors = self.store.chunks.vectors([s.id for s in sources if s.kind == "chunk"])
        if len(chunk_vectors) and float(np.max(chunk_vectors @ vector)) > self.settings.restatement_threshold:
            return ThoughtOutcome("dropped", "restatement: the thought only repeats one source chunk", **base), None
        return ThoughtOutcome("added", **base), (text, vector, confidence, sources)

    def _unstated(self, text: str, items: list[RetrievedItem], question: str = "") -> list[str]:
        """The facts of ``text`` (numbers, names, expansions, quoted terms) that none of ``items``' chunks (nor their
        papers' titles) states; what the question itself says (but its numbers) may be repeated."""
        read = self._with_texts(items)
        # As in the answer's check, only a paper's own text confirms a fact, never an earlier thought.
        stated = grounding_check.SourceFacts([s.text for s in read if s.kind != "thought"] + self._titles(read))
        return grounding_check.missing_facts(text, stated, grounding_check.SourceFacts([question]))

    def _store_thought(self, user_id: str, text: str, vector: np.ndarray, confidence: float,
                       sources: list[RetrievedItem], *, public: bool, annotations: ThoughtOutcome) -> ThoughtOutcome:
        """The merge check, then the merge or the insert (inside the caller's transaction, under the user's lock)."""
        target = self._merge_target(user_id, vector)
        if target is not None:
            # A thought rebuilt from the very thought it merges into adds no abstraction level.
            others = [s for s in sources if not (s.kind == "thought" and s.id == target.id)]
            outcome = self._merge(target, text, vector, confidence, 1 + max((s.depth for s in others), default=0),
                                  sources)
        else:
            outcome = self._add(user_id, text, vector, confidence, 1 + max((s.depth for s in sources), default=0),
                                sources, public)
        outcome.model_confidence, outcome.relevance = annotations.model_confidence, annotations.relevance
        outcome.llm_calls = annotations.llm_calls
        return outcome

    def _merge_target(self, user_id: str, vector: np.ndarray) -> Thought | None:
        """The user's stored thought closest to ``vector``, if closer than the merge threshold."""
        hits = self.store.search("thoughts", vector, 1, VectorFilter(owner=user_id))
        if hits and hits[0][1] > self.settings.merge_threshold:
            return self.store.thoughts.get(hits[0][0])
        return None

    def _add(self, user_id: str, text: str, vector: np.ndarray, confidence: float, depth: int,
             sources: list[RetrievedItem], public: bool) -> ThoughtOutcome:
        thought_id = self.store.thoughts.add(user_id=user_id, text=text, confidence=confidence, depth=depth,
                                             public=public, vector=vector, sources=_edges(sources))
        return ThoughtOutcome("added", "", thought_id, depth, round(confidence, 3), text,
                              sources=[{"kind": s.kind, "id": s.id, "depth": s.depth} for s in sources])

    def _merge(self, target: Thought, text: str, vector: np.ndarray, confidence: float, depth: int,
               sources: list[RetrievedItem]) -> ThoughtOutcome:
        """Support +1, confidence max, provenance union; the more confident (then longer) text is kept."""
        thought_id = target.id
        old_conf = float(target.confidence or 0.0)
        new_is_better = (confidence, len(text)) > (old_conf, len(target.text or ""))
        support = int(target.support or 1) + 1
        merged_confidence = max(old_conf, confidence)
        merged_depth = max(int(target.depth or 1), depth) if new_is_better else int(target.depth or 1)
        self.store.thoughts.merge(thought_id, support=support, confidence=merged_confidence, depth=merged_depth,
                                  sources=_edges(sources), text=text if new_is_better else None,
                                  vector=vector if new_is_better else None)
        kept = text if new_is_better else target.text
        return ThoughtOutcome("merged", f"merged into thought #{thought_id} (support {support})",
                              thought_id, merged_depth, round(merged_confidence, 3), kept,
                              sources=[{"kind": s.kind, "id": s.id, "depth": s.depth} for s in sources])

    # ----- feedback, reading, deleting ---------------------------------------------------------------

    def apply_feedback(self, thought_id: int, value: int) -> float | None:
        """Thumbs up raises the thought's confidence, thumbs down lowers it; returns the new confidence."""
        thought = self.store.thoughts.get(thought_id)
        if thought is None:
            return None  # the thought was deleted meanwhile
        step = FEEDBACK_UP if value > 0 else -FEEDBACK_DOWN
        confidence = _clamp(float(thought.confidence or 0.0) + step)
        self.store.thoughts.set_confidence(thought_id, confidence)
        return confidence

    def get(self, thought_id: int, user_id: str | None = None) -> Thought | None:
        """The thought with its sources, if ``user_id`` may read it (their own, or public)."""
        return self.store.thoughts.visible(thought_id, user_id, sources=True)

    def list(self, user_id: str | None = None) -> list[Thought]:
        return self.store.thoughts.list(user_id)

    def delete(self, thought_id: int, user_id: str | None = None) -> bool:
        """Delete a thought (only its owner may); provenance pointing at it goes too."""
        thought = self.store.thoughts.get(thought_id)
        if thought is None or (user_id is not None and thought.user_id != user_id):
            return False
        self.store.thoughts.delete(thought_id)
        return True

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts by depth and the share of retrieved items that were thoughts (utilisation)."""
        by_depth = self.store.thoughts.count_by_depth(user_id)
        retrieved = self.store.queries.retrieved(user_id)
        kinds = [item["kind"] for items in retrieved for item in items]
        return {"thoughts": sum(by_depth.values()), "by_depth": by_depth,
                "utilisation": round(kinds.count("thought") / len(kinds), 3) if kinds else 0.0,
                "queries": len(retrieved)}


def _edges(sources: list[RetrievedItem]) -> list[ThoughtSource]:
    """The provenance edges of a thought built from these retrieved items."""
    return [ThoughtSource(s.kind, s.id) for s in sources]
