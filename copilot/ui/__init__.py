"""The web app: ``build_app`` and ``serve`` for tests, ``launch`` for ``make run`` and Spaces."""

from copilot.ui.app import build_app, describe_model, launch, serve

__all__ = ["build_app", "describe_model", "launch", "serve"]
