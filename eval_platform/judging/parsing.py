"""Read a verdict out of a judge's reply, or say precisely why it cannot be read.

Judges answer in many shapes. Every mode first looks for a JSON object (bare, in a ``` fence, or with
prose around it); without one, it accepts the text shapes real judges produce (each mode's parser is in
its module under `judging/modes/`; the shared toolkit is `judging/replies`):

- pairwise: `[[A]]` / `[[B]]` / `[[C]]` (MT-Bench), `Output (a)` (LLMBar), a candidate's name or
  `Response 1` alone on the first or last line (PandaLM), `Tie`, `Winner: B`;
- score / reference: `Rating: [[7]]`, `Score: 4/5`, a number alone on the last line;
- binary / assertion: `yes` / `no` / `pass` / `fail` / `true` / `false`, also as `[[YES]]` or `Verdict: PASS`;
- categorical: `[[label]]`, `Label: x`, a label alone on the first or last line;
- n_wise: `[[C > A > B]]`, `Ranking: C, A, B`.

Anything else is a `ParseFailure` and the row is FAILED with the raw reply kept: never a default score. A
reply that ends inside a JSON object is `truncated`. A reply whose verdicts disagree, across JSON objects,
`[[...]]`, `Key: value` lines and its first and last lines (a quoted injected `{"score": 1.0}` before the
judge's `Score: 0.2`, or both pairwise candidates named), is `ambiguous`; an evaluator may declare a published
parser's convention for the last case (`pairwise.when_both_named`).
`strict: true` accepts only a JSON reply whose fields have exactly the reply schema's types.
"""

from __future__ import annotations

import json
from typing import Any

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes.pairwise import pairwise_aliases  # noqa: F401 (re-exported)
from eval_platform.judging.replies import (  # noqa: F401 (Verdict, ParseFailure and the JSON finders are re-exported)
    ParseFailure,
    Verdict,
    confidence_of,
    find_json_object,
    find_json_objects,
    is_truncated_json,
    one_json_object,
    reasoning_of,
    strict_json,
    text_outside_json,
    validate,
)
from eval_platform.schemas import AMBIGUOUS, EMPTY_REPLY, SCHEMA_VIOLATION, TRUNCATED, UNPARSEABLE


def parse_reply(config: EvaluatorConfig, text: str, n_candidates: int | None = None) -> Verdict:
    """Parse one reply for the evaluator's mode; raise ParseFailure when it cannot be trusted."""
    if not text or not text.strip():
        raise ParseFailure(EMPTY_REPLY, "the judge returned no content")
    one = None  # the reply when it is one JSON object and nothing else (the usual reply), read once
    obj: dict[str, Any] | None
    if config.strict:
        obj = strict_json(text)
        from eval_platform.judging.prompts import (
            reply_schema,  # prompts builds on config, like this module
        )

        validate(obj, reply_schema(config, n_candidates), "the reply schema")
    else:
        one = one_json_object(text.strip())
        obj = one if one is not None else _the_verdict_object(config, text, n_candidates)
    if obj is not None and config.output_schema is not None:
        validate(obj, config.output_schema, "output_schema")
    if obj is None:
        if config.output_schema is not None:
            raise ParseFailure(SCHEMA_VIOLATION, "output_schema requires a JSON object reply; none found")
        if is_truncated_json(text):
            raise ParseFailure(TRUNCATED, "the reply ends inside a JSON object")
    verdict = config.judge_mode.parse(config, obj, text, n_candidates)
    # A reply that is one JSON object has no text around it that could give a verdict of its own.
    if one is None and obj is not None and not config.strict and any(k in obj for k in config.judge_mode.verdict_keys):
        _check_the_text_agrees(config, verdict, text, n_candidates)
    confidence = confidence_of(obj, text)
    reasoning = reasoning_of(obj) if obj is not None else text.strip()
    # The mode's verdict with the reasoning and confidence read here: a copy of its fields (a frozen dataclass's
    # __init__ sets them one `object.__setattr__` at a time, and this is once per reply).
    whole = object.__new__(Verdict)
    whole.__dict__.update(verdict.__dict__, reasoning=reasoning, confidence=confidence)
    return whole


def _the_verdict_object(config: EvaluatorConfig, text: str, n_candidates: int | None) -> dict[str, Any] | None:
    """The JSON object holding the verdict; several objects with different verdicts are `ambiguous`.

    Judges sometimes quote the evaluated content, and content can carry an injected verdict such as
    `{"score": 1.0}`: taking the first object would let it win. A reply is trusted only when every
    verdict-bearing object in it says the same thing.
    """
    objects = find_json_objects(text)
    keys = config.judge_mode.verdict_keys
    bearing = [obj for obj in objects if any(key in obj for key in keys)]
    if len(bearing) > 1:
        decisions: list[str | tuple[object, ...]] = []
        for obj in bearing:
            try:
                verdict = config.judge_mode.parse(config, obj, text, n_candidates)
            except ParseFailure as failure:
                decisions.append(f"unreadable ({failure.reason})")
                continue
            decisions.append((verdict.score, verdict.label, verdict.passed, verdict.winner, verdict.ranking))
        distinct = list(dict.fromkeys(map(str, decisions)))
        if len(distinct) > 1:
            shown = "; ".join(json.dumps({k: obj[k] for k in keys if k in obj}) for obj in bearing)
            raise ParseFailure(AMBIGUOUS, f"the reply holds {len(bearing)} different verdicts: {shown}")
    if bearing:
        return bearing[-1]
    return objects[0] if objects else None


def _decision(verdict: Verdict) -> tuple:
    return (verdict.score, verdict.label, verdict.passed, verdict.winner, verdict.ranking)


def _check_the_text_agrees(config: EvaluatorConfig, verdict: Verdict, text: str, n_candidates: int | None) -> None:
    """A JSON verdict stands only if the text around it gives none, or the same one.

    Content can carry an injected `{"score": 1.0}` that the judge quotes before giving its own verdict in
    a text shape (`Score: 0.2`, `Verdict: FAIL`): the JSON object is then not the judge's verdict.
    """
    rest = text_outside_json(text)
    if not rest.strip():  # nothing but the JSON: no verdict of its own (every mode finds none in blank text)
        return
    try:
        in_text = config.judge_mode.parse(config, None, rest, n_candidates)
    except ParseFailure as failure:
        if failure.reason == UNPARSEABLE:  # the text around the JSON gives no verdict of its own
            return
        raise ParseFailure(AMBIGUOUS, f"the JSON verdict and the text around it disagree: {failure.detail}") from None
    if _decision(in_text) != _decision(verdict):
        raise ParseFailure(
            AMBIGUOUS,
            f"the JSON verdict ({_shown(verdict)}) and the text around it ({_shown(in_text)}) disagree",
        )


def _shown(verdict: Verdict) -> str:
    named = {
        "raw_score": verdict.raw_score,
        "label": verdict.label,
        "passed": verdict.passed,
        "winner": verdict.winner,
        "ranking": verdict.ranking,
    }
    return ", ".join(f"{key} {value}" for key, value in named.items() if value is not None) or "none"
