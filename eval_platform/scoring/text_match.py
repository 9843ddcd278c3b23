"""Substring and regular-expression checks of an output."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import field_validator

from eval_platform.scoring.base import Scorer, ScorerOptions
from eval_platform.scoring.squad import references


class ContainsOptions(ScorerOptions):
    """`text` fixed in the suite, or else the case's `reference_field`."""

    text: str | None = None
    reference_field: str = "expected_output"
    case_sensitive: bool = False


def _contains(output: str, case: Mapping[str, Any], options: ContainsOptions) -> float:
    """1 when the output contains the text, or any of the case's references (a list holds several)."""
    needles = [options.text] if options.text is not None else references(case, options.reference_field)
    if not options.case_sensitive:
        return float(any(needle.lower() in output.lower() for needle in needles))
    return float(any(needle in output for needle in needles))


class RegexOptions(ScorerOptions):
    pattern: str
    full_match: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return pattern


def _regex(output: str, _case: Mapping[str, Any], options: RegexOptions) -> float:
    match = re.fullmatch if options.full_match else re.search
    return float(match(options.pattern, output) is not None)


SCORERS = [
    Scorer("contains", ContainsOptions, _contains, lambda o: () if o.text is not None else (o.reference_field,)),
    Scorer("regex", RegexOptions, _regex),
]
