"""``python -m copilot.bench tables``: are the papers' tables read cell by cell, and answered from?

On the shared papers (``tests/data/papers``, ``papers/more``), with the truth in ``tests/data/tables/truth.json``
(made by hand from the rendered pages):

- ``tables_true``: the numbered table captions of the papers; ``tables_detected``: the tables the parser read cell
  by cell (:mod:`ingest.pdf.tables`), ``tables_captioned`` those of them it joined to a caption;
- ``cell_accuracy``: of the truth tables' scored cells (a label spanning rows is not scored), the share the parse
  gives in the same column of the row that agrees with the truth's row most; a table not found scores none of its
  cells. ``header_accuracy``: the same for the header's column names;
- ``table_answer``: the questions on table facts of ``tests/data/tables/questions.jsonl`` answered right through
  the chat's own call (:mod:`copilot.bench.qa`, scoped to the question's paper), ``table_evidence`` those whose
  answer was in a source sent to the model, ``table_precision`` right among those answered rather than declined;
  ``first_word_p50_s`` as in ``bench qa``.

Cells are compared NFKC-normalised, lower-cased, with whitespace collapsed.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot.bench.qa import find_paper, load_questions, normalise, run
from copilot.config import Settings
from ingest.table_text import cells as row_cells
from ingest.table_text import TABLE_CAPTION, read_table

TABLES_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "tables"
JSON_KEYS = ("model", "tables_true", "tables_detected", "tables_captioned", "truth_tables", "truth_cells",
             "cell_accuracy", "header_accuracy", "table_questions", "table_answer", "table_evidence",
             "table_precision", "first_word_p50_s")

Log = Callable[[str], None]


def parsed_tables(path: Path) -> dict[tuple[int, int | None, tuple], dict[str, Any]]:
    """The tables of a PDF read cell by cell: (page, caption number, region) -> header and rows, in order."""
    from ingest.pdf import parse_pdf

    out: dict[tuple[int, int | None, tuple], dict[str, Any]] = {}
    for note in parse_pdf(path).notes:
        if note.kind != "table" or not note.whole:
            continue
        read = read_table(note.text)
        if read is None:
            continue
        caption = TABLE_CAPTION.match(read.above[0]) if read.above else None
        number = caption["number"] if caption else ""
        key = (note.page, int(number) if number.isdigit() else None, tuple(note.bbox or ()))
        table = out.setdefault(key, {"header": row_cells(read.header), "rows": []})
        table["rows"] += [row_cells(line) for line in read.rows]
    return out


def _same(a: str | None, b: str) -> bool:
    return a is not None and normalise(a) == normalise(b)


def score_table(truth: dict[str, Any], found: dict[str, Any] | None) -> tuple[int, int, int, int]:
    """(cells right, cells scored, header names right, header names) of one truth table against its parse."""
    scored = [[c for c in row] for row in truth["rows"]]
    cells = sum(1 for row in scored for c in row if c is not None)
    names = len(truth["header"])
    if found is None:
        return 0, cells, 0, names
    right = 0
    for row in scored:
        best = 0
        for candidate in found["rows"]:
            if len(candidate) != len(row):
                continue
            best = max(best, sum(1 for c, x in zip(row, candidate, strict=True) if c is not None and _same(x, c)))
        right += best
    header = found["header"]
    named = sum(1 for j, name in enumerate(truth["header"]) if j < len(header) and len(header) == names
                and _same(header[j], name))
    return right, cells, named, names


def structure(truth_file: Path = TABLES_DIR / "truth.json") -> dict[str, Any]:
    """Detection and cell accuracy on the shared papers (no model)."""
    truth = json.loads(truth_file.read_text(encoding="utf-8"))
    detected = captioned = 0
    parsed = {}
    for stem in truth["tables"]:
        parsed[stem] = parsed_tables(find_paper(stem))
        detected += len(parsed[stem])
        captioned += len({(page, number) for page, number, _ in parsed[stem] if number is not None})
    right = cells = named = names = 0
    per_table = []
    for table in truth["truth"]:
        found = next((t for (page, number, _), t in parsed[table["paper"]].items()
                      if page == table["page"] and number == table["table"]), None)
        r, c, n, h = score_table(table, found)
        right, cells, named, names = right + r, cells + c, named + n, names + h
        per_table.append({"paper": table["paper"], "table": table["table"], "found": found is not None,
                          "cells_right": r, "cells": c, "header_right": n, "header": h})
    return {"tables_true": sum(truth["tables"].values()), "tables_detected": detected, "tables_captioned": captioned,
            "truth_tables": len(truth["truth"]), "truth_cells": cells,
            "cell_accuracy": round(right / cells, 3) if cells else None,
            "header_accuracy": round(named / names, 3) if names else None, "per_table": per_table}


def answers(model: str, log: Log, settings: Settings | None = None, limit: int | None = None) -> dict[str, Any]:
    """The table questions through the chat (one pass, thoughts on as in the app)."""
    questions = load_questions(TABLES_DIR)[:limit] if limit else load_questions(TABLES_DIR)
    with tempfile.TemporaryDirectory(prefix="copilot-tables-") as tmp:
        base = settings or Settings()
        chosen = base.model_copy(update={"data_dir": Path(tmp), "llm_backend": "local",
                                         "llm_model": model or base.llm_model})
        outcomes = run(chosen, questions, log, passes=1)[0]
    answered = [o for o in outcomes if not o.declined and not o.error]
    first = [o.first_word_s for o in outcomes if o.first_word_s is not None]
    n = len(outcomes)
    return {"model": chosen.llm_model, "table_questions": n,
            "table_answer": round(sum(o.right for o in outcomes) / n, 3) if n else None,
            "table_evidence": round(sum(o.evidence for o in outcomes) / n, 3) if n else None,
            "table_precision": round(sum(o.right for o in answered) / len(answered), 3) if answered else None,
            "first_word_p50_s": round(statistics.median(first), 2) if first else None,
            "details": [{"id": o.question.id, "right": o.right, "declined": o.declined, "evidence": o.evidence,
                         "answer": o.answer} for o in outcomes]}
