"""The text of a table read cell by cell, as its sources and chunks hold it: the caption (its first sentence), then a
Markdown table, its header row and rule, then its rows, one a line ("| BC5CDR | 88.85 | 90.01 |").

Written by :func:`ingest.pdf.tables.table_sources`; read here only, by chunking (a long table cut between rows under
the same caption and header), evidence (a row read with each value's column) and the tables benchmark.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# A table's caption as it starts: "Table 3:", "Tab. 2.", an appendix's "Table A1.", a roman "TABLE IV."
TABLE_CAPTION = re.compile(r"^(?:Table|Tab\.)\s*(?P<number>[A-Z]?\d+|[IVX]+)\s*[.:]", re.IGNORECASE)
_RULE = re.compile(r"^\|?(\s*:?-{3,}:?\s*\|)+\s*$")  # the line under the header: |---|---|


def row_line(cells: Sequence[str]) -> str:
    """One row (or the header) as a Markdown line."""
    return "| " + " | ".join(cells) + " |"


def rule_line(width: int) -> str:
    """The line under a header of ``width`` columns."""
    return "|" + "---|" * width


@dataclass
class TableText:
    """A table's text in its parts (see the module's docstring)."""

    above: list[str]  # the lines above the header: the caption, when there is one
    header: str
    rule: str
    rows: list[str]

    @property
    def head(self) -> str:
        """Everything above the rows: what each part of a table cut between rows repeats."""
        return "\n".join([*self.above, self.header, self.rule])


def read_table(text: str) -> TableText | None:
    """``text`` as a table read cell by cell, or None when it is none (prose, a caption, rows of a rule zone)."""
    lines = text.strip().split("\n")
    rule = next((k for k, line in enumerate(lines) if _RULE.match(line.strip())), None)
    if rule is None or rule < 1 or not lines[rule - 1].lstrip().startswith("|"):
        return None
    return TableText(lines[:rule - 1], lines[rule - 1], lines[rule],
                     [line for line in lines[rule + 1:] if line.lstrip().startswith("|")])


def is_cell_table(text: str) -> bool:
    """Is ``text`` (a chunk's) a table read cell by cell?"""
    return read_table(text) is not None


def cells(line: str) -> list[str]:
    """The cells of one row line, whitespace collapsed."""
    return [" ".join(c.split()) for c in line.strip().strip("|").split("|")]
