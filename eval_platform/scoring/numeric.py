"""Numeric match with tolerance: the last number in the output against the case's reference number.

The last number, as GSM8K-style graders read a worked answer ("... so the answer is 18").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from eval_platform.scoring.registry import Scorer, ScorerOptions, reference_field

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
    expected = last_number(str(case[options.reference_field]))
    if expected is None:
        raise ValueError(f"case field '{options.reference_field}' holds no number")
    got = last_number(output)
    return float(got is not None and math.isclose(got, expected, rel_tol=options.rel_tol, abs_tol=options.abs_tol))


SCORERS = [Scorer("numeric_match", NumericOptions, _numeric, reference_field)]
