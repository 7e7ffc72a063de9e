"""Child process for the ingest crash test: ``python -m copilot papers add PDF`` through the real command line,
with the hash embedder in place of the model (so a run takes a second) and an optional pause where a kill hurts
most.

Usage: python tests/crash_ingest.py DATA_DIR PDF [PAUSE]. PAUSE ``staged`` stops once the PDF is copied to its
staged file, ``placed`` once it is moved to its place inside the paper's transaction (before COMMIT); the child
then prints ``PAUSED`` and waits to be killed. Without PAUSE it runs to the end and prints the add's JSON. The
pauses wrap the library's own functions; the product is unchanged.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import copilot.embeddings  # noqa: E402
from copilot import cli, library  # noqa: E402
from tests.library_support import HashEmbedder  # noqa: E402


def pause_forever() -> None:
    print("PAUSED", flush=True)
    while True:
        time.sleep(1)


def pause_after(owner: object, name: str) -> None:
    real = getattr(owner, name)

    def paused(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real(*args, **kwargs)
        pause_forever()

    setattr(owner, name, paused)


def main() -> None:
    data, pdf = sys.argv[1], sys.argv[2]
    pause = sys.argv[3] if len(sys.argv) > 3 else ""
    if pause == "staged":
        pause_after(library, "stage_upload")
    elif pause == "placed":
        pause_after(library.Library, "_place")
    copilot.embeddings.get_embedder = lambda settings=None: HashEmbedder()
    cli.cli(["papers", "add", pdf, "--json", "--quiet", "--data-dir", data], prog_name="python -m copilot")


if __name__ == "__main__":
    main()
