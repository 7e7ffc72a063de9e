"""The web app's modules stay small: each tab lays out and formats, the engine holds the rules."""

from pathlib import Path

UI = Path(__file__).resolve().parent.parent / "copilot" / "ui"
MAX_LINES = 250


def test_every_ui_module_is_at_most_250_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(UI.glob("*.py"))}
    assert sizes, "the UI modules are found"
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, f"UI modules over {MAX_LINES} lines: {too_long}"


def test_tabs_call_the_engine_not_the_tasks_or_the_evaluation() -> None:
    for tab in sorted(UI.glob("*_tab.py")):
        text = tab.read_text(encoding="utf-8")
        assert "from copilot.eval" not in text and "import copilot.eval" not in text, f"{tab.name} imports the eval"
        assert "except (" not in text, f"{tab.name} catches a tuple of exceptions"
        assert "ctx.user(" not in text, f"{tab.name} resolves the user itself instead of through the action wrapper"
