"""Numeric match with tolerance: the last number in the output against the case's reference number.

The last number, as GSM8K-style graders read a worked answer ("... so the answer is 18").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field
from eval_platform.scoring.squad import references

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str) -> float | None:
    """The last number written in `text` (thousands separators allowed), or None."""
    found = _NUMBER.findall(text)
    return float(found[-1].replace(",", "")) if found else None


class NumericOptions(ScorerOptions):
    reference_field: str = "expected_output"
    abs_tol: float = Field(default=0.0, ge=0)
    rel_tol: float = Field(default=1e-9, ge=0)


def _numeric(output: str, case: Mapping[str, Any], options: NumericOptions) -> float:
    """1 when the output's last number is the reference number, or any of them (a list holds several)."""
    numbers = [last_number(reference) for reference in references(case, options.reference_field)]
    expected = [number for number in numbers if number is not None]
    if len(expected) < len(numbers):
        raise ValueError(f"case field '{options.reference_field}' holds no number")
    got = last_number(output)
    return float(
        got is not None
        and any(math.isclose(got, number, rel_tol=options.rel_tol, abs_tol=options.abs_tol) for number in expected)
    )


SCORERS = [Scorer("numeric_match", NumericOptions, _numeric, reference_field)]
