"""``python -m copilot.bench compare``: are the cells of a comparison table right, and is "not stated" said where
the paper does not state it?

The four shared papers are added to a fresh library (as uploads) and compared by the aspects of
``tests/data/compare/truth.json`` (made by hand from the papers' text) through the engine's own call
(:meth:`copilot.engine.Copilot.compare`), with the model ``--model`` names (default: the embedded default):

- ``cell_accuracy``: of the cells the truth says the paper states, those the table fills (not "not stated") with
  one of the truth's strings (compared lower-cased);
- ``not_stated_correct``: of the cells the truth says the paper does not state, those the table leaves "not
  stated";
- ``supported_share``: filled cells that passed the check (the rest are shown marked ⚠️);
- ``llm_calls`` (at most one a cell), ``cell_p50_s`` (median seconds a cell) and ``total_s``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from copilot.bench.qa import USER, build_library
from copilot.config import Settings

TRUTH = Path(__file__).resolve().parents[2] / "tests" / "data" / "compare" / "truth.json"
JSON_KEYS = ("model", "papers", "aspects", "cells", "stated_cells", "not_stated_cells", "cell_accuracy",
             "not_stated_correct", "supported_share", "llm_calls", "cell_p50_s", "total_s")

Log = Callable[[str], None]


def grade(truth: dict[str, Any], table: Any) -> dict[str, Any]:  # noqa: ANN401 - a copilot.tasks.compare.Comparison
    """The figures of a filled ``table`` against ``truth`` (file stem -> aspect -> strings or None), with the
    table's paper ids in the truth's paper order."""
    right = stated = kept_blank = blank = supported = filled = 0
    rows = []
    for cells, paper in zip(truth["papers"].values(), table.papers, strict=True):
        for aspect in truth["aspects"]:
            wanted = cells[aspect]
            cell = table.cell(paper.paper_id, aspect)
            if cell.stated:
                filled += 1
                supported += cell.supported
            if wanted is None:
                blank += 1
                kept_blank += not cell.stated
                ok = not cell.stated
            else:
                stated += 1
                ok = cell.stated and any(w in cell.text.lower() for w in wanted)
                right += ok
            rows.append({"paper": paper.paper_id, "aspect": aspect, "cell": cell.shown(), "right": ok})
    seconds = [c.seconds for c in table.cells]
    return {"cells": len(table.cells), "stated_cells": stated, "not_stated_cells": blank,
            "cell_accuracy": round(right / stated, 3) if stated else None,
            "not_stated_correct": round(kept_blank / blank, 3) if blank else None,
            "supported_share": round(supported / filled, 3) if filled else None,
            "llm_calls": table.llm_calls, "cell_p50_s": round(statistics.median(seconds), 2) if seconds else None,
            "details": rows}


def bench(model: str, log: Log, settings: Settings | None = None, truth_file: Path = TRUTH) -> dict[str, Any]:
    from copilot.engine import Copilot
    from copilot.tasks.compare import Comparison

    truth = json.loads(truth_file.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="copilot-compare-") as tmp:
        base = settings or Settings()
        chosen = base.model_copy(update={"data_dir": Path(tmp), "llm_backend": "local",
                                         "llm_model": model or base.llm_model})
        copilot = Copilot.open(chosen, read_ahead=True)
        try:
            ids = build_library(copilot, list(truth["papers"]), log)
            start = time.perf_counter()
            table = None
            for update in copilot.compare(USER, [ids[stem] for stem in truth["papers"]], truth["aspects"]):
                if isinstance(update, Comparison):
                    table = update
                else:
                    log(f"{update.paper_id} · {update.aspect} ({update.seconds:.1f} s): {update.shown()[:90]}")
            total = time.perf_counter() - start
        finally:
            copilot.store.close()
    assert table is not None
    return {"model": table.model, "papers": len(table.papers), "aspects": len(table.aspects),
            **grade(truth, table), "total_s": round(total, 1), "markdown": table.to_markdown()}
