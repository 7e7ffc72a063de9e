"""How well a thought's confidence separates real answers from answers to another question.

A thought's confidence blends two signals: the LLM's own probability of "yes" after ``answered:`` and the
answer's relevance to its question (a logistic curve on their embedding cosine). This measures both on
expert answers from ScholarQA-Multi paired with their own question (label 1) and with another item's question
(label 0), run through the very same thought call; it reports each signal's ROC AUC, its best threshold
(balanced accuracy) and how the configured threshold does, and fits the relevance curve that
``copilot.thoughts`` ships (``RELEVANCE_SLOPE``, ``RELEVANCE_BIAS``). Run it for another model before trusting
its verdicts: ``python -m copilot.tools.calibration --n 40``.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from copilot.config import SHARED_DATA_DIR, Settings, apply_offline_defaults
from copilot.embeddings import Embedder, get_embedder
from copilot.llm import get_llm
from copilot.llm.base import ChatModel
from copilot.thoughts import combined_confidence, distill, relevance_probability

DEFAULT_DATA = SHARED_DATA_DIR / "scholarqa" / "scholarqa_multi_human_answers.json"
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


@click.command(help="Measure how the thought confidence separates real answers from mismatched ones, and fit the "
                    "relevance curve (slope, bias).")
@click.option("--data", "path", type=click.Path(path_type=Path), default=DEFAULT_DATA, show_default=True,
              help="ScholarQA-Multi style JSON (input, output).")
@click.option("--n", default=40, show_default=True, help="Matched pairs (as many mismatched ones are added).")
@click.option("--seed", default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write the scores as JSON.")
def main(path: Path, n: int, seed: int, out: Path | None) -> None:
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
    main()
