"""Paper Copilot: the engine (configuration, storage, embeddings, LLM backends, thought memory, tasks).

The engine never imports the UI; ``copilot.ui`` and ``copilot.cli`` are thin shells over it.
"""

import os

# llama.cpp and torch run their threads on OpenMP (GNU libgomp). An idle thread spins for 300,000 rounds before it
# sleeps, so when the cores are shared (an answer while a paper is embedded, two answers at once, another program)
# the spinning threads take the cores from the ones with work. With 2,000 rounds, measured on 2 cores beside a core
# kept busy: the 1.5B read 477 prompt tokens and wrote 48 in 20.8 s instead of 30.3, and MiniLM embedded 400 chunks
# in 10.8 s instead of 15.6; alone, 11.4 s instead of 11.3 (docs/configuration.md, "Threads"). Read when those
# libraries load, so set before they are imported; a value already in the environment is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "2000")

__version__ = "0.1.0"
