"""Read a verdict out of a judge's reply, or say precisely why it cannot be read.

Judges answer in many shapes. Every mode first looks for a JSON object (bare, in a ``` fence, or with
prose around it); without one, it accepts the text shapes real judges produce:

- pairwise: `[[A]]` / `[[B]]` / `[[C]]` (MT-Bench), `Output (a)` (LLMBar), a candidate's name or
  `Response 1` alone on the first or last line (PandaLM), `Tie`, `Winner: B`;
- score / reference: `Rating: [[7]]`, `Score: 4/5`, a number alone on the last line;
- binary / assertion: `yes` / `no` / `pass` / `fail` / `true` / `false`, also as `[[YES]]` or `Verdict: PASS`;
- categorical: `[[label]]`, `Label: x`, a label alone on the first or last line;
- n_wise: `[[C > A > B]]`, `Ranking: C, A, B`.

Anything else, including a reply naming both candidates, is a `ParseFailure` and the row is FAILED with
the raw reply kept: never a default score. A reply that ends inside a JSON object is `truncated`.
`strict: true` accepts only a JSON reply whose fields have exactly the reply schema's types.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from eval_platform.judging.config import TIE_WORDS, EvaluatorConfig
from eval_platform.judging.modes import MODES

_FENCED_JSON_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_BRACKET_RE = re.compile(r"\[\[\s*([^\[\]]{1,80}?)\s*\]\]")
_KEYED_LINE_RE = re.compile(
    r"^\W*(?:final\s+)?(?:verdict|winner|answer|decision|choice|preferred(?:\s+response)?|better\s+response|"
    r"result|label|category|rating|score|ranking|grade)\s*\W*\s*[:=\-]\s*(.+?)\s*$",
    re.IGNORECASE,
)
_NUMBER_RE = r"[-+]?\d+(?:\.\d+)?"
_SCORE_TEXT_RE = re.compile(rf"^\W*(?:\[\[)?\s*({_NUMBER_RE})\s*(?:\]\])?\s*(?:/\s*({_NUMBER_RE}))?\W*$")
_CONFIDENCE_RE = re.compile(rf"confidence\W*\s*[:=]\s*({_NUMBER_RE})\s*(%?)", re.IGNORECASE)
_WRAPPING = "*_`\"'.!。 \t"
_YES = frozenset({"yes", "pass", "passed", "true", "y"})
_NO = frozenset({"no", "fail", "failed", "false", "n"})
_CANDIDATE_WORDS = ("output", "response", "assistant", "candidate", "model", "answer", "option")


@dataclass(frozen=True)
class Verdict:
    score: float | None  # normalized 0..1
    raw_score: float | None
    label: str | None
    passed: bool | None
    winner: str | None  # pairwise, in presentation order: A (shown first) | B | tie
    reasoning: str | None
    confidence: float | None = None
    ranking: tuple[str, ...] | None = None  # n_wise: candidate letters, best first


class ParseFailure(ValueError):
    """`reason` is a short code: empty_reply, unparseable, ambiguous, truncated, schema_violation, out_of_range."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def find_json_objects(text: str) -> list[dict[str, Any]]:
    """Every distinct JSON object in the reply (the whole reply, fenced blocks, balanced {...} in prose), in order."""
    stripped = text.strip()
    candidates = [stripped, *(m.group(1).strip() for m in _FENCED_JSON_RE.finditer(stripped))]
    candidates.extend(c for c in _balanced_objects(stripped) if c is not None)
    found: list[dict[str, Any]] = []
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and value not in found:
            found.append(value)
    return found


def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in the reply, or None."""
    found = find_json_objects(text)
    return found[0] if found else None


def _balanced_objects(text: str) -> list[str]:
    """Top-level {...} substrings, string-literal aware, in order of appearance."""
    found, depth, start, in_string, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth > 0:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    if depth > 0:
        found.append(None)  # an object is still open at the end: the reply was cut off
    return found


def _is_truncated_json(text: str) -> bool:
    return None in _balanced_objects(text.strip())


def _strict_json(text: str) -> dict[str, Any]:
    stripped = text.strip()
    fenced = _FENCED_JSON_RE.fullmatch(stripped)
    try:
        value = json.loads(fenced.group(1) if fenced else stripped)
    except json.JSONDecodeError:
        raise ParseFailure("unparseable", "strict mode: the reply must be exactly one JSON object") from None
    if not isinstance(value, dict):
        raise ParseFailure("unparseable", "strict mode: the reply must be exactly one JSON object")
    return value


def _norm(text: str) -> str:
    return text.strip().strip(_WRAPPING).strip().lower()


def _lines(text: str) -> list[str]:
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def _text_candidates(text: str) -> list[str]:
    """Where a verdict may sit in prose: the whole reply, `Key: value` lines (last first), first and last lines."""
    lines = _lines(text)
    keyed = [m.group(1) for line in reversed(lines) if (m := _KEYED_LINE_RE.match(line))]
    edges = [lines[0], lines[-1]] if lines else []
    return [text, *keyed, *edges]


def _reasoning(obj: dict[str, Any]) -> str | None:
    value = obj.get("reasoning", obj.get("explanation", obj.get("reason")))
    return None if value is None else str(value)


def _confidence(obj: dict[str, Any] | None, text: str) -> float | None:
    if obj is not None and "confidence" in obj:
        value = obj["confidence"]
        percent = False
    else:
        match = _CONFIDENCE_RE.search(text)
        if match is None:
            return None
        value, percent = match.group(1), bool(match.group(2))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ParseFailure("schema_violation", f"'confidence' is not a number: {value!r}") from None
    if percent or 1 < number <= 100:
        number /= 100
    if not 0 <= number <= 1:
        raise ParseFailure("out_of_range", f"confidence {value} is outside 0..1")
    return number


def parse_reply(config: EvaluatorConfig, text: str, n_candidates: int | None = None) -> Verdict:
    """Parse one reply for the evaluator's mode; raise ParseFailure when it cannot be trusted."""
    if not text or not text.strip():
        raise ParseFailure("empty_reply", "the judge returned no content")
    if config.strict:
        obj = _strict_json(text)
        from eval_platform.judging.prompts import reply_schema  # prompts builds on config, like this module

        _validate(obj, reply_schema(config, n_candidates), "the reply schema")
    else:
        obj = _the_verdict_object(config, text, n_candidates)
    if obj is not None and config.output_schema is not None:
        _validate(obj, config.output_schema, "output_schema")
    if obj is None:
        if config.output_schema is not None:
            raise ParseFailure("schema_violation", "output_schema requires a JSON object reply; none found")
        if _is_truncated_json(text):
            raise ParseFailure("truncated", "the reply ends inside a JSON object")
    parser = _PARSERS[config.mode]
    verdict = parser(config, obj, text, n_candidates)
    confidence = _confidence(obj, text)
    reasoning = _reasoning(obj) if obj is not None else text.strip()
    return Verdict(**{**verdict.__dict__, "reasoning": reasoning, "confidence": confidence})


# The keys under which each mode's parser looks for its verdict in a JSON reply.
_VERDICT_KEYS = {name: mode.verdict_keys for name, mode in MODES.items()}


def _the_verdict_object(config: EvaluatorConfig, text: str, n_candidates: int | None) -> dict[str, Any] | None:
    """The JSON object holding the verdict; several objects with different verdicts are `ambiguous`.

    Judges sometimes quote the evaluated content, and content can carry an injected verdict such as
    `{"score": 1.0}`: taking the first object would let it win. A reply is trusted only when every
    verdict-bearing object in it says the same thing.
    """
    objects = find_json_objects(text)
    keys = _VERDICT_KEYS[config.mode]
    bearing = [obj for obj in objects if any(key in obj for key in keys)]
    if len(bearing) > 1:
        decisions = []
        for obj in bearing:
            try:
                verdict = _PARSERS[config.mode](config, obj, text, n_candidates)
            except ParseFailure as failure:
                decisions.append(f"unreadable ({failure.reason})")
                continue
            decisions.append((verdict.score, verdict.label, verdict.passed, verdict.winner, verdict.ranking))
        distinct = list(dict.fromkeys(map(str, decisions)))
        if len(distinct) > 1:
            shown = "; ".join(json.dumps({k: obj[k] for k in keys if k in obj}) for obj in bearing)
            raise ParseFailure("ambiguous", f"the reply holds {len(bearing)} different verdicts: {shown}")
    if bearing:
        return bearing[-1]
    return objects[0] if objects else None


def _validate(obj: dict[str, Any], schema: dict[str, Any], what: str) -> None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(obj))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(reply)"
        raise ParseFailure("schema_violation", f"{what}: {where}: {error.message}")


def _field(obj: dict[str, Any] | None, *keys: str) -> Any:
    if obj is None:
        return None
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def _parse_score(config: EvaluatorConfig, obj, text, _n) -> Verdict:
    raw = _field(obj, "score", "rating")
    scale = config.score_scale
    if obj is not None and raw is not None:
        if isinstance(raw, str) and not config.strict:
            match = _SCORE_TEXT_RE.match(raw.strip())
            raw = float(match.group(1)) if match and match.group(2) is None else raw
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ParseFailure("schema_violation", f"'score' must be a number, got {raw!r}")
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'score'")
    else:
        raw = _score_from_text(text, scale.max)
    if not scale.min <= raw <= scale.max:
        raise ParseFailure("out_of_range", f"score {raw} is outside the scale {scale.min}..{scale.max}")
    return Verdict((raw - scale.min) / (scale.max - scale.min), float(raw), None, None, None, None)


def _score_from_text(text: str, scale_max: float) -> float:
    brackets = {float(m) for m in _BRACKET_RE.findall(text) if re.fullmatch(_NUMBER_RE, m.strip())}
    if len(brackets) > 1:
        raise ParseFailure("unparseable", f"several different bracketed ratings: {sorted(brackets)}")
    if brackets:
        return brackets.pop()
    for candidate in _text_candidates(text)[1:]:
        match = _SCORE_TEXT_RE.match(candidate)
        if match:
            denominator = match.group(2)
            if denominator is not None and float(denominator) != scale_max:
                raise ParseFailure("out_of_range", f"'{candidate}' is on a scale of {denominator}, not {scale_max:g}")
            return float(match.group(1))
    raise ParseFailure("unparseable", "no JSON object, [[rating]], 'Score: n' or number on its own line")


def _yes_no(value: Any, strict: bool, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if not strict and isinstance(value, str) and _norm(value) in _YES | _NO:
        return _norm(value) in _YES
    raise ParseFailure("schema_violation", f"'{key}' must be {'true or false' if key == 'passed' else 'yes or no'}, got {value!r}")


def _yes_no_from_text(text: str) -> bool:
    found = {_norm(m) in _YES for m in _BRACKET_RE.findall(text) if _norm(m) in _YES | _NO}
    if len(found) > 1:
        raise ParseFailure("unparseable", "the reply says both yes and no in [[...]]")
    if found:
        return found.pop()
    for candidate in _text_candidates(text):
        word = _norm(candidate)
        if word in _YES | _NO:
            return word in _YES
    raise ParseFailure("unparseable", "no JSON object and no yes/no (pass/fail) verdict on its own line")


def _parse_binary(config: EvaluatorConfig, obj, text, _n) -> Verdict:
    key = "passed" if config.mode == "binary" else "answer"
    value = _field(obj, key, "verdict", "result")
    if obj is not None and value is not None:
        answer = _yes_no(value, config.strict, key)
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", f"the reply has no '{key}'")
    else:
        answer = _yes_no_from_text(text)
    passed = answer if config.mode == "binary" else answer == config.expect
    label = None if config.mode == "binary" else ("yes" if answer else "no")
    return Verdict(1.0 if passed else 0.0, 1.0 if answer else 0.0, label, passed, None, None)


def _parse_categorical(config: EvaluatorConfig, obj, text, _n) -> Verdict:
    labels = {k.lower(): k for k in config.labels}
    value = _field(obj, "label", "category")
    if obj is not None and value is not None:
        if not isinstance(value, str) or _norm(value) not in labels:
            raise ParseFailure("schema_violation", f"'label' must be one of {list(config.labels)}, got {value!r}")
        canonical = labels[_norm(value)]
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'label'")
    else:
        canonical = _choice_from_text(text, labels, "label")
    return Verdict(config.labels[canonical], None, canonical, None, None, None)


def _choice_from_text(text: str, aliases: dict[str, str], what: str) -> str:
    """One option named by `[[x]]` (all brackets must agree), else by the first matching text candidate."""
    bracketed = {aliases[_norm(m)] for m in _BRACKET_RE.findall(text) if _norm(m) in aliases}
    if len(bracketed) > 1:
        raise ParseFailure("unparseable", f"the reply names several {what}s in [[...]]: {sorted(bracketed)}")
    if bracketed:
        return bracketed.pop()
    for candidate in _text_candidates(text):
        key = _norm(candidate)
        if key in aliases:
            return aliases[key]
    raise ParseFailure("unparseable", f"no JSON object and no single {what} on its own line or in [[...]]")


def pairwise_aliases(names: tuple[str, str]) -> dict[str, str]:
    """Every way a judge may name the first-shown (A) or second-shown (B) candidate, or a tie."""
    aliases: dict[str, str] = {}
    for position, name in zip("AB", names, strict=True):
        inner = re.fullmatch(r".*\((\w+)\)", name.strip())
        bases = {_norm(name)} | ({inner.group(1).lower()} if inner else set())
        for base in bases:
            aliases[base] = position
            for word in _CANDIDATE_WORDS:
                aliases[f"{word} {base}"] = position
                aliases[f"{word} ({base})"] = position
    for word in TIE_WORDS | {"both", "tied", "it's a tie", "it is a tie"}:
        aliases.setdefault(word, "tie")
    return aliases


def _parse_pairwise(config: EvaluatorConfig, obj, text, _n) -> Verdict:
    options = config.pairwise
    aliases = pairwise_aliases(options.candidate_names)
    value = _field(obj, "winner", "verdict", "choice")
    if obj is not None and value is not None:
        winner = aliases.get(_norm(str(value)))
        if winner is None:
            names = [*options.candidate_names, *(["tie"] if options.allow_ties else [])]
            raise ParseFailure("schema_violation", f"'winner' must be one of {names}, got {value!r}")
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'winner'")
    else:
        winner = _choice_from_text(text, aliases, "candidate")
    if winner == "tie" and not options.allow_ties:
        raise ParseFailure("schema_violation", "the judge answered tie, but this evaluator forbids ties")
    return Verdict({"A": 1.0, "B": 0.0, "tie": 0.5}[winner], None, winner, None, winner, None)


def _parse_n_wise(config: EvaluatorConfig, obj, text, n_candidates) -> Verdict:
    letters = [chr(ord("A") + i) for i in range(n_candidates or 0)]
    value = _field(obj, "ranking", "rank", "order")
    if obj is not None and value is not None:
        items = value if isinstance(value, list) else re.split(r"\s*(?:>|,|;)\s*", str(value))
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'ranking'")
    else:
        found = [m for m in _BRACKET_RE.findall(text) if ">" in m or "," in m]
        found += [c for c in _text_candidates(text) if re.fullmatch(r"\W*\w+(?:\s*[>,]\s*\w+)+\W*", c.strip())]
        if not found:
            raise ParseFailure("unparseable", "no JSON object, [[C > A > B]] or 'Ranking: C, A, B' line")
        items = re.split(r"\s*(?:>|,)\s*", found[0].strip(_WRAPPING + "[]"))
    ranking = [re.sub(r"^(?:candidate\s+)?", "", _norm(str(item)), flags=re.IGNORECASE).upper() for item in items]
    if sorted(ranking) != letters:
        raise ParseFailure("schema_violation", f"the ranking must list each of {letters} exactly once, got {ranking}")
    return Verdict(None, None, None, None, None, None, ranking=tuple(ranking))


_PARSERS = {
    "score": _parse_score,
    "reference": _parse_score,
    "binary": _parse_binary,
    "assertion": _parse_binary,
    "categorical": _parse_categorical,
    "pairwise": _parse_pairwise,
    "n_wise": _parse_n_wise,
}
