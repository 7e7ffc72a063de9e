"""The README and docs/ name only what exists: every `make` target, command, setting and API endpoint they name is
real, so a renamed or removed one fails here. The README stays short: reference material lives in docs/."""

from __future__ import annotations

import re

import click
import pytest

from copilot.config import Settings
from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ENVIRONMENT_ONLY = {"DATA_ROOT"}  # read from the environment by the tests and benchmarks, not a setting


def _text() -> str:
    return "\n".join(path.read_text() for path in DOCS)


def test_the_readme_is_short_and_links_its_reference_pages() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 15 * 1024
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", readme))
    assert linked and all((ROOT / link).is_file() for link in linked)
    for section in ("## Quick start", "## Settings that matter", "## Deploy to Hugging Face Spaces",
                    "## Headline figures"):
        assert section in readme


def test_every_make_target_named_exists() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make ([a-z][\w-]*[a-z])", _text()))
    assert {"run", "test", "bench-qa"} <= named
    assert sorted(named - targets) == []


def test_every_command_named_exists() -> None:
    from copilot.association.cli import cli as association
    from copilot.bench.cli import bench
    from copilot.cli import cli

    groups = {"copilot": cli, "copilot.bench": bench, "copilot.association": association}
    named = set(re.findall(r"python -m (copilot(?:\.bench|\.association)?) ([a-z][\w-]*(?: [a-z][\w-]*)?)",
                           _text()))
    assert len(named) > 20
    missing = []
    for module, words in sorted(named):
        first, *rest = words.split()
        command = groups[module].commands.get(first)
        if command is None or (isinstance(command, click.Group) and rest and rest[0] not in command.commands):
            missing.append(f"python -m {module} {words}")
    assert missing == []


def test_every_setting_named_exists() -> None:
    named = set(re.findall(r"COPILOT_([A-Z][A-Z0-9_]*[A-Z0-9])", _text()))
    assert len(named) > 40
    assert sorted(n for n in named if n.lower() not in Settings.model_fields and n not in ENVIRONMENT_ONLY) == []


@pytest.mark.slow
def test_every_api_endpoint_named_exists(tmp_path) -> None:  # noqa: ANN001
    from copilot.ui import build_app

    demo = build_app(Settings(data_dir=tmp_path / "data"), warm_up=False)
    endpoints = {f"/{fn.api_name}" for fn in demo.fns.values() if fn.api_name}
    public = {f"/{fn.api_name}" for fn in demo.fns.values() if fn.api_name and fn.api_visibility != "private"}
    page = (ROOT / "docs" / "web-app.md").read_text()
    named = set(re.findall(r"`(/[a-z_]+)`", page))
    assert len(named) > 20
    assert sorted(named - endpoints) == [], "named but not served"
    assert sorted(public - named) == [], "served but not documented"
