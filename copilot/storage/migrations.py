"""The database schema, grown by small functions applied once each and recorded in ``_migrations``.

Add a new function at the end decorated with ``@migration``; never edit one that has shipped. The schema
version (``PRAGMA user_version``) is the number of migrations applied.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlite_utils import Database

Migration = Callable[[Database], None]
MIGRATIONS: list[Migration] = []

# Tables whose rows carry an ``embedding`` blob mirrored by a FAISS index.
VECTOR_TABLES = ("chunks", "thoughts", "memories")
# Tables with a full-text index (``<table>_fts``), each over these columns.
FULL_TEXT = {"chunks": ("text", "section"), "thoughts": ("text",)}


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append(fn)
    return fn


def schema_version(db: Database) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: Database) -> list[str]:
    """Apply the migrations not yet applied, in order; returns the names applied now."""
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_at": str}, pk="name", if_not_exists=True)
    done = {row["name"] for row in db["_migrations"].rows}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.conn:
            fn(db)
            db["_migrations"].insert({"name": fn.__name__, "applied_at": datetime.now(UTC).isoformat()})
        applied.append(fn.__name__)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
    return applied


@migration
def m001_initial(db: Database) -> None:
    db["users"].create(
        {"id": str, "name": str, "created_at": str}, pk="id", if_not_exists=True
    )
    db["papers"].create(
        {
            "id": str,
            "user_id": str,
            "source": str,
            "arxiv_id": str,
            "version": str,
            "title": str,
            "authors": str,
            "abstract": str,
            "categories": str,
            "published": str,
            "updated": str,
            "pdf_url": str,
            "doi": str,
            "journal_ref": str,
            "file_hash": str,
            "pdf_path": str,
            "meta": str,
            "added_at": str,
        },
        pk="id",
        if_not_exists=True,
    )
    db["chunks"].create(
        {
            "id": int,
            "paper_id": str,
            "seq": int,
            "section": str,
            "text": str,
            "page_start": int,
            "page_end": int,
            "char_start": int,
            "char_end": int,
            "n_tokens": int,
            "embedding": bytes,
        },
        pk="id",
        foreign_keys=[("paper_id", "papers", "id")],
        if_not_exists=True,
    )
    db["thoughts"].create(
        {
            "id": int,
            "user_id": str,
            "text": str,
            "query": str,
            "answer": str,
            "confidence": float,
            "support": int,
            "depth": int,
            "public": int,
            "flagged": int,
            "created_at": str,
            "updated_at": str,
            "embedding": bytes,
        },
        pk="id",
        if_not_exists=True,
    )
    db["thought_sources"].create(
        {"thought_id": int, "source_kind": str, "source_id": int},
        pk=("thought_id", "source_kind", "source_id"),
        foreign_keys=[("thought_id", "thoughts", "id")],
        if_not_exists=True,
    )
    db["queries"].create(
        {
            "id": int,
            "user_id": str,
            "text": str,
            "answer": str,
            "retrieved": str,
            "thought_id": int,
            "thought_outcome": str,
            "thought_reason": str,
            "timings": str,
            "llm_calls": int,
            "created_at": str,
        },
        pk="id",
        if_not_exists=True,
    )
    db["feedback"].create(
        {"id": int, "query_id": int, "user_id": str, "value": int, "created_at": str},
        pk="id",
        foreign_keys=[("query_id", "queries", "id")],
        if_not_exists=True,
    )
    db["profiles"].create(
        {"user_id": str, "persona": str, "source": str, "updated_at": str}, pk="user_id", if_not_exists=True
    )
    db["memories"].create(
        {"id": int, "user_id": str, "text": str, "created_at": str, "embedding": bytes},
        pk="id",
        if_not_exists=True,
    )
    db["eval_runs"].create(
        {"id": int, "task": str, "methods": str, "started_at": str, "finished_at": str, "path": str, "report": str},
        pk="id",
        if_not_exists=True,
    )
    # One counter per vector table, bumped in the same transaction as any change to its embeddings.
    db["vector_generations"].create({"kind": str, "generation": int}, pk="kind", if_not_exists=True)
    db["vector_generations"].upsert_all([{"kind": k, "generation": 0} for k in VECTOR_TABLES], pk="kind")
    db["chunks"].create_index(["paper_id"], if_not_exists=True)
    db["thoughts"].create_index(["user_id"], if_not_exists=True)
    db["thought_sources"].create_index(["source_kind", "source_id"], if_not_exists=True)
    db["queries"].create_index(["user_id"], if_not_exists=True)
    db["memories"].create_index(["user_id"], if_not_exists=True)


@migration
def m002_paper_structure(db: Database) -> None:
    """Keep what parsing found, so ``show --sections`` needs no re-parse."""
    papers = db["papers"]
    for column, kind in (("n_pages", int), ("sections", str), ("references_json", str), ("warnings", str)):
        if column not in papers.columns_dict:
            papers.add_column(column, kind)
    db["papers"].create_index(["file_hash"], if_not_exists=True)


@migration
def m003_refreshes_and_follows(db: Database) -> None:
    """Followed arXiv categories per user, and a record of each library refresh (what it added, what failed)."""
    db["follows"].create({"user_id": str, "category": str, "created_at": str}, pk=("user_id", "category"),
                         if_not_exists=True)
    db["refreshes"].create(
        {"id": int, "user_id": str, "categories": str, "added": str, "skipped": int, "errors": str,
         "started_at": str, "finished_at": str},
        pk="id",
        if_not_exists=True,
    )
    db["refreshes"].create_index(["user_id"], if_not_exists=True)


@migration
def m004_generation_tokens(db: Database) -> None:
    """A random token per generation bump: an index file made for a generation number the database later reused
    (a restored backup, commits lost with the power) has another token, and is rebuilt instead of trusted."""
    if "token" not in db["vector_generations"].columns_dict:
        db["vector_generations"].add_column("token", str)


@migration
def m005_usage_events(db: Database) -> None:
    """One row per counted action of a user (a question, a paper added from arXiv), for per-user limits."""
    db["usage_events"].create({"id": int, "user_id": str, "action": str, "at": str}, pk="id", if_not_exists=True)
    db["usage_events"].create_index(["user_id", "action", "at"], if_not_exists=True)


@migration
def m006_thought_jobs(db: Database) -> None:
    """An answered query whose thought is 'pending' is the job of writing it: the share flag it was asked with,
    and which worker claimed it when (a lease, renewed while that worker lives), so another replica takes over
    the job of one that died."""
    queries = db["queries"]
    for column, kind in (("thought_public", int), ("thought_claim", str), ("thought_claimed_at", float)):
        if column not in queries.columns_dict:
            queries.add_column(column, kind)
    db.execute("CREATE INDEX IF NOT EXISTS queries_thought_pending ON queries (id) WHERE thought_outcome = 'pending'")


@migration
def m007_full_text(db: Database) -> None:
    """A full-text index (FTS5, BM25 ranking) of chunks (text and section) and thoughts (text), for lexical
    retrieval beside the vectors. The indices hold no copy of the text (external content); triggers keep them in
    step with every insert, update and delete, in the writing transaction. Existing rows are indexed now."""
    for table, columns in FULL_TEXT.items():
        fts = f"{table}_fts"
        names = ", ".join(columns)
        new = ", ".join(f"new.{c}" for c in columns)
        old = ", ".join(f"old.{c}" for c in columns)
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5({names}, content='{table}', "
                   "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')")
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {fts}_insert AFTER INSERT ON {table} BEGIN "
                   f"INSERT INTO {fts} (rowid, {names}) VALUES (new.id, {new}); END")
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {fts}_delete AFTER DELETE ON {table} BEGIN "
                   f"INSERT INTO {fts} ({fts}, rowid, {names}) VALUES ('delete', old.id, {old}); END")
        db.execute(f"CREATE TRIGGER IF NOT EXISTS {fts}_update AFTER UPDATE OF {names} ON {table} BEGIN "
                   f"INSERT INTO {fts} ({fts}, rowid, {names}) VALUES ('delete', old.id, {old}); "
                   f"INSERT INTO {fts} (rowid, {names}) VALUES (new.id, {new}); END")
        db.execute(f"INSERT INTO {fts} ({fts}) VALUES ('rebuild')")


@migration
def m008_answer_language(db: Database) -> None:
    """The language a user's answers and drafts are written in (empty: the language of the question)."""
    if "answer_language" not in db["profiles"].columns_dict:
        db["profiles"].add_column("answer_language", str)


@migration
def m009_conversations(db: Database) -> None:
    """Each user's chats, kept: a conversation (titled from its first question) and its turns in order, each the
    question, the answer as given and the answered query (its sources and its thought's outcome)."""
    db["conversations"].create(
        {"id": int, "user_id": str, "title": str, "created_at": str, "updated_at": str}, pk="id",
        if_not_exists=True)
    db["conversation_turns"].create(
        {"id": int, "conversation_id": int, "user_id": str, "question": str, "answer": str, "query_id": int,
         "created_at": str},
        pk="id", foreign_keys=[("conversation_id", "conversations", "id")], if_not_exists=True)
    db["conversations"].create_index(["user_id", "updated_at"], if_not_exists=True)
    db["conversation_turns"].create_index(["conversation_id"], if_not_exists=True)


@migration
def m010_access_tokens(db: Database) -> None:
    """Personal access tokens, by the SHA-256 of their secret (the secret itself is shown once and never kept):
    an agent's calls act as the token's user until the user revokes it (the row is deleted)."""
    db["access_tokens"].create(
        {"id": int, "user_id": str, "name": str, "token_hash": str, "created_at": str, "last_used_at": str},
        pk="id", if_not_exists=True)
    db["access_tokens"].create_index(["token_hash"], unique=True, if_not_exists=True)
    db["access_tokens"].create_index(["user_id"], if_not_exists=True)


@migration
def m011_zotero(db: Database) -> None:
    """A user's Zotero connection (its API key sealed with the instance secret; the library version synced to) and
    each item synced, by its key and version, so a second sync takes only what is new or changed, and a sync cut
    half-way resumes where it stopped."""
    db["zotero_connections"].create(
        {"user_id": str, "library_type": str, "library_id": str, "sealed_key": str, "collection": str,
         "local": int, "library_version": int, "created_at": str, "synced_at": str}, pk="user_id", if_not_exists=True)
    db["zotero_items"].create(
        {"user_id": str, "item_key": str, "version": int, "status": str, "paper_id": str, "title": str,
         "synced_at": str}, pk=("user_id", "item_key"), if_not_exists=True)


@migration
def m012_chunk_regions(db: Database) -> None:
    """A chunk's region on its page ("x0,y0,x1,y1" in PDF points): a table's, which the passage view highlights."""
    if "bbox" not in db["chunks"].columns_dict:
        db["chunks"].add_column("bbox", str)
