"""Paper Copilot web app: ``python app.py`` (or ``make run``), and the entry point Hugging Face Spaces runs."""

from copilot.config import apply_offline_defaults, get_settings

apply_offline_defaults(get_settings())  # before Gradio is imported: it reads these variables at import

from copilot.ui import launch  # noqa: E402

if __name__ == "__main__":
    launch()
