"""The embedded models run by llama.cpp through the same ``ChatModel`` calls: the default
(Qwen2.5-Coder-1.5B-Instruct) is found without a path; Qwen2.5-Coder-0.5B-Instruct and SmolLM2-135M-Instruct (chat
prompts) and Gemma 3 270M (completion prompts) answer."""

import math

import pytest

from copilot.config import Settings
from copilot.llm import LLMError, build_llm, get_llm
from copilot.llm.embedded import DEFAULT_EMBEDDED_MODEL
from copilot.llm.llamacpp import LlamaCppModel

INSTRUCT = "qwen2.5-coder-0.5b"  # of the models tested here, the one that follows instructions (as the default does)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["qwen2.5-coder-0.5b", "smollm2-135m", "gemma3-270m"])
def llm(request: pytest.FixtureRequest) -> LlamaCppModel:
    model = get_llm(Settings(llm_backend="local", llm_model=request.param))
    assert isinstance(model, LlamaCppModel)
    assert model.prompt_form == ("completion" if request.param == "gemma3-270m" else "chat")
    return model


def test_the_default_model_is_found_without_a_path() -> None:
    model = LlamaCppModel()
    assert model.model_path.name == "qwen2.5-coder-1.5b-instruct.gguf" and model.prompt_form == "chat"
    assert model.model_path.stat().st_size == 1_117_320_768
    assert model.embedded is not None and model.embedded.name == DEFAULT_EMBEDDED_MODEL
    assert model.licence.startswith("Apache-2.0") and model.name == "local:qwen2.5-coder-1.5b"


def test_generates_and_streams(llm: LlamaCppModel) -> None:
    calls_before = llm.usage.calls
    pieces = list(llm.stream([{"role": "user", "content": "What is the capital of France?"}], max_tokens=24,
                             temperature=0.0))
    text = "".join(pieces)
    assert len(pieces) > 1, "a stream yields several pieces"
    assert text.strip()
    assert llm.count_tokens(text) <= 24 + 2
    assert llm.usage.calls == calls_before + 1
    # Greedy decoding is deterministic; for Gemma the second call reuses the first's prompt state, whose last
    # token is read again alone, and the rounding that changes can change the reply after its first line.
    again = llm.chat([{"role": "user", "content": "What is the capital of France?"}], max_tokens=24, temperature=0.0)
    if llm.prompt_form == "chat":
        assert again == text
    else:
        assert again.splitlines()[0] == text.splitlines()[0] and "Paris" in text


def test_max_tokens_caps_the_output(llm: LlamaCppModel) -> None:
    text = llm.chat([{"role": "user", "content": "Write a long story about a dragon."}], max_tokens=5)
    assert 1 <= llm.count_tokens(text) <= 6


def test_token_counting(llm: LlamaCppModel) -> None:
    assert llm.count_tokens("") == 0
    short, long = llm.count_tokens("citation graph"), llm.count_tokens("citation graph " * 20)
    assert 1 <= short < long


def test_prompt_too_long_for_the_context_is_a_clear_error(llm: LlamaCppModel) -> None:
    huge = "word " * (llm.context_tokens + 100)
    with pytest.raises(LLMError, match="does not fit the local model's context"):
        llm.chat([{"role": "user", "content": huge}])


def test_missing_gguf_path_is_a_clear_error(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(LLMError, match="GGUF model file not found"):
        build_llm(Settings(llm_backend="local", llm_model=str(tmp_path / "nope.gguf")))


def test_choice_probe_reads_the_models_own_probabilities(llm: LlamaCppModel) -> None:
    from copilot import prompts
    from copilot.llm import ChoiceProbe

    good, bad = ChoiceProbe(prompts.THOUGHT_MARKER), ChoiceProbe(prompts.THOUGHT_MARKER)
    question = "What does SPECTER use to train document embeddings?"
    llm.chat(prompts.thought_messages(question, "SPECTER trains document embeddings with a triplet loss on the "
                                      "citation graph [1]."), max_tokens=80, temperature=0.0, probe=good)
    llm.chat(prompts.thought_messages(question, "The sources do not say."), max_tokens=80, temperature=0.0,
             probe=bad)
    assert good.probabilities is not None and bad.probabilities is not None
    assert sum(good.probabilities.values()) == pytest.approx(1.0)
    if llm.embedded and llm.embedded.name == "smollm2-135m":  # Gemma's verdict: see docs/models.md, "Embedded models"
        assert good.probabilities["yes"] > bad.probabilities["yes"], (good.probabilities, bad.probabilities)


def test_token_trace_reads_the_probability_of_each_written_token(llm: LlamaCppModel) -> None:
    """A number the source states is copied with confidence; the trace's text is the reply's, token by token, each
    with the model's own log-probability (the probe's processor runs beside it in the same call)."""
    from copilot import grounding
    from copilot.llm import ChoiceProbe, TokenTrace

    trace, probe = TokenTrace(), ChoiceProbe("papers")
    question = "How many papers does the corpus hold? Answer in a few words."
    reply = llm.chat([{"role": "user", "content": f"Source [1]: The corpus holds 81.1M papers.\n{question}"}],
                     max_tokens=24, temperature=0.0, trace=trace, probe=probe)
    assert trace.tokens and trace.text.strip().startswith(reply.strip()[:10]), (reply, trace.tokens)
    if llm.embedded and llm.embedded.name == INSTRUCT:
        assert "81.1" in reply, reply
        # Decoded greedily, each token is its step's likeliest: read against the step before, most would be unlikely.
        probabilities = sorted(math.exp(log_p) for _, log_p in trace.tokens)
        assert probabilities[len(probabilities) // 2] > 0.5, trace.tokens
        assert grounding.unsure_facts(reply, trace.tokens, 0.33, question) == [], trace.tokens
        assert grounding.unsure_facts(reply, trace.tokens, 1.01, question), "each fact has its probability"
    short = TokenTrace(most=3)
    llm.chat([{"role": "user", "content": "Count from one to ten in words."}], max_tokens=24, temperature=0.0,
             trace=short)
    assert len(short.tokens) == 3 and short.full, short


def test_a_reply_kept_from_an_opening_never_starts_with_it(llm: LlamaCppModel) -> None:
    """Told to answer with a bare citation, the model does; kept from opening with "[", it writes words instead, and
    only its first token is constrained (a citation later in the reply stays)."""
    from copilot.llm import TokenTrace

    messages = [{"role": "user", "content": "Source [1]: The corpus holds 81.1M papers.\nReply with the source's "
                                            "number in brackets, like [1], and nothing else."}]
    plain = llm.chat(messages, max_tokens=8, temperature=0.0)
    trace = TokenTrace()
    kept = llm.chat(messages, max_tokens=8, temperature=0.0, never_opens=("[",), trace=trace)
    assert kept.strip() and not kept.lstrip().startswith("["), (plain, kept)
    if llm.embedded and llm.embedded.name == INSTRUCT:
        assert plain.lstrip().startswith("["), plain
    # The trace reads the distribution the first token was drawn from, the masked one: its probability is real.
    assert trace.tokens and not trace.tokens[0][0].lstrip().startswith("[") and trace.tokens[0][1] > float("-inf")
    llm.prepare(never_opens=("(",))  # read ahead, as the web app's answerer does at start-up: no call waits for the scan
    assert ("(",) in llm._openings and len(llm._openings[("(",)]) > 1
    banned = llm._opening_tokens(("[",))
    assert len(banned) > 1 and all(llm._llama.detokenize([int(t)]).decode("utf-8", "ignore").lstrip()[:1] == "["
                                   for t in banned[:50])


def test_a_base_model_answers_from_the_completion_form(llm: LlamaCppModel) -> None:
    """The same messages as the engine sends; the reply is the answer alone, not the next example."""
    from copilot import prompts

    source = ("(XAI survey, Introduction) Explainable Artificial Intelligence (XAI) is a field of research that "
              "aims to provide explanations for the predictions made by deep learning models.")
    reply = llm.chat([{"role": "system", "content": prompts.ANSWER_SYSTEM},
                      {"role": "user", "content": prompts.answer_user("What does XAI stand for?", [source])}],
                     max_tokens=60, temperature=0.0)
    assert reply.strip()
    assert "###" not in reply and "Question:" not in reply and "\n\n" not in reply.strip()
    if llm.prompt_form == "completion":
        assert not reply.startswith(" "), "the space after the cue is not part of the answer"
        assert "explainable artificial intelligence" in reply.lower(), reply
