"""Every prompt the product sends to an LLM, in one place, so they can be read and compared together.

The embedded model is tiny (135M parameters): prompts stay short, concrete and in plain words.
"""

CHAT_SYSTEM = (
    "You are Paper Copilot, a helpful assistant for researchers. "
    "Answer clearly and briefly. If you do not know, say so."
)

DOCTOR_PROBE = "List the planets of the solar system, one per line."
