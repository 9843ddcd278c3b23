"""n_wise: a ranking of several candidates ({{candidates}}); each candidate's rank is its value.

Read from JSON `ranking` (or `rank`, `order`), else `[[C > A > B]]` or `Ranking: C, A, B`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import JudgeMode
from eval_platform.judging.replies import (
    BRACKET_RE,
    WRAPPING,
    ParseFailure,
    Verdict,
    field,
    norm,
    one_verdict,
    text_candidates,
)

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


def candidate_letters(n: int) -> list[str]:
    """The letters candidates are shown under: A, B, C, ..."""
    return [chr(ord("A") + i) for i in range(n)]


def verdict_schema(_config: EvaluatorConfig, n_candidates: int | None) -> dict[str, Any]:
    letters = candidate_letters(n_candidates or 2)
    return {
        "ranking": {
            "type": "array",
            "description": "every candidate's letter exactly once, best first",
            "items": {"type": "string", "enum": letters},
            "minItems": len(letters),
            "maxItems": len(letters),
            "uniqueItems": True,
        }
    }


def _letters(items: list) -> list[str]:
    return [re.sub(r"^(?:candidate\s+)?", "", norm(str(item)), flags=re.IGNORECASE).upper() for item in items]


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, n_candidates: int | None) -> Verdict:
    letters = candidate_letters(n_candidates or 0)
    value = field(obj, "ranking", "rank", "order")
    if obj is not None and value is not None:
        items = value if isinstance(value, list) else re.split(r"\s*(?:>|,|;)\s*", str(value))
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'ranking'")
    else:
        found = [m for m in BRACKET_RE.findall(text) if ">" in m or "," in m]
        found += [c for c in text_candidates(text) if re.fullmatch(r"\W*\w+(?:\s*[>,]\s*\w+)+\W*", c.strip())]
        split = [(c, tuple(_letters(re.split(r"\s*(?:>|,)\s*", c.strip(WRAPPING + "[]"))))) for c in found]
        ranking = one_verdict(split, "ranking")
        if ranking is None:
            raise ParseFailure("unparseable", "no JSON object, [[C > A > B]] or 'Ranking: C, A, B' line")
        items = list(ranking)
    ranking = _letters(items)
    if sorted(ranking) != letters:
        raise ParseFailure("schema_violation", f"the ranking must list each of {letters} exactly once, got {ranking}")
    return Verdict(None, None, None, None, None, None, ranking=tuple(ranking))


MODE = JudgeMode(
    "n_wise", "ranking", ("ranking", "rank", "order"), "raw_score",
    options=("n_wise",), output_variables=("candidates",), required_variables=(("candidates", "where the candidates are listed"),),
    parse=parse, verdict_schema=verdict_schema,
)
