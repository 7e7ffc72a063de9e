"""Paper Copilot: the engine (configuration, storage, embeddings, LLM backends, thought memory, tasks).

The engine never imports the UI; ``copilot.ui`` and ``copilot.cli`` are thin shells over it.
"""

__version__ = "0.1.0"
