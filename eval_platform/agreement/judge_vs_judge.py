"""`judge_vs_judge`: the member models of a consensus against each other, evaluators of one mode on the same
slots, and pairwise evaluators against the imported judges of their task."""

from __future__ import annotations

import itertools

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
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes import AgreementKind
from eval_platform.stats.judge_agreement import (
    label_table,
    pairwise_agreement,
    score_agreement_by_counts,
)
from eval_platform.stats.kappa import cohen_kappa_table


def judge_vs_judge(
    evaluators: dict[str, EvaluatorConfig],
    scores: ScoreSource | None,
    rows: Rows,
    verdicts: dict[str, JudgeVerdicts] | None = None,
) -> None:
    """Members of a consensus evaluator against each other, and same-mode evaluators on the same slots.

    `verdicts`: each evaluator's `JudgeVerdicts` when `compute` has them from reading its rows for the other
    sections; otherwise each evaluator is read from `scores` once."""
    if verdicts is None:
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
    scores: ScoreSource,
    judgments: pl.DataFrame,
    annotations: pl.DataFrame,
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
