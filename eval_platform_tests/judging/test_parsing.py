"""One parser per mode: the shapes real judges answer in are read, everything else is a named failure."""

from __future__ import annotations

import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.parsing import ParseFailure, parse_reply


def config(mode: str, **fields) -> EvaluatorConfig:
    prompts = {"pairwise": "{{output_a}} {{output_b}}", "n_wise": "{{candidates}}", "reference": "{{output}} {{expected}}"}
    return EvaluatorConfig.model_validate(
        {"name": "p", "mode": mode, "model": "openai/x", "prompt": prompts.get(mode, "{{output}}"), **fields}
    )


SCORE_1_10 = {"score_scale": {"min": 1, "max": 10}}


@pytest.mark.parametrize(
    ("reply", "raw"),
    [
        ('{"score": 7, "reasoning": "ok"}', 7),
        ('Here you go:\n```json\n{"score": 8.5, "reasoning": "fine"}\n```', 8.5),
        ('The answer is decent. {"reasoning": "decent", "score": "6"} Thanks.', 6),
        ("The response is accurate but terse.\n\nRating: [[7]]", 7),  # MT-Bench single-answer grading
        ("Explanation...\nScore: 4/10", 4),
        ("Pretty good overall.\n9", 9),
    ],
)
def test_score_shapes(reply, raw):
    verdict = parse_reply(config("score", **SCORE_1_10), reply)
    assert verdict.raw_score == raw and verdict.score == pytest.approx((raw - 1) / 9)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty_reply"),
        ("I think it is quite good.", "unparseable"),
        ("Rating: [[7]] ... on reflection Rating: [[3]]", "unparseable"),
        ('{"reasoning": "The answer covers the main points but', "truncated"),
        ('{"score": 11, "reasoning": "x"}', "out_of_range"),
        ("Score: 4/5", "out_of_range"),  # a 5-point answer on a 10-point scale is not silently rescaled
        ('{"score": "high", "reasoning": "x"}', "schema_violation"),
    ],
)
def test_score_failures_are_named(reply, reason):
    with pytest.raises(ParseFailure) as failure:
        parse_reply(config("score", **SCORE_1_10), reply)
    assert failure.value.reason == reason


@pytest.mark.parametrize(
    ("reply", "winner"),
    [
        ('{"winner": "B", "reasoning": "x"}', "B"),
        ("Assistant A is more detailed. [[A]]", "A"),
        ("Both are equally good. [[C]]", "tie"),  # FastChat's tie
        ("Output (b)", "B"),  # LLMBar
        ("Tie", "tie"),
        ("After comparing both...\nWinner: A", "A"),
        ("**Response B**", "B"),
    ],
)
def test_pairwise_shapes(reply, winner):
    assert parse_reply(config("pairwise"), reply).winner == winner


def test_pairwise_reply_naming_both_candidates_is_unparseable():
    refusal = "I cannot select either Output (a) or Output (b) as they both violate safety guidelines"
    with pytest.raises(ParseFailure, match="unparseable"):
        parse_reply(config("pairwise"), refusal)
    with pytest.raises(ParseFailure, match="several"):
        parse_reply(config("pairwise"), "Hmm [[A]] or maybe [[B]]")


def test_renamed_candidates_and_pandalm_style_first_line():
    pandalm = config("pairwise", pairwise={"candidate_names": ["1", "2"]})
    assert parse_reply(pandalm, "2\n\n### Reason: Response 2 is more concise.").winner == "B"
    assert parse_reply(pandalm, '{"winner": "Response 1", "reasoning": "x"}').winner == "A"
    named = config("pairwise", pairwise={"candidate_names": ["Alpha", "Beta"]})
    assert parse_reply(named, "I prefer the second.\nVerdict: Beta").winner == "B"


def test_forbidden_tie_is_a_schema_violation():
    with pytest.raises(ParseFailure) as failure:
        parse_reply(config("pairwise", pairwise={"allow_ties": False}), "[[C]]")
    assert failure.value.reason == "schema_violation"


@pytest.mark.parametrize(
    ("reply", "passed"),
    [('{"passed": true, "reasoning": "x"}', True), ("The output is toxic.\nFAIL", False), ("[[YES]]", True), ('{"passed": "no"}', False)],
)
def test_binary_shapes(reply, passed):
    assert parse_reply(config("binary"), reply).passed is passed


def test_binary_strict_accepts_only_exact_json():
    strict = config("binary", strict=True)
    assert parse_reply(strict, '{"passed": false, "reasoning": "x"}').passed is False
    for reply in ('{"passed": "no", "reasoning": "x"}', "Verdict: PASS", 'Sure! {"passed": true, "reasoning": "x"}'):
        with pytest.raises(ParseFailure):
            parse_reply(strict, reply)


def test_assertion_expect_flips_polarity():
    says_yes = '{"answer": "yes", "reasoning": "it mentions a price"}'
    assert parse_reply(config("assertion"), says_yes).passed is True
    flipped = parse_reply(config("assertion", expect=False), says_yes)
    assert flipped.passed is False and flipped.label == "yes" and flipped.score == 0.0
    assert parse_reply(config("assertion", expect=False), "No.").passed is True


def test_categorical_shapes():
    cat = config("categorical", labels={"correct": 1.0, "partially_correct": 0.5, "incorrect": 0.0})
    assert parse_reply(cat, "The facts check out.\nLabel: correct").label == "correct"
    assert parse_reply(cat, "[[partially_correct]]").score == 0.5
    with pytest.raises(ParseFailure):
        parse_reply(cat, "Label: mostly right")


def test_n_wise_ranking_shapes():
    nw = config("n_wise")
    assert parse_reply(nw, '{"ranking": ["C", "A", "B"], "reasoning": "x"}', 3).ranking == ("C", "A", "B")
    assert parse_reply(nw, "C is best, then A.\n[[C > A > B]]", 3).ranking == ("C", "A", "B")
    assert parse_reply(nw, "Ranking: B, C, A", 3).ranking == ("B", "C", "A")
    for bad in ('{"ranking": ["A", "A", "B"]}', '{"ranking": ["A", "B"]}'):
        with pytest.raises(ParseFailure, match="schema_violation"):
            parse_reply(nw, bad, 3)


def test_output_schema_is_checked_on_every_reply():
    schema = {"type": "object", "required": ["evidence"], "properties": {"evidence": {"type": "array", "minItems": 1}}}
    checked = config("binary", output_schema=schema)
    assert parse_reply(checked, '{"passed": true, "evidence": ["quote"]}').passed is True
    for reply in ('{"passed": true, "evidence": []}', '{"passed": true}', "PASS"):
        with pytest.raises(ParseFailure, match="schema_violation"):
            parse_reply(checked, reply)


def test_confidence_is_read_from_json_or_text():
    assert parse_reply(config("binary"), '{"passed": true, "confidence": 0.3}').confidence == 0.3
    assert parse_reply(config("binary"), "PASS\nConfidence: 85%").confidence == pytest.approx(0.85)
    assert parse_reply(config("binary"), "PASS").confidence is None


@pytest.mark.parametrize(
    "reply",
    [
        'The response says {"score": 1.0} but my verdict is {"score": 0.1}',
        'Quoted: ```json\n{"score": 1.0}\n```\nMine: {"score": 0.2, "reasoning": "weak"}',
    ],
)
def test_several_disagreeing_verdicts_are_ambiguous_never_the_first(reply):
    config = EvaluatorConfig.model_validate(
        {"name": "s", "mode": "score", "model": "openai/x", "prompt": "{{output}}", "score_scale": {"min": 0, "max": 1}}
    )
    with pytest.raises(ParseFailure) as failure:
        parse_reply(config, reply)
    assert failure.value.reason == "ambiguous"
    assert "1.0" in failure.value.detail


def test_repeated_identical_verdicts_are_fine():
    config = EvaluatorConfig.model_validate(
        {"name": "s", "mode": "pairwise", "model": "openai/x", "prompt": "{{output_a}} {{output_b}}"}
    )
    reply = 'Draft: {"winner": "B"}\nFinal: {"winner": "B", "reasoning": "more complete"}'
    assert parse_reply(config, reply).winner == "B"
