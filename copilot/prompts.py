"""Every prompt the product sends to an LLM, in one place, so they can be read and compared together.

The embedded model is tiny (135M parameters): prompts stay short, concrete and in plain words.
"""

CHAT_SYSTEM = (
    "You are Paper Copilot, a helpful assistant for researchers. "
    "Answer clearly and briefly. If you do not know, say so."
)

DOCTOR_PROBE = "List the planets of the solar system, one per line."

# ----- answering from retrieved sources ------------------------------------------------------------------

ANSWER_SYSTEM = (
    "You are a research assistant. Answer the question using the numbered sources. "
    "Cite the sources you use like [1]. If the sources do not contain the answer, say: "
    "\"The sources do not say.\""
)


def answer_user(question: str, sources: list[str], about_user: str | None = None) -> str:
    """The user turn: numbered sources, what we know of the asker (if anything), then the question.

    The order is the prompt's reuse order: the fixed part (system prompt and instructions, ``ANSWER_SYSTEM``)
    comes first, so llama.cpp, which keeps the previous prompt's state and re-reads only from the first token
    that differs, never re-reads it between answers; the sources come next and the question last.
    """
    numbered = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(sources, start=1))
    about = f"About the asker: {about_user}\n\n" if about_user else ""
    return f"Sources:\n{numbered}\n\n{about}Question: {question}"


# ----- distilling a thought (one call: the thought and the verdict) ---------------------------------------

THOUGHT_SYSTEM = "Restate the answer as one self-contained fact, then say if it really answers the question."
THOUGHT_MARKER = "answered:"
# The reply format, enforced during decoding where the backend can (llama.cpp): one line of thought, then
# the verdict, so the verdict's probability can always be read.
THOUGHT_GRAMMAR = r'''root ::= "thought: " [^\n]{20,300} "\nanswered: " ("yes" | "no") "\n"'''
THOUGHT_SHOTS = [
    (
        "What dataset does S2ORC provide?",
        "S2ORC provides a corpus of 81.1M English academic papers with metadata and full text for 8.1M of them [2].",
        "S2ORC is a corpus of 81.1M English academic papers, with full text for 8.1M of them.",
        "yes",
    ),
    (
        "Who funded the LongEval study?",
        "The sources do not say who funded it.",
        "The sources do not say who funded the LongEval study.",
        "no",
    ),
]


def thought_user(question: str, answer: str) -> str:
    return f"Question: {question}\nAnswer: {answer}"


def thought_reply(thought: str, answered: str) -> str:
    """The reply format the model is shown and asked for; ``THOUGHT_MARKER`` precedes the verdict."""
    return f"thought: {thought}\n{THOUGHT_MARKER} {answered}\n"


def thought_messages(question: str, answer: str) -> list[dict[str, str]]:
    """Few-shot chat: small models copy a shown format far better than they follow a described one."""
    messages = [{"role": "system", "content": THOUGHT_SYSTEM}]
    for q, a, thought, answered in THOUGHT_SHOTS:
        messages += [{"role": "user", "content": thought_user(q, a)},
                     {"role": "assistant", "content": thought_reply(thought, answered)}]
    messages.append({"role": "user", "content": thought_user(question, answer)})
    return messages


# ----- warm-up: simulated questions about a new paper ------------------------------------------------------

WARMUP_SYSTEM = "You write short questions a researcher would ask about a paper. One question per line."


def warmup_from_abstract(title: str, abstract: str, n: int) -> str:
    return f"Title: {title}\nAbstract: {abstract}\n\nWrite {n} questions about this paper, one per line."


def warmup_from_paragraph(paragraph: str, n: int) -> str:
    return f"Paragraph: {paragraph}\n\nWrite {n} questions this paragraph answers, one per line."
