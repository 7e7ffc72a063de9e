"""A signed-in visitor of a Space is answered by the remote model that ``COPILOT_SIGNED_IN_MODEL`` names, on Hugging
Face Inference under the visitor's own OAuth token; a guest by the instance's model; a remote failure falls back to
the instance's model with a notice. Hugging Face Inference is stood in for by a local server speaking its
chat-completions protocol; the chat is the app's own handler, called as Gradio calls it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import gradio.oauth
import huggingface_hub.constants
import pytest

from copilot import prompts
from copilot.engine import Copilot
from copilot.ui import build_app
from copilot.ui.identity import COOKIE, guest_tokens
from copilot.ui.services import Services
from copilot.ui.users import visitor_token
from tests.fake_openai_server import ChatServer
from tests.library_support import add_paper, make_copilot
from tests.ui_harness import RoutedLLM

VISITOR_TOKEN = "hf_oauth_visitor_token"
QUESTION = "How are citation graphs of a digital library built?"
SENTENCE = "The citation graph of the digital library links papers, authors and venues through their references."


@pytest.fixture(autouse=True)
def no_hub_login(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off Spaces, Gradio's sign-in button asks the Hub who this machine is logged in as: answered here."""
    monkeypatch.setattr(gradio.oauth, "_get_mocked_oauth_info", lambda: {"access_token": "unused", "scope": "openid"})
    # The tests keep the Hub offline; on a Space, Inference is online (here it is the local server).
    monkeypatch.setattr(huggingface_hub.constants, "is_offline_mode", lambda: False)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(keys=(VISITOR_TOKEN,)) as running:
        yield running


def signed_in(token: str | None = VISITOR_TOKEN, scope: str = "openid profile inference-api"
              ) -> tuple[gr.OAuthProfile, gr.OAuthToken | None]:
    profile = gr.OAuthProfile({"preferred_username": "alice", "name": "Alice", "picture": "", "profile": ""})
    return profile, gr.OAuthToken(token=token, scope=scope, expires_at=2**40) if token else None


def prepared(tmp_path: Path, server: ChatServer, model: str = "org/visitor-model") -> tuple[Copilot, object]:
    copilot = make_copilot(tmp_path, RoutedLLM(), users="hf", signed_in_base_url=server.base_url.removesuffix("/v1"),
                           signed_in_model=model, secret="s" * 64)
    add_paper(copilot, "2301.00001", "The Literature Graph", sections=[("Method", SENTENCE)])
    demo = build_app(copilot.settings, Services(copilot.settings, copilot), warm_up=False)
    line = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "model-line").value
    assert f"Signed in: **{model}** on Hugging Face Inference" in line, "the page names both models"
    return copilot, next(fn for fn in demo.fns.values() if fn.api_name == "chat").fn


def ask(chat, request: object, profile: gr.OAuthProfile | None, token: gr.OAuthToken | None) -> str:  # noqa: ANN001
    """The chat handler's last answer bubble, called with the arguments Gradio injects."""
    shown = None
    for outputs in chat(QUESTION, [], None, False, False, request, profile, None, token):
        shown = outputs
    return shown[1][-1]["content"]


def answer_calls(copilot: Copilot) -> list[list[dict]]:
    """The instance model's answer calls (its thought calls come after, in the background)."""
    return [call for call in copilot.llm.calls if call[0]["content"] == prompts.ANSWER_SYSTEM]


def guest_request(copilot: Copilot) -> object:
    cookie = guest_tokens(copilot.settings).issue()
    return SimpleNamespace(cookies={COOKIE: cookie}, headers={}, client=SimpleNamespace(host="127.0.0.1"))


def test_a_signed_in_visitor_is_answered_by_the_remote_model_under_their_own_token(tmp_path: Path,
                                                                                      server: ChatServer) -> None:
    copilot, chat = prepared(tmp_path, server)
    profile, token = signed_in()
    shown = ask(chat, guest_request(copilot), profile, token)
    # The answer, then its two rechecks (the answer states a fact): all by the remote model, on the visitor's token.
    assert len(server.requests) == 3, "the remote model wrote the answer and its rechecks"
    assert all(r["auth"] == f"Bearer {VISITOR_TOKEN}" for r in server.requests), "never the instance's token"
    sent = server.requests[0]
    assert sent["auth"] == f"Bearer {VISITOR_TOKEN}", "the visitor's own token, not the instance's"
    assert sent["body"]["model"] == "org/visitor-model" and sent["body"]["stream"] is True
    assert QUESTION in sent["body"]["messages"][-1]["content"] and SENTENCE in sent["body"]["messages"][-1]["content"]
    assert "Answered by org/visitor-model on Hugging Face Inference, with your account." in shown
    assert answer_calls(copilot) == [], "the instance's model did not write it"


def test_a_guest_is_answered_by_the_instance_model(tmp_path: Path, server: ChatServer) -> None:
    copilot, chat = prepared(tmp_path, server)
    shown = ask(chat, guest_request(copilot), None, None)
    assert server.requests == [], "nothing reaches the remote model"
    assert len(answer_calls(copilot)) == 1 and QUESTION in answer_calls(copilot)[0][-1]["content"]
    assert "Hugging Face Inference" not in shown


def test_a_remote_failure_falls_back_to_the_instance_model_with_a_notice(tmp_path: Path, server: ChatServer,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    notices: list[str] = []
    monkeypatch.setattr(gr, "Warning", lambda message, *a, **k: notices.append(message))
    copilot, chat = prepared(tmp_path, server, model="limited-model")
    profile, token = signed_in()
    shown = ask(chat, guest_request(copilot), profile, token)
    assert len(server.requests) == 1 and server.requests[0]["auth"] == f"Bearer {VISITOR_TOKEN}"
    assert len(answer_calls(copilot)) == 1, "the instance's model answered"
    assert "Answered by this site's own model: limited-model on Hugging Face Inference failed." in shown
    assert len(notices) == 1 and "rate limiting your account" in notices[0] and "own model did" in notices[0]


def test_a_visitors_token_never_goes_to_the_instances_own_inference_url() -> None:
    from copilot.config import Settings
    from copilot.llm.hf_inference import HFInferenceModel

    settings = Settings(hf_base_url="http://127.0.0.1:9/v1", signed_in_model="org/m", llm_backend="local")
    assert HFInferenceModel.for_visitor(settings, VISITOR_TOKEN)._client.model == "org/m", "Hugging Face's router"
    assert HFInferenceModel.from_settings(settings)._client.model == "http://127.0.0.1:9/v1"


def test_only_a_signed_in_visitor_with_the_inference_scope_lends_a_token() -> None:
    profile, token = signed_in()
    assert visitor_token("hf:alice", token) == VISITOR_TOKEN
    assert visitor_token("guest:abc", token) is None, "a guest has no Hugging Face account"
    assert visitor_token("hf:alice", signed_in(scope="openid profile")[1]) is None, "the Space did not ask for it"
    assert visitor_token("hf:alice", None) is None
