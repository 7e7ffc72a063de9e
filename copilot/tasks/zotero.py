"""A Zotero library (or one of its collections) as a source of papers, through pyzotero, the maintained client.

Each top-level item goes the way the library already knows: one with an arXiv id through the arXiv path, one with a
stored PDF attachment through the upload path (with all its checks), any other is listed as "metadata only". Every
item taken is recorded at once with its version, so a second sync takes only what is new or changed, and a sync cut
half-way (an error, a limit) resumes where it stopped: the library version a sync saw becomes the next one's
starting point only when it took everything. A PDF the library refuses (damaged, no text) is recorded as failed at
its item's version: it is not read again until the item changes, and holds no later sync back. Zotero's refusals (a
bad key, rate limits, a timeout) are one line, and what they stopped is taken by the next sync.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from copilot.errors import UserError
from ingest.models import Progress, no_progress
from ingest.zotero import arxiv_id_of_item, is_stored_pdf

if TYPE_CHECKING:
    from copilot.engine import Copilot

PAGE = 100  # items per request, the web API's most
LEFT = "left for the next sync"  # an item a limit of this sync left untaken
MAX_LIST_PAGES = 100  # pages of changed items one sync lists at most (10,000 items); past them, the next sync goes on
KEYS_PER_REQUEST = 50  # the web API's most item keys in one request (itemKey=A,B,...)
MAX_ATTACHMENT_PAGES = 20  # pages of changed attachments one sync reads (a PDF added to a record taken before)
SKIPPED_TYPES = ("note", "annotation")


class ZoteroError(UserError):
    """Zotero refused or could not be reached (one line; what was synced before it is kept)."""


class ZoteroNotFound(ZoteroError):
    """Zotero has no such library, collection or file (an attachment whose file is not in Zotero's storage)."""


def _refusal(response: httpx.Response) -> None:
    """httpx response hook: Zotero's refusals as one line, before pyzotero reads the response."""
    status = response.status_code
    if status < 400:
        return
    if status in (401, 403):
        raise ZoteroError("Zotero refused the key: check the user or group id, and that the key may read this "
                          "library.")
    if status == 404:
        raise ZoteroNotFound("Zotero has no such library, collection or file: check the ids.")
    if status == 429:
        wait = response.headers.get("Retry-After") or response.headers.get("Backoff") or "a few"
        raise ZoteroError(f"Zotero is limiting requests: sync again in {wait} seconds (what was synced is kept, "
                          "and the next sync goes on from there).")
    raise ZoteroError(f"Zotero answered with an error ({status}): try again later; what was synced is kept.")


def client(connection: dict[str, Any], api_key: str | None, *, api_url: str, timeout_s: float) -> Any:  # noqa: ANN401
    """A pyzotero client for ``connection`` (its stored fields), on the web API at ``api_url`` or Zotero 7's local
    API, with a timeout and Zotero's refusals raised as :class:`ZoteroError`."""
    from pyzotero import zotero

    zot = zotero.Zotero(connection["library_id"], connection["library_type"], api_key or None,
                        local=bool(connection["local"]))
    if not connection["local"]:
        zot.endpoint = api_url.rstrip("/")
    zot.client.timeout = httpx.Timeout(timeout_s)
    zot.client.event_hooks["response"].append(_refusal)
    return zot


def _call(step: Callable[[], Any]) -> Any:  # noqa: ANN401 - what pyzotero returns
    """One request to Zotero, its network failures as one line."""
    try:
        return step()
    except httpx.TimeoutException as exc:
        raise ZoteroError("Zotero did not answer in time: sync again later; what was synced is kept.") from exc
    except httpx.TransportError as exc:
        raise ZoteroError("Zotero could not be reached: check the connection and sync again; what was synced is "
                          "kept.") from exc


def _pages(zot: Any, collection: str, since: int) -> Iterator[tuple[list[dict[str, Any]], int]]:  # noqa: ANN401
    """The top-level items changed since library version ``since``, a page at a time (oldest change first), each
    with the library's version when Zotero answered it."""
    params = {"since": since, "limit": PAGE, "sort": "dateModified", "direction": "asc"}
    page = _call(lambda: zot.collection_items_top(collection, **params) if collection else zot.top(**params))
    yield list(page), int(zot.request.headers.get("Last-Modified-Version") or since)
    for _ in range(MAX_LIST_PAGES - 1):
        if not (zot.links and zot.links.get("next")):
            return
        page = _call(lambda: zot.follow())
        yield list(page), int(zot.request.headers.get("Last-Modified-Version") or since)


def _file_url(zot: Any, key: str) -> str:  # noqa: ANN401 - a pyzotero client
    return f"{zot.endpoint}/{zot.library_type}/{zot.library_id}/items/{key}/file"


def _bounded(response: httpx.Response, most: int) -> bytes | None:
    """A response's body read as it streams in; None once it passes ``most`` bytes (nothing more is read)."""
    if int(response.headers.get("Content-Length") or 0) > most:
        return None
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > most:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _download(zot: Any, key: str, most: int) -> bytes | None:  # noqa: ANN401 - a pyzotero client
    """An attachment's file from the web API, read as it streams in; None once it passes ``most`` bytes."""
    with zot.client.stream("GET", _file_url(zot, key), headers=zot.default_headers()) as response:
        return _bounded(response, most)


def _local_file(zot: Any, key: str, most: int) -> bytes | None:  # noqa: ANN401 - a pyzotero client
    """An attachment's file from Zotero 7's local API, which answers with a redirect to the file on this machine:
    the file's size is read first, and a file larger than ``most`` bytes is never read (None). A local API that
    sends the bytes itself is read as the web API's are."""
    with zot.client.stream("GET", _file_url(zot, key), headers=zot.default_headers(),
                           follow_redirects=False) as response:
        if not response.is_redirect:
            return _bounded(response, most)
        location = response.headers.get("Location", "")
    try:
        target = httpx.URL(location)
    except httpx.InvalidURL:
        target = None
    if target is None or target.scheme != "file" or target.host not in ("", "localhost"):
        raise ZoteroError("Zotero's local API pointed a file somewhere other than this machine; nothing was read.")
    path = Path(target.path)  # httpx gives the path decoded
    if not path.is_file():
        raise ZoteroNotFound("Zotero has no such file on this machine.")
    try:
        if path.stat().st_size > most:
            return None
        with path.open("rb") as handle:
            content = handle.read(most + 1)  # a file that grew since its size was read is still bounded
    except OSError as exc:
        raise ZoteroError(f"A file of Zotero's could not be read on this machine ({exc.strerror or 'unreadable'}); "
                          "sync again once it can be.") from exc
    return content if len(content) <= most else None


def _gained_a_pdf(zot: Any, since: int, records_only: set[str],  # noqa: ANN401 - a pyzotero client
                  listed: set[str]) -> list[dict[str, Any]]:
    """Items taken before as records only that have gained a stored PDF since library version ``since``: a new child
    attachment leaves its parent's version as it was, so the top-level listing does not show them."""
    if not records_only:
        return []
    params = {"since": since, "itemType": "attachment", "limit": PAGE}
    pages = [_call(lambda: zot.items(**params))]
    while zot.links and zot.links.get("next") and len(pages) < MAX_ATTACHMENT_PAGES:
        pages.append(_call(lambda: zot.follow()))
    parents = [a["data"].get("parentItem") for page in pages for a in page if is_stored_pdf(a.get("data") or {})]
    wanted = list(dict.fromkeys(p for p in parents if p in records_only and p not in listed))
    # Fetched 50 at a time (the web API's most keys a request), not one request a parent.
    return [item for at in range(0, len(wanted), KEYS_PER_REQUEST)
            for item in _call(lambda at=at: zot.items(itemKey=",".join(wanted[at:at + KEYS_PER_REQUEST])))]


def _safe_name(text: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "zotero"
    return stem if stem.lower().endswith(".pdf") else f"{stem}.pdf"


def sync(copilot: Copilot, user_id: str, api_key: str | None, progress: Progress = no_progress, *,
         quotas: bool = False, address: str | None = None) -> dict[str, Any]:
    """Take what is new or changed in the user's connected Zotero library (see the module docstring).

    Returns the counts (``added``, ``already``, ``metadata_only``, ``unchanged``, ``failed``, ``left``: items left
    for the next sync by the limits) and one line per item taken."""
    settings, store = copilot.settings, copilot.store
    connection = store.zotero.connection(user_id)
    if connection is None:
        raise UserError("Connect a Zotero library first (a user or group id and an API key, or Zotero's local API).")
    zot = client(connection, api_key, api_url=settings.zotero_api_url, timeout_s=settings.zotero_timeout_s)
    limit = settings.zotero_max_items
    progress(0.0, "asking Zotero for what changed…")
    since = int(connection["library_version"] or 0)
    done = store.zotero.versions(user_id)
    changed: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    complete, version, versions = True, since, set()
    for page, version in _pages(zot, connection["collection"] or "", since):
        versions.add(version)
        for listed in page:  # an item taken at this version before (by a sync that was cut) is not taken again
            if done.get(listed["key"]) == int(listed.get("version") or 0):
                counts["unchanged"] += 1
            else:
                changed.append(listed)
        if len(changed) > limit:
            complete = False
            break
    if len(versions) > 1 or (zot.links and zot.links.get("next")):
        # The library changed while it was listed (pages may have shifted), or more pages than one sync lists: the
        # starting point stays, and the next sync lists it again (what was taken is skipped as unchanged).
        complete = False
    if since and complete:
        changed += _gained_a_pdf(zot, since, store.zotero.records_only(user_id), {i["key"] for i in changed})
    todo = changed[:limit]
    counts["left"] = len(changed) - len(todo)
    bytes_left = settings.zotero_max_mb * 1024 * 1024
    lines: list[dict[str, Any]] = []
    for n, item in enumerate(todo):
        data = item.get("data") or {}
        key, item_version = item["key"], int(item.get("version") or 0)
        title = str(data.get("title") or data.get("filename") or key)
        progress(n / max(1, len(todo)), f"[{n + 1}/{len(todo)}] {title[:60]}")
        taken = _take(copilot, zot, user_id, data, key, quotas=quotas, address=address, bytes_left=bytes_left,
                      local=bool(connection["local"]))
        bytes_left -= taken.bytes_read
        lines.append({"item": key, "title": title, "status": taken.status, "paper_id": taken.paper_id,
                      "message": taken.message})
        if taken.status == LEFT or (taken.status == "failed" and taken.retry):
            complete = False  # taken again by the next sync
            counts["left" if taken.status == LEFT else "failed"] += 1
            continue
        counts[taken.status.replace(" ", "_")] += 1  # a refused PDF: failed, and recorded at its version
        store.zotero.record_item(user_id, key, item_version, taken.status, taken.paper_id, title)
    if complete and not counts["left"]:
        store.zotero.finished(user_id, version)
    progress(1.0, "done")
    return {"added": counts["added"], "already": counts["already"], "metadata_only": counts["metadata_only"],
            "unchanged": counts["unchanged"], "failed": counts["failed"], "left": counts["left"], "items": lines}


@dataclass
class Taken:
    """What became of one item: ``status`` (added, already, metadata only, failed, or :data:`LEFT`)."""

    status: str
    paper_id: str | None
    message: str
    bytes_read: int = 0
    retry: bool = True  # a failure the next sync tries again (a network error, a limit); False: the file was refused


def _take(copilot: Copilot, zot: Any, user_id: str, data: dict[str, Any], key: str, *,  # noqa: ANN401
          quotas: bool, address: str | None, bytes_left: int, local: bool) -> Taken:
    if data.get("itemType") in SKIPPED_TYPES:
        return Taken("metadata only", None, "a note, not a paper")
    arxiv_id = arxiv_id_of_item(data)
    if arxiv_id:
        try:
            if quotas:
                copilot.admit(user_id, "arxiv_add", address=address)
            report = copilot.add_arxiv([arxiv_id], user_id, quotas=quotas)[0]
        except UserError as exc:
            return Taken("failed", None, str(exc))
        return Taken(_status(report), report["ref"] if report["ok"] else None, report["message"])
    try:
        pdfs = [data] if is_stored_pdf(data) else [
            child["data"] for child in _call(lambda: zot.children(key)) if is_stored_pdf(child.get("data") or {})]
        if not pdfs:
            return Taken("metadata only", None, "no arXiv id and no stored PDF")
        attachment = pdfs[0]
        most = min(bytes_left, copilot.settings.max_upload_mb * 1024 * 1024)
        content = _call(lambda: _local_file(zot, attachment["key"], most) if local
                        else _download(zot, attachment["key"], most))
    except ZoteroNotFound:
        return Taken("metadata only", None, "its PDF is not in Zotero's storage")
    if content is None:
        if most < bytes_left:
            return Taken("metadata only", None, f"its PDF is larger than the {copilot.settings.max_upload_mb} MB "
                         "an upload may be")
        return Taken(LEFT, None, "left for the next sync: the bytes one sync may read are spent")
    with tempfile.TemporaryDirectory(prefix="zotero-") as folder:
        path = Path(folder) / _safe_name(str(attachment.get("filename") or data.get("title") or key))
        path.write_bytes(bytes(content))
        try:
            if quotas:
                copilot.admit(user_id, "upload", address=address)
            report = copilot.upload([path], user_id, quotas=quotas)[0]
        except UserError as exc:
            return Taken("failed", None, str(exc), len(content))
    # A PDF the library refuses (damaged, no text, too many pages) is refused again until its item changes.
    return Taken(_status(report), report.get("paper_id"), report["message"], len(content), retry=report["ok"])


def _status(report: dict[str, Any]) -> str:
    if not report["ok"]:
        return "failed"
    added = report.get("added", report.get("status") == "added")
    return "added" if added else "already"
