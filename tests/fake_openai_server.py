"""A small local HTTP server speaking the OpenAI chat-completions protocol, streaming included (tests only)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD_KEY = "sk-good"


class ChatCompletionsHandler(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions with a reply that echoes the last user message word by word."""

    server: ChatServer

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        if self.headers.get("Authorization") not in {f"Bearer {key}" for key in self.server.keys}:
            self._json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                       "code": "invalid_api_key"}})
            return
        if body.get("model") == "missing-model":
            self._json(404, {"error": {"message": "The model does not exist", "type": "invalid_request_error",
                                       "code": "model_not_found"}})
            return
        if body.get("model") == "limited-model":
            self._json(429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})
            return
        if body.get("model") == "slow-model":
            time.sleep(3)
        words = ["You", " said:", *[" " + w for w in body["messages"][-1]["content"].split()]]
        words = words[: body.get("max_tokens") or len(words)]
        if not body.get("stream"):
            self._json(200, {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "".join(words)}}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in words:
            event = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        done = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, keys: tuple[str, ...] = (GOOD_KEY,)) -> None:
        super().__init__(("127.0.0.1", 0), ChatCompletionsHandler)
        self.keys = keys  # the API keys (bearer tokens) it accepts
        self.requests: list[dict] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (the timeout test) closes the socket mid-stream: that is expected."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
