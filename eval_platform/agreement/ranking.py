"""`ranking`: Bradley–Terry rankings of the compared models from human votes and from each imported judge."""

from __future__ import annotations

import itertools
import json

import polars as pl

from eval_platform.agreement.humans import only_task
from eval_platform.agreement.rows import Rows
from eval_platform.stats.judge_agreement import preference_labels, score_agreement
from eval_platform.stats.ranking import BradleyTerry, bradley_terry

HUMAN_VOTES = "human_votes"
CANDIDATE_FIELDS = ("candidate_a", "candidate_b")  # metadata naming the compared models: A (left, first) and B


def _named_comparisons(frame: pl.DataFrame, verdict: str) -> pl.DataFrame:
    """The rows with `a`, `b` (the candidates their metadata names, else null) and `winner` (left | right |
    tie for A | B | tie; null when unusable), the terms `bradley_terry` takes."""
    side = preference_labels(frame[verdict]).replace_strict({"A": "left", "B": "right", "tie": "tie"}, default=None)
    return frame.with_columns(
        pl.col("metadata").str.json_path_match(f"$.{CANDIDATE_FIELDS[0]}").alias("a"),
        pl.col("metadata").str.json_path_match(f"$.{CANDIDATE_FIELDS[1]}").alias("b"),
        side.alias("winner"),
    )


def ranking_agreement(annotations: pl.DataFrame | pl.LazyFrame, judgments: pl.DataFrame, rows: Rows) -> None:
    """`ranking` rows: do an imported judge and the humans rank the compared models alike?

    For a pairwise task whose annotations name the two candidates in their metadata (`candidate_a`, shown
    left or first, and `candidate_b`), Bradley–Terry strengths are fitted on every human vote (each
    annotator's vote is one comparison; a tie is half a win for each side) and on each imported judge's
    verdicts on the task (a judgment that does not name the candidates takes those of its item; an unusable
    verdict is left out). Over the models both rankings have (`n`): `bradley_terry_rank_pearson`, the Pearson
    correlation of the two rank vectors, equal strengths sharing the best rank (LLMFAO's published method and
    tie handling), and `bradley_terry_spearman`, Spearman's correlation of the strengths (average ranks).
    Subject: the judge (source); reference: `human_votes`, or another judge of the same task; `details`: both
    rankings (model, score, rank, comparisons). A task and criterion are matched as in `imported_vs_human`.
    """
    # most annotations name no candidates: a substring test spares parsing their metadata
    named = annotations.lazy().filter(pl.col("metadata").str.contains(CANDIDATE_FIELDS[0], literal=True)).collect()
    votes = _named_comparisons(named, "label").filter(pl.col("a").is_not_null() & pl.col("b").is_not_null())
    if votes.is_empty():
        return
    judged = _named_comparisons(judgments, "verdict")
    fitted: dict[tuple, dict[str, BradleyTerry]] = {}
    for (source, task, criterion), part in judged.group_by("source", "task", "criterion", maintain_order=True):
        task = task or only_task(annotations)
        humans = votes.filter(pl.col("task") == task)
        if criterion is not None:
            humans = humans.filter(pl.col("criterion") == criterion)
        if humans.is_empty():
            continue
        if (task, criterion) not in fitted:
            fitted[task, criterion] = {HUMAN_VOTES: bradley_terry(humans["a"], humans["b"], humans["winner"])}
        fits = fitted[task, criterion]
        items = humans.group_by("item_id").agg(pl.col("a").first().alias("item_a"), pl.col("b").first().alias("item_b"))
        part = part.join(items, on="item_id", how="left").with_columns(
            pl.coalesce("a", "item_a").alias("a"), pl.coalesce("b", "item_b").alias("b")
        )
        fits[source] = bradley_terry(part["a"], part["b"], part["winner"])
    for (task, criterion), fits in fitted.items():
        base = {"section": "ranking", "task": task, "criterion": criterion, "period": "all"}
        judges = sorted(name for name in fits if name != HUMAN_VOTES)
        pairs = [(judge, HUMAN_VOTES) for judge in judges] + list(itertools.combinations(judges, 2))
        for subject, reference in pairs:
            _rank_correlation(
                fits[subject], fits[reference], rows, {**base, "subject": subject, "reference": reference}
            )


def _rank_correlation(subject: BradleyTerry, reference: BradleyTerry, rows: Rows, fields: dict) -> None:
    both = subject.table.join(reference.table, on="model", suffix="_reference")
    ranks = score_agreement(both["rank_reference"], both["rank"])
    strengths = score_agreement(both["score_reference"], both["score"])
    fit_notes = [
        f"{side} fit: {fit.note}" for side, fit in (("subject", subject), ("reference", reference)) if fit.note
    ]
    details = json.dumps({"subject": subject.table.to_dicts(), "reference": reference.table.to_dicts()})
    for statistic, value, result in (
        ("bradley_terry_rank_pearson", ranks.pearson, ranks),
        ("bradley_terry_spearman", strengths.spearman, strengths),
    ):
        note = "; ".join(n for n in [result.note, *fit_notes] if n) or None
        rows.add(statistic, value, result.n, note=note, details=details, **fields)
