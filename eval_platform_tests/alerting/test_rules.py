"""Threshold rules: the grammar (parsed, never evaluated), the evaluator file's `alerts:` block and its errors, and
the alerts the rules raise over judged rows and over the real budget ledger."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from eval_platform.alerting.rules import AlertRule, alert_key, budget_alerts, parse_rule, score_alerts
from eval_platform.costs import ledger_spend
from eval_platform.judging.loading import EvaluatorConfigError, load_evaluator
from eval_platform.llm.budget import BudgetLedger, Reservation
from eval_platform_tests.conftest import write_evaluator


@pytest.mark.parametrize(
    ("text", "normalized", "metric", "threshold"),
    [
        ("rate(score > 0.5) > 2 %", "rate(score > 0.5) > 2%", "rate", 0.02),
        ("rate(score<0.5)>=0.02", "rate(score < 0.5) >= 0.02", "rate", 0.02),
        ("mean < 0.6", "mean < 0.6", "mean", 0.6),
        ("failed_rate > 10%", "failed_rate > 10%", "failed_rate", 0.10),
        ("budget_used_pct > 80", "budget_used_pct > 80", "budget_used_pct", 80.0),
        ("monthly_budget_used_pct >= 90%", "monthly_budget_used_pct >= 90%", "monthly_budget_used_pct", 90.0),
    ],
)
def test_rules_parse_into_metric_and_threshold(text, normalized, metric, threshold):
    rule = parse_rule(text)
    assert (rule.text, rule.metric) == (normalized, metric)
    assert rule.threshold == pytest.approx(threshold)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("rate(score > 0.5) > 2", r"a rate is a fraction in 0..1 or a percentage with %: write 2% or 0.02"),
        ("mean < 60%", r"not a percentage"),
        ("mean < 7", r"normalized to 0..1"),
        ("rate(score > 5) > 2%", r"score 5 never happens"),
        ("failed_rate > 120%", r"above 100%"),
        ("__import__('os').system('true') > 1", r"cannot parse rule"),
        ("mean < 0.5 or True", r"cannot parse rule"),
        ("rate(label > 0.5) > 2%", r"cannot parse rule"),
        ("p95 < 0.5", r"cannot parse rule"),
        ("mean == 0.5", r"cannot parse rule"),
    ],
)
def test_a_bad_rule_is_refused_with_the_grammar(text, why):
    with pytest.raises(ValueError, match=why):
        parse_rule(text)


def test_a_bad_rule_in_an_evaluator_file_names_the_file_and_the_field(data_root):
    path = write_evaluator(
        data_root,
        "toxicity",
        mode="score",
        model="openai/mock",
        prompt="{{output}}",
        alerts=["mean < 0.5", {"rule": "rate(score < 0.5) > 2", "severity": "high"}],
    )
    with pytest.raises(EvaluatorConfigError, match=r"toxicity\.yaml: field 'alerts\.1\.rule': .*write 2% or 0\.02"):
        load_evaluator(path)
    path = write_evaluator(
        data_root,
        "toxicity",
        mode="score",
        model="openai/mock",
        prompt="{{output}}",
        alerts=[{"rule": "mean < 1", "sevrity": "high"}],
    )
    with pytest.raises(EvaluatorConfigError, match=r"toxicity\.yaml: field 'alerts\.0\.sevrity': Extra inputs"):
        load_evaluator(path)


def test_rules_the_evaluator_cannot_measure_are_refused(data_root):
    path = write_evaluator(
        data_root, "quality", mode="score", model="openai/mock", prompt="{{output}}", alerts=["budget_used_pct > 80"]
    )
    # the documented error: the file and the field (`alerts.0.rule`), not `(file)`
    with pytest.raises(
        EvaluatorConfigError,
        match=r"quality\.yaml: field 'alerts\.0\.rule': 'budget_used_pct > 80': .*max_daily_cost_usd, which is not set",
    ):
        load_evaluator(path)
    path = write_evaluator(
        data_root,
        "preference",
        mode="pairwise",
        model="openai/mock",
        prompt="{{input}} A: {{output_a}} B: {{output_b}}",
        alerts=["failed_rate > 5%", "mean < 0.5"],
    )
    with pytest.raises(
        EvaluatorConfigError, match=r"preference\.yaml: field 'alerts\.1\.rule': 'mean < 0.5': mode 'pairwise' scores"
    ):
        load_evaluator(path)


def test_the_block_loads_with_defaults_and_leaves_the_config_hash_alone(data_root):
    fields = {"mode": "score", "model": "openai/mock", "prompt": "{{output}}"}
    plain = load_evaluator(write_evaluator(data_root, "quality", **fields))
    ruled = load_evaluator(write_evaluator(data_root, "quality", **fields, alerts=["rate(score<0.5) > 2 %"]))
    assert ruled.alerts == [AlertRule(rule="rate(score < 0.5) > 2%")]
    assert (ruled.alerts[0].min_n, ruled.alerts[0].severity) == (1, "medium")
    assert ruled.config_hash == plain.config_hash  # who is told about verdicts does not change them


def judged(evaluator: str, day: str, scores: list[float | None], failed: int = 0) -> pl.DataFrame:
    rows = [(evaluator, day, "COMPLETED", s) for s in scores] + [(evaluator, day, "FAILED", None)] * failed
    return pl.DataFrame(rows, schema=["evaluator", "date", "status", "score"], orient="row")


def test_score_rules_fire_on_the_days_that_break_them():
    rows = pl.concat(
        [
            judged("toxicity", "2026-11-20", [1.0] * 49 + [0.0], failed=0),  # 2 % toxic: not above 2 %
            judged("toxicity", "2026-11-21", [1.0] * 47 + [0.0] * 3, failed=10),  # 6 % toxic, 10 of 60 failed
            judged("quality", "2026-11-21", [0.2, 0.4]),  # mean 0.3, but only 2 scores
        ]
    )
    rules = {
        "toxicity": [AlertRule(rule="rate(score < 0.5) > 2%"), AlertRule(rule="failed_rate > 15%", severity="high")],
        "quality": [AlertRule(rule="mean < 0.5", min_n=3)],
    }
    alerts = score_alerts(rows, rules)
    assert [(a["evaluator"], a["day"], a["rule"]) for a in alerts] == [
        ("toxicity", "2026-11-21", "rate(score < 0.5) > 2%"),
        ("toxicity", "2026-11-21", "failed_rate > 15%"),
    ]
    rate, failed = alerts
    assert rate["value"] == pytest.approx(3 / 50) and rate["n"] == 50 and rate["threshold"] == pytest.approx(0.02)
    assert rate["message"] == "toxicity on 2026-11-21: rate(score < 0.5) = 6.0% (3 of 50), rule rate(score < 0.5) > 2%"
    assert failed["value"] == pytest.approx(10 / 60) and failed["severity"] == "high"
    assert failed["alert_key"] == alert_key("threshold", "toxicity", "failed_rate > 15%", "2026-11-21")
    # min_n lowered: the two-score day fires
    [mean] = score_alerts(rows, {"quality": [AlertRule(rule="mean < 0.5")]})
    assert (mean["value"], mean["mean"], mean["n"]) == (pytest.approx(0.3), pytest.approx(0.3), 2)


def test_budget_rules_read_the_ledger(tmp_path):
    days = iter(["2026-11-02T10:00:00", "2026-11-03T10:00:00", "2026-11-03T11:00:00"])
    ledger = BudgetLedger(
        tmp_path / "budget.sqlite", clock=lambda: datetime.fromisoformat(next(days)).replace(tzinfo=UTC)
    )
    for cost in (0.5, 0.3, 0.55):
        reservation = ledger.reserve("quality", 1.0, None, None)
        assert isinstance(reservation, Reservation)
        ledger.settle(reservation, cost)
    rules = {"quality": [AlertRule(rule="budget_used_pct > 80"), AlertRule(rule="monthly_budget_used_pct > 90%")]}
    alerts = budget_alerts(ledger_spend(ledger), rules, {"quality": (1.0, 1.6)})
    # 0.30 + 0.55 of a 1.00 daily budget; the month's 1.35 of 1.60 (84 %) is not above 90 %
    assert [(a["day"], a["rule"], round(a["value"], 6)) for a in alerts] == [
        ("2026-11-03", "budget_used_pct > 80", 85.0)
    ]
    assert alerts[0]["message"] == (
        "quality on 2026-11-03 (UTC day of the calls): budget_used_pct = 85.0% (0.85 of 1 USD daily budget), "
        "rule budget_used_pct > 80"
    )
    [monthly] = budget_alerts(
        ledger_spend(ledger), {"quality": [AlertRule(rule="monthly_budget_used_pct >= 90%")]}, {"quality": (None, 1.5)}
    )
    assert (monthly["day"], round(monthly["value"], 6)) == ("2026-11-03", 90.0)
