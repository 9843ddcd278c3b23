"""`judge_vs_judge`: the member models of a consensus against each other, evaluators of one mode on the same
slots, and pairwise evaluators against the imported judges of their task."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from eval_platform.agreement.humans import human_reference
from eval_platform.agreement.judge_rows import (
    JudgeVerdicts,
    ScoreSource,
    join_slots,
    read_evaluator,
)
from eval_platform.agreement.judge_vs_human import (
    evaluator_pairwise_labels,
    imported_pairwise_labels,
    pairwise_human_labels,
)
from eval_platform.agreement.out_of_core import OutOfCoreScores
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes import AgreementKind
from eval_platform.stats.judge_agreement import (
    MAX_TABLE_CELLS,
    label_table,
    pairwise_agreement,
    pairwise_agreement_counts,
    score_agreement,
    score_agreement_by_counts,
    score_agreement_table,
)
from eval_platform.stats.kappa import cohen_kappa_table


def judge_vs_judge(
    evaluators: dict[str, EvaluatorConfig],
    scores: ScoreSource | OutOfCoreScores | None,
    rows: Rows,
    verdicts: dict[str, JudgeVerdicts] | None = None,
) -> None:
    """Members of a consensus evaluator against each other, and same-mode evaluators on the same slots.

    `verdicts`: each evaluator's `JudgeVerdicts` when `compute` has them from reading its rows for the other
    sections; otherwise each evaluator is read from `scores` once. Out of core (`OutOfCoreScores`), DuckDB counts
    each pair of verdicts instead (`compare_counts`)."""
    if isinstance(scores, OutOfCoreScores):
        _judge_vs_judge_out_of_core(evaluators, scores, rows)
        return
    if verdicts is None:
        if scores is None:
            if evaluators:
                raise ValueError("judge_vs_judge needs the evaluators' verdicts or their rows (scores)")
            return  # nothing to compare
        verdicts = {
            name: JudgeVerdicts.of(c.mode, read_evaluator(scores, name, c.mode)) for name, c in evaluators.items()
        }
    for name, config in evaluators.items():
        members = verdicts[name].members
        for a, b in itertools.combinations(sorted(members), 2):
            both = join_slots(members[a], members[b])
            compare(
                config.judge_mode.agreement,
                both["a"],
                both["b"],
                rows,
                {"section": "judge_vs_judge", "subject": f"{name}:{a}", "reference": f"{name}:{b}", "period": "all"},
            )
    for (a, ca), (b, cb) in itertools.combinations(sorted(evaluators.items()), 2):
        if ca.mode != cb.mode:
            continue
        both = join_slots(verdicts[a].final, verdicts[b].final)
        if both.height:
            compare(
                ca.judge_mode.agreement,
                both["a"],
                both["b"],
                rows,
                {"section": "judge_vs_judge", "subject": a, "reference": b, "period": "all"},
            )


def _judge_vs_judge_out_of_core(evaluators: dict[str, EvaluatorConfig], scores: OutOfCoreScores, rows: Rows) -> None:
    """`judge_vs_judge` from count tables of verdict pairs: the same rows, in the same order."""
    for name, config in evaluators.items():
        members = scores.members(name, config.mode) if name in scores else {}
        for a, b in itertools.combinations(sorted(members), 2):
            compare_counts(
                config.judge_mode.agreement,
                scores.verdict_pairs(members[a], members[b]),
                rows,
                {"section": "judge_vs_judge", "subject": f"{name}:{a}", "reference": f"{name}:{b}", "period": "all"},
            )
    for (a, ca), (b, cb) in itertools.combinations(sorted(evaluators.items()), 2):
        if ca.mode != cb.mode or a not in scores or b not in scores:
            continue
        table = scores.verdict_pairs(scores.final_verdicts(a, ca.mode), scores.final_verdicts(b, cb.mode))
        if table["n"].sum():
            compare_counts(
                ca.judge_mode.agreement,
                table,
                rows,
                {"section": "judge_vs_judge", "subject": a, "reference": b, "period": "all"},
            )


def compare_counts(kind: AgreementKind, table: pl.DataFrame, rows: Rows, fields: dict) -> None:
    """`compare` on verdict pairs given as counts: (a, b, n) is n slots where one judge said a and the other b
    (nulls included, as `compare`'s inputs have them). The same statistics from the same counts."""
    if kind == "scores":
        both = table.drop_nulls(["a", "b"]).with_columns(pl.col("a", "b").cast(pl.Float64))
        x_values, y_values = (np.sort(both[c].unique().to_numpy()) for c in ("a", "b"))
        if x_values.size * y_values.size > MAX_TABLE_CELLS:  # as score_agreement_by_counts: from the items
            counts = both["n"].to_numpy()
            result = score_agreement(*(pl.Series(np.repeat(both[c].to_numpy(), counts)) for c in ("a", "b")))
        else:
            grid = np.zeros((x_values.size, y_values.size), dtype=np.int64)
            x, y = np.searchsorted(x_values, both["a"].to_numpy()), np.searchsorted(y_values, both["b"].to_numpy())
            np.add.at(grid, (x, y), both["n"].to_numpy())
            result = score_agreement_table(grid, x_values, y_values)
        rows.add("spearman", result.spearman, result.n, note=result.note, **fields)
        rows.add("pearson", result.pearson, result.n, note=result.note, **fields)
        rows.add("mae", result.mae, result.n, note=result.note, **fields)
        return
    # label_table's categories: the texts seen on either side, even beside a missing verdict
    text = table.with_columns(pl.col("a", "b").cast(pl.String))
    seen = pl.concat([text["a"].drop_nulls(), text["b"].drop_nulls()]).unique().sort().to_list()
    position = {label: i for i, label in enumerate(seen)}
    grid = np.zeros((len(seen), len(seen)), dtype=np.int64)
    for a, b, n in text.drop_nulls(["a", "b"]).iter_rows():
        grid[position[a], position[b]] += n
    kappa = cohen_kappa_table(grid)
    rows.add("cohen_kappa", kappa.value, kappa.n, note=kappa.note, **fields)
    if kind == "preference":
        decisive = [i for i, label in enumerate(seen) if label != "tie"]
        kept = grid[np.ix_(decisive, decisive)]
        s = pairwise_agreement_counts(int(grid.sum()), int(np.trace(grid)), int(kept.sum()), int(np.trace(kept)))
        rows.add("agreement_with_ties_s1", s.with_ties, s.n_with_ties, note=s.note, **fields)
        rows.add("agreement_without_ties_s2", s.without_ties, s.n_without_ties, note=s.note, **fields)


def compare(kind: AgreementKind, a: pl.Series, b: pl.Series, rows: Rows, fields: dict) -> None:
    """Two judges' verdicts on the same slots: correlations of scores, kappa of labels, and for preferences
    MT-Bench's agreement with and without ties too."""
    if kind == "scores":
        result = score_agreement_by_counts(a, b)
        rows.add("spearman", result.spearman, result.n, note=result.note, **fields)
        rows.add("pearson", result.pearson, result.n, note=result.note, **fields)
        rows.add("mae", result.mae, result.n, note=result.note, **fields)
        return
    kappa = cohen_kappa_table(label_table(a, b)[0])  # = cohen_kappa(a.cast(pl.String), b.cast(pl.String))
    rows.add("cohen_kappa", kappa.value, kappa.n, note=kappa.note, **fields)
    if kind == "preference":
        s = pairwise_agreement(a, b)
        rows.add("agreement_with_ties_s1", s.with_ties, s.n_with_ties, note=s.note, **fields)
        rows.add("agreement_without_ties_s2", s.without_ties, s.n_without_ties, note=s.note, **fields)


def imported_vs_evaluators(
    evaluators: dict[str, EvaluatorConfig],
    scores: ScoreSource | OutOfCoreScores,
    judgments: pl.DataFrame,
    annotations: pl.DataFrame | pl.LazyFrame,
    rows: Rows,
    cache: dict | None = None,
) -> None:
    """Each pairwise evaluator with a human task against each imported judge of that task (its item labels from
    `cache` when `judge_vs_human` computed them, else from its rows in `scores`)."""
    cache = {} if cache is None else cache
    for name, config in evaluators.items():
        options = config.human_agreement
        if config.judge_mode.agreement != "preference" or options is None:
            continue
        reference = pairwise_human_labels(human_reference(annotations, options.task, options.criterion, cache))
        ours = cache.get(("pairwise_labels", name))
        if ours is None:
            if isinstance(scores, OutOfCoreScores):  # the rows of the reference's pairs, as the join keeps
                sides = pl.concat([reference["response1_trace_id"], reference["response2_trace_id"]])
                final = scores.rows_meeting(name, config.mode, sides).filter(pl.col("is_final"))
            else:
                final = read_evaluator(scores, name, config.mode).filter(pl.col("is_final"))
            ours = evaluator_pairwise_labels(final, reference)
        for source, part in judgments.group_by("source", maintain_order=True):
            theirs = imported_pairwise_labels(part, reference).select("item_id", theirs="judge")
            both = ours.join(theirs, on="item_id")
            compare(
                "preference",
                both["judge"],
                both["theirs"],
                rows,
                {
                    "section": "judge_vs_judge",
                    "task": options.task,
                    "subject": name,
                    "reference": source[0],
                    "period": "all",
                    "convention": "failed_excluded",
                },
            )
