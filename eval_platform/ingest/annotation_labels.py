"""A criterion's label under its schema: which schema a label has, and its (label, value) output pairs.

- classification: the label as text (numbers without a spurious `.0`, booleans `true`/`false`), checked
  against the declared labels (case-insensitively, stored as declared); value = the declared mapping, else null;
- rating: a finite number, checked against the declared min/max; label = the number as written, value = it;
- ranking: a list best first, `"B > A > C"`, JSON text of a list, or `{candidate: rank}`; no candidate twice,
  and exactly the declared candidates when declared; one pair per candidate, value = its 1-based rank.

Problems are RowErrors whose reason names the criterion: `invalid_label:<c>`, `label_not_allowed:<c>`,
`label_out_of_range:<c>`, `invalid_ranking:<c>`, `schema_mismatch:<c>`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from eval_platform.ingest.annotation_criteria import CriterionSpec
from eval_platform.ingest.common import RowError, preview
from eval_platform.ingest.export_files import number_text


def _decoded(value: Any) -> Any:
    """A JSON list or object written as text (CSV, Parquet string columns) becomes that list or object."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def label_schema(spec: CriterionSpec | None, row_schema: str | None, criterion: str, value: Any) -> str:
    if spec is not None:
        if row_schema is not None and row_schema != spec.schema_:
            raise RowError(
                f"schema_mismatch:{criterion}",
                f"criterion {criterion!r} is a {spec.schema_} in tasks.yaml, but the row says {row_schema!r}",
            )
        return spec.schema_
    if row_schema is not None:
        return row_schema
    value = _decoded(value)
    if isinstance(value, (list, dict)):
        return "ranking"
    if isinstance(value, bool):
        return "classification"
    return "rating" if _number(value) is not None else "classification"


def _label_text(value: Any, criterion: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.strip()
    number = _number(value)
    if number is None:
        raise RowError(f"invalid_label:{criterion}", f"label of {criterion!r} is {preview(value)}, not a single label")
    return number_text(number)


def normalized_labels(
    schema: str, spec: CriterionSpec | None, criterion: str, value: Any
) -> Sequence[tuple[str, float | None]]:
    """(label, value) pairs of one criterion: one pair, or one per ranked candidate."""
    if schema == "rating":
        number = _number(value)
        if number is None:
            raise RowError(f"invalid_label:{criterion}", f"rating of {criterion!r} is {preview(value)}, not a number")
        low, high = (spec.min, spec.max) if spec is not None else (None, None)
        if (low is not None and number < low) or (high is not None and number > high):
            bounds = f"{'-inf' if low is None else number_text(low)}..{'inf' if high is None else number_text(high)}"
            raise RowError(
                f"label_out_of_range:{criterion}", f"rating of {criterion!r} is {number_text(number)}, outside {bounds}"
            )
        return [(number_text(number), number)]
    if schema == "ranking":
        return _ranking(spec, criterion, value)
    label = _label_text(value, criterion)
    if not label:
        raise RowError("missing_field:label", f"the label of {criterion!r} is empty")
    if spec is not None and spec.allowed is not None:
        canonical = {allowed.lower(): allowed for allowed in spec.allowed}
        if label not in spec.allowed and label.lower() not in canonical:
            raise RowError(
                f"label_not_allowed:{criterion}",
                f"label {label!r} of {criterion!r} is not one of {', '.join(repr(a) for a in spec.allowed)}",
            )
        label = label if label in spec.allowed else canonical[label.lower()]
    return [(label, spec.label_value(label) if spec is not None else None)]


def _ranking(spec: CriterionSpec | None, criterion: str, value: Any) -> list[tuple[str, float]]:
    value = _decoded(value)
    bad = f"invalid_ranking:{criterion}"
    if isinstance(value, str) and ">" in value:
        value = [part.strip() for part in value.split(">")]
    if isinstance(value, dict):
        ranks = {}
        for candidate, rank in value.items():
            number = _number(rank)
            if number is None or not number.is_integer() or number < 1:
                raise RowError(
                    bad, f"rank of {candidate!r} in {criterion!r} is {preview(rank)}, not a positive integer"
                )
            ranks[str(candidate)] = number
        pairs = sorted(ranks.items(), key=lambda item: (item[1], item[0]))
    elif isinstance(value, list):
        pairs = [
            (_label_text(candidate, criterion), float(position)) for position, candidate in enumerate(value, start=1)
        ]
    else:
        raise RowError(
            bad, f"ranking of {criterion!r} is {preview(value)}, not a list (best first) or candidate -> rank"
        )
    names = [name for name, _ in pairs]
    if not names or any(not name for name in names):
        raise RowError(bad, f"ranking of {criterion!r} is empty or names an empty candidate")
    repeated = sorted(name for name, n in Counter(names).items() if n > 1)
    if repeated:
        raise RowError(bad, f"ranking of {criterion!r} lists {', '.join(map(repr, repeated))} more than once")
    if spec is not None and spec.candidates is not None and sorted(names) != sorted(spec.candidates):
        raise RowError(
            bad,
            f"ranking of {criterion!r} orders {names}, but tasks.yaml asks for each of {spec.candidates} exactly once",
        )
    return pairs
