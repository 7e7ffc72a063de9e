"""SIGKILL a writer in the middle of its work: nothing committed is lost and the index agrees with SQLite."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from copilot.storage import Store, from_blob
from tests.conftest import ROOT
from tests.crash_writer import PER_BATCH, batch_vectors

WRITER = Path(__file__).with_name("crash_writer.py")


def run_and_kill(data: Path, first_batch: int, batches_before_kill: int, mode: str = "commit",
                 pause_at: int = 0) -> dict[int, list[int]]:
    """Start the writer, wait for some commits (or for it to pause mid-append or mid-snapshot), SIGKILL it;
    returns the commits it reported."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(data), str(first_batch), mode, str(pause_at)],
                            stdout=subprocess.PIPE, text=True)
    committed: dict[int, list[int]] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "PAUSED":
            break
        batch, *ids = (int(x) for x in line.split())
        committed[batch] = ids
        if mode == "commit" and len(committed) >= batches_before_kill:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # Lines printed between our last read and the kill are commits too.
    for line in proc.stdout.read().splitlines():
        if line.strip() == "PAUSED":
            continue
        batch, *ids = (int(x) for x in line.split())
        committed[batch] = ids
    return committed


@pytest.mark.parametrize("mode", ["commit", "delta", "snapshot"])
def test_sigkill_loses_nothing_committed(tmp_path: Path, mode: str) -> None:
    """Killed between batches, in the middle of a delta append, or in the middle of a snapshot rewrite."""
    data = tmp_path / "data"
    all_committed: dict[int, list[int]] = {}
    first = 0
    for round_no, kill_after in enumerate((5, 23, 61)):
        committed = run_and_kill(data, first, kill_after, mode, pause_at=kill_after // 4 + 1)
        all_committed.update(committed)
        first = max(all_committed) + 1000  # later rounds write new batch numbers

        with Store(data / "copilot.db", data / "index") as store:
            assert store.integrity_ok(), f"round {round_no}: integrity check failed"
            assert store.check_consistency()["chunks"], f"round {round_no}: index and database disagree"
            rows = {r["id"]: r for r in store.db["chunks"].rows}
            for batch, ids in all_committed.items():
                expected = batch_vectors(batch)
                assert len(ids) == PER_BATCH
                for i, chunk_id in enumerate(ids):
                    assert chunk_id in rows, f"committed chunk {chunk_id} of batch {batch} was lost"
                    assert np.allclose(from_blob(rows[chunk_id]["embedding"]), expected[i])
            # A batch is all or nothing: no partial batch survives.
            assert len(rows) % PER_BATCH == 0
            index = store.index("chunks")
            assert index is not None and len(index) == len(rows)
            leftovers = [p.name for p in (data / "index").iterdir() if ".tmp" in p.name]
            assert not leftovers, f"round {round_no}: a killed writer's files were left behind: {leftovers}"

    with Store(data / "copilot.db", data / "index") as store:
        queries = [batch_vectors(b)[0] for b in list(all_committed)[:10]]
        before = [store.search("chunks", q, 10) for q in queries]
        assert all(hits[0][1] > 0.999 for hits in before)
        n_rows = store.db["chunks"].count

    # The CLI rebuild gives identical results.
    result = subprocess.run([sys.executable, "-m", "copilot", "reindex", "--data-dir", str(data), "--json"],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(result.stdout)["chunks"] == n_rows
    with Store(data / "copilot.db", data / "index") as store:
        after = [store.search("chunks", q, 10) for q in queries]
    # Same hits in the same order; scores agree to float32 rounding (the rebuilt index may sum in another order).
    assert [[i for i, _ in hits] for hits in before] == [[i for i, _ in hits] for hits in after]
    assert np.allclose([[s for _, s in hits] for hits in before], [[s for _, s in hits] for hits in after], atol=1e-6)
