"""The Hugging Face Inference backend with huggingface_hub's HTTP layer replaced by a mock transport."""

import json
from collections.abc import Callable, Iterator

import httpx2
import pytest
from huggingface_hub.utils import _http as hub_http

from copilot.config import Settings
from copilot.llm import LLMError, build_llm
from copilot.llm.hf_inference import HFInferenceModel

Handler = Callable[[httpx2.Request], httpx2.Response]


def sse(words: list[str]) -> bytes:
    events = [{"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": w}, "finish_reason": None}]}
              for w in words]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


@pytest.fixture
def transport() -> Iterator[Callable[[Handler], list[httpx2.Request]]]:
    """Install a handler as huggingface_hub's HTTP layer; returns the list of requests it saw."""

    def install(handler: Handler) -> list[httpx2.Request]:
        seen: list[httpx2.Request] = []

        def record(request: httpx2.Request) -> httpx2.Response:
            seen.append(request)
            return handler(request)

        hub_http.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(record)))
        return seen

    yield install
    hub_http.set_client_factory(hub_http.default_client_factory)


def test_streams_a_chat_completion(transport) -> None:  # noqa: ANN001
    seen = transport(lambda req: httpx2.Response(200, content=sse(["Graph", " neural", " nets"]),
                                                 headers={"Content-Type": "text/event-stream"}))
    llm = HFInferenceModel(token="hf_test", model="org/chat-model", timeout_s=5)
    assert list(llm.stream([{"role": "user", "content": "topic?"}], max_tokens=20)) == ["Graph", " neural", " nets"]
    request = seen[-1]
    assert request.url.path.endswith("/chat/completions")
    assert request.headers["authorization"] == "Bearer hf_test"
    body = json.loads(request.content)
    assert body["model"].startswith("org/chat-model") and body["stream"] is True and body["max_tokens"] == 20


def test_hf_answers_when_named_and_a_token_alone_changes_nothing(transport) -> None:  # noqa: ANN001
    transport(lambda req: httpx2.Response(200, content=sse(["ok"]), headers={"Content-Type": "text/event-stream"}))
    only_token = Settings(hf_token="hf_test", llm_model="org/m", openai_base_url="", openai_api_key="")
    assert only_token.resolved_backend() == "local"
    llm = build_llm(Settings(llm_backend="hf", hf_token="hf_test", llm_model="org/m", openai_base_url="",
                             openai_api_key=""))
    assert isinstance(llm, HFInferenceModel)
    assert llm.chat([{"role": "user", "content": "hi"}]) == "ok"


@pytest.mark.parametrize(
    ("status", "message"),
    [(401, "refused the token"), (404, "not served by Hugging Face Inference"), (429, "rate limiting"),
     (500, "HTTP 500")],
)
def test_http_errors_are_explained(transport, status: int, message: str) -> None:  # noqa: ANN001
    transport(lambda req: httpx2.Response(status, json={"error": "nope"}))
    with pytest.raises(LLMError, match=message):
        HFInferenceModel(token="hf_bad", model="org/m", timeout_s=5).chat([{"role": "user", "content": "hi"}])


def test_unreachable(transport) -> None:  # noqa: ANN001
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    transport(refuse)
    with pytest.raises(LLMError, match="Cannot reach Hugging Face Inference"):
        HFInferenceModel(token="hf_x", model="org/m", timeout_s=5).chat([{"role": "user", "content": "hi"}])


def test_timeout(transport) -> None:  # noqa: ANN001
    def slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    transport(slow)
    with pytest.raises(LLMError, match="in time|timed out"):
        HFInferenceModel(token="hf_x", model="org/m", timeout_s=1).chat([{"role": "user", "content": "hi"}])
