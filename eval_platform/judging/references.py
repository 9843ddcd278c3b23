"""Gold answers for `reference` evaluators whose references live in a dataset rather than on the trace."""

from __future__ import annotations

import polars as pl

from eval_platform.record_fields import field_text


def attach_dataset_references(traces: pl.DataFrame, cases: pl.DataFrame, match_on: str) -> pl.DataFrame:
    """The traces with `expected_output` replaced by that of the test case whose `case_id` equals the
    trace's `match_on` value (a column or `metadata.<key>`); no matching case leaves it empty."""
    expected = dict(zip(cases["case_id"].to_list(), cases["expected_output"].to_list(), strict=True))
    keys = [field_text(trace, match_on) for trace in traces.to_dicts()]
    return traces.with_columns(pl.Series("expected_output", [expected.get(k) for k in keys], dtype=pl.String()))
