"""PDF downloads against a local HTTP server, and local uploads: size and type checks, staged files that a failure
removes and that name their process."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import os

from ingest.download import being_written, download_pdf, stage_upload
from ingest.errors import DownloadError, PDFError
from tests.conftest import TEST_DATA, free_port

PDF = TEST_DATA / "papers" / "N18-3011.pdf"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        routes = {
            "/paper.pdf": (200, "application/pdf", PDF.read_bytes()),
            "/page.html": (200, "text/html", b"<html>not a pdf</html>"),
            "/fake.pdf": (200, "application/pdf", b"<html>login required</html>"),
            "/big.pdf": (200, "application/pdf", b"%PDF-1.4\n" + b"0" * 200_000),
        }
        status, ctype, body = routes.get(self.path, (404, "text/plain", b"missing"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_download_is_staged_with_its_hash(server: str, tmp_path: Path) -> None:
    import hashlib

    calls = []
    path, sha = download_pdf(f"{server}/paper.pdf", tmp_path, before_request=lambda: calls.append(1))
    assert path.parent == tmp_path and path.read_bytes() == PDF.read_bytes() and calls == [1]
    assert sha == hashlib.sha256(PDF.read_bytes()).hexdigest()
    assert path.name.startswith(f".download-{os.getpid()}-") and being_written(path)
    assert leftovers(tmp_path) == [path.name]
    dead = tmp_path / ".download-999999999-x.tmp"
    assert not being_written(dead) and not being_written(tmp_path / f"{sha}.pdf")


@pytest.mark.parametrize(
    ("route", "message"),
    [("/page.html", "not a PDF"), ("/fake.pdf", "did not return a PDF"), ("/nothing.pdf", "HTTP 404")],
)
def test_bad_downloads_leave_nothing(server: str, tmp_path: Path, route: str, message: str) -> None:
    with pytest.raises(DownloadError, match=message):
        download_pdf(f"{server}{route}", tmp_path)
    assert leftovers(tmp_path) == []


def test_size_limit(server: str, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="over the"):
        download_pdf(f"{server}/big.pdf", tmp_path, max_bytes=100_000)
    assert leftovers(tmp_path) == []


def test_unreachable(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="Could not download.*uploading the PDF directly still works"):
        download_pdf(f"http://127.0.0.1:{free_port()}/x.pdf", tmp_path, timeout_s=2)


def test_upload_checks(tmp_path: Path) -> None:
    dest = tmp_path / "pdfs"
    path, sha = stage_upload(PDF, dest)
    assert path.read_bytes() == PDF.read_bytes() and path.name.startswith(f".upload-{os.getpid()}-")
    text = tmp_path / "notes.pdf"
    text.write_text("just text")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(PDFError, match="not a PDF"):
        stage_upload(text, dest)
    with pytest.raises(PDFError, match="empty"):
        stage_upload(empty, dest)
    with pytest.raises(PDFError, match="does not exist"):
        stage_upload(tmp_path / "missing.pdf", dest)
    with pytest.raises(PDFError, match="over the"):
        stage_upload(PDF, dest, max_bytes=1000)
    assert leftovers(dest) == [path.name]
