"""PDFs into the data directory: downloads with size and type checks, and local uploads.

Both are *staged*: written to a temporary file in the data directory, named after the process writing it
(``.upload-<pid>-….tmp``), and hashed on the way. The library moves a staged file to its place,
``<sha256>.pdf``, inside the transaction that stores the paper, so a failed or interrupted add never leaves a
PDF that no paper uses, and the same file is stored once. A staged file whose process is gone is a leftover of a
killed add (``python -m copilot doctor --repair`` removes it).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import requests

from ingest.errors import DownloadError, PDFError

MAX_PDF_BYTES = 50 * 1024 * 1024
PDF_MAGIC = b"%PDF-"
_ACCEPTED_TYPES = ("application/pdf", "application/x-pdf", "application/octet-stream", "binary/octet-stream")


_STAGED = re.compile(r"^\.(?:upload|download)-(?P<pid>\d+)-.*\.tmp$")


def stored_name(sha256: str) -> str:
    """The name of a stored PDF in the data directory: its content's hash."""
    return f"{sha256}.pdf"


def _stage(dest_dir: Path, kind: str) -> tuple[int, Path]:
    fd, name = tempfile.mkstemp(prefix=f".{kind}-{os.getpid()}-", suffix=".tmp", dir=dest_dir)
    return fd, Path(name)


def being_written(path: Path) -> bool:
    """Is ``path`` a staged PDF whose process is still running (an add in progress, not a leftover)?"""
    match = _STAGED.match(path.name)
    if not match:
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def download_pdf(
    url: str,
    dest_dir: Path,
    *,
    max_bytes: int = MAX_PDF_BYTES,
    timeout_s: float = 60.0,
    session: requests.Session | None = None,
    before_request: Callable[[], None] | None = None,
) -> tuple[Path, str]:
    """Fetch ``url`` into a staged file in ``dest_dir``; returns (path, sha256). The caller moves the file to its
    place or removes it. Raises :class:`DownloadError` (and leaves nothing behind)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    if before_request is not None:
        before_request()
    http = session or requests.Session()
    try:
        response = http.get(url, stream=True, timeout=timeout_s, headers={"User-Agent": "paper-copilot"})
    except requests.RequestException as exc:
        raise DownloadError(f"Could not download {url}: {exc.__class__.__name__}. Check your connection; "
                            "uploading the PDF directly still works.") from exc
    with response:
        if response.status_code != 200:
            raise DownloadError(f"Downloading {url} failed with HTTP {response.status_code}.")
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type and content_type not in _ACCEPTED_TYPES:
            raise DownloadError(f"{url} is not a PDF (the server sent {content_type}).")
        declared = int(response.headers.get("Content-Length") or 0)
        if declared > max_bytes:
            raise DownloadError(f"{url} is {declared / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB limit.")
        digest = hashlib.sha256()
        fd, tmp = _stage(dest_dir, "download")
        done = False
        try:
            size = 0
            head = b""
            with os.fdopen(fd, "wb") as out:
                for block in response.iter_content(chunk_size=1 << 16):
                    size += len(block)
                    if size > max_bytes:
                        raise DownloadError(f"{url} is over the {max_bytes / 1e6:.0f} MB limit.")
                    if len(head) < len(PDF_MAGIC):
                        head += block[: len(PDF_MAGIC)]
                    digest.update(block)
                    out.write(block)
            if not head.startswith(PDF_MAGIC):
                raise DownloadError(f"{url} did not return a PDF file.")
            done = True
            return tmp, digest.hexdigest()
        except requests.RequestException as exc:
            raise DownloadError(f"The download of {url} was interrupted: {exc.__class__.__name__}.") from exc
        finally:
            if not done:
                tmp.unlink(missing_ok=True)


def stage_upload(source: Path, dest_dir: Path, *, max_bytes: int = MAX_PDF_BYTES) -> tuple[Path, str]:
    """Copy a local PDF into a staged file in ``dest_dir``; returns (path, sha256). The caller moves the file to
    its place or removes it. Raises :class:`PDFError` for non-PDFs, naming ``source`` as the user gave it."""
    if not source.is_file():
        raise PDFError(f"{source} does not exist or is not a file.")
    size = source.stat().st_size
    if size == 0:
        raise PDFError(f"{source.name} is empty (0 bytes).")
    if size > max_bytes:
        raise PDFError(f"{source.name} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.0f} MB limit.")
    with open(source, "rb") as handle:
        if not handle.read(1024).lstrip().startswith(PDF_MAGIC):
            raise PDFError(f"{source.name} is not a PDF file.")
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = _stage(dest_dir, "upload")
    digest = hashlib.sha256()
    try:
        with open(source, "rb") as handle, os.fdopen(fd, "wb") as out:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, digest.hexdigest()
