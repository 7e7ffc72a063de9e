"""The action wrapper: the signature Gradio reads, the user it resolves, and the errors it turns into page errors."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio.utils import get_function_params

from copilot.config import Settings
from copilot.errors import NotFound
from copilot.ui.actions import action
from copilot.ui.context import AppContext
from copilot.ui.services import Services


@pytest.fixture
def ctx(tmp_path: Path) -> AppContext:
    settings = Settings(data_dir=tmp_path / "data", users="single")
    return AppContext(settings, Services(settings), "single")


def test_the_wrapper_keeps_the_inputs_and_adds_request_and_profile(ctx: AppContext) -> None:
    @action(ctx)
    def upload(paths: list[str] | None, user_id: str, progress: gr.Progress = gr.Progress()) -> str:
        """Add PDFs."""
        return f"{user_id}: {paths}"

    parameters = list(inspect.signature(upload).parameters)
    assert parameters == ["paths", "request", "profile", "progress"]
    hints = typing.get_type_hints(upload)
    assert hints["request"] is gr.Request and hints["profile"] == (gr.OAuthProfile | None)
    assert "user_id" not in hints
    assert [name for name, *_ in get_function_params(upload)] == ["paths", "progress"], "what the API shows"
    assert upload.__name__ == "upload" and upload.__doc__ == "Add PDFs."
    assert upload(["a.pdf"], None) == "local: ['a.pdf']"


def test_a_shown_error_becomes_one_page_error_and_others_pass(ctx: AppContext) -> None:
    @action(ctx)
    def show(thought_id: float | None, user_id: str) -> str:
        if thought_id == 1:
            raise NotFound(f"No thought #1 for {user_id}.")
        raise KeyError("a bug")

    with pytest.raises(gr.Error) as info:
        show(1, None)
    assert info.value.message == "No thought #1 for local."
    with pytest.raises(KeyError):
        show(2, None)


def test_a_streaming_handler_stays_a_generator(ctx: AppContext) -> None:
    @action(ctx)
    def chat(message: str, user_id: str) -> typing.Iterator[Any]:
        yield f"{user_id} asked"
        raise NotFound("No answer #3 for this user.")

    assert inspect.isgeneratorfunction(chat)
    stream = chat("hi", None)
    assert next(stream) == "local asked"
    with pytest.raises(gr.Error, match="No answer #3"):
        next(stream)


class _Request:
    """What the wrapper reads of a request: the header the page's own calls carry (an API client sends "api")."""

    def __init__(self, who: str) -> None:
        self.headers = {"x-gradio-user": who}
        self.client = None
        self.cookies = {}


def test_a_refusal_on_the_page_is_a_notice_and_changes_no_output(ctx: AppContext) -> None:
    @action(ctx)
    def upload(paths: list[str] | None, user_id: str) -> tuple[str, list]:
        raise NotFound("/tmp/gradio/2f81ab/2020.acl-main.207.pdf does not exist or is not a file.")

    with pytest.warns(UserWarning, match=r"^2020\.acl-main\.207\.pdf does not exist"):
        assert upload(["a.pdf"], _Request("app")) == gr.skip(), "every output keeps what it showed"
    with pytest.raises(gr.Error) as info:
        upload(["a.pdf"], _Request("api"))
    assert info.value.message == "2020.acl-main.207.pdf does not exist or is not a file."


def test_a_streaming_refusal_on_the_page_keeps_what_was_shown(ctx: AppContext) -> None:
    @action(ctx)
    def chat(message: str, user_id: str) -> typing.Iterator[Any]:
        if len(message) > 5:
            raise gr.Error("Questions are limited to 5 characters.")
        yield "asked"

    with pytest.warns(UserWarning, match="limited to 5"):
        assert list(chat("too long", _Request("app"))) == [gr.skip()]
    with pytest.raises(gr.Error, match="limited to 5"):
        list(chat("too long", _Request("api")))
    # Gradio's MCP server calls only the agents' tools (copilot.ui.agent_tools), never a page action.
    with pytest.raises(gr.Error, match="not one of the agents' tools"):
        list(chat("short", _Request("mcp")))


def test_server_paths_are_named_by_their_file_only() -> None:
    from copilot.errors import without_paths

    assert without_paths("/tmp/gradio/2f81/x.pdf does not exist") == "x.pdf does not exist"
    assert without_paths("at /srv/data/copilot/db.sqlite3, locked") == "at db.sqlite3, locked"
    kept = "see https://arxiv.org/abs/2104.12255 or 10.1145/3397271 and 1/2 of a/b"
    assert without_paths(kept) == kept
