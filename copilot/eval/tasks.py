"""The evaluation's tasks, built from real data: what each item asks, what it may read, what it is scored against.

- ``abstract-single``: one item per paper PDF. The corpus is the paper's body chunks without the abstract,
  the conclusion, the acknowledgements and the references; the reference is its real abstract (as parsed).
- ``synthesis``: ScholarQA-Multi questions; the corpus pools the cited snippets (``ctxs``) of every evaluated
  question; the reference is the expert answer.
- ``claims``: SciFact claims; the corpus pools the gold abstracts of every evaluated claim; scored by
  Recall@k of the claim's gold abstract and by the true/false verdict.

A subset is a seeded random sample of items, kept in file order, so a run names exactly what it measured.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from copilot import prompts
from copilot.config import DATA_ROOT
from copilot.embeddings import load_tokenizer
from ingest.chunking import ChunkingOptions, chunk_paper, split_spans

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TASKS = ("abstract-single", "synthesis", "claims")
DEFAULT_DATA = {
    "abstract-single": DATA_ROOT / "papers",
    "synthesis": DATA_ROOT / "scholarqa" / "scholarqa_multi_human_answers.json",
    "claims": DATA_ROOT / "scholarqa" / "scifact_test.jsonl",
}
# Sections that restate the abstract's content (or are not prose): kept out of the abstract-single corpus.
_EXCLUDED_SECTION = re.compile(r"conclu|summary and|reference|bibliograph|acknowledg", re.IGNORECASE)


@dataclass
class Doc:
    """One retrievable passage; ``group`` is the document it belongs to (a paper, a snippet, an abstract)."""

    id: str
    group: str
    title: str
    section: str
    text: str


@dataclass
class Item:
    """One question of a task."""

    id: str
    query: str
    reference: str  # the text an answer is scored against; for claims, the label
    scope: list[str] | None = None  # the groups the item may read; None = the whole corpus
    gold: list[str] = field(default_factory=list)  # claims: the groups holding the evidence
    label: str | None = None  # claims: "true" or "false"


@dataclass
class Task:
    name: str
    kind: Literal["generate", "claims"]
    docs: list[Doc]
    items: list[Item]
    source: str
    selection: dict[str, Any] = field(default_factory=dict)  # how the items were chosen, for the report

    @property
    def groups(self) -> dict[str, str]:
        """Group id -> title, in first-seen order."""
        return {d.group: d.title for d in self.docs}


def sample_indices(n: int, limit: int | None, seed: int) -> list[int]:
    """``limit`` of ``range(n)`` drawn with ``seed``, in their original order (all of them without a limit)."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), limit))


def _short_id(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:10]


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON list or a JSONL file."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    return data


def _split(text: str, tokenizer: PreTrainedTokenizerBase, group: str, title: str, section: str) -> list[Doc]:
    """Passages of at most the embedder's chunk size, so each is embedded whole."""
    spans = split_spans(tokenizer, text, ChunkingOptions())
    return [Doc(f"{group}#{i}", group, title, section, text[s:e]) for i, (s, e, _) in enumerate(spans)]


def load_abstract_single(path: Path, *, limit: int | None = None, seed: int = 0,
                         tokenizer: PreTrainedTokenizerBase | None = None) -> Task:
    """One item per PDF in ``path`` (sorted by name)."""
    from ingest.pdf import parse_pdf  # pymupdf (a second to load): only for the task that reads PDFs

    tokenizer = tokenizer or load_tokenizer()
    pdfs = sorted(Path(path).glob("*.pdf"))
    if not pdfs:
        raise ValueError(f"{path}: no PDF files")
    chosen = [pdfs[i] for i in sample_indices(len(pdfs), limit, seed)]
    docs, items = [], []
    for pdf in chosen:
        parsed = parse_pdf(pdf)
        paper_id = pdf.stem
        title = parsed.title or paper_id
        if not parsed.abstract.strip():
            raise ValueError(f"{pdf.name}: no abstract was found, so there is no reference")
        chunks = chunk_paper(paper_id, parsed, tokenizer, ChunkingOptions(include_abstract=False))
        body = [c for c in chunks if not _EXCLUDED_SECTION.search(c.section)]
        docs += [Doc(f"{paper_id}#{c.seq}", paper_id, title, c.section, c.text) for c in body]
        items.append(Item(paper_id, prompts.abstract_task(title), parsed.abstract.strip(), scope=[paper_id]))
    return Task("abstract-single", "generate", docs, items, str(path),
                {"items": [i.id for i in items], "of": len(pdfs), "seed": seed})


def load_synthesis(path: Path, *, limit: int | None = None, seed: int = 0) -> Task:
    """ScholarQA-Multi style records: ``input``, ``output``, ``ctxs`` (title, text)."""
    records = read_records(path)
    chosen = sample_indices(len(records), limit, seed)
    docs: dict[str, Doc] = {}
    items = []
    for index in chosen:
        record = records[index]
        for ctx in record.get("ctxs") or []:
            text, title = ctx.get("text"), ctx.get("title")
            if not isinstance(text, str) or not text.strip():
                continue  # a few snippets have no text (NaN in the source)
            title = title if isinstance(title, str) else ""
            group = "ctx-" + _short_id(title, text)
            docs.setdefault(group, Doc(group, group, title, str(ctx.get("year") or ""), text.strip()))
        items.append(Item(str(record.get("id", index)), record["input"].strip(), record["output"].strip()))
    return Task("synthesis", "generate", list(docs.values()), items, str(path),
                {"items": [i.id for i in items], "indices": chosen, "of": len(records), "seed": seed})


def load_claims(path: Path, *, limit: int | None = None, seed: int = 0,
                tokenizer: PreTrainedTokenizerBase | None = None) -> Task:
    """SciFact style records: ``input`` (the claim), ``gold_ctx`` (title, text), ``answer`` (true/false)."""
    tokenizer = tokenizer or load_tokenizer()
    records = read_records(path)
    chosen = sample_indices(len(records), limit, seed)
    docs: list[Doc] = []
    seen: set[str] = set()
    items = []
    for index in chosen:
        record = records[index]
        gold = []
        for ctx in record.get("gold_ctx") or []:
            title, text = str(ctx.get("title") or ""), str(ctx.get("text") or "")
            group = "abs-" + _short_id(title, text)
            gold.append(group)
            if group not in seen:
                seen.add(group)
                docs += _split(text, tokenizer, group, title, "Abstract")
        label = str(record.get("answer", record.get("label", ""))).strip().lower()
        items.append(Item(f"claim-{index}", record["input"].strip(), label, gold=gold, label=label))
    labels = [i.label for i in items]
    return Task("claims", "claims", docs, items, str(path),
                {"indices": chosen, "of": len(records), "seed": seed,
                 "labels": {v: labels.count(v) for v in sorted(set(labels), key=str)}})


def load_task(name: str, path: Path | None = None, *, limit: int | None = None, seed: int = 0) -> Task:
    """The task ``name`` from ``path`` (default: the data root, tests/data)."""
    path = Path(path) if path else DEFAULT_DATA[name]
    if name == "abstract-single":
        return load_abstract_single(path, limit=limit, seed=seed)
    if name == "synthesis":
        return load_synthesis(path, limit=limit, seed=seed)
    if name == "claims":
        return load_claims(path, limit=limit, seed=seed)
    raise ValueError(f"unknown task {name!r}; one of {', '.join(TASKS)}")


def halves(items: Sequence[Item], seed: int) -> tuple[list[Item], list[Item]]:
    """A seeded split of ``items`` into a warm-up half and a test half (the test half gets the odd one)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    cut = len(items) // 2
    return [items[i] for i in sorted(order[:cut])], [items[i] for i in sorted(order[cut:])]
