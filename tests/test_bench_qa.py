"""``python -m copilot.bench qa``: its question set, its grading, and the command end to end on a real paper with a
scripted model (the real models' figures are the benchmark's, in docs/trust.md)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from copilot.bench import qa
from copilot.bench.cli import bench
from copilot.llm.base import Message
from tests.scripted_llm import ScriptedLLM


def test_the_question_set_has_every_kind_with_what_grading_needs() -> None:
    questions = qa.load_questions()
    kinds = [q.kind for q in questions]
    assert len(questions) >= 80 and len({q.id for q in questions}) == len(questions)
    assert kinds.count("lookup") >= 40 and kinds.count("broad") >= 10 and kinds.count("unanswerable") >= 10
    assert len({q.paper for q in questions}) >= 5
    for q in questions:
        assert qa.find_paper(q.paper).is_file()
        if q.kind == "lookup":
            assert q.answers and q.page
        if q.kind == "broad":
            assert q.key_points and all(q.key_points)
        if q.kind == "unanswerable":
            assert not q.answers and q.page is None


def test_holds_matches_whole_numbers_and_normalised_text() -> None:
    assert qa.holds("The corpus has 81.1M papers.", ["81.1M"])
    assert not qa.holds("It scores 85.50 F1.", ["85.5"]), "a number must stand alone"
    assert not qa.holds("It scores 185.5 F1.", ["85.5"])
    assert qa.holds("It uses  the  Resource\nDescription Framework.", ["resource description framework"])


def _result(answer: str, *, declined: bool = False, grounded: bool = True, sources: tuple[str, ...] = (),
            draft: str = "") -> object:
    return SimpleNamespace(answer=answer, declined=declined, decline_reason="", evidence=[], draft=draft, rechecks=0,
                           grounding=None if declined else SimpleNamespace(grounded=grounded, sentences=[]),
                           sources=[SimpleNamespace(text=t, kind="chunk", paper_id="p", paper_title="P",
                                                    section="Body") for t in sources])


def test_grading_and_the_figures_of_a_pass() -> None:
    lookup = qa.Question("l1", "p", "lookup", "How many?", ("37M",), 1)
    lookup2 = qa.Question("l2", "p", "lookup", "Which?", ("SciBERT",), 1)
    lookup3 = qa.Question("l3", "p", "lookup", "Which one?", ("BERT",), 1)
    broad = qa.Question("b1", "p", "broad", "Why?", (), 1, (("graph",), ("citations", "citation")))
    never = qa.Question("u1", "p", "unanswerable", "Which GPU?")
    outcomes = [
        qa.grade(lookup, _result("It has 37M nodes [1].", sources=("37M nodes",)), 2.0, 3.0),  # right
        qa.grade(lookup2, _result("It uses BERT [1].", grounded=True, sources=("SciBERT",)), 1.0, 2.0),  # wrong
        qa.grade(lookup3, _result("The papers in scope do not say.", declined=True, draft="It is GPT [1]."), 2.0,
                 0.5),  # a wrong draft, declined by the check
        qa.grade(broad, _result("A citation graph [1]."), 3.0, 4.0),
        qa.grade(never, _result("The papers in scope do not say.", declined=True, draft="The sources do not say."),
                 None, 0.4),  # the model's own refusal: no wrong answer
    ]
    outcomes[0].thought, outcomes[1].thought = "added", "added"
    outcomes[0].thought_grounded = outcomes[1].thought_grounded = True
    row = qa.summary(outcomes, "m")
    assert set(qa.JSON_KEYS) <= set(row)
    assert row["lookup_answer"] == pytest.approx(1 / 3) or row["lookup_answer"] == 0.333
    assert row["lookup_evidence"] == 0.667 and row["precision"] == 0.5 and row["false_declines"] == 0.333
    # Two wrong drafts: one shown without a warning, one declined by the check.
    assert row["wrong_marked_supported"] == 0.5 and row["wrong_drafts"] == 2
    assert row["unanswerable_declined"] == 1.0 and row["summary_coverage"] == 1.0
    assert row["first_word_p50_s"] == 2.0 and row["total_p50_s"] == 2.0
    assert row["thoughts_kept"] == 2 and row["thoughts_kept_unsupported"] == 0 and row["thoughts_kept_wrong"] == 1


def _echo(messages: list[Message]) -> str:
    """A stand-in model that answers with the first sentence of source [1], cited."""
    found = re.search(r"\[1\] \([^)]*\) (?:… )?(.+?[.!?])(?:\s|$)", messages[-1]["content"], re.S)
    return f"{' '.join(found.group(1).split())} [1]" if found else "The sources do not say."


def test_the_command_prints_the_figures_as_json(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    import copilot.engine

    thought = ("thought: the literature graph holds papers, authors and entities as its nodes.\nanswered: yes\n", 0.9)
    llm = ScriptedLLM(answers=[_echo] * 20, thoughts=[thought] * 20)
    monkeypatch.setattr(copilot.engine, "get_llm", lambda settings: llm)
    details = tmp_path / "details.jsonl"
    result = CliRunner().invoke(bench, ["qa", "--json", "--paper", "N18-3011", "--limit", "3", "--passes", "2",
                                        "--details", str(details)])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(qa.JSON_KEYS) <= set(row) and row["questions"] == 3 and len(row["passes"]) == 2
    assert row["thoughts_kept_unsupported"] == 0
    lines = [json.loads(line) for line in details.read_text().splitlines()]
    assert len(lines) == 6 and {line["pass"] for line in lines} == {1, 2}
    assert all(line["declined"] or line["answer"] for line in lines)
    # Each line carries what its answer can be read against: the sources sent (the scoped paper's passages) and,
    # for an answer shown, each sentence's check.
    shown = [line for line in lines if not line["declined"]]
    assert shown and all(any(s.startswith("(Construction of the Literature Graph") for s in line["sources"])
                         for line in shown)
    assert all(line["checked"] and {"sentence", "support", "quote"} <= set(line["checked"][0]) for line in shown)
    assert all(line["checked"] is None and line["rechecks"] == 0 for line in lines if line["declined"])


def test_without_thoughts_no_thought_is_recalled_or_written(monkeypatch: pytest.MonkeyPatch) -> None:
    import copilot.engine

    llm = ScriptedLLM(answers=[_echo] * 10)
    monkeypatch.setattr(copilot.engine, "get_llm", lambda settings: llm)
    asked = []
    chat_stream = copilot.engine.Copilot.chat_stream

    def recording(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - passes everything on
        asked.append((kwargs.get("use_thoughts", True), kwargs.get("write_thought", True)))
        return chat_stream(self, *args, **kwargs)

    monkeypatch.setattr(copilot.engine.Copilot, "chat_stream", recording)
    result = CliRunner().invoke(bench, ["qa", "--json", "--paper", "N18-3011", "--limit", "2", "--passes", "2",
                                        "--no-thoughts"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert row["questions"] == 2 and [p["thoughts_kept"] for p in row["passes"]] == [0, 0]
    assert asked == [(False, False)] * 4, "every question asked without recalling or writing a thought"
    assert len(llm.calls) == 4, "the answers only: no thought call"
