"""BLEU/chrF and ROUGE scorers reproduce the libraries' own published values (sacrebleu README, rouge-score tests)."""

from __future__ import annotations

import pytest

from eval_platform.scoring import registry

# sacrebleu's README example: BLEU = 48.53, chrF2 = 59.73 on these three sentences and two reference streams.
SYSTEM = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
STREAMS = [
    ["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
    ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
]
CASES = [{"expected_output": [STREAMS[0][i], STREAMS[1][i]]} for i in range(3)]


@pytest.mark.parametrize(("name", "published"), [("bleu", 0.4853), ("chrf", 0.5973)])
def test_corpus_bleu_and_chrf_match_sacrebleus_published_example(name, published):
    scorer = registry.get(name)
    options = scorer.options()
    values = [scorer.score(output, case, options) for output, case in zip(SYSTEM, CASES, strict=True)]
    assert scorer.aggregate(values, SYSTEM, CASES, options) == pytest.approx(published, abs=5e-5)
    assert values[0] == pytest.approx(1.0)  # an output equal to a reference
    # its declared sufficient statistics, summed, give exactly the corpus score (what the interval resamples)
    summed = scorer.statistics(SYSTEM, CASES, options).sum(axis=0)
    assert scorer.from_statistics(summed, options) == scorer.aggregate(values, SYSTEM, CASES, options)


def test_a_different_number_of_references_per_case_is_sacrebleus_variable_reference_corpus_score():
    # A dataset's list of accepted answers need not be the same length in every case; sacrebleu takes None
    # for a reference a case does not have.
    from sacrebleu.metrics import BLEU

    cases = [
        {"expected_output": [STREAMS[0][0]]},
        {"expected_output": [STREAMS[0][1], STREAMS[1][1]]},
        {"expected_output": [STREAMS[0][2], STREAMS[1][2]]},
    ]
    streams = [[STREAMS[0][0], STREAMS[0][1], STREAMS[0][2]], [None, STREAMS[1][1], STREAMS[1][2]]]
    expected = BLEU(effective_order=True).corpus_score(SYSTEM, streams).score / 100
    scorer = registry.get("bleu")
    assert scorer.aggregate([], SYSTEM, cases, scorer.options()) == pytest.approx(expected)


def test_rouge_matches_rouge_scores_own_tests():
    # rouge_scorer_test.testRouge1: target "testing one two", prediction "testing" -> F 1/2.
    assert registry.get("rouge1").score("testing", {"expected_output": "testing one two"}) == pytest.approx(0.5)
    # testRougeLSum: target "w1 w2 w3 w4 w5", prediction on two lines -> P 0.4, R 0.8, F 0.533.
    prediction = "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"
    value = registry.get("rougeLsum").score(prediction, {"expected_output": "w1 w2 w3 w4 w5"})
    assert value == pytest.approx(0.533, abs=5e-4)
    # testRougeSingleExample: rouge2 and rougeL of "testing one" against "testing one two".
    assert registry.get("rouge2").score("testing one", {"expected_output": "testing one two"}) == pytest.approx(2 / 3)
    assert registry.get("rougeL").score("testing two", {"expected_output": "testing one two"}) == pytest.approx(4 / 5)


def test_rouge_lsum_splits_sentences_on_newlines_without_nltk_data():
    # Two reference lines answered in swapped order: ROUGE-L finds one line (F 0.5), ROUGE-Lsum both (F 1).
    case = {"expected_output": "a b\nc d"}
    assert registry.get("rougeL").score("c d\na b", case) == pytest.approx(0.5)
    assert registry.get("rougeLsum").score("c d\na b", case) == pytest.approx(1.0)
