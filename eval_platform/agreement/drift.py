"""Judge drift: an evaluator's anchor items judged again and compared with the previous check.

An evaluator may declare `anchors` (`judging.options.AnchorOptions`): a pinned dataset version whose cases carry
the response to judge and the expected verdict. A check judges every anchor through `judge_day` (the one path
every judge call takes: budget, redaction, retries, cost), never from the reply cache, so a provider that
silently changed its model answers afresh. It runs when the evaluator's config hash or the model its provider
reports changes (sensor), on the anchors' schedule, and on demand.

Each check is compared with the evaluator's previous check on the anchors both judged: `agreement` (share of
equal verdicts), the mean shift current − previous with its paired t interval (`stats.paired`), and
`significant` when p < alpha. Each check is also compared with the expected verdicts (`expected_agreement`,
`expected_mae`). A failed anchor call is a FAILED row with its reason, never a verdict: it is left out of the
comparison.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from eval_platform.agreement.calibration import verdict_values
from eval_platform.benchmarks.runner import case_field
from eval_platform.ingest.datasets import read_dataset_version
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import ANCHOR_VERDICT_SCHEMA, COMPLETED, JUDGE_DRIFT_SCHEMA, conform
from eval_platform.stats.paired import paired_shift


def anchor_traces(root: Path, config: EvaluatorConfig) -> tuple[pl.DataFrame, str]:
    """The anchors as traces to judge (trace_id = case_id) with their expected verdict text, and the dataset's
    label (`name@vN (sha256 prefix)`). The dataset version is validated as `dataset_versions` does."""
    anchors = config.anchors
    if anchors is None:
        raise ValueError(f"evaluator '{config.name}' has no anchors: it has no drift check")
    dataset = read_dataset_version(root, anchors.dataset, anchors.version)
    rows = [
        {
            "trace_id": case["case_id"],
            "input": case.get("input"),
            "output": case_field(case, anchors.output),
            "expected_output": case.get("expected_output"),
            "metadata": case.get("metadata"),
            "expected_verdict": case_field(case, anchors.expected),
        }
        for case in dataset.cases.to_dicts()
    ]
    schema = {name: pl.String() for name in ("trace_id", "input", "output", "expected_output", "metadata")}
    frame = pl.DataFrame(rows, schema={**schema, "expected_verdict": pl.String()})
    return frame, dataset.label()


def judge_anchors(
    root: Path, config: EvaluatorConfig, runtime: ModelRuntime, check_id: str, checked_at: datetime
) -> tuple[pl.DataFrame, str]:
    """One check's `anchor_verdicts` rows (ANCHOR_VERDICT_SCHEMA) and the dataset label. The replies are not read
    from (nor written to) the reply cache: a fresh one lives for this check only."""
    traces, dataset = anchor_traces(root, config)
    every = config.model_copy(update={"trigger": "all", "enabled": True, "projects": None})
    with tempfile.TemporaryDirectory(prefix="anchors-") as folder:
        fresh = ModelCache(Path(folder))
        result = judge_day(
            every, f"anchors:{config.name}", traces.drop("expected_verdict"), replace(runtime, cache=fresh)
        )
        fresh.flush()
    final = result.rows.filter(pl.col("is_final"))
    expected_score, _ = verdict_values(
        config, pl.col("expected_verdict"), pl.col("expected_verdict").cast(pl.Float64, strict=False)
    )
    expected = traces.select("trace_id", expected_score.alias("expected_score"))
    joined = final.join(expected, on="trace_id", how="left")
    frame = joined.select(
        pl.lit(config.name).alias("evaluator"),
        pl.lit(check_id).alias("check_id"),
        pl.lit(checked_at).alias("checked_at"),
        pl.col("config_hash"),
        pl.col("provider_model"),
        pl.col("trace_id").alias("case_id"),
        "status",
        "reason",
        pl.when(pl.col("status") == COMPLETED).then(pl.col("score")).alias("score"),
        "expected_score",
        "cost_usd",
    )
    return conform(frame, ANCHOR_VERDICT_SCHEMA), dataset


def check_model(verdicts: pl.DataFrame) -> str | None:
    """The model the provider reported for a check's completed anchors (the most frequent; ties: first by name)."""
    reported = verdicts.filter(pl.col("status") == COMPLETED).drop_nulls("provider_model")
    if reported.is_empty():
        return None
    counts = reported.group_by("provider_model").len().sort(["len", "provider_model"], descending=[True, False])
    return counts["provider_model"][0]


def trigger_of(config_hash: str, provider_model: str | None, previous: dict | None, scheduled: bool) -> str:
    """Why this check ran, as the `judge_drift` row says it: what changed since the previous check, else the
    schedule or a manual run."""
    if previous is None:
        return "first"
    if previous["config_hash"] != config_hash:
        return "config_changed"
    if provider_model is not None and previous["provider_model"] != provider_model:
        return "model_changed"
    return "schedule" if scheduled else "manual"


def drift_row(
    config: EvaluatorConfig,
    verdicts: pl.DataFrame,
    previous_verdicts: pl.DataFrame | None,
    previous: dict | None,
    dataset: str,
    scheduled: bool = False,
) -> dict:
    """The `judge_drift` row of one check (`verdicts`) against the previous check (its row and verdicts)."""
    if config.anchors is None:
        raise ValueError(f"evaluator '{config.name}' has no anchors: it has no drift check")
    alpha = config.anchors.alpha
    config_hash = config.config_hash
    model = check_model(verdicts)
    done = verdicts.filter(pl.col("status") == COMPLETED)
    with_expected = done.drop_nulls("expected_score")
    row = {
        "evaluator": config.name,
        "check_id": verdicts["check_id"][0] if verdicts.height else None,
        "checked_at": verdicts["checked_at"][0] if verdicts.height else None,
        "trigger": trigger_of(config_hash, model, previous, scheduled),
        "config_hash": config_hash,
        "provider_model": model,
        "dataset": dataset,
        "n_anchors": verdicts.height,
        "n_completed": done.height,
        "n_failed": verdicts.height - done.height,
        "mean_score": done["score"].mean(),
        "expected_agreement": (
            float(with_expected.select((pl.col("score") - pl.col("expected_score")).abs().lt(1e-9).mean()).item())
            if with_expected.height
            else None
        ),
        "expected_mae": (
            float(with_expected.select((pl.col("score") - pl.col("expected_score")).abs().mean()).item())
            if with_expected.height
            else None
        ),
        "alpha": alpha,
        "cost_usd": verdicts["cost_usd"].sum() if verdicts["cost_usd"].null_count() == 0 else None,
    }
    if previous is None or previous_verdicts is None:
        return row | {"note": "first check of these anchors: nothing to compare with"}
    pairs = done.select("case_id", "score").join(
        previous_verdicts.filter(pl.col("status") == COMPLETED).select("case_id", previous="score"), on="case_id"
    )
    shift = paired_shift(pairs["score"].to_numpy(), pairs["previous"].to_numpy(), alpha)
    return row | {
        "previous_check_id": previous["check_id"],
        "previous_config_hash": previous["config_hash"],
        "previous_provider_model": previous["provider_model"],
        "n_paired": shift.n,
        "agreement": shift.agreement,
        "mean_shift": shift.shift,
        "shift_ci_low": shift.ci_low,
        "shift_ci_high": shift.ci_high,
        "p_value": shift.p_value,
        "significant": shift.significant,
        "note": shift.note,
    }


def check_anchors(
    root: Path,
    config: EvaluatorConfig,
    runtime: ModelRuntime,
    history: pl.DataFrame,
    previous_verdicts: pl.DataFrame | None,
    scheduled: bool = False,
    now: datetime | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Judge the evaluator's anchors and compare with its latest check in `history` (its `judge_drift` rows,
    whose verdicts are `previous_verdicts`): the new `judge_drift` row (a one-row frame) and the check's
    `anchor_verdicts` rows."""
    now = now or datetime.now(UTC)
    check_id = now.strftime("%Y%m%dT%H%M%S%fZ")
    verdicts, dataset = judge_anchors(root, config, runtime, check_id, now)
    mine = history.filter(pl.col("evaluator") == config.name).sort("checked_at")
    previous = mine.row(-1, named=True) if mine.height else None
    row = drift_row(config, verdicts, previous_verdicts if previous else None, previous, dataset, scheduled)
    return conform(pl.DataFrame([row], infer_schema_length=None), JUDGE_DRIFT_SCHEMA), verdicts


def needs_check(config: EvaluatorConfig, history: pl.DataFrame, reported_model: str | None) -> str | None:
    """Why the evaluator's anchors must be judged now (a new config hash, a new provider-reported model in its
    judge_scores, or never checked), or None. `history`: the `judge_drift` rows."""
    mine = history.filter(pl.col("evaluator") == config.name).sort("checked_at")
    if mine.is_empty():
        return "first"
    last = mine.row(-1, named=True)
    if last["config_hash"] != config.config_hash:
        return "config_changed"
    if reported_model is not None and last["provider_model"] not in (None, reported_model):
        return "model_changed"
    return None
