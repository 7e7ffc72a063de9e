"""Getting papers in: arXiv client, PDF download, PyMuPDF parsing (``ingest.pdf``), sections, references and chunking.

A library of its own: it returns plain values (``ingest.models``) and raises its own errors (``ingest.errors``),
and imports nothing from ``copilot``, which stores what it returns (``copilot.library``). Its command line is
``python -m copilot papers``.
"""
