"""The one wrapper every tab's handler goes through: it resolves who is asking and turns refusals into page errors.

A handler is written for one user: it takes ``user_id`` (a keyword) besides its inputs. :func:`action` gives it
the signature Gradio expects, the same inputs followed by ``request: gr.Request`` and ``profile:
gr.OAuthProfile | None`` (then any inputs with defaults, such as ``gr.Progress``), so that Gradio still injects
them and the ``api_name`` endpoints keep their parameters. Each call resolves the user first
(:meth:`AppContext.user`: an unusable database or a bad guest token stops it there), then runs the handler.
Streaming handlers (generators) stay generators.

A refusal (an error the user may see, :data:`copilot.errors.SHOWN`, or a ``gr.Error`` the handler raises) is one
line without server paths, its traceback left in the server log. On the page it is a notice that stays until it is
read, and every output keeps what it showed: the chat its history, the question box the text to shorten, the
library table its rows (a ``gr.Error`` would replace each output with a red "Error" label). An API or MCP client
gets it as the call's error.
"""

from __future__ import annotations

import functools
import html
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import gradio as gr

from copilot.errors import SHOWN
from copilot.ui.context import AppContext, page_error

REFUSED = (*SHOWN, gr.Error)
NOTICE_S = 30  # how long a refusal's notice stays on the page (it can be closed sooner)
NOTICE_TITLE = "Not done"

Handler = TypeVar("Handler", bound=Callable[..., Any])
USER = "user_id"
_REQUEST = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="gr.Request")
_PROFILE = inspect.Parameter("profile", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation="gr.OAuthProfile | None")


def _public_signature(handler: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature Gradio sees (inputs, request, profile, inputs with defaults) and its resolved annotations."""
    signature = inspect.signature(handler)
    hints = typing.get_type_hints(handler)
    own = [p for p in signature.parameters.values() if p.name != USER]
    required = [p for p in own if p.default is inspect.Parameter.empty]
    optional = [p for p in own if p.default is not inspect.Parameter.empty]
    public = signature.replace(parameters=[*required, _REQUEST, _PROFILE, *optional])
    annotations = {name: hint for name, hint in hints.items() if name != USER}
    return public, annotations | {"request": gr.Request, "profile": gr.OAuthProfile | None}


def from_page(request: gr.Request | None) -> bool:
    """Whether the call comes from the web page (its own requests say so), not from an API or MCP client."""
    headers = getattr(request, "headers", None) or {}
    return headers.get("x-gradio-user") == "app"


def refused(exc: Exception, request: gr.Request | None) -> Any:  # noqa: ANN401 - Gradio's skip update
    """A refusal on the page: its notice, and no change to any output; raised as the call's error elsewhere."""
    error = page_error(exc)  # one line, no server paths, whatever raised it
    if not from_page(request):
        raise error from exc
    gr.Warning(html.escape(error.message), duration=NOTICE_S, title=NOTICE_TITLE)
    return gr.skip()


def action(ctx: AppContext) -> Callable[[Handler], Handler]:
    """The decorator of ``ctx``'s handlers (see the module docstring)."""

    def wrap(handler: Handler) -> Handler:
        public, annotations = _public_signature(handler)

        def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], gr.Request | None]:
            values = public.bind(*args, **kwargs)
            values.apply_defaults()
            arguments = dict(values.arguments)
            request = arguments.pop("request")
            return arguments, request

        if inspect.isgeneratorfunction(handler):
            @functools.wraps(handler)
            def run(*args: Any, **kwargs: Any) -> Iterator[Any]:  # noqa: ANN401 - the handler's own values
                arguments, request = bound(args, kwargs)
                try:
                    arguments[USER] = ctx.user(request, arguments.pop("profile"))
                    yield from handler(**arguments)
                except REFUSED as exc:
                    yield refused(exc, request)
        else:
            @functools.wraps(handler)
            def run(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - the handler's own values
                arguments, request = bound(args, kwargs)
                try:
                    arguments[USER] = ctx.user(request, arguments.pop("profile"))
                    return handler(**arguments)
                except REFUSED as exc:
                    return refused(exc, request)

        run.__signature__ = public  # type: ignore[attr-defined]
        run.__annotations__ = annotations
        return typing.cast(Handler, run)

    return wrap
