"""Child process for the crash test: writes batches of chunks with vectors forever, reporting each commit.

Usage: python tests/crash_writer.py DATA_DIR FIRST_BATCH [MODE PAUSE_AT]. Each committed batch prints
``BATCH IDS...``; vectors are a pure function of the batch number so the parent can check what was stored.

MODE ``delta`` stops in the middle of the PAUSE_AT-th delta append (half a record written) and MODE ``snapshot``
in the middle of the PAUSE_AT-th snapshot (half a partition file written); the writer then prints ``PAUSED``
and waits to be killed there. The pause wraps the index module's own write functions; the product is unchanged.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from copilot.storage import Store, vectors  # noqa: E402
from copilot.storage.vectors import IndexOptions  # noqa: E402

DIM = 32
PER_BATCH = 7


def batch_vectors(batch: int) -> np.ndarray:
    v = np.random.default_rng(batch).normal(size=(PER_BATCH, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def pause_forever() -> None:
    print("PAUSED", flush=True)
    while True:
        time.sleep(1)


def pause_in(mode: str, pause_at: int) -> None:
    calls = {"n": 0}
    if mode == "delta":
        real_append = vectors._append_bytes

        def torn_append(path: Path, record: bytes) -> None:
            calls["n"] += 1
            if calls["n"] < pause_at:
                return real_append(path, record)
            real_append(path, record[: len(record) // 2])
            pause_forever()

        vectors._append_bytes = torn_append
    elif mode == "snapshot":
        real_write = vectors._write_partition

        def torn_write(index, path: Path) -> None:  # noqa: ANN001
            calls["n"] += 1
            real_write(index, path)
            if calls["n"] >= pause_at:
                data = path.read_bytes()
                path.write_bytes(data[: len(data) // 2])
                pause_forever()

        vectors._write_partition = torn_write


def main() -> None:
    data = Path(sys.argv[1])
    batch = int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "commit"
    pause_in(mode, int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    # Small snapshots and deltas, so that snapshots are rewritten every few batches.
    store = Store(data / "copilot.db", data / "index", IndexOptions(delta_fraction=0.5, min_delta_bytes=4096))
    paper = f"paper-{batch}"
    store.db["papers"].insert({"id": paper, "title": "crash test"}, pk="id", replace=True)
    while True:
        records = [
            {"paper_id": paper, "seq": i, "section": "body", "text": f"batch {batch} chunk {i}"}
            for i in range(PER_BATCH)
        ]
        ids = store.insert_with_vectors("chunks", records, batch_vectors(batch))
        print(batch, *ids, flush=True)
        batch += 1


if __name__ == "__main__":
    main()
