"""BERTScore from a local model folder against the reference implementation (the `bert-score` package) on the
same tiny model: precision, recall and F1 per pair, at each layer, with and without idf, several references."""

from __future__ import annotations

import bert_score
import numpy as np
import pytest
from pydantic import ValidationError

from eval_platform.judging.runner import judge_day
from eval_platform.local_models import LocalModelError
from eval_platform.local_models.bertscore import bertscore, idf_weights
from eval_platform.scoring import registry
from eval_platform_tests.judging.test_checks import DAY, by_trace, check, traces

CANDIDATES = [
    "the cat sat on the mat",
    "a quick brown fox",
    "dogs ran fast",
    "the red cat jumps",
    "blue birds",
    "the answer is 18.",
    "nobody knew the old man",
]
REFERENCES = [
    "a cat sat on a rug",
    "the quick brown fox jumps over the lazy dog",
    "the dog ran slow",
    "blue cats sat",
    "the small green bird",
    "the answer is 18.",
    "somewhere far beyond the hills and the two rivers",
]


def package(model, candidates, references, layers, idf):
    # nthreads=0: the package counts document frequencies in this process (its default forks a pool)
    p, r, f = bert_score.score(
        candidates, references, model_type=model, num_layers=layers, idf=idf, device="cpu", nthreads=0
    )
    return np.column_stack([p.numpy(), r.numpy(), f.numpy()]).astype(float)


def ours(model, candidates, references, layers, idf):
    groups = [[r] if isinstance(r, str) else r for r in references]
    weights = idf_weights(model, [r for g in groups for r in g]) if idf else None
    scores = bertscore(model, candidates, groups, num_layers=layers, idf=weights)
    return np.array([[s.precision, s.recall, s.f1] for s in scores])


@pytest.fixture
def model(tiny_bert, network_attempts):
    yield str(tiny_bert)
    assert network_attempts == []  # neither ours nor the package's loading of the folder reached the network


@pytest.mark.parametrize("layers", [0, 1, 2])
@pytest.mark.parametrize("idf", [False, True])
def test_precision_recall_f1_are_the_packages(model, layers, idf):
    expected = package(model, CANDIDATES, REFERENCES, layers, idf)
    got = ours(model, CANDIDATES, REFERENCES, layers, idf)
    assert np.abs(got - expected).max() < 1e-6
    assert got[5] == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)  # a candidate equal to its reference
    assert (got[[0, 1, 2, 3, 4, 6]] < 1 - 1e-4).all()


def test_the_default_layer_is_the_last_and_idf_changes_the_score(model):
    assert (
        np.abs(
            ours(model, CANDIDATES, REFERENCES, None, False) - package(model, CANDIDATES, REFERENCES, 2, False)
        ).max()
        < 1e-6
    )
    assert (
        np.abs(ours(model, CANDIDATES, REFERENCES, 2, True) - ours(model, CANDIDATES, REFERENCES, 2, False)).max()
        > 1e-3
    )


@pytest.mark.parametrize("idf", [False, True])
def test_several_references_take_the_best_of_each_metric(model, idf):
    groups = [[REFERENCES[i], REFERENCES[(i + 3) % len(REFERENCES)]] for i in range(len(CANDIDATES))]
    expected = package(model, CANDIDATES, groups, 1, idf)
    assert np.abs(ours(model, CANDIDATES, groups, 1, idf) - expected).max() < 1e-6


def test_a_pair_scores_alike_alone_or_among_others(model):
    alone = ours(model, CANDIDATES[:1], REFERENCES[:1], 2, False)
    assert np.abs(alone - ours(model, CANDIDATES, REFERENCES, 2, False)[:1]).max() < 1e-6


def test_an_empty_candidate_or_reference_scores_zero(model):
    # The package's rule ("Empty candidate sentence detected; setting raw BERTScores to 0"). bert-score 0.3.13
    # cannot encode an empty text under transformers 5 (it calls build_inputs_with_special_tokens, removed there),
    # so this is checked against the rule, not the package.
    got = bertscore(model, ["", "the cat", "  "], [["the cat"], [""], ["a dog"]], num_layers=2)
    assert [(s.precision, s.recall, s.f1) for s in got] == [(0.0, 0.0, 0.0)] * 3


def test_idf_over_a_single_reference_is_an_error_not_a_score(model):
    # Every token of the only reference is in every reference: idf weighs them all 0 (the package returns NaN).
    with pytest.raises(LocalModelError, match="every token weighs 0 .*idf needs references that differ"):
        bertscore(model, ["a cat"], [["the cat"]], idf=idf_weights(model, ["the cat"]))


def test_the_scorer_gives_the_packages_value_per_case_and_over_the_corpus(model):
    cases = [{"expected_output": reference} for reference in REFERENCES]
    for metric, column in (("precision", 0), ("recall", 1), ("f1", 2)):
        options = registry.get("bertscore").options(model_path=model, num_layers=1, metric=metric)
        values = [registry.get("bertscore").score(c, case, options) for c, case in zip(CANDIDATES, cases, strict=True)]
        assert np.abs(np.array(values) - package(model, CANDIDATES, REFERENCES, 1, False)[:, column]).max() < 1e-6
        idf_scorer = registry.get("bertscore_idf")
        assert idf_scorer.task_level  # declared a corpus statistic: idf comes from all the task's references
        expected = package(model, CANDIDATES, REFERENCES, 1, True)[:, column].mean()
        assert idf_scorer.aggregate([], CANDIDATES, cases, options) == pytest.approx(expected, abs=1e-6)
        rows = idf_scorer.statistics(CANDIDATES, cases, options)
        assert idf_scorer.from_statistics(rows.sum(axis=0), options) == pytest.approx(expected, abs=1e-6)
    assert registry.get("bertscore_idf").aggregate([], [], [], options) is None


def test_options_name_the_missing_folder_and_a_layer_the_model_lacks(model, tmp_path):
    scorer = registry.get("bertscore")
    with pytest.raises(ValidationError, match=f"model_path '{tmp_path / 'nowhere'}': no such folder"):
        scorer.options(model_path=str(tmp_path / "nowhere"))
    with pytest.raises(ValidationError, match="num_layers 3 is more than the model's 2 layers"):
        scorer.options(model_path=model, num_layers=3)
    with pytest.raises(ValidationError, match="metric"):
        scorer.options(model_path=model, metric="accuracy")
    with pytest.raises(ValidationError, match="model_path"):
        scorer.options()  # no default model: nothing is ever chosen (or fetched) for the user


def test_bertscore_as_a_check_scores_each_trace_against_its_expected_output(model, local_judge, runtime):
    config = check("close_to_reference", check={"scorer": "bertscore", "model_path": model, "pass_threshold": 0.9})
    rows = [
        {"trace_id": f"t{i}", "output": c, "expected_output": r}
        for i, (c, r) in enumerate(zip(CANDIDATES, REFERENCES, strict=True))
    ]
    rows.append({"trace_id": "no_reference", "output": "the cat"})
    result = by_trace(judge_day(config, DAY, traces(rows), runtime).rows)
    expected = package(model, CANDIDATES, REFERENCES, 2, False)[:, 2]
    for i, f1 in enumerate(expected):
        row = result[f"t{i}"]
        assert row["status"] == "COMPLETED" and row["score"] == pytest.approx(f1, abs=1e-6)
        assert row["passed"] == (row["score"] >= 0.9)
    assert result["t5"]["passed"] and not result["t1"]["passed"]
    assert (result["no_reference"]["status"], result["no_reference"]["reason"]) == ("SKIPPED", "missing_field")
