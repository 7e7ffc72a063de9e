"""A local stand-in for the Zotero web API (v3), in the shapes the real one answers: top-level items paged with a
``Link: rel="next"`` header, ``Last-Modified-Version`` and ``Total-Results``, ``since`` for what changed, child
attachments, attachment files, a 403 for a wrong key and a 429 with ``Retry-After`` when told to. The library is
plain data a test edits between syncs (a new item, a changed version)."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

USER = "475425"
KEY = "ZoteroTestKey0123456789ab"


def item(key: str, version: int, item_type: str, title: str, **fields: Any) -> dict[str, Any]:  # noqa: ANN401
    """One item as the API returns it (``format=json``): key, version, library, links, meta and its data."""
    data = {"key": key, "version": version, "itemType": item_type, "title": title, "creators": [
        {"creatorType": "author", "firstName": "Ada", "lastName": "Lovelace"}], "tags": [], "collections": [],
        "relations": {}, "dateAdded": "2026-11-01T10:00:00Z", "dateModified": "2026-11-01T10:00:00Z", **fields}
    return {"key": key, "version": version,
            "library": {"type": "user", "id": int(USER), "name": "ada", "links": {}},
            "links": {"self": {"href": f"https://api.zotero.org/users/{USER}/items/{key}",
                               "type": "application/json"}},
            "meta": {"creatorSummary": "Lovelace", "numChildren": 0}, "data": data}


def attachment(key: str, parent: str, version: int, filename: str, **fields: Any) -> dict[str, Any]:  # noqa: ANN401
    found = item(key, version, "attachment", filename, **({"parentItem": parent, "linkMode": "imported_file",
                 "contentType": "application/pdf", "filename": filename, "md5": "0" * 32, "mtime": 1700000000000}
                 | fields))
    found["data"].pop("creators")
    return found


class ZoteroLibrary:
    """The served library: ``items`` (top-level and attachments, as the API returns them), ``files`` (attachment key
    -> PDF path), and switches: ``rate_limited`` answers 429, ``requests`` counts what was asked."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.files: dict[str, Path] = {}
        self.collections: dict[str, list[str]] = {}  # collection key -> top-level item keys
        self.rate_limited = False
        self.fail_file: str | None = None  # an attachment whose download drops the connection
        self.file_urls = False  # answer a file with a redirect to its file:// URL, as Zotero 7's local API does
        self.redirect_to: str | None = None  # with file_urls: redirect every file here instead
        self.requests: list[str] = []

    @property
    def version(self) -> int:
        return max((i["version"] for i in self.items), default=0)

    def top(self) -> list[dict[str, Any]]:
        return [i for i in self.items if not i["data"].get("parentItem")]

    def children(self, key: str) -> list[dict[str, Any]]:
        return [i for i in self.items if i["data"].get("parentItem") == key]


class _Handler(http.server.BaseHTTPRequestHandler):
    library: ZoteroLibrary

    def log_message(self, *args: Any) -> None:  # noqa: ANN401
        pass

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, text.encode(), "text/plain", headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        library = self.library
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        library.requests.append(url.path)
        if library.rate_limited:
            self._error(429, "Too Many Requests", {"Retry-After": "7"})
            return
        if self.headers.get("Authorization") != f"Bearer {KEY}" and self.headers.get("Zotero-API-Key") != KEY:
            self._error(403, "Forbidden")
            return
        parts = url.path.strip("/").split("/")
        if parts[:2] != ["users", USER]:
            self._error(404, "Not found")
            return
        rest = parts[2:]
        if rest == ["items", "top"] or (len(rest) == 4 and rest[0] == "collections" and rest[2:] == ["items", "top"]):
            top = library.top()
            if rest[0] == "collections":
                if rest[1] not in library.collections:
                    self._error(404, "Collection not found")
                    return
                top = [i for i in top if i["key"] in library.collections[rest[1]]]
            since = int(query.get("since", 0))
            changed = sorted((i for i in top if i["version"] > since), key=lambda i: i["version"])
            start, limit = int(query.get("start", 0)), int(query.get("limit", 25))
            page = changed[start:start + limit]
            headers = {"Last-Modified-Version": str(library.version), "Total-Results": str(len(changed))}
            if start + limit < len(changed):
                params = dict(query, start=str(start + limit))
                link = f"http://{self.headers['Host']}{url.path}?" + "&".join(f"{k}={v}" for k, v in params.items())
                headers["Link"] = f'<{link}>; rel="next"'
            self._send(200, json.dumps(page).encode(), "application/json", headers)
            return
        if rest == ["items"] and "itemKey" in query:  # the items of these keys, at most 50 (as the web API)
            keys = query["itemKey"].split(",")
            if len(keys) > 50:
                self._error(400, "Too many keys")
                return
            found = [i for i in library.items if i["key"] in keys]
            self._send(200, json.dumps(found).encode(), "application/json",
                       {"Last-Modified-Version": str(library.version)})
            return
        if rest == ["items"]:  # every item (children too), here only by type and version, as the sync asks
            since = int(query.get("since", 0))
            found = sorted((i for i in library.items if i["version"] > since
                            and i["data"]["itemType"] == query.get("itemType", i["data"]["itemType"])),
                           key=lambda i: i["version"])
            self._send(200, json.dumps(found[:int(query.get("limit", 25))]).encode(), "application/json",
                       {"Last-Modified-Version": str(library.version), "Total-Results": str(len(found))})
            return
        if len(rest) == 2 and rest[0] == "items":
            found = [i for i in library.items if i["key"] == rest[1]]
            if not found:
                self._error(404, "Not found")
                return
            self._send(200, json.dumps(found[0]).encode(), "application/json",
                       {"Last-Modified-Version": str(library.version)})
            return
        if len(rest) == 3 and rest[0] == "items" and rest[2] == "children":
            self._send(200, json.dumps(library.children(rest[1])).encode(), "application/json",
                       {"Last-Modified-Version": str(library.version)})
            return
        if len(rest) == 3 and rest[0] == "items" and rest[2] == "file" and rest[1] in library.files:
            if library.fail_file == rest[1]:
                self.connection.close()  # a download cut: the client sees the connection drop
                return
            if library.file_urls:
                where = library.redirect_to or library.files[rest[1]].resolve().as_uri()
                self._send(302, b"", "text/plain", {"Location": where})
                return
            self._send(200, library.files[rest[1]].read_bytes(), "application/pdf")
            return
        self._error(404, "Not found")


def serve(library: ZoteroLibrary) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``library`` on a free local port; returns the server and its base URL (the API's root)."""
    handler = type("Handler", (_Handler,), {"library": library})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
