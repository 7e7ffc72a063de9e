"""The running app (started by ``make run``) through HTTP and ``gradio_client``."""

import urllib.request

import pytest
from gradio_client import Client

from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS

pytestmark = pytest.mark.slow


def test_page_is_served(app_url: str) -> None:
    with urllib.request.urlopen(app_url, timeout=30) as response:
        assert response.status == 200
        html = response.read().decode()
    assert "Paper Copilot" in html


def test_chat_api_answers_with_the_embedded_model(app_url: str) -> None:
    client = Client(app_url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)
    assert "/chat" in api["named_endpoints"]
    info = client.predict(api_name="/model_info")
    assert info["backend"] == "local" and EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL].title in info["model"]
    textbox, history, retrieved, query_id, status = client.predict(
        "What is a citation graph? Answer in one sentence.", [], [], False, False, api_name="/chat")
    assert textbox == "" and isinstance(query_id, int | float)
    assert history[-2]["role"] == "user" and "citation graph" in str(history[-2]["content"])
    assert history[-1]["role"] == "assistant"
    answer = history[-1]["content"]
    answer = answer if isinstance(answer, str) else " ".join(part.get("text", "") for part in answer)
    assert len(answer.split()) >= 3, answer


def test_chat_api_keeps_history(app_url: str) -> None:
    client = Client(app_url, verbose=False)
    _, first, *_ = client.predict("What is a citation?", [], [], False, False, api_name="/chat")
    _, second, *_ = client.predict("Say hello.", first, [], False, False, api_name="/chat")
    assert len(second) == len(first) + 2
    assert [m["role"] for m in second[-2:]] == ["user", "assistant"]


def test_empty_message_changes_nothing(app_url: str) -> None:
    client = Client(app_url, verbose=False)
    textbox, history, *_ = client.predict("   ", [], [], False, False, api_name="/chat")
    assert history == []
