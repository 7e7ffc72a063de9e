"""The OpenAI-compatible backend against a local server speaking the chat-completions protocol."""

import socket
from collections.abc import Iterator

import pytest

from copilot.config import Settings
from copilot.llm import LLMError, build_llm
from copilot.llm.openai_compat import OpenAICompatibleModel
from tests.fake_openai_server import GOOD_KEY, ChatServer


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as s:
        yield s


def model(server: ChatServer, **kw) -> OpenAICompatibleModel:
    args = {"base_url": server.base_url, "api_key": GOOD_KEY, "model": "tiny", "timeout_s": 5} | kw
    return OpenAICompatibleModel(**args)


def test_streams_pieces_in_order(server: ChatServer) -> None:
    llm = model(server)
    pieces = list(llm.stream([{"role": "user", "content": "hello there world"}], max_tokens=50))
    assert pieces == ["You", " said:", " hello", " there", " world"]
    request = server.requests[-1]["body"]
    assert request["stream"] is True and request["model"] == "tiny" and request["max_tokens"] == 50
    assert llm.usage.calls == 1 and llm.usage.completion_tokens > 0


def test_chat_collects_and_passes_options(server: ChatServer) -> None:
    llm = model(server)
    text = llm.chat([{"role": "system", "content": "be brief"}, {"role": "user", "content": "a b c"}],
                    max_tokens=3, temperature=0.0, stop=["\n"])
    assert text == "You said: a"
    body = server.requests[-1]["body"]
    assert body["temperature"] == 0.0 and body["stop"] == ["\n"]
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_auto_picks_the_configured_endpoint(server: ChatServer) -> None:
    settings = Settings(openai_base_url=server.base_url, openai_api_key=GOOD_KEY, llm_model="tiny")
    llm = build_llm(settings)
    assert isinstance(llm, OpenAICompatibleModel)
    assert llm.chat([{"role": "user", "content": "ping"}]) == "You said: ping"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wrong_base_url_gives_a_clear_error() -> None:
    llm = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key="k", model="m",
                                timeout_s=2)
    with pytest.raises(LLMError, match="Cannot reach the LLM endpoint .* COPILOT_OPENAI_BASE_URL"):
        llm.chat([{"role": "user", "content": "hi"}])


def test_wrong_path_gives_a_clear_error(server: ChatServer) -> None:
    llm = model(server, base_url=server.base_url.removesuffix("/v1"))
    with pytest.raises(LLMError, match="not found"):
        llm.chat([{"role": "user", "content": "hi"}])


def test_bad_key(server: ChatServer) -> None:
    with pytest.raises(LLMError, match="refused the API key.*COPILOT_OPENAI_API_KEY"):
        model(server, api_key="sk-wrong").chat([{"role": "user", "content": "hi"}])


def test_missing_model(server: ChatServer) -> None:
    with pytest.raises(LLMError, match="Model 'missing-model'.*COPILOT_LLM_MODEL"):
        model(server, model="missing-model").chat([{"role": "user", "content": "hi"}])


def test_timeout(server: ChatServer) -> None:
    with pytest.raises(LLMError, match="did not answer within the timeout"):
        model(server, model="slow-model", timeout_s=0.5).chat([{"role": "user", "content": "hi"}])
