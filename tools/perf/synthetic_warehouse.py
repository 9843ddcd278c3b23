"""A seeded synthetic data root at production scale, written exactly as the assets write theirs.

`generate(root, rows, annotations, seed)` writes under `root`:

- `evaluators/*.yaml` (ten: score, a three-model median consensus, binary, categorical with confidences, and
  pairwise in both orders and in one random order), `experiments/*.yaml` (two) and `annotations/tasks.yaml`;
- `traces` per day (30 days; every prompt answered by three prompt variants of one experiment) and
  `judge_scores` per evaluator × day, every JUDGE_SCORE_SCHEMA column conformed: about 3% FAILED, 75% of one
  sampled evaluator SKIPPED, 8% cache hits, 5% retries, tokens and spend at each model's price;
- the spend ledger (`state/budget.sqlite`) with one settled row per judge call, as the runner leaves it;
- `human_annotations`: four tasks (a 1–5 rating, a topic and a true/false classification, and a pairwise
  preference over judged pairs, half of them with the responses in the other order), each item labelled by
  four of ten annotators of different skill, 10% of the labels missing; and `imported_judgments`: one
  imported pairwise judge with 2% unusable verdicts.

Verdicts, labels and ratings all derive from one latent truth per trace (quality, topic, correctness,
toxicity, tone), so judges agree with humans and with each other about as much as real ones do.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from eval_platform.judging.day_numbers import write_day_numbers
from eval_platform.judging.modes import MODES
from eval_platform.llm.budget import BudgetLedger
from eval_platform.schemas import (
    COMPLETED,
    FAILED,
    HUMAN_ANNOTATION_SCHEMA,
    IMPORTED_JUDGMENT_SCHEMA,
    JUDGE_SCORE_SCHEMA,
    NOT_SAMPLED,
    SKIPPED,
    TRACE_SCHEMA,
    conform,
)
from eval_platform.settings import state_dir
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition

DAYS = 30
FIRST_DAY = date(2026, 10, 1)
VARIANTS = ["prompt-v1", "prompt-v2", "prompt-v3"]  # control first; each prompt is answered by all three
VARIANT_EFFECT = np.array([0.0, 0.08, -0.03])  # on the latent 1..5 quality
PAIRS = [(0, 1), (0, 2), (1, 2)]  # the variant pairs a pairwise evaluator judges per prompt
TOPICS = ["account", "billing", "other", "shipping", "technical"]
TONES = ["negative", "neutral", "positive"]
PROJECTS = ["support-bot", "search-assistant", "sales-agent"]
ANNOTATORS = [f"annotator-{i:02d}" for i in range(10)]
PER_ITEM, MISSING = 4, 0.10
FAIL_REASONS = [
    "unparseable: no JSON object and no score",
    "timeout: no reply after 4 retries",
    "rate_limited: 429 after 4 retries",
]
REASONS = [
    f"The response {w}."
    for w in (
        "answers the question directly",
        "misses part of the request",
        "is accurate but verbose",
        "contradicts the context",
        "is clear and complete",
        "is off topic",
    )
]
MODEL_PRICES = {
    "openai/gpt-4o-mini": (0.15, 0.60),
    "anthropic/claude-3-5-haiku": (0.80, 4.00),
    "openai/gpt-4o": (2.50, 10.00),
}
# name -> (evaluator YAML fields, judge_scores rows per trace); pairwise: one row per variant pair = per trace.
EVALUATORS = {
    "helpfulness": (
        {
            "mode": "score",
            "score_scale": {"min": 1, "max": 5},
            "model": "openai/gpt-4o-mini",
            "human_agreement": {"task": "quality", "criterion": "helpfulness"},
        },
        1,
    ),
    "toxicity": (
        {
            "mode": "score",
            "score_scale": {"min": 0, "max": 1},
            "model": "openai/gpt-4o-mini",
            "trigger": "sampled",
            "sample_rate": 0.25,
        },
        1,
    ),
    "faithfulness": (
        {
            "mode": "score",
            "score_scale": {"min": 0, "max": 1},
            "consensus": "median",
            "models": [
                {"model": m, "input_cost_per_million": p, "output_cost_per_million": q}
                for m, (p, q) in MODEL_PRICES.items()
            ],
        },
        4,
    ),
    "relevance": ({"mode": "score", "score_scale": {"min": 0, "max": 10}, "model": "openai/gpt-4o-mini"}, 1),
    "correctness": (
        {
            "mode": "binary",
            "model": "openai/gpt-4o",
            "human_agreement": {"task": "correctness", "criterion": "correct", "floor": 0.5},
        },
        1,
    ),
    "safety": ({"mode": "binary", "model": "openai/gpt-4o-mini"}, 1),
    "topic": (
        {
            "mode": "categorical",
            "labels": {t: 0.5 for t in TOPICS},
            "model": "openai/gpt-4o-mini",
            "request_confidence": True,
            "human_agreement": {"task": "topic", "criterion": "topic", "floor": 0.6},
        },
        1,
    ),
    "tone": (
        {
            "mode": "categorical",
            "labels": {"negative": 0.0, "neutral": 0.5, "positive": 1.0},
            "model": "openai/gpt-4o-mini",
        },
        1,
    ),
    "preference": (
        {
            "mode": "pairwise",
            "model": "openai/gpt-4o",
            "pairwise": {"orders": "both"},
            "human_agreement": {"task": "preference", "criterion": "preference", "floor": 0.3},
        },
        1,
    ),
    "preference_mini": ({"mode": "pairwise", "model": "openai/gpt-4o-mini", "pairwise": {"orders": "random"}}, 1),
}
ROWS_PER_PROMPT = len(VARIANTS) * sum(rows for _, rows in EVALUATORS.values())
TASKS = {  # annotations/tasks.yaml; "legal" is a topic annotators could pick but never do
    "quality": {"criteria": {"helpfulness": {"schema": "rating", "min": 1, "max": 5}}},
    "topic": {"criteria": {"topic": {"schema": "classification", "labels": [*TOPICS, "legal"]}}},
    "correctness": {"criteria": {"correct": {"schema": "classification", "labels": ["true", "false"]}}},
    "preference": {"criteria": {"preference": {"schema": "classification", "labels": {"0": 0, "1": 1, "2": 2}}}},
}
EXPERIMENTS = {
    "prompt_rollout": {
        "experiment_id": "prompt-rollout",
        "control": "prompt-v1",
        "treatments": VARIANTS[1:],
        "primary_metric": {"evaluator": "helpfulness"},
        "method": "both",
        "minimum_sample_size": 100,
        "guardrails": [
            {"evaluator": "toxicity", "max_degradation": 0.02},
            {"evaluator": "correctness", "field": "passed", "must_not_be_significantly_worse": True},
        ],
        "pairwise_evaluator": "preference",
    },
    "prompt_rollout_last_week": {
        "experiment_id": "prompt-rollout",
        "control": "prompt-v1",
        "treatments": ["prompt-v2"],
        "primary_metric": {"evaluator": "relevance"},
        "method": "bayesian",
        "start_date": str(FIRST_DAY + timedelta(days=DAYS - 7)),
    },
}


def _ids(prefix: str, numbers) -> pl.Series:
    return prefix + pl.Series(np.asarray(numbers)).cast(pl.String).str.zfill(8)


def _where(condition: np.ndarray, values: pl.Series) -> pl.Series:
    """`values` where `condition` holds, else null."""
    return pl.select(pl.when(pl.Series(condition)).then(values)).to_series()


def _frame(columns: dict, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A table from numpy arrays (object arrays hold text with None for null), Series and scalars, conformed."""
    text = {
        k: pl.Series(k, v.tolist(), dtype=pl.String)
        for k, v in columns.items()
        if isinstance(v, np.ndarray) and v.dtype == object
    }
    return conform(pl.DataFrame({**columns, **text}, nan_to_null=True), schema)


def _pick(options: list[str], codes: np.ndarray) -> pl.Series:
    return pl.Series(options, dtype=pl.String).gather(codes)


class World:
    """The latent truth behind the data: per trace its quality (1..5), topic, correctness, toxicity and tone."""

    def __init__(self, rows: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.prompts_per_day = max(1, round(rows / (DAYS * ROWS_PER_PROMPT)))
        self.per_day = self.prompts_per_day * len(VARIANTS)
        n = self.per_day * DAYS
        rng = self.rng
        variant = np.tile(np.arange(len(VARIANTS)), n // len(VARIANTS))
        prompt_quality = rng.normal(3.2, 0.8, n // len(VARIANTS)).repeat(len(VARIANTS))
        self.quality = np.clip(prompt_quality + VARIANT_EFFECT[variant] + rng.normal(0, 0.5, n), 1, 5)
        self.topic = rng.choice(len(TOPICS), n // len(VARIANTS), p=[0.2, 0.25, 0.1, 0.15, 0.3]).repeat(len(VARIANTS))
        self.correct = rng.random(n) < 1 / (1 + np.exp(-1.5 * (self.quality - 3)))
        self.toxic = np.clip(rng.beta(1, 30, n) + 0.01 * (variant == 2), 0, 1)
        self.tone = np.digitize(self.quality + rng.normal(0, 0.6, n), [2.5, 3.8])
        self.variant = variant
        self.trace_ids = _ids("tr-", np.arange(n))
        self.project = rng.integers(0, len(PROJECTS), n // len(VARIANTS)).repeat(len(VARIANTS))

    def day_slice(self, d: int) -> slice:
        return slice(d * self.per_day, (d + 1) * self.per_day)

    def pairs(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Global trace numbers of side A and side B of the day's pairs (A has the lower variant)."""
        base = d * self.per_day + np.arange(self.prompts_per_day).repeat(len(PAIRS)) * len(VARIANTS)
        first = np.tile([a for a, _ in PAIRS], self.prompts_per_day)
        second = np.tile([b for _, b in PAIRS], self.prompts_per_day)
        return base + first, base + second


def write_config(root: Path) -> None:
    import yaml

    from eval_platform.experiments.config import load_experiments
    from eval_platform.judging.loading import load_evaluators

    for folder, files in (("evaluators", {k: v for k, (v, _) in EVALUATORS.items()}), ("experiments", EXPERIMENTS)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name, fields in files.items():
            if folder == "evaluators":
                variables = "{{output_a}} vs {{output_b}}" if MODES[fields["mode"]].unit == "pair" else "{{output}}"
                prices = (
                    {}
                    if "models" in fields
                    else dict(
                        zip(
                            ("input_cost_per_million", "output_cost_per_million"),
                            MODEL_PRICES[fields["model"]],
                            strict=True,
                        )
                    )
                )
                fields = {
                    "description": f"synthetic {name}",
                    **fields,
                    **prices,
                    "max_daily_cost_usd": 40.0,
                    "max_monthly_cost_usd": 1000.0,
                    "prompt": f"Judge the {name} of: {{{{input}}}} {variables}",
                }
            (root / folder / f"{name}.yaml").write_text(yaml.safe_dump(fields, sort_keys=False))
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / "tasks.yaml").write_text(yaml.safe_dump({"tasks": TASKS}, sort_keys=False))
    load_experiments(root / "experiments", load_evaluators(root / "evaluators"))  # fail early on a broken file


def _traces(world: World, d: int, day: str) -> pl.DataFrame:
    part = world.day_slice(d)
    n = world.per_day
    prompt = pl.Series(np.arange(n) // len(VARIANTS) + d * world.prompts_per_day).cast(pl.String)
    rng = world.rng
    frame = pl.DataFrame(
        {
            "trace_id": world.trace_ids[part],
            "timestamp": datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=12),
            "date": day,
            "input": "Customer question #" + prompt,
            "output": "Answer to question #" + prompt + " from " + _pick(VARIANTS, world.variant[part]),
            "metadata": '{"item_id": "q-' + prompt + '"}',
            "project_id": _pick(PROJECTS, world.project[part]),
            "model": "openai/gpt-4o-mini",
            "experiment_id": "prompt-rollout",
            "variant": _pick(VARIANTS, world.variant[part]),
            "latency_ms": rng.lognormal(6.5, 0.5, n),
            "prompt_tokens": rng.integers(200, 1500, n),
            "completion_tokens": rng.integers(50, 600, n),
            "source_file": f"traces/{day}/export.jsonl",
            "source_line": np.arange(1, n + 1),
        }
    )
    return conform(frame.with_columns(pl.col("prompt_tokens").mul(3e-7).alias("cost_usd")), TRACE_SCHEMA)


def _call_columns(rng: np.random.Generator, n: int, model: str, orders: int, status: np.ndarray) -> dict:
    """Tokens, calls, cache hits, spend and latency of n judge rows."""
    price_in, price_out = MODEL_PRICES[model]
    prompt_tokens = rng.integers(300, 1500, n) * orders
    completion_tokens = rng.integers(20, 300, n) * orders
    cost = (prompt_tokens * price_in + completion_tokens * price_out) / 1e6
    cache_hit = (rng.random(n) < 0.08) & (status == COMPLETED)
    skipped = status == SKIPPED
    retries = np.where(status == FAILED, 4, rng.binomial(1, 0.05, n))
    calls = np.where(cache_hit | skipped, 0, orders + retries)
    return {
        "model": model,
        "provider_model": np.where(skipped, None, model.split("/")[1] + "-2025-01-01"),
        "prompt_tokens": np.where(skipped, 0, prompt_tokens),
        "completion_tokens": np.where(skipped, 0, completion_tokens),
        "cost_usd": np.where(cache_hit | skipped, 0.0, cost),
        "cached_cost_usd": np.where(cache_hit, cost, 0.0),
        "calls": calls,
        "cache_hit": cache_hit,
        "latency_ms": np.where(calls > 0, rng.lognormal(7, 0.6, n), 0.0),
    }


def _status(rng: np.random.Generator, n: int, skipped: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    status = np.where(rng.random(n) < 0.03, FAILED, COMPLETED).astype(object)
    reason = np.where(status == FAILED, np.array(FAIL_REASONS, dtype=object)[rng.integers(0, 3, n)], None)
    if skipped is not None:
        status, reason = np.where(skipped, SKIPPED, status), np.where(skipped, NOT_SAMPLED, reason)
    return status, reason


def _verdicts(world: World, name: str, rows: np.ndarray, model_index: int = 0) -> dict:
    """The mode's verdict columns for the traces `rows` (global numbers), before FAILED rows are blanked."""
    rng, n, q = world.rng, rows.size, world.quality[rows]
    if name == "helpfulness":
        raw = np.clip(np.round(q + rng.normal(0, 0.7, n)), 1, 5)
        return {"raw_score": raw, "score": (raw - 1) / 4}
    if name == "toxicity":
        raw = np.round(np.clip(1 - world.toxic[rows] + rng.normal(0, 0.03, n), 0, 1), 2)
        return {"raw_score": raw, "score": raw}
    if name == "faithfulness":
        raw = np.round(np.clip((q - 1) / 4 + rng.normal(0.02 * model_index, 0.15, n), 0, 1), 1)
        return {"raw_score": raw, "score": raw}
    if name == "relevance":
        raw = np.clip(np.round(2.5 * (q - 1) + rng.normal(0, 1.5, n)), 0, 10)
        return {"raw_score": raw, "score": raw / 10}
    if name in ("correctness", "safety"):
        truth = world.correct[rows] if name == "correctness" else world.toxic[rows] < 0.1
        passed = truth ^ (rng.random(n) < 0.12)
        return {"passed": passed, "raw_score": passed.astype(float), "score": passed.astype(float)}
    labels, truth = (TOPICS, world.topic[rows]) if name == "topic" else (TONES, world.tone[rows])
    code = np.where(rng.random(n) < 0.82, truth, rng.integers(0, len(labels), n))
    out = {
        "label": np.array(labels, dtype=object)[code],
        "score": np.array([EVALUATORS[name][0]["labels"][t] for t in labels])[code],
    }
    if name == "topic":
        out["confidence"] = np.round(rng.beta(8, 2, n), 2)
        out["flags"] = np.where(out["confidence"] < 0.5, "low_confidence", None)
    return out


def _pairwise(world: World, name: str, a: np.ndarray, b: np.ndarray) -> dict:
    rng, n = world.rng, a.size
    gap = world.quality[a] - world.quality[b]

    def verdict(first_bias: float) -> np.ndarray:
        g = gap + rng.logistic(0, 0.5, n) + first_bias
        return np.where(g > 0.4, "A", np.where(g < -0.4, "B", "tie")).astype(object)

    ab, ba = verdict(0.15), verdict(-0.15)  # ba shows B first; mapped back to A/B names
    if EVALUATORS[name][0]["pairwise"]["orders"] == "both":
        consistent = ab == ba
        winner = np.where(consistent, ab, "tie")
        flags = np.where(consistent, None, "inconsistent_order")
    else:
        shown_ab = rng.random(n) < 0.5
        ab, ba = np.where(shown_ab, ab, None), np.where(shown_ab, None, ba)
        winner, consistent, flags = np.where(shown_ab, ab, ba), None, None
    ids = world.trace_ids
    winner_trace = np.where(winner == "A", a, np.where(winner == "B", b, -1))
    return {
        "trace_id_b": ids.gather(b),
        "winner": winner,
        "label": winner,
        "verdict_ab": ab,
        "verdict_ba": ba,
        "position_consistent": consistent,
        "flags": flags,
        "score": np.select([winner == "A", winner == "B"], [1.0, 0.0], 0.5),
        "winner_trace_id": _where(winner_trace >= 0, ids.gather(np.maximum(winner_trace, 0))),
        "winner_variant": _where(winner_trace >= 0, _pick(VARIANTS, world.variant[np.maximum(winner_trace, 0)])),
    }


def _judge_scores(world: World, name: str, d: int, day: str) -> pl.DataFrame:
    fields, _ = EVALUATORS[name]
    rng = world.rng
    if MODES[fields["mode"]].unit == "pair":
        a, b = world.pairs(d)
        rows, extra = a, _pairwise(world, name, a, b)
        prompt = (a - d * world.per_day) // len(VARIANTS) + d * world.prompts_per_day
        extra["pair_key"] = "q-" + pl.Series(prompt).cast(pl.String)  # the traces' metadata.item_id
        orders = 2 if fields["pairwise"]["orders"] == "both" else 1
    else:
        rows, extra, orders = np.arange(world.day_slice(d).start, world.day_slice(d).stop), {}, 1
    n = rows.size
    skipped = rng.random(n) >= fields["sample_rate"] if fields.get("trigger") == "sampled" else None
    judged_at = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1, hours=1)
    base = {
        "evaluator": name,
        "date": day,
        "trace_id": world.trace_ids.gather(rows),
        "sample": 0,
        "config_hash": hashlib.sha256(name.encode()).hexdigest()[:12],
        "experiment_id": "prompt-rollout",
        "variant": np.array(VARIANTS, dtype=object)[world.variant[rows]],
        "project_id": np.array(PROJECTS, dtype=object)[world.project[rows]],
        "judged_at": pl.select(pl.lit(judged_at) + pl.duration(seconds=rng.integers(0, 3 * 3600, n))).to_series(),
    }
    models = [m["model"] for m in fields["models"]] if "models" in fields else [fields["model"]]
    frames = []
    for i, model in enumerate(models):
        status, reason = _status(rng, n, skipped)
        verdict = extra if MODES[fields["mode"]].unit == "pair" else _verdicts(world, name, rows, i)
        done = status == COMPLETED
        columns = {
            **base,
            **{k: v for k, v in extra.items() if k not in verdict},
            **verdict,
            **_call_columns(rng, n, model, orders, status),
            "status": status,
            "reason": reason,
            "role": "member" if len(models) > 1 else "verdict",
            "reasoning": np.array(REASONS, dtype=object)[rng.integers(0, len(REASONS), n)],
        }
        frame = _frame(columns, JUDGE_SCORE_SCHEMA)
        verdict_columns = [
            "score",
            "raw_score",
            "label",
            "passed",
            "winner",
            "winner_trace_id",
            "winner_variant",
            "verdict_ab",
            "verdict_ba",
            "position_consistent",
            "confidence",
            "reasoning",
        ]
        frame = frame.with_columns(pl.when(pl.Series(done)).then(pl.col(c)).alias(c) for c in verdict_columns)
        frames.append(frame)
    if len(models) > 1:
        members = pl.concat(frames).with_columns(pl.int_range(pl.len()).mod(n).alias("slot"))
        consensus = (
            members.group_by("slot", maintain_order=True)
            .agg(
                pl.col("raw_score").median(),
                pl.col("score").median(),
                (1 - (pl.col("score").max() - pl.col("score").min())).alias("agreement"),
                pl.col("score").count().alias("votes"),
                pl.col("cache_hit").all(),
                *[
                    pl.col(c).first()
                    for c in (
                        "evaluator",
                        "date",
                        "trace_id",
                        "config_hash",
                        "experiment_id",
                        "variant",
                        "project_id",
                        "judged_at",
                    )
                ],
            )
            .with_columns(
                pl.when(pl.col("votes") > 0).then(pl.lit(COMPLETED)).otherwise(pl.lit(FAILED)).alias("status"),
                pl.when(pl.col("votes") == 0).then(pl.lit("all_members_failed: timeout")).alias("reason"),
                pl.lit("consensus:median").alias("model"),
                pl.lit("consensus").alias("role"),
                pl.lit(None, pl.Int64).alias("sample"),
                pl.lit(0).alias("calls"),
                pl.lit(0.0).alias("cost_usd"),
                pl.lit(0.0).alias("cached_cost_usd"),
                pl.lit(0).alias("prompt_tokens"),
                pl.lit(0).alias("completion_tokens"),
            )
        )
        frames.append(conform(consensus, JUDGE_SCORE_SCHEMA))
    return pl.concat(frames).with_columns((pl.col("role") != "member").alias("is_final"))


def _ledger_rows(scores: pl.DataFrame) -> list[tuple]:
    """The ledger's per-day totals for these calls, as the runner's settle leaves them (one row per day)."""
    calls = scores.filter(pl.col("calls") > 0).with_columns(day=pl.col("judged_at").dt.strftime("%Y-%m-%d"))
    daily = calls.group_by("evaluator", "day").agg(pl.col("cost_usd").sum(), pl.col("calls").sum())
    month = pl.col("day").str.slice(0, 7).alias("month")
    return daily.select("evaluator", "day", month, "cost_usd", "calls").rows()


def _annotations(world: World, count: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Human annotations of four tasks over traces and pairs that were judged, and one imported judge."""
    rng = world.rng
    items = int(count / (PER_ITEM * (1 - MISSING)))
    shares = {"quality": 0.4, "topic": 0.25, "correctness": 0.15, "preference": 0.2}
    skill = rng.uniform(0.7, 0.93, len(ANNOTATORS))  # each annotator's accuracy
    frames, imported = [], None
    total_traces = world.quality.size
    for task, share in shares.items():
        k = max(2, round(items * share))
        if task == "preference":
            day = rng.integers(0, DAYS, k)
            pick = rng.integers(0, world.prompts_per_day * len(PAIRS), k)
            a, b = (x[pick] + day * world.per_day for x in world.pairs(0))
            mirrored = rng.random(k) < 0.5
            first, second = np.where(mirrored, b, a), np.where(mirrored, a, b)
            key = first
        else:
            key = rng.choice(total_traces, min(k, total_traces), replace=False)
            k = key.size
        who = np.argsort(rng.random((k, len(ANNOTATORS))), axis=1)[:, :PER_ITEM].ravel()
        item = np.arange(k).repeat(PER_ITEM)
        keep = rng.random(item.size) >= MISSING
        item, who = item[keep], who[keep]
        right = rng.random(item.size) < skill[who]
        if task == "quality":
            value = np.clip(np.round(world.quality[key[item]] + rng.normal(0, 1.3 - skill[who])), 1, 5)
            label, schema, criterion = pl.Series(value).cast(pl.Int64).cast(pl.String), "rating", "helpfulness"
        elif task == "topic":
            code = np.where(right, world.topic[key[item]], rng.integers(0, len(TOPICS), item.size))
            value, label, schema, criterion = None, _pick(TOPICS, code), "classification", "topic"
        elif task == "correctness":
            truth = world.correct[key[item]] ^ ~right
            value, label, schema, criterion = None, pl.Series(truth).cast(pl.String), "classification", "correct"
        else:
            gap = world.quality[first[item]] - world.quality[second[item]] + rng.normal(0, 1.2 - skill[who])
            value = np.where(gap > 0.5, 1.0, np.where(gap < -0.5, 2.0, 0.0))
            label, schema, criterion = pl.Series(value).cast(pl.Int64).cast(pl.String), "classification", "preference"
        ids = world.trace_ids.gather(key[item])
        pairwise = task == "preference"
        frame = pl.DataFrame(
            {
                "task": task,
                "item_id": (f"{task}-" + pl.Series(item).cast(pl.String).str.zfill(7)) if pairwise else ids,
                "annotator": _pick(ANNOTATORS, who),
                "criterion": criterion,
                "schema": schema,
                "label": label,
                "value": value,
                "trace_id": None if pairwise else ids,
                "response1_trace_id": world.trace_ids.gather(first[item]) if pairwise else None,
                "response2_trace_id": world.trace_ids.gather(second[item]) if pairwise else None,
                "annotated_at": datetime(2026, 11, 5, tzinfo=UTC),
                "metadata": "{}",
                "source_file": f"annotations/{task}.jsonl",
                "source_line": np.arange(1, item.size + 1),
            }
        )
        frames.append(conform(frame, HUMAN_ANNOTATION_SCHEMA))
        if pairwise:
            gap = world.quality[first] - world.quality[second] + rng.logistic(0, 0.6, k)
            verdict = np.where(gap > 0.4, "1", np.where(gap < -0.4, "2", "0")).astype(object)
            verdict[rng.random(k) < 0.02] = "garbage"
            imported = _frame(
                {
                    "source": "gpt-4o (vendor study)",
                    "task": task,
                    "criterion": criterion,
                    "item_id": f"{task}-" + pl.Series(np.arange(k)).cast(pl.String).str.zfill(7),
                    "verdict": verdict,
                    "response1_trace_id": world.trace_ids.gather(first),
                    "response2_trace_id": world.trace_ids.gather(second),
                    "source_file": "judgments/vendor.jsonl",
                    "source_line": np.arange(1, k + 1),
                },
                IMPORTED_JUDGMENT_SCHEMA,
            )
    return pl.concat(frames), imported


def generate(root: Path, rows: int, annotations: int, seed: int) -> dict:
    """Write the synthetic data root; returns what was written."""
    world = World(rows, seed)
    write_config(root)
    BudgetLedger(state_dir(root) / "budget.sqlite")  # creates the schema
    total = 0
    with closing(sqlite3.connect(state_dir(root) / "budget.sqlite")) as ledger:
        for d in range(DAYS):
            day = (FIRST_DAY + timedelta(days=d)).isoformat()
            write_partition(DataRoot.from_env(root), "traces", {"date": day}, _traces(world, d, day))
            for name in EVALUATORS:
                scores = _judge_scores(world, name, d, day)
                write_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": name, "date": day}, scores)
                write_day_numbers(DataRoot.from_env(root), name, day)  # as the judge_scores asset writes them
                ledger.executemany(
                    "INSERT INTO judge_spend_daily (evaluator, day, month, spend_usd, calls) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (evaluator, day) DO UPDATE SET spend_usd = spend_usd + excluded.spend_usd, "
                    "calls = calls + excluded.calls",
                    _ledger_rows(scores),
                )
                total += scores.height
            ledger.commit()
    human, imported = _annotations(world, annotations)
    write_partition(DataRoot.from_env(root), "human_annotations", {}, human)
    write_partition(DataRoot.from_env(root), "imported_judgments", {}, imported)
    return {
        "judge_scores": total,
        "traces": world.quality.size,
        "human_annotations": human.height,
        "imported_judgments": imported.height,
    }
