"""Threshold alert rules: the `alerts:` block of an evaluator file, its small grammar, and the alerts it raises.

A rule is one line, parsed by a strict regular expression (never evaluated as code):

    rate(score > 0.5) > 2%        the share of the day's final completed scores above 0.5 is above 2 %
    mean < 0.6                    the day's mean final completed score is below 0.6
    failed_rate > 10%             FAILED among the day's judged final rows (completed + failed) is above 10 %
    budget_used_pct > 80          the UTC day's judge spend (the budget ledger) is above 80 % of max_daily_cost_usd
    monthly_budget_used_pct > 90  month-to-date spend up to that UTC day is above 90 % of max_monthly_cost_usd

Comparisons are `>`, `>=`, `<`, `<=`. A rate (`rate(...)`, `failed_rate`) is a fraction: write it as a percentage
with `%` (`2%`, `2 %`) or as a fraction in 0..1 (`0.02`). A score and a mean are on the 0..1 scale (`%` refused).
A budget percentage is in percent with or without `%`. Score rules are per evaluator and trace day (the
`judge_scores` partition); budget rules per evaluator and UTC day of the calls (the ledger's day).

Higher scores are better for every built-in evaluator (toxicity and hallucination score 1 for clean answers), so
"alert when more than 2 % of answers are toxic" is `rate(score < 0.5) > 2%` on the toxicity evaluator.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import polars as pl
from pydantic import Field, field_validator, model_validator

from eval_platform.schemas import ALERT_SCHEMA, COMPLETED, FAILED, UTC_TS, conform
from eval_platform.strict import Strict

Metric = Literal["rate", "mean", "failed_rate", "budget_used_pct", "monthly_budget_used_pct"]
SCORE_METRICS = ("rate", "mean")  # read the scores: meaningless for a relative (pairwise, n_wise) score
BUDGET_METRICS = ("budget_used_pct", "monthly_budget_used_pct")
REGRESSION, THRESHOLD = "regression", "threshold"  # the `kind` of an `alerts` row

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_CMP = r"(>=|<=|>|<)"
_RULE = re.compile(
    rf"\s*(?:rate\(\s*score\s*{_CMP}\s*({_NUMBER})\s*\)|(mean|failed_rate|budget_used_pct|monthly_budget_used_pct))"
    rf"\s*{_CMP}\s*({_NUMBER})\s*(%?)\s*"
)
_GRAMMAR = (
    "write `rate(score > 0.5) > 2%`, `mean < 0.6`, `failed_rate > 10%`, `budget_used_pct > 80` or "
    "`monthly_budget_used_pct > 90` (comparisons >, >=, <, <=)"
)


@dataclass(frozen=True)
class ParsedRule:
    """A rule as parsed: `metric op threshold`, with `rate`'s inner `score score_op score_threshold`.

    `threshold` is in the metric's own unit: a fraction for rates, 0..1 for a mean, percent for budgets."""

    text: str  # normalized: one space around operators, `%` kept as written for percentages
    metric: Metric
    op: str
    threshold: float
    score_op: str | None = None
    score_threshold: float | None = None

    def fires(self, value: float) -> bool:
        return bool(_OPS[self.op](value, self.threshold))


def parse_rule(text: str) -> ParsedRule:
    """Parse one rule; a ValueError says what is wrong and what the grammar is."""
    if not isinstance(text, str):
        raise ValueError(f"a rule is text; {_GRAMMAR}")
    match = _RULE.fullmatch(text)
    if match is None:
        raise ValueError(f"cannot parse rule {text!r}: {_GRAMMAR}")
    score_op, score_value, named, op, value_text, percent = match.groups()
    metric: Metric = named or "rate"  # type: ignore[assignment]
    value = float(value_text)
    shown = f"{value_text}{'%' if percent else ''}"
    if metric in ("rate", "failed_rate"):
        if percent:
            if value > 100:
                raise ValueError(f"rule {text!r}: a rate of {value_text}% is above 100%")
            value /= 100
        elif value > 1:
            raise ValueError(
                f"rule {text!r}: a rate is a fraction in 0..1 or a percentage with %: write {value_text}% or "
                f"{value / 100:g}"
            )
    elif metric == "mean":
        if percent:
            raise ValueError(f"rule {text!r}: a mean score is on the 0..1 scale, not a percentage: drop the %")
        if value > 1:
            raise ValueError(f"rule {text!r}: scores are normalized to 0..1; a mean of {value_text} never happens")
    score_threshold = None
    if score_value is not None:
        score_threshold = float(score_value)
        if score_threshold > 1:
            raise ValueError(f"rule {text!r}: scores are normalized to 0..1; score {score_value} never happens")
    inner = f"rate(score {score_op} {score_value})" if score_value is not None else metric
    return ParsedRule(f"{inner} {op} {shown}", metric, op, value, score_op, score_threshold)


class AlertRule(Strict):
    """One entry of an evaluator's `alerts:` list: a rule line, or a mapping with the rule and its options."""

    rule: str = Field(description="e.g. `rate(score > 0.5) > 2%`, `mean < 0.6`, `failed_rate > 10%`.")
    min_n: int = Field(
        1, ge=1, description="Score rules: fire only on a day with at least this many scores (judged rows)."
    )
    severity: Literal["low", "medium", "high"] = "medium"

    @model_validator(mode="before")
    @classmethod
    def _from_line(cls, raw: Any) -> Any:
        return {"rule": raw} if isinstance(raw, str) else raw

    @field_validator("rule")
    @classmethod
    def _parses(cls, text: str) -> str:
        return parse_rule(text).text

    @property
    def parsed(self) -> ParsedRule:
        return parse_rule(self.rule)


def alert_key(kind: str, evaluator: str, rule: str | None, day: str) -> str:
    """The alert's identity (and the idempotency key its deliveries carry): one per kind, evaluator, rule, day."""
    return hashlib.sha256(f"{kind}\x1f{evaluator}\x1f{rule or ''}\x1f{day}".encode()).hexdigest()[:24]


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def score_alerts(rows: pl.DataFrame, rules: Mapping[str, list[AlertRule]]) -> list[dict]:
    """Alerts of the score rules (`rate`, `mean`, `failed_rate`) over final judge_scores rows.

    `rows`: evaluator, date, status, score of the final COMPLETED and FAILED rows (SKIPPED ones were not judged).
    One group-by per rule over the evaluator's rows; a loop step per rule and day, never per score."""
    alerts = []
    for evaluator, evaluator_rules in rules.items():
        own = rows.filter(pl.col("evaluator") == evaluator)
        if own.is_empty():
            continue
        completed = (pl.col("status") == COMPLETED) & pl.col("score").is_not_null()
        for rule in evaluator_rules:
            parsed = rule.parsed
            if parsed.metric not in ("rate", "mean", "failed_rate"):
                continue
            if parsed.metric == "failed_rate":
                numerator = (pl.col("status") == FAILED).sum()
                denominator = pl.col("status").is_in([COMPLETED, FAILED]).sum()
            elif parsed.metric == "rate":
                hit = _OPS[parsed.score_op or ">"](pl.col("score"), parsed.score_threshold)
                numerator, denominator = (completed & hit).sum(), completed.sum()
            else:
                numerator, denominator = pl.col("score").filter(completed).sum(), completed.sum()
            daily = (
                own.group_by("date")
                .agg(numerator.cast(pl.Float64).alias("numerator"), denominator.alias("n"))
                .filter(pl.col("n") >= rule.min_n)
                .sort("date")
            )
            for day, num, n in daily.iter_rows():
                value = num / n
                if not parsed.fires(value):
                    continue
                if parsed.metric == "mean":
                    figure = f"mean = {value:.3f} (n={n})"
                elif parsed.metric == "rate":
                    figure = (
                        f"rate(score {parsed.score_op} {parsed.score_threshold:g}) = {_pct(value)} ({num:g} of {n})"
                    )
                else:
                    figure = f"failed_rate = {_pct(value)} ({num:g} of {n} judged)"
                alerts.append(
                    _row(evaluator, day, rule, value, n, f"{evaluator} on {day}: {figure}, rule {parsed.text}")
                    | ({"mean": value} if parsed.metric == "mean" else {})
                )
    return alerts


def budget_alerts(
    spend: pl.DataFrame, rules: Mapping[str, list[AlertRule]], budgets: Mapping[str, tuple[float | None, float | None]]
) -> list[dict]:
    """Alerts of the budget rules over the ledger's spend (`costs.ledger_spend`: evaluator, day, ledger_spend_usd).

    `budgets`: evaluator -> (max_daily_cost_usd, max_monthly_cost_usd). Monthly use is month-to-date up to each day.
    """
    alerts = []
    spend = spend.sort("evaluator", "day").with_columns(
        pl.col("ledger_spend_usd").cum_sum().over("evaluator", pl.col("day").str.slice(0, 7)).alias("month_to_date")
    )
    for evaluator, evaluator_rules in rules.items():
        own = spend.filter(pl.col("evaluator") == evaluator)
        daily_budget, monthly_budget = budgets.get(evaluator, (None, None))
        for rule in evaluator_rules:
            parsed = rule.parsed
            if parsed.metric not in BUDGET_METRICS:
                continue
            monthly = parsed.metric == "monthly_budget_used_pct"
            budget = monthly_budget if monthly else daily_budget
            if not budget:
                continue  # refused when the file loads; a budget of 0 spends nothing to alert on
            for day, day_spend, to_date in own.select("day", "ledger_spend_usd", "month_to_date").iter_rows():
                used = to_date if monthly else day_spend
                value = 100 * used / budget
                if not parsed.fires(value):
                    continue
                period = f"month-to-date {day[:7]}" if monthly else "UTC day of the calls"
                what = "monthly" if monthly else "daily"
                message = (
                    f"{evaluator} on {day} ({period}): {parsed.metric} = {value:.1f}% "
                    f"({used:.6g} of {budget:.6g} USD {what} budget), rule {parsed.text}"
                )
                alerts.append(_row(evaluator, day, rule, value, None, message))
    return alerts


def _row(evaluator: str, day: str, rule: AlertRule, value: float, n: int | None, message: str) -> dict:
    return {
        "evaluator": evaluator,
        "day": day,
        "kind": THRESHOLD,
        "rule": rule.rule,
        "value": value,
        "threshold": rule.parsed.threshold,
        "n": n,
        "severity": rule.severity,
        "message": message,
        "alert_key": alert_key(THRESHOLD, evaluator, rule.rule, day),
    }


def threshold_alerts(rows: list[dict], detected_at: datetime | None = None) -> pl.DataFrame:
    """`alerts` rows from `score_alerts` / `budget_alerts` dicts."""
    frame = pl.DataFrame(rows, schema={k: v for k, v in ALERT_SCHEMA.items() if k != "detected_at"})
    return conform(
        frame.with_columns(pl.lit(detected_at or datetime.now(UTC), dtype=UTC_TS).alias("detected_at")), ALERT_SCHEMA
    )


def with_regressions(regressions: pl.DataFrame, thresholds: pl.DataFrame) -> pl.DataFrame:
    """The `alerts` table: regression rows (kind `regression`, their key filled in) and threshold rows."""
    # One regression row per evaluator and day at most: a loop over alerts, not over scores.
    keys = [alert_key(REGRESSION, e, None, d) for e, d in regressions.select("evaluator", "day").iter_rows()]
    keyed = regressions.with_columns(pl.lit(REGRESSION).alias("kind"), pl.Series("alert_key", keys, dtype=pl.String))
    return pl.concat([conform(keyed, ALERT_SCHEMA), conform(thresholds, ALERT_SCHEMA)]).sort(
        "day", "evaluator", "kind", "rule", nulls_last=True
    )
