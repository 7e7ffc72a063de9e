"""Every prompt sent to an LLM, in one place, so they can be read and compared together: answers, thoughts,
warm-up questions, drafts, ideas and the persona, then the evaluation's task answers, summary tree and judge.

The embedded models are small (135M to 1.5B parameters; the default 0.5B): prompts stay short, concrete and in plain words, with
the sources numbered the way the reply should cite them (:func:`numbered`). Decoding is greedy, so a changed
character changes the replies and the evaluation's scores. A base model reads each prompt in its completion form
(the end of this module).
"""

from __future__ import annotations

from dataclasses import dataclass

CHAT_SYSTEM = (
    "You are Paper Copilot, a helpful assistant for researchers. "
    "Answer clearly and briefly. If you do not know, say so."
)

DOCTOR_PROBE = "List the planets of the solar system, one per line."


def numbered(sources: list[str]) -> str:
    """Sources as the model sees them: ``[n] text``, separated by blank lines."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(sources, start=1))


# ----- answering from retrieved sources ---------------------------------------------------------------------

# No fixed refusal line: given one ("If the sources do not contain the answer, say ..."), the Qwen models used it for
# most look-ups whose answer was in the sources (s2orc-l07: "380.5M" in sources [1] and [4]). Whether an answer is
# right is the check's to say (copilot.grounding), and an answer it cannot support is declined.
ANSWER_SYSTEM = (
    "You are a research assistant. Answer the question using the numbered sources. "
    "Cite the sources you use like [1]. Give the exact names and numbers the sources state; if they do not answer "
    "the question, say so."
)


# What the copilot says when the papers in scope do not answer (nothing bears on the question, or no sentence of the
# model's answer is supported by its sources); the nearest passages follow it.
DECLINE = "The papers in scope do not say."


def answer_user(question: str, sources: list[str], about_user: str | None = None, *,
                language: str | None = None) -> str:
    """The user turn: numbered sources, what we know of the asker (if anything), then the question.

    The order is the prompt's reuse order: the fixed part (system prompt and instructions, ``ANSWER_SYSTEM``)
    comes first, so llama.cpp, which keeps the previous prompt's state and re-reads only from the first token
    that differs, never re-reads it between answers; the sources come next and the question last.
    ``language``: see :func:`in_language` (the chat always passes one; the evaluation none).
    """
    about = f"About the asker: {about_user}\n\n" if about_user else ""
    return f"Sources:\n{numbered(sources)}\n\n{about}Question: {question}{in_language(language)}"


def table_cell(table: str, value: str, column: str, row: str, n: int) -> str:
    """The answer a table's cell gives, written without the model (:mod:`copilot.table_reader`): where it was read,
    then its source: "Table 1 gives 90.01 for SCIBERT Finetune in the row BC5CDR [1]."."""
    return f"{table} gives {value}{f' for {column}' if column else ''}{f' in the row {row}' if row else ''} [{n}]."


# ----- the language of answers and drafts (a profile setting) -------------------------------------------------

LANGUAGE_OF_QUESTION = "the language of the question"  # the setting's default


def in_language(language: str | None) -> str:
    """The line that asks for a reply in ``language`` (a name, or :data:`LANGUAGE_OF_QUESTION`), after the
    question, where it changes nothing of the prompt's reused start; none without a language, so a prompt
    built without one (the evaluation's) is the same text as before."""
    return f"\nAnswer in {language}." if language else ""


# ----- distilling a thought (one call: the thought and the verdict) -----------------------------------------

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


# ----- warm-up: simulated questions about a new paper -------------------------------------------------------

WARMUP_SYSTEM = "You write short questions a researcher would ask about a paper. One question per line."


def warmup_from_abstract(title: str, abstract: str, n: int) -> str:
    return f"Title: {title}\nAbstract: {abstract}\n\nWrite {n} questions about this paper, one per line."


def warmup_from_paragraph(paragraph: str, n: int) -> str:
    return f"Paragraph: {paragraph}\n\nWrite {n} questions this paragraph answers, one per line."


# ----- drafting ---------------------------------------------------------------------------------------------

DRAFT_ABSTRACT_SYSTEM = (
    "You write the abstract of a research paper from excerpts of its body. Write one paragraph of about "
    "150 words: the problem, the method, and the main results. Use only facts from the excerpts."
)

DRAFT_SYNTHESIS_SYSTEM = (
    "You write a short synthesis of several research papers. Write one paragraph of about 150 words that "
    "says what the papers share and how they differ. Cite each paper you mention like [1]."
)

DRAFT_RELATED_SYSTEM = (
    "You write the Related Work section of a research paper. Use the numbered sources and cite them like [1]. "
    "Group similar work, say how it relates to our paper, and write about 200 words."
)


def write_in(language: str | None) -> str:
    """A draft's language line: a chosen language only (a draft has no question whose language to follow)."""
    return f" Write it in {language}." if language and language != LANGUAGE_OF_QUESTION else ""


def abstract_user(title: str, excerpts: list[str], *, language: str | None = None) -> str:
    body = "\n\n".join(excerpts)
    return (f"Title: {title}\n\nExcerpts from the paper:\n{body}\n\nWrite the abstract of this paper."
            f"{write_in(language)}")


def synthesis_user(sources: list[str], *, language: str | None = None) -> str:
    return (f"Papers:\n{numbered(sources)}\n\nWrite a synthesis of these papers, citing them like [1]."
            f"{write_in(language)}")


def related_user(title: str, abstract: str, sources: list[str], *, language: str | None = None) -> str:
    return (f"Our paper:\nTitle: {title}\nAbstract: {abstract}\n\nSources:\n{numbered(sources)}\n\n"
            f"Write the Related Work section for our paper, citing the sources like [1].{write_in(language)}")


# ----- comparison tables ------------------------------------------------------------------------------------

COMPARE_SYSTEM = (
    "You fill one cell of a table that compares research papers. Read the numbered sources, all from one paper, "
    "and answer the question in one short phrase of at most 15 words, with the exact names and numbers the sources "
    "state, citing the source like [1]. If the sources do not state it, write: not stated."
)


def compare_user(aspect: str, question: str, sources: list[str]) -> str:
    return f"Sources:\n{numbered(sources)}\n\nColumn: {aspect}\nQuestion: {question}"


# One worked cell, shown before the real one: a small model copies a shown format far better than it follows a
# described one.
COMPARE_SHOT = [
    {"role": "user", "content": compare_user(
        "data", "What datasets or data does the paper use?",
        ["We present GraphQA, a method that answers questions over knowledge graphs. We train it on WebQSP and "
         "evaluate it on WebQSP and CWQ, where it improves accuracy by 4 points.",
         "All models are trained with the Adam optimizer for 10 epochs."])},
    {"role": "assistant", "content": "WebQSP and CWQ question-answering benchmarks [1]"},
    {"role": "user", "content": compare_user(
        "method", "How does the paper's method or approach work, in a few words?",
        ["We present GraphQA, a method that answers questions over knowledge graphs by retrieving a subgraph and "
         "reading it with a graph neural network."])},
    {"role": "assistant", "content": "Retrieves a subgraph and reads it with a graph neural network [1]"},
]


# ----- trends and ideas -------------------------------------------------------------------------------------

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


# ----- research persona -------------------------------------------------------------------------------------

PERSONA_SYSTEM = (
    "You describe a researcher in 2 or 3 sentences: their field, the topics they work on, and their methods. "
    "Write in the third person, starting with \"A researcher\"."
)


def persona_from_text_user(text: str) -> str:
    return f"Text about the researcher:\n{text}\n\nDescribe this researcher in 2 or 3 sentences."


def persona_from_papers_user(author: str, papers: list[str]) -> str:
    return (f"Papers by {author}:\n{numbered(papers)}\n\n"
            f"Describe {author} as a researcher in 2 or 3 sentences.")


# ----- evaluation: answering a task item --------------------------------------------------------------------
# Every method of a task answers with the same prompt; only the numbered sources differ. Replies are capped or
# constrained by a grammar.

ABSTRACT_SYSTEM = (  # the abstract-single task (a draft uses DRAFT_ABSTRACT_SYSTEM)
    "You write the abstract of a research paper from passages of its body. "
    "Write one paragraph of about 150 words: the problem, the method, the main results."
)
SYNTHESIS_SYSTEM = ANSWER_SYSTEM  # every method of a task answers with the product's prompt
CLAIM_SYSTEM = "You check a scientific claim against the numbered sources. Say if the claim is true or false."
CLAIM_MARKER = "verdict:"
CLAIM_GRAMMAR = r'''root ::= "verdict: " ("true" | "false")'''


def abstract_task(title: str) -> str:
    """The query of abstract-single: it names the paper (the title is no part of the reference)."""
    return f'Write the abstract of the paper "{title}".'


def task_user(query: str, sources: list[str]) -> str:
    """The user turn of every generation task: numbered sources (when there are any), then the task."""
    if not sources:
        return f"Question: {query}"
    return answer_user(query, sources)


def claim_user(claim: str, sources: list[str]) -> str:
    head = f"Sources:\n{numbered(sources)}\n\n" if sources else ""
    return f"{head}Claim: {claim}\nIs the claim true or false?"


# ----- evaluation: building and walking a summary tree ------------------------------------------------------

SUMMARY_SYSTEM = "Summarise the passages in three sentences. Keep names, numbers and findings."
SUMMARY_MAX_TOKENS = 96


def summary_user(passages: list[str]) -> str:
    return f"Passages:\n{numbered(passages)}\n\nSummary:"


NAVIGATE_SYSTEM = "Pick the numbered summary most likely to hold what the question needs. Reply with its number."


def navigate_user(query: str, summaries: list[str]) -> str:
    return f"Summaries:\n{numbered(summaries)}\n\nQuestion: {query}\nNumber:"


def navigate_grammar(n: int) -> str:
    """Only the numbers 1..n can be written (a tiny model otherwise writes prose)."""
    return "root ::= " + " | ".join(f'"{i}"' for i in range(1, n + 1))


# ----- evaluation: the pairwise judge -----------------------------------------------------------------------

JUDGE_SYSTEM = "You compare two answers with a reference answer. Say which answer is closer to the reference."
JUDGE_MARKER = "better:"
JUDGE_GRAMMAR = r'''root ::= "better: " ("1" | "2")'''


def judge_user(query: str, reference: str, first: str, second: str) -> str:
    return (f"Task: {query}\n\nReference: {reference}\n\nAnswer 1: {first}\n\nAnswer 2: {second}\n\n"
            "Which answer is closer to the reference, 1 or 2?")


# ----- prompt forms: the same prompts for a base model --------------------------------------------------------
# Every prompt above is a chat: a system prompt, worked examples as earlier turns, the user turn. An instruction
# model reads it through its chat template. A base model (Gemma 3 270M, pretrained only) has no chat format: in
# chat form it drifts off topic, so the backend renders the same messages as one completion prompt, the
# instruction first, then worked examples, then the user turn and a cue where the reply begins
# (:func:`completion_prompt`). The examples are made-up papers, never the shared ones the benchmarks ask about.

EXAMPLE_SEPARATOR = "\n\n###\n\n"
COMPLETION_STOPS = ("\n###", "<end_of_turn>")  # where a base model starts writing the next example


@dataclass(frozen=True)
class CompletionForm:
    """How one chat prompt reads as a completion: worked (user, reply) examples shown before the messages' own,
    and the cue after the user turn (``inline``: the reply follows on the cue's line, else on the next).

    ``stops`` end the reply: a base model that has said its paragraph goes on writing the next source or question
    ("\n\n[2] …", "\n\nQuestion: …"), so a one-paragraph reply stops at its first blank line.
    """

    shots: tuple[tuple[str, str], ...] = ()
    cue: str = "Answer:"
    inline: bool = True
    stops: tuple[str, ...] = ("\n\n",)


_BERT = ("(BERT, Introduction) BERT stands for Bidirectional Encoder Representations from Transformers. It is "
         "pre-trained on BooksCorpus (800M words) and English Wikipedia (2,500M words).")
_GLOVE = "(GloVe, Method) GloVe learns word vectors from global word co-occurrence counts."
_DPR_EXCERPTS = [
    "(Introduction) Open-domain question answering needs to find passages that hold the answer among millions.",
    "(Method) Questions and passages are encoded by two BERT encoders trained on question-passage pairs.",
    "(Results) Dense retrieval beats BM25 by 9 to 19 points of top-20 passage accuracy on five QA datasets.",
]
_DPR_ABSTRACT = ("Open-domain question answering needs to find the passages that hold an answer among millions. "
                 "We show that retrieval can use dense representations alone, learned from a small number of "
                 "questions and passages by two BERT encoders. Our dense retriever beats BM25 by 9 to 19 points "
                 "of top-20 passage accuracy on five question answering datasets.")
_PAPERS = ["Dense Passage Retrieval. Passages are retrieved with learned dense embeddings from two encoders.",
           "ColBERT. Passages are retrieved by late interaction between the token embeddings of query and passage."]
_JUDGE_SHOTS = (  # one of each verdict, so the model copies the comparison and not a number
    (judge_user("What is BERT pre-trained on?", "BooksCorpus and English Wikipedia.",
                "BERT is a model for translation.", "BERT is pre-trained on BooksCorpus and Wikipedia."),
     f"{JUDGE_MARKER} 2"),
    (judge_user("What does GloVe learn from?", "Global word co-occurrence counts.",
                "GloVe learns from how often words occur together.", "GloVe learns from images."),
     f"{JUDGE_MARKER} 1"),
)

# Found by the system prompt a message list starts with (by prefix, so a sentence appended to one keeps its form).
COMPLETION_FORMS: dict[str, CompletionForm] = {
    ANSWER_SYSTEM: CompletionForm(shots=((answer_user("What data is BERT pre-trained on?", [_BERT, _GLOVE]),
                                          "BERT is pre-trained on BooksCorpus (800M words) and English Wikipedia "
                                          "(2,500M words) [1]."),)),
    THOUGHT_SYSTEM: CompletionForm(cue="", inline=False),  # its examples are the messages' own turns
    ABSTRACT_SYSTEM: CompletionForm(shots=((task_user(abstract_task("Dense Passage Retrieval"), _DPR_EXCERPTS),
                                            _DPR_ABSTRACT),), cue="Abstract:", inline=False),
    DRAFT_ABSTRACT_SYSTEM: CompletionForm(shots=((abstract_user("Dense Passage Retrieval", _DPR_EXCERPTS),
                                                  _DPR_ABSTRACT),), cue="Abstract:", inline=False),
    DRAFT_SYNTHESIS_SYSTEM: CompletionForm(
        shots=((synthesis_user(_PAPERS), "Both papers retrieve passages with learned embeddings instead of word "
                "matching [1, 2]. Dense Passage Retrieval compares one vector per query and passage [1], while "
                "ColBERT keeps one vector per token and matches them late [2], which costs more storage."),),
        cue="Synthesis:", inline=False),
    DRAFT_RELATED_SYSTEM: CompletionForm(
        shots=((related_user("Fast retrieval for question answering", "We make dense retrieval ten times faster.",
                             _PAPERS),
                "Dense retrievers learn embeddings of questions and passages [1]. Late interaction keeps one "
                "embedding per token for more accuracy at a higher cost [2]. Our work makes such retrieval "
                "faster."),),
        cue="Related Work:", inline=False, stops=("\n\nSources:", "\n\nOur paper:", "\n\n[")),
    IDEAS_SYSTEM: CompletionForm(cue="Ideas:", inline=False),  # its example is the messages' own (IDEAS_SHOT)
    JUDGE_SYSTEM: CompletionForm(shots=_JUDGE_SHOTS, cue="", inline=False),
}
DEFAULT_COMPLETION_FORM = CompletionForm(cue="Answer:", inline=False)  # any other prompt: no examples of its own


def completion_form(system: str) -> CompletionForm:
    """The completion form of the prompt whose system prompt is ``system``: the longest registered one it starts
    with, else :data:`DEFAULT_COMPLETION_FORM`."""
    keys = [key for key in COMPLETION_FORMS if system.startswith(key)]
    return COMPLETION_FORMS[max(keys, key=len)] if keys else DEFAULT_COMPLETION_FORM


def completion_prompt(messages: list[dict[str, str]]) -> tuple[str, list[str]]:
    """``messages`` (a chat: an optional system prompt, earlier turns, the user turn) as one completion prompt, and
    the stop strings that end its reply.

    The system prompt comes first, then each worked example (the form's, then the messages' own user/assistant
    turns) as user text, cue and reply, separated by :data:`EXAMPLE_SEPARATOR`; the last user turn and the cue end
    it, so the model's continuation is the reply (it stops at :data:`COMPLETION_STOPS` and the form's ``stops``).
    The fixed part leads, as in the chat form, so llama.cpp re-reads only the part that changed.
    """
    system = messages[0]["content"] if messages and messages[0].get("role") == "system" else ""
    turns = [m for m in messages if m.get("role") != "system"]
    form = completion_form(system)
    examples = list(form.shots)
    pending: list[str] = []
    for message in turns:
        if message.get("role") == "assistant" and pending:
            examples.append(("\n\n".join(pending), message.get("content", "")))
            pending = []
        elif message.get("role") != "assistant":
            pending.append(message.get("content", ""))
    def cued(user: str, reply: str = "") -> str:
        if not form.cue:
            return f"{user}\n{reply}"
        if form.inline:  # "Answer:" then the reply on the same line; the model writes its own leading space
            return f"{user}\n{form.cue}" + (f" {reply}" if reply else "")
        return f"{user}\n{form.cue}\n{reply}"

    parts = [cued(user, reply.strip()) for user, reply in examples] + [cued("\n\n".join(pending))]
    head = f"{system}{EXAMPLE_SEPARATOR}" if system else ""
    return head + EXAMPLE_SEPARATOR.join(parts), [*COMPLETION_STOPS, *form.stops]
