"""Scoring a benchmark task's rows: a judge task's replies parsed into verdicts (pairwise orders unswapped and
linked), then each COMPLETED row scored by the task's scorers, a judge evaluator's scorer through `judge_day`, a
scorer of embeddings (semantic_similarity) on vectors fetched first for every row (`scoring.embedding_calls`, the
one call path; counted in the model under test's budget, their cost added to the row's `cost_usd`).

A row a scorer cannot score is FAILED with a reason (missing_field, scorer_error, judge:<code>, embedding:<code>),
never scored 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from eval_platform.ingest.datasets import expected_value
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes.pairwise import unswap
from eval_platform.judging.parsing import ParseFailure, parse_reply
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import reservation_ttl_s
from eval_platform.llm.call import CallResult
from eval_platform.schemas import (
    COMPLETED,
    FAILED,
    JUDGE_MISSING,
    MISSING_FIELD,
    SCORER_ERROR,
    UNKNOWN_EVALUATOR,
    embedding_reason,
    judge_reason,
)
from eval_platform.scoring import registry
from eval_platform.scoring.base import EMBEDDINGS
from eval_platform.scoring.embedding_calls import embed_cases

if TYPE_CHECKING:
    from eval_platform.benchmarks.runner import TaskRun

# An evaluator's judgment of one row: (score, None), or (None, (reason, detail)) when it gave no score.
EvaluatorOutcome = tuple[float, None] | tuple[None, tuple[str, str]]


def judge_config(run: TaskRun) -> EvaluatorConfig:
    assert run.task.as_judge is not None  # called for an `as_judge` task only
    return run.task.as_judge.config(f"{run.suite_name}.{run.task_name}", run.model.model)


def score_rows(run: TaskRun, rows: list[dict]) -> None:
    task = run.task
    judge = judge_config(run) if task.as_judge is not None else None
    pairwise = task.as_judge is not None and task.as_judge.pairwise
    for row in rows:
        if row["status"] != COMPLETED or judge is None:
            continue
        try:
            verdict = parse_reply(judge, row["output"] or "")
        except ParseFailure as failure:
            row["verdict"], row["reason"], row["reason_detail"] = (
                None,
                "no_verdict",
                f"{failure.reason}: {failure.detail}",
            )
            continue
        if pairwise:
            assert verdict.winner is not None  # a parsed pairwise reply names a winner
            row["verdict"] = unswap(verdict.winner) if row["presentation"] == "BA" else verdict.winner
        else:
            assert judge.judge_mode.gold_text is not None  # `_check_judge`: a benchmarked mode, not pairwise, has one
            row["verdict"] = judge.judge_mode.gold_text(verdict)
    if judge is not None and pairwise:
        _link_orders(rows)
    evaluator_values = _evaluator_scores(run, rows)
    options = [registry.SCORERS[spec.name].options(**spec.options) for spec in task.scorers]
    embedded = _embeddings(run, rows, options)
    for i, row in enumerate(rows):
        if row["status"] != COMPLETED:
            continue
        case = _scored_case(row)
        scores = []
        for j, (spec, spec_options) in enumerate(zip(task.scorers, options, strict=True)):
            scorer = registry.SCORERS[spec.name]
            scored = case
            if scorer.calls_model and i in embedded[j]:
                call = embedded[j][i]
                if call is not None:
                    # the call was made (and paid for) whatever came of it
                    unknown = call.cost_usd is None or row["cost_usd"] is None
                    row["cost_usd"] = None if unknown else row["cost_usd"] + call.cost_usd
                    if call.status != COMPLETED:
                        row.update(status=FAILED, reason=embedding_reason(call.reason), reason_detail=call.detail)
                        break
                scored = {**case, EMBEDDINGS: call.verdict if call is not None else []}
            if scorer.calls_evaluator:
                outcome = evaluator_values[spec.options["evaluator"]].get(_row_key(row))
                if outcome is None or outcome[0] is None:
                    code, detail = outcome[1] if outcome else (JUDGE_MISSING, "the judge returned no row")
                    row.update(status=FAILED, reason=judge_reason(code), reason_detail=detail)
                    break
                scores.append({"metric": spec.metric_name, "value": outcome[0]})
                continue
            try:
                value = scorer.score(row["output"] or "", scored, spec_options)
            except registry.NotApplicable:
                scores.append({"metric": spec.metric_name, "value": None})
                continue
            except registry.MissingField as exc:
                row.update(status=FAILED, reason=MISSING_FIELD, reason_detail=str(exc))
                break
            except ValueError as exc:  # the case cannot be scored (e.g. a reference holding no number)
                row.update(status=FAILED, reason=SCORER_ERROR, reason_detail=f"{spec.metric_name}: {exc}")
                break
            scores.append({"metric": spec.metric_name, "value": float(value)})
        else:
            row["scores"] = scores


def _scored_case(row: dict) -> dict:
    """What the scorers read of a row: its case, with the expected output as the dataset wrote it (a JSON list or
    object, never its repr), the judge's verdict and the presentation order."""
    case = {
        **row["_case"],
        "expected_output": expected_value(row["_case"]),
        "verdict": row.get("verdict"),
        "presentation": row["presentation"],
    }
    if "_verdict_other" in row:
        case["verdict_other"] = row["_verdict_other"]
    return case


def _embeddings(run: TaskRun, rows: list[dict], options: list) -> dict[int, dict[int, CallResult | None]]:
    """Scorer position -> row position -> its embedding call (None: nothing to embed), for the scorers that embed:
    every COMPLETED row's texts, embedded concurrently through the one call path. A row whose texts cannot be read
    has no entry: its scorer raises the same error when it scores it."""
    from eval_platform.benchmarks.runner import model_budget  # the runner imports this module

    embedded: dict[int, dict[int, CallResult | None]] = {}
    for j, (spec, spec_options) in enumerate(zip(run.task.scorers, options, strict=True)):
        scorer = registry.SCORERS[spec.name]
        if not scorer.calls_model:
            continue
        assert scorer.embeds is not None  # `Scorer.calls_model`: it embeds
        texts: dict[int, tuple[str, ...]] = {}
        for i, row in enumerate(rows):
            if row["status"] != COMPLETED:
                continue
            case = _scored_case(row)
            if any(case.get(name) is None for name in scorer.needs(spec_options)):
                continue
            try:
                texts[i] = scorer.embeds(row["output"] or "", case, spec_options)
            except ValueError:
                continue
        ttl_s = reservation_ttl_s(spec_options.timeout_s, spec_options.max_retries)
        results, cache_failure = embed_cases(spec_options, list(texts.values()), run.runtime, model_budget(run, ttl_s))
        run.cache_write_failed = cache_failure or run.cache_write_failed
        embedded[j] = dict(zip(texts, results, strict=True))
    return embedded


def _link_orders(rows: list[dict]) -> None:
    by_case: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        if row["status"] == COMPLETED:
            by_case.setdefault((row["case_id"], row["sample"]), {})[row["presentation"]] = row
    for pair in by_case.values():
        if len(pair) == 2:
            pair["AB"]["_verdict_other"], pair["BA"]["_verdict_other"] = pair["BA"]["verdict"], pair["AB"]["verdict"]


def _row_key(row: dict) -> str:
    return f"{row['case_id']}|{row['sample']}|{row['presentation']}"


def _evaluator_scores(run: TaskRun, rows: list[dict]) -> dict[str, dict[str, EvaluatorOutcome]]:
    """Evaluator name -> row key -> (score, None) or (None, (reason, detail)), through `judge_day`."""
    results: dict[str, dict[str, EvaluatorOutcome]] = {}
    completed = [row for row in rows if row["status"] == COMPLETED]
    for spec in run.task.scorers:
        if not registry.SCORERS[spec.name].calls_evaluator or spec.options["evaluator"] in results:
            continue
        name = spec.options["evaluator"]
        config = run.evaluators.get(name)
        if config is None:
            results[name] = {
                _row_key(r): (None, (UNKNOWN_EVALUATOR, f"no evaluator named '{name}'")) for r in completed
            }
            continue
        traces = pl.DataFrame(
            [
                {
                    "trace_id": _row_key(row),
                    "input": row["input"],
                    "output": row["output"],
                    "expected_output": row["expected_output"],
                    "metadata": row["_case"].get("metadata"),
                }
                for row in completed
            ],
            schema={
                "trace_id": pl.String(),
                "input": pl.String(),
                "output": pl.String(),
                "expected_output": pl.String(),
                "metadata": pl.String(),
            },
        )
        day = f"benchmark:{run.suite_name}.{run.task_name}"
        # Every case is judged: the trace selection of an evaluator (trigger, sample_rate, projects) is for
        # production traffic.
        config = config.model_copy(update={"trigger": "all", "enabled": True, "projects": None})
        judged = judge_day(config, day, traces, run.runtime).rows.filter(pl.col("is_final"))
        values: dict[str, EvaluatorOutcome] = {}
        for row in judged.iter_rows(named=True):
            if row["status"] == COMPLETED and row["score"] is not None:
                values[row["trace_id"]] = (float(row["score"]), None)
            else:
                values[row["trace_id"]] = (None, (row["reason"] or row["status"].lower(), row["reason_detail"]))
        results[name] = values
    return results
