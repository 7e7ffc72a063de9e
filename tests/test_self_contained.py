"""The repository is all a clone needs: its tests and benchmarks read their data from inside it (``tests/data``,
``copilot/association/lives``), never from a folder beside it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from copilot.config import DATA_ROOT
from tests.conftest import ROOT, clean_env

# The folder a checkout may find beside it, spelled in parts so that this file does not name it whole.
BESIDE = "sha" + "red"
OUTSIDE = ("../" + BESIDE, BESIDE + "/data")


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def test_nothing_in_the_repository_names_a_folder_beside_it() -> None:
    readers = [p for p in _tracked() if p.suffix in {".py", ".toml", ".cfg", ".sh", ".md", ".txt", ""}
               and any(o in p.read_text(errors="replace") for o in OUTSIDE)]
    assert [str(p.relative_to(ROOT)) for p in readers] == []
    assert DATA_ROOT == ROOT / "tests" / "data" and (DATA_ROOT / "LICENSES.md").is_file()


def test_a_copy_with_nothing_beside_it_runs_its_data_tests(tmp_path: Path) -> None:
    clone = tmp_path / "alone" / "paper-copilot"
    for path in _tracked():
        target = clone / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    assert not (clone.parent / BESIDE).exists()
    env = {k: v for k, v in clean_env().items() if k != "COPILOT_DATA_ROOT"}
    root = subprocess.run([sys.executable, "-c", "from copilot.config import DATA_ROOT; print(DATA_ROOT)"], cwd=clone,
                          env=env, capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert Path(root) == clone / "tests" / "data", "the copy reads its own data"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_pdf_front.py",
                           "tests/test_arxiv_client.py", "-k", "not slow"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]
