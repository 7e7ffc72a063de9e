"""How well a thought's confidence separates real answers from answers to another question.

A thought's confidence blends two signals: the LLM's own probability of "yes" after ``answered:`` and the
answer's relevance to its question (a logistic curve on their embedding cosine). This measures both on
expert answers from ScholarQA-Multi paired with their own question (label 1) and with another item's question
(label 0), run through the very same thought call; it reports each signal's ROC AUC, its best threshold
(balanced accuracy) and how the configured threshold does, and fits the relevance curve that
``copilot.thoughts`` ships (``RELEVANCE_SLOPE``, ``RELEVANCE_BIAS``). Run it for another model before trusting
its verdicts: ``python -m copilot.tools.calibration --n 40``.

``python -m copilot.tools.calibration grounding`` calibrates the grounding check (:mod:`copilot.grounding`) the same
way: each expert answer's sentences are scored against its own cited snippets (label 1) and against the snippets
of another question on the same subject (label 0). It fits the support curve (``SUPPORT_*`` in copilot.grounding),
and picks the threshold an answer's every sentence must reach (``GROUNDING_THRESHOLD`` in copilot.config): the one
with the best balanced accuracy (Youden's J) on answers of a copilot answer's length, each scored by its least
supported sentence, from cross-validated support scores.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from copilot.config import DATA_ROOT, Settings, apply_offline_defaults
from copilot.embeddings import Embedder, get_embedder
from copilot.grounding import evidence, split_sentences, strip_citations, support_score
from copilot.llm import get_llm
from copilot.llm.base import ChatModel
from copilot.thoughts import combined_confidence, distill, relevance_probability
from copilot.types import GroundingEvidence

DEFAULT_DATA = DATA_ROOT / "scholarqa" / "scholarqa_multi_human_answers.json"
ANSWER_WORDS = 60


@dataclass
class Pair:
    question: str
    answer: str
    label: int  # 1: the answer belongs to the question; 0: it answers another question


@dataclass
class SignalReport:
    """How one confidence signal separates the two kinds of pairs."""

    auc: float
    best_threshold: float
    best_balanced_accuracy: float
    recall_at_threshold: float
    false_positive_rate_at_threshold: float
    median_positive: float
    median_negative: float


@dataclass
class CalibrationReport:
    n: int
    threshold: float
    relevance_weight: float
    model: SignalReport  # the LLM's probability of "yes" (or stated confidence)
    relevance: SignalReport  # the question-answer relevance curve, cross-validated
    combined: SignalReport  # what the product stores, cross-validated
    slope: float  # the relevance curve fitted on all pairs (RELEVANCE_SLOPE, RELEVANCE_BIAS)
    bias: float
    unusable: int

    def as_dict(self) -> dict:
        return asdict(self)


def _opening(text: str, words: int = ANSWER_WORDS) -> str:
    """The first sentences of an expert answer, about ``words`` long: the length of a copilot answer."""
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    kept: list[str] = []
    for sentence in sentences:
        kept.append(sentence)
        if sum(len(s.split()) for s in kept) >= words:
            break
    return " ".join(kept)


def make_pairs(path: Path = DEFAULT_DATA, n: int = 40, seed: int = 0) -> list[Pair]:
    """``n`` matched and ``n`` mismatched question/answer pairs (a derangement: never an item's own answer)."""
    items = json.loads(Path(path).read_text())
    rng = random.Random(seed)
    chosen = rng.sample(items, min(n, len(items)))
    pairs = [Pair(item["input"], _opening(item["output"]), 1) for item in chosen]
    shifted = chosen[1:] + chosen[:1]
    pairs += [Pair(item["input"], _opening(other["output"]), 0) for item, other in zip(chosen, shifted, strict=True)]
    return pairs


def roc_auc(labels: list[int], scores: list[float]) -> float:
    """Probability that a random positive scores above a random negative (ties count half); NaN for one class."""
    if len(set(labels)) < 2:
        return float("nan")
    return float(roc_auc_score(labels, scores))


def rates(labels: list[int], scores: list[float], threshold: float) -> tuple[float, float]:
    """(true positive rate, false positive rate) when keeping scores at or above ``threshold``."""
    y = np.array(labels)
    kept = np.array(scores) >= threshold
    tpr = float(kept[y == 1].mean()) if (y == 1).any() else 0.0
    fpr = float(kept[y == 0].mean()) if (y == 0).any() else 0.0
    return tpr, fpr


def best_threshold(labels: list[int], scores: list[float]) -> tuple[float, float]:
    """The threshold (midpoint between neighbouring scores) with the highest balanced accuracy."""
    values = sorted(set(scores))
    cuts = [(a + b) / 2 for a, b in zip(values, values[1:])] or values
    best = max(cuts, key=lambda t: (rates(labels, scores, t)[0] - rates(labels, scores, t)[1], -abs(t - 0.5)))
    tpr, fpr = rates(labels, scores, best)
    return round(best, 3), round((tpr + 1 - fpr) / 2, 3)


def score_pairs(llm: ChatModel, pairs: list[Pair]) -> tuple[list[float | None], list[str]]:
    """The thought call's confidence and thought for every pair; None and "" where the reply held no usable
    thought."""
    scores: list[float | None] = []
    thoughts: list[str] = []
    for pair in pairs:
        distilled = distill(llm, pair.question, pair.answer)
        scores.append(None if distilled is None else distilled.confidence)
        thoughts.append("" if distilled is None else distilled.thought)
    return scores, thoughts


def signal_report(labels: list[int], values: list[float], threshold: float) -> SignalReport:
    best, best_bacc = best_threshold(labels, values)
    tpr, fpr = rates(labels, values, threshold)
    pos = [v for v, y in zip(values, labels, strict=True) if y == 1]
    neg = [v for v, y in zip(values, labels, strict=True) if y == 0]
    return SignalReport(auc=round(roc_auc(labels, values), 3), best_threshold=best, best_balanced_accuracy=best_bacc,
                        recall_at_threshold=round(tpr, 3), false_positive_rate_at_threshold=round(fpr, 3),
                        median_positive=round(float(np.median(pos)), 3),
                        median_negative=round(float(np.median(neg)), 3))


def fit_relevance(cosines: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(slope, bias) of the logistic curve P(label 1 | cosine)."""
    model = LogisticRegression(C=1e4).fit(np.asarray(cosines)[:, None], np.asarray(labels))
    return round(float(model.coef_[0][0]), 2), round(float(model.intercept_[0]), 2)


def cross_validated_relevance(cosines: np.ndarray, labels: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each pair's relevance from a curve fitted on the other half of the questions (2 folds).

    The matched and mismatched pair of one question stay in the same fold, so no question is seen in fitting.
    """
    n = len(labels) // 2
    order = np.random.default_rng(seed).permutation(n)
    folds = [order[: n // 2], order[n // 2:]]
    out = np.zeros(len(labels))
    for k in range(2):
        train = np.concatenate([folds[1 - k], folds[1 - k] + n])
        test = np.concatenate([folds[k], folds[k] + n])
        slope, bias = fit_relevance(cosines[train], labels[train])
        out[test] = relevance_probability(cosines[test], slope, bias)
    return out


def question_answer_cosines(embedder: Embedder, pairs: list[Pair]) -> np.ndarray:
    """The cosine ``ThoughtMemory.write`` computes: question and answer, both embedded as documents."""
    q = embedder.encode_documents([p.question for p in pairs])
    a = embedder.encode_documents([p.answer for p in pairs])
    return np.sum(q * a, axis=1)


def report(pairs: list[Pair], scores: list[float | None], cosines: np.ndarray, threshold: float,
           relevance_weight: float) -> CalibrationReport:
    """Unusable replies count as model confidence 0: the product would store nothing for them either."""
    labels = np.array([p.label for p in pairs])
    model = np.array([0.0 if s is None else float(s) for s in scores])
    relevance = cross_validated_relevance(np.asarray(cosines), labels)
    combined = np.array([combined_confidence(m, r, relevance_weight) for m, r in zip(model, relevance, strict=True)])
    slope, bias = fit_relevance(np.asarray(cosines), labels)
    y = labels.tolist()
    return CalibrationReport(
        n=len(pairs), threshold=threshold, relevance_weight=relevance_weight,
        model=signal_report(y, model.tolist(), threshold), relevance=signal_report(y, relevance.tolist(), threshold),
        combined=signal_report(y, combined.tolist(), threshold), slope=slope, bias=bias,
        unusable=sum(s is None for s in scores))


# ----- the grounding check --------------------------------------------------------------------------------


@dataclass
class GroundingPair:
    """An expert answer's sentences (citation markers stripped) and a set of snippets: its own (label 1) or
    another question's (label 0)."""

    item: str
    sentences: list[str]
    sources: list[str]
    label: int


@dataclass
class ThresholdReport:
    """What one threshold keeps: shares of positive and negative sentences, and of answers under the rule "every
    sentence reaches it" and under "at least half do"."""

    threshold: float
    sentences_kept_positive: float
    sentences_kept_negative: float
    answers_kept_positive: float
    answers_kept_negative: float
    half_kept_positive: float
    half_kept_negative: float


@dataclass
class GroundingReport:
    n_questions: int
    answer_words: int  # the opening of each expert answer that counts as a copilot-sized answer
    sentences_positive: int  # in those openings
    sentences_negative: int
    sentences_per_answer: float
    auc_sentence_cosine: float  # the best source sentence's cosine alone
    auc_sentence_coverage: float  # the rare-term coverage alone
    auc_sentence: float  # the support score (cross-validated)
    auc_answer: float  # an answer scored by its least supported sentence
    auc_answer_mean: float  # an answer scored by its mean support
    auc_full_answer: float  # the least supported sentence of the whole expert answer
    chosen: ThresholdReport  # best balanced accuracy of the answer rule: GROUNDING_THRESHOLD
    sentence_best: ThresholdReport  # best balanced accuracy of single sentences, for comparison
    full_answers: ThresholdReport  # the chosen threshold on the whole expert answers (about 10 sentences)
    cosine_weight: float  # the support curve fitted on every sentence (SUPPORT_* in copilot.grounding)
    coverage_weight: float
    bias: float
    grounding_ms_median: float  # one answer's check (its snippets embedded once) on this machine

    def as_dict(self) -> dict:
        return asdict(self)


def make_grounding_pairs(path: Path = DEFAULT_DATA, n: int | None = None, seed: int = 0) -> list[GroundingPair]:
    """For each of ``n`` questions (all by default) its expert answer against its own snippets, then against the
    snippets of another question on the same subject (a derangement within each subject: never its own)."""
    items = json.loads(Path(path).read_text())
    rng = random.Random(seed)
    chosen = rng.sample(items, min(n, len(items))) if n else items
    by_subject: dict[str, list[int]] = {}
    for k, item in enumerate(chosen):
        by_subject.setdefault(item.get("subject") or "", []).append(k)
    other: dict[int, int] = {}
    for ids in by_subject.values():
        if len(ids) < 2:  # a subject alone: the next question of the sample, whatever its subject
            other[ids[0]] = (ids[0] + 1) % len(chosen)
            continue
        shuffled = rng.sample(ids, len(ids))
        other.update(zip(shuffled, shuffled[1:] + shuffled[:1], strict=True))

    def snippets(item: dict) -> list[str]:
        return [c["text"] for c in item["ctxs"] if isinstance(c.get("text"), str) and c["text"].strip()]

    pairs = []
    for k, item in enumerate(chosen):
        sentences = [s for s in (strip_citations(x) for x in split_sentences(item["output"])) if s]
        pairs.append(GroundingPair(item["id"], sentences, snippets(item), 1))
    for k, item in enumerate(chosen):
        pairs.append(GroundingPair(item["id"], pairs[k].sentences, snippets(chosen[other[k]]), 0))
    return pairs


def opening_length(sentences: list[str], words: int = ANSWER_WORDS) -> int:
    """How many first sentences make an answer about ``words`` long (the length of a copilot answer)."""
    total = 0
    for k, sentence in enumerate(sentences, start=1):
        total += len(sentence.split())
        if total >= words:
            return k
    return len(sentences)


def sentence_features(found: list[GroundingEvidence]) -> np.ndarray:
    """(cosine, coverage) of each sentence against its best source by each, stacked over the pairs."""
    rows = [np.stack([e.cosine.max(axis=1), e.coverage.max(axis=1)], axis=1) for e in found if e.cosine.size]
    return np.concatenate(rows) if rows else np.zeros((0, 2))


def fit_support(found: list[GroundingEvidence], labels: list[int]) -> tuple[float, float, float]:
    """(cosine weight, coverage weight, bias) of the logistic curve P(label 1 | cosine, coverage) over sentences."""
    x = sentence_features(found)
    y = np.concatenate([[label] * e.cosine.shape[0] for e, label in zip(found, labels, strict=True)])
    model = LogisticRegression(C=1e4).fit(x, y)
    cosine, coverage = model.coef_[0]
    return round(float(cosine), 2), round(float(coverage), 2), round(float(model.intercept_[0]), 2)


def cross_validated_support(pairs: list[GroundingPair], found: list[GroundingEvidence], seed: int = 0
                            ) -> list[np.ndarray]:
    """Each sentence's support (its best source, as the product scores it) from a curve fitted on the other half
    of the questions (2 folds; a question's two pairs stay in one fold)."""
    questions = sorted({p.item for p in pairs})
    order = np.random.default_rng(seed).permutation(len(questions))
    fold = {questions[i]: k % 2 for k, i in enumerate(order)}
    out: list[np.ndarray] = [np.zeros(0)] * len(pairs)
    for k in range(2):
        train = [i for i, p in enumerate(pairs) if fold[p.item] != k]
        weights = fit_support([found[i] for i in train], [pairs[i].label for i in train])
        for i, p in enumerate(pairs):
            if fold[p.item] == k:
                out[i] = (support_score(found[i].cosine, found[i].coverage, weights=weights).max(axis=1)
                          if found[i].cosine.size else np.zeros(len(p.sentences)))
    return out


def threshold_report(labels: list[int], supports: list[np.ndarray], threshold: float) -> ThresholdReport:
    """What ``threshold`` keeps of the sentences and of the answers (each answer: the given supports)."""
    y = np.array(labels)
    sentence_y = np.concatenate([[label] * len(s) for label, s in zip(labels, supports, strict=True)])
    sentence_s = np.concatenate(supports)
    every = np.array([bool(len(s)) and bool((s >= threshold).all()) for s in supports])
    half = np.array([bool(len(s)) and (s >= threshold).mean() >= 0.5 for s in supports])

    def share(kept: np.ndarray, mask: np.ndarray) -> float:
        return round(float(kept[mask].mean()), 3) if mask.any() else 0.0

    return ThresholdReport(round(threshold, 3), share(sentence_s >= threshold, sentence_y == 1),
                           share(sentence_s >= threshold, sentence_y == 0), share(every, y == 1), share(every, y == 0),
                           share(half, y == 1), share(half, y == 0))


def grounding_report(pairs: list[GroundingPair], found: list[GroundingEvidence], words: int = ANSWER_WORDS,
                     timings_ms: list[float] | None = None) -> GroundingReport:
    """The calibration of the grounding check from every pair's evidence (see the module's docstring)."""
    labels = [p.label for p in pairs]
    supports = cross_validated_support(pairs, found)
    openings = [s[:opening_length(p.sentences, words)] for p, s in zip(pairs, supports, strict=True)]
    sentence_y = [label for label, s in zip(labels, openings, strict=True) for _ in s]
    sentence_s = np.concatenate(openings).tolist()
    cut = [opening_length(p.sentences, words) for p in pairs]
    features = [sentence_features([GroundingEvidence(e.cosine[:c], e.coverage[:c], e.quotes[:c])]) for e, c in
                zip(found, cut, strict=True)]
    cosines = np.concatenate([f[:, 0] for f in features]).tolist()
    coverages = np.concatenate([f[:, 1] for f in features]).tolist()
    least = [float(s.min()) if len(s) else 0.0 for s in openings]
    chosen, _ = best_threshold(labels, least)
    sentence_threshold, _ = best_threshold(sentence_y, sentence_s)
    weights = fit_support(found, labels)
    return GroundingReport(
        n_questions=len(pairs) // 2, answer_words=words,
        sentences_positive=sum(y == 1 for y in sentence_y), sentences_negative=sum(y == 0 for y in sentence_y),
        sentences_per_answer=round(len(sentence_y) / len(pairs), 2),
        auc_sentence_cosine=round(roc_auc(sentence_y, cosines), 3),
        auc_sentence_coverage=round(roc_auc(sentence_y, coverages), 3),
        auc_sentence=round(roc_auc(sentence_y, sentence_s), 3), auc_answer=round(roc_auc(labels, least), 3),
        auc_answer_mean=round(roc_auc(labels, [float(s.mean()) if len(s) else 0.0 for s in openings]), 3),
        auc_full_answer=round(roc_auc(labels, [float(s.min()) if len(s) else 0.0 for s in supports]), 3),
        chosen=threshold_report(labels, openings, chosen),
        sentence_best=threshold_report(labels, openings, sentence_threshold),
        full_answers=threshold_report(labels, supports, chosen),
        cosine_weight=weights[0], coverage_weight=weights[1], bias=weights[2],
        grounding_ms_median=round(float(np.median(timings_ms)), 1) if timings_ms else 0.0)


def grounding_evidence(embedder: Embedder, pairs: list[GroundingPair]
                       ) -> tuple[list[GroundingEvidence], list[float]]:
    """Every pair's evidence, and the time each took (milliseconds): the sentences and snippets embedded once."""
    found, timings = [], []
    for pair in pairs:
        start = time.perf_counter()
        found.append(evidence(pair.sentences, pair.sources, embedder))
        timings.append(1000 * (time.perf_counter() - start))
    return found, timings


# ----- the command line -------------------------------------------------------------------------------------


class _ConfidenceByDefault(click.Group):
    """``python -m copilot.tools.calibration [options]`` stays the thought-confidence calibration; ``grounding``
    names the other one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["confidence", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ConfidenceByDefault, help="Calibrations: the thought confidence (the default command) and the "
                                            "grounding check.")
def main() -> None:
    pass


@main.command("grounding", help="Measure how the grounding check separates expert answers' own snippets from "
                                "another question's; fit the support curve and pick the threshold.")
@click.option("--data", "path", type=click.Path(path_type=Path), default=DEFAULT_DATA, show_default=True,
              help="ScholarQA-Multi style JSON (output, ctxs, subject).")
@click.option("--n", default=0, show_default=True, help="Questions used (0 = all).")
@click.option("--words", default=ANSWER_WORDS, show_default=True,
              help="Opening of each expert answer scored as one copilot answer.")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write each sentence's evidence "
              "as JSON.")
def grounding(path: Path, n: int, words: int, seed: int, out: Path | None) -> None:
    """``python -m copilot.tools.calibration grounding``: calibrate the grounding check on real expert answers."""
    settings = Settings()
    apply_offline_defaults(settings)
    pairs = make_grounding_pairs(path, n or None, seed)
    embedder = get_embedder(settings)
    embedder.encode_documents(["warm up"])  # the first call pays for loading, not the check
    found, timings = grounding_evidence(embedder, pairs)
    result = grounding_report(pairs, found, words, timings)
    if out:
        out.write_text(json.dumps({"report": result.as_dict(), "pairs": [
            {"item": p.item, "label": p.label, "sentences": [
                {"sentence": s, "cosine": round(float(e.cosine[i].max()), 4),
                 "coverage": round(float(e.coverage[i].max()), 4)} for i, s in enumerate(p.sentences)]}
            for p, e in zip(pairs, found, strict=True)]}, indent=2))
    click.echo(json.dumps(result.as_dict(), indent=2))


@main.command("confidence", help="Measure how the thought confidence separates real answers from mismatched ones, "
                                 "and fit the relevance curve (slope, bias).")
@click.option("--data", "path", type=click.Path(path_type=Path), default=DEFAULT_DATA, show_default=True,
              help="ScholarQA-Multi style JSON (input, output).")
@click.option("--n", default=40, show_default=True, help="Matched pairs (as many mismatched ones are added).")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write the scores as JSON.")
def confidence(path: Path, n: int, seed: int, out: Path | None) -> None:
    """``python -m copilot.tools.calibration``: measure the thought confidence of the configured LLM."""
    settings = Settings()
    apply_offline_defaults(settings)
    pairs = make_pairs(path, n, seed)
    scores, thoughts = score_pairs(get_llm(settings), pairs)
    cosines = question_answer_cosines(get_embedder(settings), pairs)
    result = report(pairs, scores, cosines, settings.min_confidence, settings.relevance_weight)
    if out:
        out.write_text(json.dumps({"report": result.as_dict(), "pairs": [
            asdict(p) | {"confidence": s, "thought": t, "cosine": float(c)}
            for p, s, t, c in zip(pairs, scores, thoughts, cosines, strict=True)]}, indent=2))
    click.echo(json.dumps(result.as_dict(), indent=2))


if __name__ == "__main__":
    main(prog_name="python -m copilot.tools.calibration")
