"""The code's layout rules: SQL lives only in ``copilot/storage/``, and ``ingest/`` imports nothing from ``copilot``.

Every other module reaches the database through the repositories of the store, so a second backend (PostgreSQL)
only has to implement those. ``ingest`` turns arXiv entries and PDFs into plain values; ``copilot`` stores them, so
the dependency goes one way. The checks read the source as Python (``ast``): SQL in string literals, uses of a
connection or database handle, and imports are found in code; English prose in docstrings is left alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

STORAGE = ROOT / "copilot" / "storage"
INGEST = ROOT / "ingest"

# Statements as SQL writes them. Upper-case keywords are SQL; lower-case ones only in a shape prose never has.
_SQL = [re.compile(p) for p in (
    r"\bSELECT\b[\s\S]*\bFROM\b",
    r"\bINSERT\b(\s+OR\s+[A-Z]+)?\s+INTO\b",
    r"\bUPDATE\s+\w+\s+SET\b",
    r"\bDELETE\s+FROM\b",
    r"\bCREATE\s+(UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER)\b",
    r"\bPRAGMA\s+\w+",
    r"\bON\s+CONFLICT\b",
)] + [re.compile(p, re.IGNORECASE) for p in (
    r"\bselect\s+(\*|[\w.]+(\s*,\s*[\w.]+)*)\s+from\s+\w+\s*(where|order|group|limit|join|$)",
    r"\binsert\s+(or\s+\w+\s+)?into\s+\w+\s*\(",
    r"\bupdate\s+\w+\s+set\s+\w+\s*=",
    r"\bdelete\s+from\s+\w+\s*(where|$)",
    r"\bcreate\s+(unique\s+)?(table|index)\s+(if\s+not\s+exists\s+)?\w+\s*(\(|on\b)",
)]
# Handles and calls that only code running SQL needs.
_ATTRIBUTES = {"conn", "db", "execute", "executemany", "executescript", "rows_where", "count_where"}
_MODULES = {"sqlite3", "sqlite_utils"}


def sql_uses(source: str, filename: str = "<source>") -> list[str]:
    """Each place in ``source`` that runs or writes SQL, as ``line: what``."""
    tree = ast.parse(source, filename)
    # An f-string is read whole (a stand-in for each value), not as its separate literal parts.
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            text = node.value
        if text is not None and any(p.search(text) for p in _SQL):
            found.append(f"{node.lineno}: SQL text {text.strip()[:60]!r}")
        if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] in _MODULES]
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def checked_files() -> list[Path]:
    files = [ROOT / "app.py", *(ROOT / "copilot").rglob("*.py"), *(ROOT / "ingest").rglob("*.py")]
    return sorted(f for f in files if STORAGE not in f.parents)


def test_no_sql_outside_storage() -> None:
    problems = [f"{path.relative_to(ROOT)}:{use}" for path in checked_files()
                for use in sql_uses(path.read_text(encoding="utf-8"), str(path))]
    assert not problems, "SQL outside copilot/storage (use a repository of the store):\n" + "\n".join(problems)


def test_the_check_finds_sql_and_ignores_prose() -> None:
    code = '''
import sqlite3

def count(store, user_id):
    """Select the thoughts from the store, then update the set of ids and delete from the list."""
    a = store.conn.execute("SELECT COUNT(*) FROM thoughts WHERE user_id = ?", [user_id])
    b = store.db["papers"].count_where("id = ?", [user_id])
    c = store.db.query(f"SELECT {columns} FROM papers")
    cursor.executemany("INSERT OR IGNORE INTO thought_sources VALUES (?, ?, ?)", rows)
    sql = "update thoughts set flagged = 1 where id = ?"
    ddl = "CREATE INDEX idx ON papers (file_hash)"
    return "PRAGMA journal_mode"
'''
    found = sql_uses(code)
    lines = {int(f.split(":")[0]) for f in found}
    assert lines == {2, 6, 7, 8, 9, 10, 11, 12}, found
    assert "8: SQL text 'SELECT x FROM papers'" in found, "an f-string is read as one statement"
    assert not any(f.startswith("5:") for f in found), "a docstring in English is not SQL"
    prose = '"""Pick what to select from the library; insert into the index; the update sets a flag."""\n'
    assert sql_uses(prose) == []
    assert sql_uses("x = settings.db_path\nconfig = 'copilot.db'\n") == []


def test_the_check_covers_the_feature_modules() -> None:
    names = {str(p.relative_to(ROOT)) for p in checked_files()}
    assert {"app.py", "copilot/thoughts.py", "copilot/library.py", "copilot/ui/services.py"} <= names
    assert not any(n.startswith("copilot/storage/") for n in names)


def copilot_imports(source: str, filename: str = "<source>") -> list[str]:
    """Each place in ``source`` that imports ``copilot`` (a statement anywhere, or ``importlib.import_module``)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")):
            names = [node.args[0].value]
        found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] == "copilot"]
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_ingest_imports_nothing_from_copilot() -> None:
    files = sorted(INGEST.rglob("*.py"))
    assert {"ingest/chunking.py", "ingest/pdf/__init__.py", "ingest/__main__.py"} <= {
        str(f.relative_to(ROOT)) for f in files}
    problems = [f"{path.relative_to(ROOT)}:{use}" for path in files
                for use in copilot_imports(path.read_text(encoding="utf-8"), str(path))]
    assert not problems, "ingest/ imports copilot (return plain values; copilot converts them):\n" + "\n".join(
        problems)


def test_the_import_check_finds_copilot_and_ignores_prose() -> None:
    code = '''
import copilot
from copilot.types import Chunk
import json, copilot.cli as cli
from copilot import library

def later():
    """Stored by copilot.library; see ``from copilot import engine``."""
    from copilot.engine import Copilot
    return importlib.import_module("copilot.config"), __import__("copilot")

from ingest.models import ParsedPaper
from . import copilot_like
import copilotx
agent = "paper-copilot"
'''
    found = copilot_imports(code)
    assert {int(f.split(":")[0]) for f in found} == {2, 3, 4, 5, 9, 10}, found
    assert "4: import copilot.cli" in found and "10: import copilot.config" in found
    assert copilot_imports('"""Values that copilot stores."""\nUSER_AGENT = "paper-copilot"\n') == []
