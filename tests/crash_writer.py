"""Child process for the crash test: writes batches of chunks with vectors forever, reporting each commit.

Usage: python tests/crash_writer.py DATA_DIR FIRST_BATCH. Each committed batch prints ``BATCH IDS...``;
vectors are a pure function of the batch number so the parent can check what was stored.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from copilot.storage import Store  # noqa: E402

DIM = 32
PER_BATCH = 7


def batch_vectors(batch: int) -> np.ndarray:
    v = np.random.default_rng(batch).normal(size=(PER_BATCH, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def main() -> None:
    data = Path(sys.argv[1])
    batch = int(sys.argv[2])
    store = Store(data / "copilot.db", data / "index")
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
