"""The prompts of the writing, ideas and profile tasks, kept together so they can be read and compared.

The embedded model is tiny (135M parameters): each prompt asks for one thing, in plain words, with the
sources numbered the way the reply should cite them.
"""

from __future__ import annotations

# ----- drafting ----------------------------------------------------------------------------------------

ABSTRACT_SYSTEM = (
    "You write the abstract of a research paper from excerpts of its body. Write one paragraph of about "
    "150 words: the problem, the method, and the main results. Use only facts from the excerpts."
)

SYNTHESIS_SYSTEM = (
    "You write a short synthesis of several research papers. Write one paragraph of about 150 words that "
    "says what the papers share and how they differ. Cite each paper you mention like [1]."
)

RELATED_SYSTEM = (
    "You write the Related Work section of a research paper. Use the numbered sources and cite them like [1]. "
    "Group similar work, say how it relates to our paper, and write about 200 words."
)


def numbered(sources: list[str]) -> str:
    """Sources as the model sees them: ``[n] text``, separated by blank lines."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(sources, start=1))


def abstract_user(title: str, excerpts: list[str]) -> str:
    body = "\n\n".join(excerpts)
    return f"Title: {title}\n\nExcerpts from the paper:\n{body}\n\nWrite the abstract of this paper."


def synthesis_user(sources: list[str]) -> str:
    return f"Papers:\n{numbered(sources)}\n\nWrite a synthesis of these papers, citing them like [1]."


def related_user(title: str, abstract: str, sources: list[str]) -> str:
    return (f"Our paper:\nTitle: {title}\nAbstract: {abstract}\n\nSources:\n{numbered(sources)}\n\n"
            "Write the Related Work section for our paper, citing the sources like [1].")


# ----- trends and ideas --------------------------------------------------------------------------------

IDEAS_SYSTEM = (
    "You suggest new research ideas to a researcher. Write 3 to 5 ideas, one per line, each one sentence "
    "that starts with a verb. End each idea with the papers it builds on, like [1]."
)


# One worked example: the tiny model copies its shape (one idea a line, each ending with its papers).
IDEAS_SHOT = (
    "Researcher: A researcher working on question answering.\n\nRecent papers:\n"
    "[1] Dense Passage Retrieval. Passages are retrieved with learned dense embeddings.\n\n"
    "[2] Multilingual BERT. One language model is trained on text in 104 languages.\n\n"
    "Trending topics: dense retrieval, multilingual models\n\nWrite 3 to 5 research ideas, one per line.",
    "1. Train dense retrievers for languages with little data using multilingual models [1, 2].\n"
    "2. Measure how dense retrieval fails on questions about rare entities [1].\n"
    "3. Build a benchmark of questions that need passages in two languages [2].",
)


def ideas_user(persona: str | None, papers: list[str], keywords: list[str]) -> str:
    who = f"Researcher: {persona}\n\n" if persona else ""
    trends = f"\n\nTrending topics: {', '.join(keywords)}" if keywords else ""
    return f"{who}Recent papers:\n{numbered(papers)}{trends}\n\nWrite 3 to 5 research ideas, one per line."


# ----- research persona --------------------------------------------------------------------------------

PERSONA_SYSTEM = (
    "You describe a researcher in 2 or 3 sentences: their field, the topics they work on, and their methods. "
    "Write in the third person, starting with \"A researcher\"."
)


def persona_from_text_user(text: str) -> str:
    return f"Text about the researcher:\n{text}\n\nDescribe this researcher in 2 or 3 sentences."


def persona_from_papers_user(author: str, papers: list[str]) -> str:
    return (f"Papers by {author}:\n{numbered(papers)}\n\n"
            f"Describe {author} as a researcher in 2 or 3 sentences.")
