"""Paper Copilot: the engine (configuration, storage, embeddings, LLM backends, thought memory, tasks).

The engine never imports the UI; ``copilot.ui`` and ``copilot.cli`` are thin shells over it.
"""

import os

# llama.cpp, torch and faiss run their threads on OpenMP (GNU libgomp). An idle thread spins for 300,000 rounds
# before it sleeps, so when the cores are shared (an answer while a paper is embedded, two answers at once, another
# program) the spinning threads take the cores from the ones with work. With 2,000 rounds, measured on 2 cores beside
# a core kept busy: the 1.5B read 477 prompt tokens and wrote 48 in 20.8 s instead of 30.3, and MiniLM embedded 400
# chunks in 10.8 s instead of 15.6 (docs/configuration.md, "Threads"). libgomp reads it when it loads, so it is set
# before those libraries are imported; an operator's own GOMP_SPINCOUNT or OMP_WAIT_POLICY is left to decide.
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "2000"

__version__ = "0.1.0"
