"""The one wrapper every tab's handler goes through: it resolves who is asking and turns refusals into page errors.

A handler is written for one user: it takes ``user_id`` (a keyword) besides its inputs. :func:`action` gives it
the signature Gradio expects, the same inputs followed by ``request: gr.Request`` and ``profile:
gr.OAuthProfile | None`` (then any inputs with defaults, such as ``gr.Progress``), so that Gradio still injects
them and the ``api_name`` endpoints keep their parameters. Each call resolves the user first
(:meth:`AppContext.user`: an unusable database or a bad guest token stops it there), then runs the handler; an
error the user may see (:data:`copilot.errors.SHOWN`) reaches the page as one ``gr.Error`` line, its traceback
left in the server log. Streaming handlers (generators) stay generators.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import gradio as gr

from copilot.errors import SHOWN
from copilot.ui.context import AppContext, page_error

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


def action(ctx: AppContext) -> Callable[[Handler], Handler]:
    """The decorator of ``ctx``'s handlers (see the module docstring)."""

    def wrap(handler: Handler) -> Handler:
        public, annotations = _public_signature(handler)

        def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            values = public.bind(*args, **kwargs)
            values.apply_defaults()
            arguments = dict(values.arguments)
            arguments[USER] = ctx.user(arguments.pop("request"), arguments.pop("profile"))
            return arguments

        if inspect.isgeneratorfunction(handler):
            @functools.wraps(handler)
            def run(*args: Any, **kwargs: Any) -> Iterator[Any]:  # noqa: ANN401 - the handler's own values
                try:
                    yield from handler(**bound(args, kwargs))
                except SHOWN as exc:
                    raise page_error(exc) from exc
        else:
            @functools.wraps(handler)
            def run(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 - the handler's own values
                try:
                    return handler(**bound(args, kwargs))
                except SHOWN as exc:
                    raise page_error(exc) from exc

        run.__signature__ = public  # type: ignore[attr-defined]
        run.__annotations__ = annotations
        return typing.cast(Handler, run)

    return wrap
