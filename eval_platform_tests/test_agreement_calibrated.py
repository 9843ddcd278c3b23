"""`agreement` rows of section `calibrated`: an evaluator's daily (and all-time) mean score and pass rate corrected
by the human labels of some of its traces, equal to ppi-python on the same traces."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_platform.agreement import compute
from eval_platform.agreement.out_of_core import open_scores
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import (
    FINAL_COMPLETED,
    HUMAN_ANNOTATION_SCHEMA,
    IMPORTED_JUDGMENT_SCHEMA,
    JUDGE_SCORE_SCHEMA,
    conform,
)
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from tools.perf.analytics_outputs import _compare_table

ppi_py = pytest.importorskip("ppi_py")
DAYS = ["2026-10-01", "2026-10-02"]


def _world(seed: int, mode: str):
    """300 traces a day; a lenient judge; humans label a random 40 of each day (a rating 1..5 or true/false)."""
    rng = np.random.default_rng(seed)
    scores, annotations, truth = [], [], {}
    for day in DAYS:
        for i in range(300):
            trace = f"{day}-{i}"
            if mode == "score":
                human = int(rng.integers(1, 6))
                raw = min(5, human + int(rng.random() < 0.5))  # a judge half a point too generous
                row = {"score": (raw - 1) / 4, "raw_score": float(raw)}
                truth[trace] = ((human - 1) / 4, None)
                label, value = str(human), float(human)
            else:
                human = bool(rng.random() < 0.6)
                passed = human or bool(rng.random() < 0.3)
                row = {"score": float(passed), "raw_score": float(passed), "passed": passed}
                truth[trace] = (float(human), float(human))
                label, value = str(human).lower(), None
            scores.append(
                {
                    "evaluator": "quality",
                    "date": day,
                    "trace_id": trace,
                    "is_final": True,
                    "status": "COMPLETED",
                    "role": "final",
                    "sample": 0,
                    **row,
                }
            )
            if i < 40:
                annotations.append(
                    {
                        "task": "review",
                        "criterion": "quality",
                        "item_id": trace,
                        "trace_id": trace,
                        "annotator": "ann",
                        "label": label,
                        "value": value,
                        "schema": "rating" if mode == "score" else "classification",
                    }
                )
    return (
        conform(pl.DataFrame(scores, infer_schema_length=None), JUDGE_SCORE_SCHEMA),
        conform(pl.DataFrame(annotations, infer_schema_length=None), HUMAN_ANNOTATION_SCHEMA),
        truth,
    )


@pytest.mark.parametrize("mode", ["score", "binary"])
def test_calibrated_daily_means_equal_ppi_python(mode):
    extra = {"score_scale": {"min": 1, "max": 5}} if mode == "score" else {}
    config = EvaluatorConfig(
        name="quality",
        mode=mode,
        model="openai/x",
        prompt="{{output}}",
        human_agreement={"task": "review", "criterion": "quality"},
        **extra,
    )
    scores, annotations, truth = _world(3, mode)
    rows, _ = compute({"quality": config}, scores, annotations, conform(pl.DataFrame(), IMPORTED_JUDGMENT_SCHEMA))
    calibrated = rows.filter(pl.col("section") == "calibrated")
    fields = ["score", "passed"] if mode == "binary" else ["score"]
    for field in fields:
        prefix = "ppi_mean" if field == "score" else "ppi_pass_rate"
        judge_name = "judge_mean" if field == "score" else "judge_pass_rate"
        for day in [*DAYS, None]:
            part = scores if day is None else scores.filter(pl.col("date") == day)
            labelled = part["trace_id"].is_in(annotations["trace_id"].implode())
            values = part[field].cast(pl.Float64).to_numpy()
            human = np.array([truth[t][0 if field == "score" else 1] for t in part.filter(labelled)["trace_id"]])
            judge, unlabelled = values[labelled.to_numpy()], values[~labelled.to_numpy()]
            low, high = ppi_py.ppi_mean_ci(human, judge, unlabelled, alpha=0.05)
            point = ppi_py.ppi_mean_pointestimate(human, judge, unlabelled)
            period = pl.col("period") == "all" if day is None else pl.col("period_start").eq(day)
            window = calibrated.filter(period & pl.col("period").is_in(["all", "day"]))
            got = dict(window.select("statistic", "value").rows())
            interval = "ppi_ci" if field == "score" else "ppi_pass_rate_ci"
            assert got[prefix] == pytest.approx(float(np.squeeze(point)), abs=1e-9)
            assert got[f"{interval}_low"] == pytest.approx(float(np.squeeze(low)), abs=1e-9)
            assert got[f"{interval}_high"] == pytest.approx(float(np.squeeze(high)), abs=1e-9)
            # the judge-only figure stays beside it, and is biased upward where the calibrated one is not
            assert got[judge_name] == pytest.approx(values.mean())
            assert got[judge_name] > got[prefix]


def test_calibrated_rows_out_of_core_equal_in_memory(tmp_path):
    """Out of core (DuckDB hands over the labelled traces' rows and the other traces' per-day moments) the
    calibrated rows are those of the in-memory path, with the rows that must not count in the data: member and
    FAILED rows, a null verdict, a null trace_id, a trace judged twice, a trace two items label (differently),
    and a label that says nothing of the verdict ("maybe")."""
    config = EvaluatorConfig(
        name="quality",
        mode="binary",
        model="openai/x",
        prompt="{{output}}",
        human_agreement={"task": "review", "criterion": "quality"},
    )
    scores, annotations, _ = _world(5, "binary")
    first = DAYS[0]
    template = scores.row(0, named=True)
    odd = [
        {**template, "trace_id": f"{first}-1", "is_final": False, "role": "member", "passed": False, "score": 0.0},
        {**template, "trace_id": f"{first}-200", "is_final": False, "role": "member", "passed": True, "score": 1.0},
        {**template, "trace_id": f"{first}-2", "status": "FAILED", "passed": None, "score": None},
        {**template, "trace_id": f"{first}-201", "status": "FAILED", "passed": None, "score": None},
        {**template, "trace_id": f"{first}-202", "passed": None, "score": None},
        {**template, "trace_id": None, "passed": False, "score": 0.0},
        {**template, "trace_id": f"{first}-3", "passed": False, "score": 0.0},  # judged twice, labelled
        {**template, "trace_id": f"{first}-203", "passed": False, "score": 0.0},  # judged twice, unlabelled
    ]
    scores = pl.concat([scores, conform(pl.DataFrame(odd, schema=scores.schema), JUDGE_SCORE_SCHEMA)])
    item = annotations.row(4, named=True)
    extra = [{**item, "item_id": "again", "label": "false"}, {**item, "item_id": "unsure", "trace_id": f"{first}-5"}]
    extra[1]["label"] = "maybe"
    annotations = pl.concat([annotations.filter(pl.col("trace_id") != f"{first}-5"), pl.DataFrame(extra)])
    empty = conform(pl.DataFrame(), IMPORTED_JUDGMENT_SCHEMA)

    in_memory, _ = compute({"quality": config}, scores, annotations, empty)
    root = tmp_path / "data"
    for day in DAYS:
        write_partition(
            DataRoot.from_env(root),
            "judge_scores",
            {"evaluator": "quality", "date": day},
            scores.filter(pl.col("date") == day),
        )
    with open_scores(DataRoot.from_env(root), temp_directory=tmp_path) as spilled:
        out_of_core, _ = compute({"quality": config}, spilled, annotations.lazy(), empty)

    calibrated = [r.filter(pl.col("section") == "calibrated") for r in (in_memory, out_of_core)]
    assert set(calibrated[0]["period"]) == {"all", "day", "trailing"}
    assert _compare_table("agreement", *calibrated) == []
    everything = calibrated[1].filter((pl.col("period") == "all") & (pl.col("statistic") == "judge_pass_rate"))
    counted = scores.filter(FINAL_COMPLETED & pl.col("passed").is_not_null())
    assert everything["n"].item() == counted.height  # every final COMPLETED verdict, each once
    assert everything["value"].item() == pytest.approx(counted["passed"].mean(), abs=1e-12)
