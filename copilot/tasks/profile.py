"""Who the user is: a short research persona, and the personal memories kept from what they say about themselves.

The persona steers trends and ideas (as the profile does in Arxiv Copilot). It is written by the user, or by
the LLM from pasted text (a bio, a homepage) or from the user's arXiv papers, and kept in the ``profiles``
table. Personal memories are the first-person statements a user makes in chat ("I work on ...", "my
deadline is ..."); a cheap rule picks them out, so keeping them costs no LLM call.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from copilot import prompts
from copilot.errors import ComponentError, UserError
from copilot.storage import Store
from copilot.tasks.writing.generation import generate
from copilot.tasks.writing.sources import truncate_tokens
from copilot.types import Memory, Profile
from ingest.arxiv_client import ArxivClient
from ingest.errors import ArxivError

if TYPE_CHECKING:
    from copilot.engine import Copilot

MAX_PERSONA_CHARS = 1500
MAX_SOURCE_CHARS = 200
SHORT_TEXT_WORDS = 60  # pasted text this short is already a persona: kept as written, no LLM call
PERSONA_MAX_TOKENS = 120
MAX_STATEMENT_WORDS = 60
MAX_LANGUAGE_CHARS = 40
# A language's name: letters of any script, with spaces, hyphens, apostrophes or brackets between them
# ("Brazilian Portuguese", "Chinese (Simplified)"): no digits, punctuation or line breaks in the prompt line.
_LANGUAGE = re.compile(r"[^\W\d_]+(?:[ '’()-]+[^\W\d_]+)*\)?")


# ----- the persona -------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    return " ".join((text or "").split())


def get_profile(store: Store, user_id: str) -> Profile | None:
    """The user's stored persona with its source and when it was set, or None."""
    return store.profiles.get(user_id)


def save_profile(store: Store, user_id: str, persona: str, source: str = "manual") -> Profile:
    """Keep ``persona`` as the user's profile (replacing any earlier one); refuses empty or overlong text."""
    persona, source = _clean(persona), _clean(source) or "manual"
    if not user_id:
        raise UserError("A profile needs a user.")
    if not persona:
        raise UserError("The persona is empty: describe your research in a sentence or two.")
    if len(persona) > MAX_PERSONA_CHARS:
        raise UserError(f"The persona is {len(persona)} characters; keep it under {MAX_PERSONA_CHARS}.")
    if len(source) > MAX_SOURCE_CHARS:
        raise UserError(f"The profile source is longer than {MAX_SOURCE_CHARS} characters.")
    return store.profiles.save(user_id, persona, source)


def persona_for_prompt(store: Store, user_id: str) -> str | None:
    """The persona text to put in a prompt, or None when the user has not set one."""
    profile = get_profile(store, user_id)
    return profile.persona if profile and profile.persona else None


def save_answer_language(store: Store, user_id: str, language: str | None) -> str | None:
    """Keep the language the user's answers and drafts are written in; returns it as saved (None: the language
    of each question, also what an empty choice or "the language of the question" saves)."""
    name = _clean(language or "")
    if not name or name.casefold() == prompts.LANGUAGE_OF_QUESTION.casefold():
        store.profiles.save_language(user_id, None)
        return None
    if len(name) > MAX_LANGUAGE_CHARS or not _LANGUAGE.fullmatch(name):
        raise UserError(f"\"{name[:60]}\" is not a language name: write one such as French, Deutsch or 中文 "
                        f"(letters, up to {MAX_LANGUAGE_CHARS} characters).")
    store.profiles.save_language(user_id, name)
    return name


def language_for_prompt(store: Store, user_id: str) -> str | None:
    """The language the user chose for answers and drafts, or None for the language of each question."""
    profile = get_profile(store, user_id)
    return profile.answer_language if profile and profile.answer_language else None


def _first_sentences(text: str, max_chars: int) -> str:
    """Whole sentences from the start of ``text`` up to ``max_chars``."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    return cut[:end + 1] if end > 0 else cut.rsplit(" ", 1)[0] + " …"


def _persona_call(copilot: Copilot, user: str) -> str:
    text, _ = generate(copilot, prompts.PERSONA_SYSTEM, user, max_tokens=PERSONA_MAX_TOKENS)
    return _first_sentences(_clean(text), MAX_PERSONA_CHARS)


def kept_as_written(text: str) -> bool:
    """Whether :func:`profile_from_text` keeps ``text`` as it is (short enough to be a persona already)."""
    text = _clean(text)
    return len(text.split()) <= SHORT_TEXT_WORDS and len(text) <= MAX_PERSONA_CHARS


def profile_from_text(copilot: Copilot, text: str, *, user_id: str) -> str:
    """A short research persona from pasted text (a bio, a homepage): kept as is when already short, else
    summarised by one LLM call. Not saved: the caller shows it and saves it with :func:`save_profile`."""
    text = _clean(text)
    if not text:
        raise UserError("Paste some text about your research first.")
    if kept_as_written(text):
        return text
    budget = copilot.settings.context_budget_tokens
    shown = truncate_tokens(text, budget, copilot.llm.count_tokens)
    persona = _persona_call(copilot, prompts.persona_from_text_user(shown))
    # A model that writes nothing usable must not erase what the user gave: fall back to their own words.
    return persona if len(persona.split()) >= 5 else _first_sentences(text, 400)


def profile_from_author(copilot: Copilot, author: str, *, user_id: str,
                        arxiv_client: ArxivClient | None = None, max_papers: int = 10) -> str:
    """A research persona from an author's arXiv papers (an ``au:`` search, newest first), one LLM call.

    Raises UserError when the name is empty or arXiv has no papers by it, ComponentError when arXiv cannot be
    reached; both messages can be shown to the user as they are.
    """
    author = _clean(author)
    if not author:
        raise UserError("Type an author's name as arXiv spells it, e.g. \"Kyle Lo\".")
    try:
        if arxiv_client is None:
            arxiv_client = ArxivClient(num_retries=1, check_reachable=True)
        papers = arxiv_client.by_author(author, max_results=max_papers)
    except ArxivError as exc:
        raise ComponentError(f"Could not search arXiv for papers by {author}: {exc}") from exc
    except OSError as exc:
        raise ComponentError(f"Could not search arXiv for papers by {author}: {exc}. Paste a short bio "
                           "instead.") from exc
    if not papers:
        raise UserError(f"arXiv has no papers by \"{author}\"; check the spelling, or paste a short bio instead.")
    budget = max(40, copilot.settings.context_budget_tokens // len(papers))
    shown = [truncate_tokens(f"{p.title}. {p.abstract}", budget, copilot.llm.count_tokens) for p in papers]
    persona = _persona_call(copilot, prompts.persona_from_papers_user(author, shown))
    if len(persona.split()) < 5:  # nothing usable: say plainly what the papers are about
        persona = _first_sentences(f"A researcher whose recent arXiv papers include: "
                                   f"{'; '.join(p.title for p in papers[:5])}.", MAX_PERSONA_CHARS)
    return persona


# ----- personal memories -------------------------------------------------------------------------------


def list_memories(store: Store, user_id: str) -> list[Memory]:
    """The user's personal memories, newest first."""
    return store.memories.list(user_id)


def delete_memory(store_or_copilot: Store | Copilot, memory_id: int, user_id: str) -> bool:
    """Delete one of the user's memories with its vector; another user's memory is never touched (False)."""
    store: Store = getattr(store_or_copilot, "store", store_or_copilot)
    return store.memories.delete(int(memory_id), user_id)


_FILLER = re.compile(r"^(?:(?:also|and|but|so|well|oh|actually|btw|by the way|fyi|hi|hello|hey|ok|okay|anyway)"
                     r"\b[,!.]?\s*)+", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"^(?:i|i'm|i’m|im|i've|i’ve|i'd|i’d|i'll|i’ll|my|mine)\b", re.IGNORECASE)
# First-person sentences that are requests to the assistant, or thoughts about the conversation itself.
_NOT_ABOUT_ME = re.compile(
    r"^(?:i|i'd|i’d)\s+(?:would\s+)?(?:want|need|like|wish)\s+(?:you|u)\b|^i\s+(?:think|guess|wonder|suppose|mean|"
    r"see|agree|disagree|understand|don'?t\s+(?:know|understand|get|see))\b|^(?:i'm|i am|i’m|im)\s+(?:not\s+sure|"
    r"asking|wondering|curious|confused|just)\b|^i\s+(?:was\s+)?(?:asking|wondering)\b|\b(?:please|can you|could you|"
    r"would you|tell me|show me|give me|help me)\b|^my\s+question\b|^i(?:'d|’d|\s+would)?\s+(?:want|need|like)\s+"
    r"to\s+(?:know|see|learn|understand|ask|find\s+out)\b",
    re.IGNORECASE)


def extract_self_statements(message: str) -> list[str]:
    """What the user said about themselves in ``message``: first-person statements, not questions or requests.

    "I work on citation graphs", "My camera-ready is due on the 14th", "I prefer short answers" are kept;
    "I think the method is wrong", "Can you summarise my paper?" and "I want you to list the results" are not.
    A rule, not an LLM call, so it can run on every chat message.
    """
    statements: list[str] = []
    for raw in re.split(r"(?<=[.!?;])\s+|\n+", message or ""):
        sentence = _FILLER.sub("", raw.strip()).strip()
        words = sentence.split()
        if len(words) < 3 or len(words) > MAX_STATEMENT_WORDS or sentence.endswith("?"):
            continue
        if not _FIRST_PERSON.match(sentence) or _NOT_ABOUT_ME.search(sentence):
            continue
        sentence = sentence.rstrip(";").strip()
        if sentence not in statements:
            statements.append(sentence)
    return statements
