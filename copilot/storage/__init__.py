"""Storage: the only code that runs SQL. Records live in SQLite, vectors in FAISS indices rebuilt from it; or both
in PostgreSQL with pgvector (``COPILOT_DATABASE_URL``)."""

from copilot.storage.rows import from_blob, to_blob, utc_now
from copilot.storage.store import Store, StorageError, StoreError

__all__ = ["Store", "StorageError", "StoreError", "from_blob", "to_blob", "utc_now"]
