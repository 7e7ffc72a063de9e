"""Splitting a paper's reference list into one entry per cited work.

Reference lists mark where an entry starts in one of a few ways, tried from the most to the least
explicit: a label ("[12]", "12."), a hanging indent (the first line of each entry sticks out to the
left), extra space between entries, or, as a last resort, an author name opening a line after a line
that ended a sentence.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass

_LABEL = re.compile(r"^\s*(?:\[(?P<bracket>\d{1,3})\]|(?P<dot>\d{1,3})\.(?=\s|[A-Z]))")
_AUTHOR_START = re.compile(r"^(?:[A-Z][\w'\u2019\-]+|[a-z]{1,3}\s[A-Z][\w'\u2019\-]+),?\s")


@dataclass
class RefLine:
    """One line of the reference list, with where it sits on its page."""

    text: str
    x0: float
    y0: float
    y1: float
    page: int
    column: int  # column index on the page; lines of one column share a left edge


def split_references(lines: list[RefLine]) -> list[list[int]]:
    """Group line indices into entries, in order, using the first layout cue the list really uses."""
    if not lines:
        return []
    for split in (_by_labels, _by_hanging_indent, _by_spacing, _by_author_starts):
        groups = split(lines)
        if groups:
            return groups
    return [list(range(len(lines)))]


def _groups_from_starts(starts: list[bool]) -> list[list[int]]:
    groups: list[list[int]] = []
    for i, start in enumerate(starts):
        if start or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def _label_number(text: str) -> int | None:
    m = _LABEL.match(text)
    if not m:
        return None
    return int(m["bracket"] or m["dot"])


def _by_labels(lines: list[RefLine]) -> list[list[int]] | None:
    """Entries numbered "[1]" or "1." in sequence: a line opens an entry when it carries the next number."""
    starts = [False] * len(lines)
    expected = None
    found = 0
    for i, line in enumerate(lines):
        number = _label_number(line.text)
        if number is None:
            continue
        if expected is None and number in (0, 1):
            expected = number
        if number == expected:
            starts[i] = True
            expected += 1
            found += 1
    if found < 3 or found < 0.15 * len(lines):
        return None
    return _groups_from_starts(starts)


def _by_hanging_indent(lines: list[RefLine]) -> list[list[int]] | None:
    """Entries whose continuation lines are indented relative to their first line."""
    columns: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, line in enumerate(lines):
        columns[(line.page, line.column)].append(i)
    starts = [False] * len(lines)
    indented = 0
    for members in columns.values():
        left = min(lines[i].x0 for i in members)
        for i in members:
            offset = lines[i].x0 - left
            if offset <= 1.5:
                starts[i] = True
            elif offset <= 40:
                indented += 1
            else:
                starts[i] = False
    n_starts = sum(starts)
    if n_starts < 2 or indented < 0.2 * len(lines) or indented < n_starts * 0.3:
        return None
    return _groups_from_starts(starts)


def _by_spacing(lines: list[RefLine]) -> list[list[int]] | None:
    """Entries separated by more vertical space than lines within an entry."""
    gaps: list[float | None] = [None]
    for prev, line in zip(lines, lines[1:]):
        same_column = (prev.page, prev.column) == (line.page, line.column)
        gaps.append(line.y0 - prev.y0 if same_column and line.y0 > prev.y0 else None)
    known = [g for g in gaps if g is not None]
    if len(known) < 4:
        return None
    pitch = statistics.median(known)
    wide = [g for g in known if g > pitch * 1.15 + 0.5]
    if len(wide) < 2 or len(wide) > 0.7 * len(known):
        return None
    starts = [True] + [g is None or g > pitch * 1.15 + 0.5 for g in gaps[1:]]
    # A new column or page only opens an entry when the previous line ended one.
    for i, gap in enumerate(gaps):
        if i and gap is None:
            starts[i] = _ends_entry(lines[i - 1].text) and bool(_AUTHOR_START.match(lines[i].text))
    return _groups_from_starts(starts)


def _ends_entry(text: str) -> bool:
    return text.rstrip().endswith((".", ")", "]")) and not text.rstrip().endswith(("et al.", " In.", "pp."))


def _by_author_starts(lines: list[RefLine]) -> list[list[int]] | None:
    """A line opening with a capitalised name after a line that ended a sentence starts an entry."""
    starts = [i == 0 or (_ends_entry(lines[i - 1].text) and bool(_AUTHOR_START.match(line.text)))
              for i, line in enumerate(lines)]
    if sum(starts) < 2:
        return None
    return _groups_from_starts(starts)
