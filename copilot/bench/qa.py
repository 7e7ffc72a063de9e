"""``python -m copilot.bench qa`` (``make bench-qa``): are the chat's answers right, shown with their evidence, or
honestly declined?

The question set (``tests/data/qa/*.jsonl``, one file per paper) holds three kinds of question a researcher asks
about one paper, written in their words rather than the sentence's:

- ``lookup``: one fact (a number, a name, an acronym's expansion) with accepted answer strings and its page;
- ``broad``: a wider question with key points, each a few alternative strings;
- ``unanswerable``: a plausible question the paper does not answer.

The papers are added through the product's library (as uploads) into a fresh temporary data directory, and every
question goes through the chat's own call (:meth:`copilot.engine.Copilot.chat_stream`) scoped to its paper, with the
model ``--model`` names (default: the embedded default). After each answer the thought worker is waited for (a
researcher reads the answer meanwhile), so the next first word is measured on an idle model. With ``--passes 2``
the same questions are asked again with the thoughts the first pass kept.

Text is compared NFKC-normalised, lower-cased, with whitespace collapsed. The figures (each a share, 0 to 1):

- ``lookup_answer``: look-ups answered (not declined) with an accepted string in the answer;
- ``lookup_evidence``: look-ups where an accepted string is in a source sent to the model;
- ``precision``: right answers among the look-ups answered rather than declined;
- ``wrong_marked_supported``: among the wrong answers the model wrote (a look-up's draft without an accepted
  string, or any draft to an unanswerable question; a refusal is no answer), those shown as answers without a
  warning: neither declined nor with a sentence marked unsupported. It measures how many wrong drafts the check
  lets through;
- ``unanswerable_declined``: unanswerable questions declined; ``unanswerable_flagged`` adds those answered with a
  warning;
- ``false_declines``: look-ups declined;
- ``summary_coverage``: the mean share of a broad question's key points its answer covers (a decline covers none);
- ``first_word_p50_s``: median seconds from sending a question to the first word of the model's answer, over the
  questions the model answered (a decline before the model is asked has no first word); ``total_p50_s``: median
  seconds to the checked answer, over every question;
- ``thoughts_kept``: thoughts added or merged; ``thoughts_kept_unsupported``: of those, kept from an answer that
  did not pass the check; ``thoughts_kept_wrong``: kept from a look-up answered wrong or an unanswerable question
  answered.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.config import DATA_ROOT, Settings

QA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "qa"
PAPER_DIRS = (DATA_ROOT / "papers", DATA_ROOT / "papers" / "more")
USER = "qa-bench"
KINDS = ("lookup", "broad", "unanswerable")
JSON_KEYS = ("model", "questions", "lookup_answer", "lookup_evidence", "precision", "wrong_marked_supported",
             "unanswerable_declined", "unanswerable_flagged", "false_declines", "summary_coverage",
             "first_word_p50_s", "total_p50_s", "thoughts_kept", "thoughts_kept_unsupported", "thoughts_kept_wrong")

Log = Callable[[str], None]


@dataclass(frozen=True)
class Question:
    id: str
    paper: str  # the PDF's file stem
    kind: str
    question: str
    answers: tuple[str, ...] = ()
    page: int | None = None
    key_points: tuple[tuple[str, ...], ...] = ()


def load_questions(directory: Path = QA_DIR) -> list[Question]:
    """Every question of the set, file by file (sorted), in file order."""
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row["kind"] not in KINDS:
                    raise ValueError(f"{path.name}: {row['id']} has an unknown kind {row['kind']!r}")
                out.append(Question(row["id"], row["paper"], row["kind"], row["question"],
                                    tuple(row.get("answers") or ()), row.get("page"),
                                    tuple(tuple(p) for p in row.get("key_points") or ())))
    return out


def normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def holds(text: str, strings: Sequence[str]) -> bool:
    """Does ``text`` contain one of ``strings`` (normalised; a string that is a number must stand alone)?"""
    plain = normalise(text)
    for s in strings:
        wanted = normalise(s)
        if wanted and re.search(rf"(?<![\w.]){re.escape(wanted)}(?![\w]|\.\d)", plain):
            return True
    return False


@dataclass
class Outcome:
    """One question's run: what was shown and how it was graded."""

    question: Question
    declined: bool = False
    warned: bool = False  # answered, with at least one sentence marked unsupported
    wrong_draft: bool = False  # the model answered (no refusal) and its answer is wrong
    right: bool = False
    evidence: bool = False
    coverage: float = 0.0
    first_word_s: float | None = None
    total_s: float = 0.0
    thought: str = ""  # added, merged or dropped
    thought_grounded: bool = False  # its answer passed the check
    answer: str = ""
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def grade(question: Question, result: Any, first_word_s: float | None, total_s: float) -> Outcome:  # noqa: ANN401
    """The outcome of one answered question (``result``: the chat's :class:`copilot.answering.AskResult`)."""
    from copilot.answering import source_texts
    from copilot.thoughts import REFUSAL

    out = Outcome(question, declined=bool(result.declined), first_word_s=first_word_s, total_s=total_s,
                  answer=result.answer)
    out.warned = not result.declined and (result.grounding is None or not result.grounding.grounded)
    texts = source_texts(result.sources)
    sent = " \n ".join(texts)
    draft = result.draft if result.declined else result.answer
    answered = bool(draft.strip()) and not REFUSAL.search(draft)
    out.wrong_draft = answered and (question.kind == "unanswerable" or
                                    (question.kind == "lookup" and not holds(draft, question.answers)))
    if question.kind == "lookup":
        out.right = not result.declined and holds(result.answer, question.answers)
        out.evidence = holds(sent, question.answers)
    elif question.kind == "broad" and question.key_points and not result.declined:
        out.coverage = sum(holds(result.answer, p) for p in question.key_points) / len(question.key_points)
    out.thought_grounded = bool(result.grounding is not None and result.grounding.grounded and not result.declined)
    # What a wrong answer is read against afterwards: the sources retrieved (as the model is sent them, when it is
    # asked), each shown answer's sentence checks (support, closest source sentence, missing or unrepeated facts; a
    # declined answer keeps none) and how many rechecks were written.
    out.extra = {"decline_reason": result.decline_reason, "quotes": [e.as_dict() for e in result.evidence],
                 "draft": result.draft, "sources": texts,
                 "checked": None if result.grounding is None else [s.as_dict() for s in result.grounding.sentences],
                 "rechecks": result.rechecks}
    return out


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 3) if total else None


def _p50(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summary(outcomes: Sequence[Outcome], model: str) -> dict[str, Any]:
    """The figures of one pass (see the module's docstring)."""
    lookups = [o for o in outcomes if o.question.kind == "lookup" and not o.error]
    answered = [o for o in lookups if not o.declined]
    wrong = [o for o in outcomes if o.wrong_draft and not o.error]
    unanswerable = [o for o in outcomes if o.question.kind == "unanswerable" and not o.error]
    broad = [o for o in outcomes if o.question.kind == "broad" and not o.error]
    kept = [o for o in outcomes if o.thought in ("added", "merged")]
    kept_wrong = [o for o in kept if (o.question.kind == "lookup" and not o.right) or o.question.kind == "unanswerable"]
    return {
        "model": model,
        "questions": len(outcomes),
        "lookup_answer": _share(sum(o.right for o in lookups), len(lookups)),
        "lookup_evidence": _share(sum(o.evidence for o in lookups), len(lookups)),
        "precision": _share(sum(o.right for o in answered), len(answered)),
        "wrong_marked_supported": _share(sum(not o.declined and not o.warned for o in wrong), len(wrong)),
        "unanswerable_declined": _share(sum(o.declined for o in unanswerable), len(unanswerable)),
        "unanswerable_flagged": _share(sum(o.declined or o.warned for o in unanswerable), len(unanswerable)),
        "false_declines": _share(sum(o.declined for o in lookups), len(lookups)),
        "summary_coverage": round(statistics.mean(o.coverage for o in broad), 3) if broad else None,
        "first_word_p50_s": _p50([o.first_word_s for o in outcomes if o.first_word_s is not None]),
        "total_p50_s": _p50([o.total_s for o in outcomes if not o.error]),
        "thoughts_kept": len(kept),
        "thoughts_kept_unsupported": sum(not o.thought_grounded for o in kept),
        "thoughts_kept_wrong": len(kept_wrong),
        "errors": sum(bool(o.error) for o in outcomes),
        "lookups": len(lookups), "lookups_answered": len(answered), "wrong_drafts": len(wrong),
    }


def find_paper(stem: str, directories: Sequence[Path] = PAPER_DIRS) -> Path:
    for directory in directories:
        path = directory / f"{stem}.pdf"
        if path.is_file():
            return path
    raise FileNotFoundError(f"paper {stem}.pdf is in none of {', '.join(str(d) for d in directories)}")


def build_library(copilot: Any, stems: Sequence[str], log: Log,  # noqa: ANN401 - a Copilot
                  directories: Sequence[Path] = PAPER_DIRS) -> dict[str, str]:
    """The papers added as the bench user's uploads; file stem -> paper id."""
    ids = {}
    for stem in stems:
        added = copilot.library.add_pdf(find_paper(stem, directories), user_id=USER)
        ids[stem] = added.paper_id
        log(f"added {stem}: {added.n_chunks} chunks")
    copilot.flush(timeout=600)  # the papers' sentences are read ahead, as while a researcher picks a question
    return ids


def ask_one(copilot: Any, question: Question, paper_id: str, *, thoughts: bool = True  # noqa: ANN401 - a Copilot
            ) -> Outcome:
    """One question through the chat's own call, scoped to its paper; the thought is waited for, untimed.
    ``thoughts``: False answers from the papers alone, recalling and writing no thought."""
    from copilot.answering import AskResult

    sent = time.perf_counter()
    first_word = None
    result = None
    try:
        for update in copilot.chat_stream(USER, question.question, paper_ids=[paper_id], use_thoughts=thoughts,
                                          write_thought=thoughts):
            if isinstance(update, AskResult):
                result = update
            elif isinstance(update, str) and update.strip() and first_word is None:
                first_word = time.perf_counter() - sent
        total = time.perf_counter() - sent
    except Exception as exc:  # noqa: BLE001 - an error is a measured outcome
        return Outcome(question, error=f"{type(exc).__name__}: {exc}")
    assert result is not None
    copilot.flush()
    outcome = grade(question, result, first_word, total)
    outcome.thought = result.thought.outcome if result.thought else "pending"
    return outcome


def run(settings: Settings, questions: Sequence[Question], log: Log, *, passes: int = 2,
        directories: Sequence[Path] = PAPER_DIRS, thoughts: bool = True) -> list[list[Outcome]]:
    """Every question once per pass on a fresh library in ``settings.data_dir``; one list of outcomes a pass."""
    from copilot.engine import Copilot

    copilot = Copilot.open(settings, read_ahead=True)  # as the web app does
    try:
        stems = list(dict.fromkeys(q.paper for q in questions))
        ids = build_library(copilot, stems, log, directories)
        rows = []
        for n in range(passes):
            outcomes = []
            for i, question in enumerate(questions, start=1):
                outcome = ask_one(copilot, question, ids[question.paper], thoughts=thoughts)
                outcomes.append(outcome)
                mark = ("error" if outcome.error else "declined" if outcome.declined else
                        "right" if outcome.right else "wrong" if question.kind == "lookup" else
                        f"covers {outcome.coverage:.2f}" if question.kind == "broad" else "answered")
                log(f"pass {n + 1} [{i}/{len(questions)}] {question.id} {mark}"
                    f" ({outcome.total_s:.1f} s; thought {outcome.thought}): {outcome.error or outcome.answer[:100]!r}")
            rows.append(outcomes)
        return rows
    finally:
        copilot.store.close()


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """One table row per (model, pass)."""
    header = ("| model | pass | look-ups right | evidence sent | precision | wrong shown unwarned | unanswerable declined "
              "| false declines | key points | first word p50 | total p50 | thoughts kept (unsupported, wrong) |")
    lines = [header, "|" + "---|" * 12]

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.0f}%"

    for row in rows:
        lines.append(
            f"| {row['model']} | {row.get('pass', 1)} | {pct(row['lookup_answer'])} | {pct(row['lookup_evidence'])} "
            f"| {pct(row['precision'])} | {pct(row['wrong_marked_supported'])} | {pct(row['unanswerable_declined'])} "
            f"| {pct(row['false_declines'])} | {pct(row['summary_coverage'])} | {row['first_word_p50_s']} s "
            f"| {row['total_p50_s']} s | {row['thoughts_kept']} ({row['thoughts_kept_unsupported']}, "
            f"{row['thoughts_kept_wrong']}) |")
    return "\n".join(lines)


def bench(model: str, log: Log, *, passes: int = 2, limit: int | None = None, kinds: Sequence[str] = KINDS,
          papers: Sequence[str] = (), details: Path | None = None, settings: Settings | None = None,
          thoughts: bool = True) -> list[dict[str, Any]]:
    """The figures of each pass for ``model`` (an embedded model's name or a GGUF path; "" the default);
    ``thoughts``: False answers from the papers alone (see :func:`ask_one`)."""
    questions = [q for q in load_questions() if q.kind in kinds and (not papers or q.paper in papers)]
    if limit:
        questions = questions[:limit]
    with tempfile.TemporaryDirectory(prefix="copilot-qa-") as tmp:
        if settings is None:  # built anew, so that the model's own defaults (its source budget) apply
            chosen = Settings(data_dir=Path(tmp), llm_backend="local", llm_model=model or Settings().llm_model)
        else:
            chosen = settings.model_copy(update={"data_dir": Path(tmp), "llm_backend": "local",
                                                 "llm_model": model or settings.llm_model})
        passes_out = run(chosen, questions, log, passes=passes, thoughts=thoughts)
    name = model or "default"
    rows = []
    for n, outcomes in enumerate(passes_out, start=1):
        rows.append(summary(outcomes, name) | {"pass": n})
    if details is not None:
        details.parent.mkdir(parents=True, exist_ok=True)
        with details.open("w", encoding="utf-8") as out:
            for n, outcomes in enumerate(passes_out, start=1):
                for o in outcomes:
                    out.write(json.dumps({"pass": n, "id": o.question.id, "kind": o.question.kind,
                                          "question": o.question.question, "answer": o.answer,
                                          "declined": o.declined, "warned": o.warned, "right": o.right,
                                          "evidence": o.evidence, "coverage": o.coverage,
                                          "first_word_s": o.first_word_s, "total_s": round(o.total_s, 2),
                                          "thought": o.thought, "error": o.error, **o.extra}) + "\n")
    return rows
