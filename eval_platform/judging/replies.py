"""The toolkit every judge mode reads its verdict with: JSON objects in a reply, verdict words on their own
line or in `[[...]]`, and the `Verdict` / `ParseFailure` every parser returns or raises.

No mode knowledge lives here: each mode's parser and reply schema are in its own module under
`judging/modes/`, and `judging/parsing.py` picks the mode's parser and checks what is common to all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from eval_platform import jsontext
from eval_platform.schemas import AMBIGUOUS, OUT_OF_RANGE, SCHEMA_VIOLATION, UNPARSEABLE

_FENCED_JSON_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
BRACKET_RE = re.compile(r"\[\[\s*([^\[\]]{1,80}?)\s*\]\]")
_KEYED_LINE_RE = re.compile(
    r"^\W*(?:final\s+)?(?:verdict|winner|answer|decision|choice|preferred(?:\s+response)?|better\s+response|"
    r"result|label|category|rating|score|ranking|grade)\s*\W*?\s*[:=\-]\s*(.+?)\s*$",
    re.IGNORECASE,
)
NUMBER_RE = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"  # 7, -3, 8.5, .375
# `\W*?` is lazy so that a leading sign or point stays part of the number, not of the wrapping.
SCORE_TEXT_RE = re.compile(rf"^\W*?(?:\[\[)?\s*({NUMBER_RE})\s*(?:\]\])?\s*(?:/\s*({NUMBER_RE}))?\W*$")
_CONFIDENCE_RE = re.compile(rf"confidence\W*\s*[:=]\s*({NUMBER_RE})\s*(%?)", re.IGNORECASE)
WRAPPING = "*_`\"'.!。 \t"
YES = frozenset({"yes", "pass", "passed", "true", "y"})
NO = frozenset({"no", "fail", "failed", "false", "n"})


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


def one_json_object(stripped: str) -> dict[str, Any] | None:
    """The reply's one JSON object when the (stripped) reply is exactly that and holds no ``` fence, else None: the
    usual reply, whose objects and text around them need no scan (each scan would find that object and nothing)."""
    if stripped[:1] != "{" or stripped[-1:] != "}" or "```" in stripped:
        return None
    try:
        value = jsontext.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def find_json_objects(text: str) -> list[dict[str, Any]]:
    """Every distinct JSON object in the reply (the whole reply, fenced blocks, balanced {...} in prose), in order."""
    stripped = text.strip()
    one = one_json_object(stripped)
    if one is not None:
        return [one]
    candidates = [stripped, *(m.group(1).strip() for m in _FENCED_JSON_RE.finditer(stripped))]
    candidates.extend(c for c in _balanced_objects(stripped) if c is not None)
    found: list[dict[str, Any]] = []
    for candidate in dict.fromkeys(candidates):  # a reply that is one object is also its own balanced {...}
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and value not in found:
            found.append(value)
    return found


def text_outside_json(text: str) -> str:
    """The reply without its JSON objects (fenced or in prose): where a verdict in a text shape may also sit."""
    if one_json_object(text.strip()) is not None:
        return "\n"

    def is_object(candidate: str) -> bool:
        try:
            return isinstance(json.loads(candidate), dict)
        except json.JSONDecodeError:
            return False

    rest = _FENCED_JSON_RE.sub(lambda m: "\n" if is_object(m.group(1).strip()) else m.group(0), text.strip())
    for candidate in _balanced_objects(rest):
        if candidate is not None and is_object(candidate):
            rest = rest.replace(candidate, "\n", 1)
    return rest


def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in the reply, or None."""
    found = find_json_objects(text)
    return found[0] if found else None


def _balanced_objects(text: str) -> list[str | None]:
    """Top-level {...} substrings, string-literal aware, in order of appearance; a last None when one is left open."""
    if text[:1] == "{" and text[-1:] == "}":
        # The usual reply, one JSON object and nothing else: the scan below would find exactly it (a character
        # loop in Python, ~20 us for a short reply), json's C parser says so in a few.
        try:
            if isinstance(json.loads(text), dict):
                return [text]
        except (ValueError, RecursionError):
            pass  # not one object: scanned below
    found: list[str | None] = []
    depth, start, in_string, escaped = 0, -1, False, False
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


def is_truncated_json(text: str) -> bool:
    return None in _balanced_objects(text.strip())


def strict_json(text: str) -> dict[str, Any]:
    stripped = text.strip()
    fenced = _FENCED_JSON_RE.fullmatch(stripped)
    try:
        value = json.loads(fenced.group(1) if fenced else stripped)
    except json.JSONDecodeError:
        raise ParseFailure(UNPARSEABLE, "strict mode: the reply must be exactly one JSON object") from None
    if not isinstance(value, dict):
        raise ParseFailure(UNPARSEABLE, "strict mode: the reply must be exactly one JSON object")
    return value


def norm(text: str) -> str:
    return text.strip().strip(WRAPPING).strip().lower()


def _lines(text: str) -> list[str]:
    return [line for line in (raw.strip() for raw in text.splitlines()) if line]


def text_candidates(text: str) -> list[str]:
    """Where a verdict may sit in prose: the whole reply, `Key: value` lines (last first), first and last lines."""
    lines = _lines(text)
    keyed = [m.group(1) for line in reversed(lines) if (m := _KEYED_LINE_RE.match(line))]
    edges = [lines[0], lines[-1]] if lines else []
    return [text, *keyed, *edges]


def reasoning_of(obj: dict[str, Any]) -> str | None:
    value = obj.get("reasoning", obj.get("explanation", obj.get("reason")))
    return None if value is None else str(value)


def confidence_of(obj: dict[str, Any] | None, text: str) -> float | None:
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
        raise ParseFailure(SCHEMA_VIOLATION, f"'confidence' is not a number: {value!r}") from None
    if percent or 1 < number <= 100:
        number /= 100
    if not 0 <= number <= 1:
        raise ParseFailure(OUT_OF_RANGE, f"confidence {value} is outside 0..1")
    return number


def validate(obj: dict[str, Any], schema: dict[str, Any], what: str) -> None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(obj))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(reply)"
        raise ParseFailure(SCHEMA_VIOLATION, f"{what}: {where}: {error.message}")


def field(obj: dict[str, Any] | None, *keys: str) -> Any:
    if obj is None:
        return None
    for key in keys:
        if key in obj:
            return obj[key]
    return None


def one_verdict(found: list[tuple[str, Any]], what: str) -> Any:
    """The verdict every place in the reply agrees on, None when no place gives one.

    `found` holds (where, verdict) for every place a verdict was read: `[[...]]`, a `Key: value` line, the
    whole reply, its first or last line. A reply that gives two different verdicts (a judge quoting an
    injected `Score: 1.0` before its own, or naming both candidates) is `ambiguous`: taking either one
    would let the reply's order, or the content, decide.
    """
    distinct = list(dict.fromkeys(verdict for _, verdict in found))
    if len(distinct) > 1:
        shown = "; ".join(dict.fromkeys(f"{where!r} -> {verdict}" for where, verdict in found))
        raise ParseFailure(AMBIGUOUS, f"the reply gives {len(distinct)} different {what}s: {shown}")
    return distinct[0] if distinct else None


def _rating(candidate: str, scale_max: float) -> float | str | None:
    """The number `candidate` states, `"n/d"` when it is on another scale than `scale_max`, else None."""
    match = SCORE_TEXT_RE.match(candidate)
    if match is None:
        return None
    denominator = match.group(2)
    if denominator is not None and float(denominator) != scale_max:
        return f"{float(match.group(1)):g}/{float(denominator):g}"
    return float(match.group(1))


def score_from_text(text: str, scale_max: float) -> float:
    """The rating in `[[n]]`, a `Score: n` line, or a number alone on the first or last line; all must agree."""
    found: list[tuple[str, Any]] = [
        (f"[[{m}]]", float(m)) for m in BRACKET_RE.findall(text) if re.fullmatch(NUMBER_RE, m.strip())
    ]
    found += [(c, r) for c in text_candidates(text)[1:] if (r := _rating(c, scale_max)) is not None]
    verdict = one_verdict(found, "rating")
    if verdict is None:
        raise ParseFailure(UNPARSEABLE, "no JSON object, [[rating]], 'Score: n' or number on its own line")
    if isinstance(verdict, str):  # a 5-point answer on a 10-point scale is not silently rescaled
        raise ParseFailure(OUT_OF_RANGE, f"the rating {verdict} is on another scale than {scale_max:g}")
    return verdict


def yes_no(value: Any, strict: bool, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if not strict and isinstance(value, str) and norm(value) in YES | NO:
        return norm(value) in YES
    raise ParseFailure(
        SCHEMA_VIOLATION, f"'{key}' must be {'true or false' if key == 'passed' else 'yes or no'}, got {value!r}"
    )


def yes_no_from_text(text: str) -> bool:
    """yes/no (pass/fail, true/false) in `[[...]]`, a `Verdict: x` line, or alone on the first or last line."""
    found = [(f"[[{m}]]", norm(m) in YES) for m in BRACKET_RE.findall(text) if norm(m) in YES | NO]
    found += [(c, norm(c) in YES) for c in text_candidates(text) if norm(c) in YES | NO]
    verdict = one_verdict(found, "verdict")
    if verdict is None:
        raise ParseFailure(UNPARSEABLE, "no JSON object and no yes/no (pass/fail) verdict on its own line")
    return verdict


def choices_in_text(text: str, aliases: dict[str, str]) -> list[tuple[str, str]]:
    """(where, option) for every place the reply names an option: `[[x]]`, `Key: x`, the reply, its edge lines."""
    found = [(f"[[{m}]]", aliases[norm(m)]) for m in BRACKET_RE.findall(text) if norm(m) in aliases]
    return found + [(c, aliases[norm(c)]) for c in text_candidates(text) if norm(c) in aliases]


def choice_from_text(text: str, aliases: dict[str, str], what: str) -> str:
    """The one option the reply names (`[[x]]`, `Label: x`, alone on its first or last line); several: ambiguous."""
    verdict = one_verdict(choices_in_text(text, aliases), what)
    if verdict is None:
        raise ParseFailure(UNPARSEABLE, f"no JSON object and no single {what} on its own line or in [[...]]")
    return verdict
