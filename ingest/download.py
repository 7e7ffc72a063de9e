"""PDFs into the data directory: downloads with size and type checks, and local uploads.

Files are named by their SHA-256, written to a temporary file and renamed, so a failed or interrupted
transfer never leaves a half file where a paper is expected, and the same file is stored once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import requests

from ingest.errors import DownloadError, PDFError

MAX_PDF_BYTES = 50 * 1024 * 1024
PDF_MAGIC = b"%PDF-"
_ACCEPTED_TYPES = ("application/pdf", "application/x-pdf", "application/octet-stream", "binary/octet-stream")


def _finish(tmp: Path, digest: str, dest_dir: Path) -> Path:
    final = dest_dir / f"{digest}.pdf"
    if final.exists():
        tmp.unlink(missing_ok=True)
    else:
        os.replace(tmp, final)
    return final


def download_pdf(
    url: str,
    dest_dir: Path,
    *,
    max_bytes: int = MAX_PDF_BYTES,
    timeout_s: float = 60.0,
    session: requests.Session | None = None,
    before_request: Callable[[], None] | None = None,
) -> tuple[Path, str]:
    """Fetch ``url`` into ``dest_dir``; returns (path, sha256). Raises :class:`DownloadError`."""
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
        fd, tmp_name = tempfile.mkstemp(prefix=".download-", suffix=".tmp", dir=dest_dir)
        tmp = Path(tmp_name)
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
            return _finish(tmp, digest.hexdigest(), dest_dir), digest.hexdigest()
        except requests.RequestException as exc:
            raise DownloadError(f"The download of {url} was interrupted: {exc.__class__.__name__}.") from exc
        finally:
            tmp.unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def store_upload(source: Path, dest_dir: Path, *, max_bytes: int = MAX_PDF_BYTES) -> tuple[Path, str]:
    """Copy a local PDF into ``dest_dir``; returns (path, sha256). Raises :class:`PDFError` for non-PDFs."""
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
    digest = file_sha256(source)
    final = dest_dir / f"{digest}.pdf"
    if not final.exists():
        fd, tmp_name = tempfile.mkstemp(prefix=".upload-", suffix=".tmp", dir=dest_dir)
        os.close(fd)
        try:
            shutil.copyfile(source, tmp_name)
            os.replace(tmp_name, final)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
    return final, digest
