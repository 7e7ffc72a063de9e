"""The grounding check: sentence splitting, term matching, support scores with the real embedder, the chat's view."""

import pytest

from copilot import grounding
from copilot.config import GROUNDING_THRESHOLD, Settings
from copilot.embeddings import Embedder, get_embedder
from copilot.types import Grounding, RetrievedItem, SentenceSupport

XAI_CHUNKS = [
    "Explainable Artificial Intelligence (XAI) aims to make the decisions of machine learning models understandable "
    "to humans. This review surveys XAI methods for deep neural networks.",
    "Post-hoc explanation methods such as LIME and SHAP attribute a model's prediction to its input features. "
    "Saliency maps highlight the pixels that most influence an image classifier.",
    "Regulation such as the GDPR has increased the demand for explanations of automated decisions in high-stakes "
    "domains like medicine and finance.",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(Settings())


def items(texts: list[str]) -> list[RetrievedItem]:
    return [RetrievedItem("chunk", 10 + n, t, 0.5, paper_id="review", section="Intro", page_start=1, page_end=1)
            for n, t in enumerate(texts)]


def test_sentences_keep_abbreviations_decimals_and_citations() -> None:
    text = ("Methods differ, e.g. LIME and SHAP [2]. Smith et al. report 93.4% accuracy. It rose by 3.5 points. [1]\n"
            "- a listed point [3]\n2. A numbered one.")
    assert grounding.split_sentences(text) == [
        "Methods differ, e.g. LIME and SHAP [2].", "Smith et al. report 93.4% accuracy.",
        "It rose by 3.5 points. [1]", "a listed point [3]", "A numbered one."]
    spans = grounding.sentence_spans(text)
    assert [text[s:e] for s, e in spans] == grounding.split_sentences(text)
    assert grounding.strip_citations("LIME and SHAP [2][3] differ [1, 4].") == "LIME and SHAP differ."


def test_terms_are_content_words_numbers_and_names() -> None:
    assert grounding.terms("The XAI models were trained on 1,000 papers with 93.4% accuracy") == {
        "xai", "model", "train", "1000", "paper", "93.4", "accuraci"}
    assert grounding.terms("It is what it was.") == set()


def test_source_sentences_take_turns_up_to_the_cap() -> None:
    sources = ["One two three. Four five six. Seven eight nine.", "Alpha beta gamma. Delta epsilon zeta.", "tiny"]
    assert grounding.source_sentences(sources, cap=4) == [
        (0, "One two three."), (1, "Alpha beta gamma."), (2, "tiny"), (0, "Four five six.")]


def test_invented_term_is_unsupported_and_a_faithful_answer_is_grounded(embedder: Embedder) -> None:
    sources = items(XAI_CHUNKS)
    invented = grounding.check("XAI stands for Exempliacetabular Impreciatibile.", sources, embedder,
                               GROUNDING_THRESHOLD)
    assert not invented.grounded
    [sentence] = invented.sentences
    assert sentence.support < GROUNDING_THRESHOLD and sentence.source_n == 1
    assert sentence.quote.startswith("Explainable Artificial Intelligence (XAI)")

    faithful = grounding.check("XAI stands for Explainable Artificial Intelligence [1]. Post-hoc methods such as "
                               "LIME and SHAP attribute a prediction to its input features [2].", sources, embedder,
                               GROUNDING_THRESHOLD)
    assert faithful.grounded, faithful
    assert [s.source_n for s in faithful.sentences] == [1, 2]
    assert faithful.sentences[1].quote.startswith("Post-hoc explanation methods such as LIME and SHAP")
    assert all(s.support > invented.sentences[0].support for s in faithful.sentences)
    assert faithful.as_dict() == {"grounding": [
        {"sentence": s.sentence, "support": s.support, "source_n": s.source_n, "quote": s.quote, "missing": [],
         "unstable": []}
        for s in faithful.sentences], "grounded": True}
    assert faithful.as_dict()["grounding"][0]["sentence"] == "XAI stands for Explainable Artificial Intelligence [1]."

    # One invented sentence is enough: the answer is not grounded, and only that sentence is unsupported.
    mixed = grounding.check("XAI stands for Explainable Artificial Intelligence [1]. It was invented in 1874 by "
                            "Exempliacetabular Impreciatibile.", sources, embedder, GROUNDING_THRESHOLD)
    assert not mixed.grounded and [s.sentence for s in mixed.unsupported] == [mixed.sentences[1].sentence]


def test_an_unfinished_last_sentence_is_not_checked(embedder: Embedder) -> None:
    sources = items(XAI_CHUNKS)
    text = "XAI stands for Explainable Artificial Intelligence [1]. The final section concludes with a discussion of how L"
    whole = grounding.check(text, sources, embedder, GROUNDING_THRESHOLD)
    assert len(whole.sentences) == 2, "an answer that was not cut off has every sentence checked"
    capped = grounding.check(text, sources, embedder, GROUNDING_THRESHOLD, capped=True)
    assert [s.sentence for s in capped.sentences] == ["XAI stands for Explainable Artificial Intelligence [1]."]
    assert capped.grounded
    alone = grounding.check("XAI stands for Exempliacetabular Impreciatibile", sources, embedder,
                            GROUNDING_THRESHOLD, capped=True)
    assert len(alone.sentences) == 1 and not alone.grounded, "an answer that is one fragment is still checked"
    assert grounding.unfinished("and then the") and not grounding.unfinished("It ends [2].")


def test_numbers_absent_from_the_sources_lower_support(embedder: Embedder) -> None:
    sources = items(["S2ORC is a corpus of 81.1 million English-language academic papers spanning many disciplines."])
    right = grounding.check("S2ORC holds 81.1 million academic papers.", sources, embedder, GROUNDING_THRESHOLD)
    wrong = grounding.check("S2ORC holds 4.6 billion academic papers.", sources, embedder, GROUNDING_THRESHOLD)
    assert right.sentences[0].support > wrong.sentences[0].support


def test_no_sources_or_no_sentences_is_not_grounded(embedder: Embedder) -> None:
    alone = grounding.check("A citation names the work an idea comes from.", [], embedder, GROUNDING_THRESHOLD)
    assert not alone.grounded and alone.sentences[0].support == 0.0 and alone.sentences[0].source_n is None
    empty = grounding.check("  [1] ", items(XAI_CHUNKS), embedder, GROUNDING_THRESHOLD)
    assert empty.sentences == [] and not empty.grounded


def test_support_curve_rises_with_both_signals() -> None:
    low, high_cosine, high_coverage = grounding.support_score([0.2, 0.8, 0.2], [0.1, 0.1, 0.9])
    assert low < high_cosine and low < high_coverage
    assert grounding.support_score(0.5, 0.5, weights=(1.0, 1.0, -1.0)) == pytest.approx(0.5)


def _grounding(answer: str, supports: list[tuple[str, float, str]], threshold: float = 0.5) -> Grounding:
    sentences = []
    for text, support, quote in supports:
        start = answer.index(text)
        sentences.append(SentenceSupport(text, support, 1, quote, start, start + len(text)))
    return Grounding(sentences, all(s.support >= threshold for s in sentences), threshold)


def test_markdown_marks_unsupported_sentences_and_lists_quotes() -> None:
    answer = "XAI means explainable AI [1].\n\nIt was named by Exempliacetabular."
    view = grounding.markdown(answer, _grounding(answer, [("XAI means explainable AI [1].", 0.9, "XAI is explainable"),
                                                          ("It was named by Exempliacetabular.", 0.1, "This review")]))
    assert view.startswith("XAI means explainable AI [1].\n\nIt was named by Exempliacetabular. ⚠️")
    assert "1 of 2 sentences are not supported by the sources" in view
    assert "1. [1] “XAI is explainable” (support 0.90)" in view
    assert "2. ⚠️ [1] “This review” (support 0.10)" in view
    assert "do not support this answer" not in view


def test_markdown_says_plainly_when_nothing_is_supported() -> None:
    answer = "XAI stands for Exempliacetabular Impreciatibile."
    view = grounding.markdown(answer, _grounding(answer, [(answer, 0.05, "Explainable Artificial Intelligence")]))
    assert view.startswith("**The sources do not support this answer.**")
    assert f"{answer} ⚠️" in view
    assert "**Closest passages**\n- [1] “Explainable Artificial Intelligence”" in view


def test_markdown_of_a_grounded_answer_marks_nothing() -> None:
    answer = "XAI means explainable AI [1]."
    view = grounding.markdown(answer, _grounding(answer, [(answer, 0.9, "XAI is explainable")]))
    assert "⚠️" not in view and view.startswith(answer) and "Supporting quotes" in view


def test_an_earlier_finding_never_confirms_a_fact(embedder: Embedder) -> None:
    """A thought that put a paper's number in the wrong place ("92.0 on titles") does not vouch for it again."""
    paper = items(["I-VILA reaches a macro-averaged F1 score of 92.7 on the full S2-VL evaluation."])
    thought = [RetrievedItem("thought", 3, "I-VILA gets an F1 score of 92.0 on titles.", 0.9)]
    answer = "I-VILA gets an F1 score of 92.0 on titles [2]."
    alone = grounding.check(answer, paper + thought, embedder, GROUNDING_THRESHOLD)
    assert not alone.grounded and "92.0" in alone.sentences[0].missing
    stated = grounding.check("I-VILA reaches an F1 score of 92.7 on the full S2-VL evaluation [1].", paper + thought,
                             embedder, GROUNDING_THRESHOLD)
    assert stated.grounded, stated


def test_a_quantity_is_stated_by_a_number_that_labels_nothing() -> None:
    assert grounding.states_quantity("GROBID chains twelve sequence labelling models.")
    assert grounding.states_quantity("It reaches 85.5 F1 [2].")
    assert grounding.states_quantity("None of the surveyed papers did.")
    assert not grounding.states_quantity("The score is given in Table 2 [1].")
    assert not grounding.states_quantity("[3] RQ3: Is it useful to align summary units?")
    assert not grounding.states_quantity("Removing the abstract causes a substantial decrease in performance.")
