"""Getting papers in: arXiv client, PDF download, PyMuPDF parsing, sections and chunking."""
