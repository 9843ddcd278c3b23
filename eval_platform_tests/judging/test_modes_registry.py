"""The MODES registry is the one list of judge modes: every mode in it validates, asks for its verdict
under the key the parser reads first, and is accepted by the evaluator schema."""

from __future__ import annotations

import json

import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes import LABEL_MODES, MODES, NUMERIC_MODES
from eval_platform.judging.parsing import parse_reply
from eval_platform.judging.prompts import reply_schema

PROMPTS = {
    "pairwise": "Q: {{input}} A: {{output_a}} B: {{output_b}}",
    "n_wise": "Q: {{input}} {{candidates}}",
    "reference": "Q: {{input}} A: {{output}} gold: {{expected}}",
}
EXTRA = {"categorical": {"labels": {"good": 1.0, "bad": 0.0}}}
VERDICTS = {"scaled": 4, "boolean": True, "label": None, "ranking": ["B", "A"]}


@pytest.mark.parametrize("name", sorted(MODES))
def test_every_registered_mode_is_a_working_evaluator_mode(name):
    mode = MODES[name]
    config = EvaluatorConfig.model_validate(
        {
            "name": "e",
            "mode": name,
            "model": "openai/x",
            **EXTRA.get(name, {}),
            "prompt": PROMPTS.get(name, "Q: {{input}} A: {{output}}"),
        }
    )
    for option in mode.options:
        assert getattr(config, option) is not None  # filled with its defaults
    schema = reply_schema(config, n_candidates=2 if name == "n_wise" else None)
    key = mode.verdict_keys[0]
    assert key in schema["required"]
    value = VERDICTS[mode.verdict]
    if value is None:
        value = schema["properties"][key]["enum"][0]
    if name == "assertion":
        value = "yes"
    verdict = parse_reply(
        config, json.dumps({"reasoning": "r", key: value}), n_candidates=2 if name == "n_wise" else None
    )
    read = verdict.ranking if mode.verdict == "ranking" else getattr(verdict, mode.vote_column)
    assert read is not None  # the per-case value consensus votes or averages on
    assert (name in LABEL_MODES) != (name in NUMERIC_MODES)  # a mode is voted on or averaged, never both
