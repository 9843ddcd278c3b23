"""The judge sides of `agreement`: judge vs human and judge vs judge, computed from judge_scores rows as the asset
reads them (every column), against the plain definitions (a join on the trace ids, the statistics of the rows)."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from eval_platform.agreement import compute
from eval_platform.agreement.judge_rows import join_slots, keyed, sorted_by_key
from eval_platform.agreement.judge_vs_judge import judge_vs_judge
from eval_platform.agreement.periods import DailyScoreTables, windows
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import (
    HUMAN_ANNOTATION_SCHEMA,
    IMPORTED_JUDGMENT_SCHEMA,
    JUDGE_SCORE_SCHEMA,
    conform,
    empty_frame,
)
from eval_platform.stats.judge_agreement import (
    _average_ranks,
    label_table,
    pairwise_agreement,
    score_agreement,
    score_agreement_by_counts,
    score_agreement_table,
)
from eval_platform.stats.kappa import cohen_kappa, contingency_table

DAYS = [f"2026-10-{d:02d}" for d in range(1, 6)]


def _evaluator(name: str, mode: str, **options) -> EvaluatorConfig:
    extra = {"labels": {"billing": 0.0, "shipping": 1.0}} if mode == "categorical" else {}
    if mode == "score":
        extra = {"score_scale": {"min": 1, "max": 5}}
    prompt = "{{output_a}} {{output_b}}" if mode == "pairwise" else "{{output}}"
    return EvaluatorConfig(name=name, mode=mode, model="openai/x", prompt=prompt, **extra, **options)


def _annotations(task: str, criterion: str, labels: dict[str, list[str]]) -> pl.DataFrame:
    """Each trace's item labelled by as many annotators as it has labels."""
    rows = [
        {
            "task": task,
            "criterion": criterion,
            "schema": "classification",
            "item_id": f"item-{trace}",
            "trace_id": trace,
            "annotator": f"ann-{i}",
            "label": label,
        }
        for trace, given in labels.items()
        for i, label in enumerate(given)
    ]
    return conform(pl.DataFrame(rows), HUMAN_ANNOTATION_SCHEMA)


def _scores(evaluator: str, rows: list[dict]) -> pl.DataFrame:
    """judge_scores rows with every column (as the asset reads them): final, completed unless said otherwise."""
    base = {
        "evaluator": evaluator,
        "date": DAYS[0],
        "is_final": True,
        "status": "COMPLETED",
        "role": "verdict",
        "sample": 0,
    }
    return conform(pl.DataFrame([{**base, **row} for row in rows], infer_schema_length=None), JUDGE_SCORE_SCHEMA)


def _statistic(rows: pl.DataFrame, subject: str, statistic: str, period: str = "all") -> tuple[float | None, int]:
    row = rows.filter(
        (pl.col("subject") == subject)
        & (pl.col("statistic") == statistic)
        & (pl.col("period") == period)
        & (pl.col("section") == "judge_vs_human")
    ).row(0, named=True)
    return row["value"], row["n"]


def test_binary_and_categorical_judges_are_compared_with_the_human_majority_not_with_themselves():
    # judge_scores has a `label` column of its own (null for a binary judge): the human majority must not be
    # read from it, which left a binary judge with no item and gave a categorical judge a kappa of 1
    humans = pl.concat(
        [
            _annotations(
                "correctness",
                "correct",
                {
                    "t1": ["true"] * 3,
                    "t2": ["false"] * 3,
                    "t3": ["true", "true", "false"],
                    "t4": ["false", "false", "true"],
                },
            ),
            _annotations(
                "topic",
                "topic",
                {"t1": ["billing"] * 2, "t2": ["shipping"] * 2, "t3": ["billing"] * 2, "t4": ["shipping"] * 2},
            ),
        ]
    )
    evaluators = {
        "correct": _evaluator("correct", "binary", human_agreement={"task": "correctness", "criterion": "correct"}),
        "topic": _evaluator("topic", "categorical", human_agreement={"task": "topic", "criterion": "topic"}),
    }
    scores = pl.concat(
        [
            _scores(
                "correct",
                [{"trace_id": t, "passed": p} for t, p in [("t1", True), ("t2", True), ("t3", True), ("t4", False)]],
            ),
            _scores(
                "topic",
                [
                    {"trace_id": t, "label": label}
                    for t, label in [("t1", "billing"), ("t2", "billing"), ("t3", "shipping"), ("t4", "shipping")]
                ],
            ),
        ]
    )
    rows, _ = compute(evaluators, scores.lazy(), humans, empty_frame(IMPORTED_JUDGMENT_SCHEMA))
    assert _statistic(rows, "correct", "accuracy") == (0.75, 4)  # wrong on t2 only
    assert _statistic(rows, "topic", "accuracy") == (0.5, 4)  # wrong on t2 and t3
    assert _statistic(rows, "topic", "cohen_kappa") == (0.0, 4)


# ------------------------------------------------------------------------------------------ judge vs judge


def _plain_judge_vs_judge(evaluators: dict[str, EvaluatorConfig], scores: pl.DataFrame) -> list[dict]:
    """The definition: members pivoted wide on their model (first verdict of a slot), evaluators of a mode joined
    on the two trace ids (nulls equal), statistics of the joined rows."""
    slot = ["trace_id", "trace_id_b"]
    out = []

    def compare(mode, a, b, subject, reference):
        if mode in ("score",):
            r = score_agreement(a, b)
            out.extend(
                [
                    (subject, reference, "spearman", r.spearman, r.n),
                    (subject, reference, "pearson", r.pearson, r.n),
                    (subject, reference, "mae", r.mae, r.n),
                ]
            )
            return
        kappa = cohen_kappa(a.cast(pl.String), b.cast(pl.String))
        out.append((subject, reference, "cohen_kappa", kappa.value, kappa.n))
        if mode == "pairwise":
            s = pairwise_agreement(a, b)
            out.extend(
                [
                    (subject, reference, "agreement_with_ties_s1", s.with_ties, s.n_with_ties),
                    (subject, reference, "agreement_without_ties_s2", s.without_ties, s.n_without_ties),
                ]
            )

    column = {"score": "score", "binary": "passed", "categorical": "label", "pairwise": "winner"}
    completed = scores.filter(pl.col("status") == "COMPLETED")
    for name, config in evaluators.items():
        part = completed.filter((pl.col("evaluator") == name) & (pl.col("role") == "member") & (pl.col("sample") == 0))
        if part.is_empty():
            continue
        values = "raw_score" if config.mode == "score" else column[config.mode]
        wide = part.pivot(on="model", index=slot, values=values, aggregate_function="first")
        for a, b in itertools.combinations(sorted(c for c in wide.columns if c not in slot), 2):
            compare(config.mode, wide[a], wide[b], f"{name}:{a}", f"{name}:{b}")
    final = completed.filter(pl.col("is_final"))
    for (a, ca), (b, cb) in itertools.combinations(sorted(evaluators.items()), 2):
        if ca.mode != cb.mode:
            continue
        left = final.filter(pl.col("evaluator") == a).select(*slot, pl.col(column[ca.mode]).alias("a"))
        right = final.filter(pl.col("evaluator") == b).select(*slot, pl.col(column[ca.mode]).alias("b"))
        both = left.join(right, on=slot, nulls_equal=True)
        if both.height:
            compare(ca.mode, both["a"], both["b"], a, b)
    return out


def _random_scores(rng: np.random.Generator) -> tuple[dict[str, EvaluatorConfig], pl.DataFrame]:
    """Evaluators of four modes judging overlapping slots, with FAILED rows, missing verdicts, slots judged twice,
    a consensus whose members vote twice on some slots, and pairs (trace_id_b) beside single traces."""
    evaluators = {
        name: _evaluator(name, mode)
        for name, mode in [
            ("s1", "score"),
            ("s2", "score"),
            ("s3", "score"),
            ("b1", "binary"),
            ("b2", "binary"),
            ("c1", "categorical"),
            ("c2", "categorical"),
            ("p1", "pairwise"),
            ("p2", "pairwise"),
        ]
    }
    traces = [f"tr-{i:04d}" for i in range(60)]
    rows = []
    for name, config in evaluators.items():
        for _ in range(int(rng.integers(30, 70))):
            at = int(rng.integers(0, 15 if config.mode == "pairwise" else len(traces)))
            trace, b = traces[at], traces[at + 1] if config.mode == "pairwise" else None
            status = "FAILED" if rng.random() < 0.1 else "COMPLETED"
            value = {
                "score": {"score": float(rng.integers(1, 6)) if rng.random() > 0.05 else None},
                "binary": {"passed": bool(rng.random() < 0.6) if rng.random() > 0.05 else None},
                "categorical": {"label": ["billing", "shipping"][rng.integers(0, 2)]},
                "pairwise": {"winner": ["A", "B", "tie"][rng.integers(0, 3)]},
            }[config.mode]
            rows.append({"evaluator": name, "trace_id": trace, "trace_id_b": b, "status": status, **value})
            if name == "s1" and status == "COMPLETED":  # a consensus: three member models, sometimes twice, two samples
                for model in ("m-a", "m-b", "m-c"):
                    for sample in (0, 1):
                        for _ in range(1 + (rng.random() < 0.2)):
                            raw = float(rng.integers(1, 6)) if rng.random() > 0.1 else None
                            rows.append(
                                {
                                    "evaluator": name,
                                    "trace_id": trace,
                                    "trace_id_b": None,
                                    "role": "member",
                                    "is_final": False,
                                    "model": model,
                                    "sample": sample,
                                    "raw_score": raw,
                                    "status": "COMPLETED" if rng.random() > 0.1 else "FAILED",
                                }
                            )
    frame = pl.concat([_scores(r["evaluator"], [r]) for r in rows])
    return evaluators, frame


@pytest.mark.parametrize("seed", range(6))
def test_judge_vs_judge_equals_the_join_on_trace_ids(seed):
    evaluators, scores = _random_scores(np.random.default_rng(seed))
    rows = Rows([])
    judge_vs_judge(evaluators, scores.lazy(), rows)
    ours = [(r["subject"], r["reference"], r["statistic"], r["value"], r["n"]) for r in rows.out]
    plain = _plain_judge_vs_judge(evaluators, scores)
    assert [row[:3] + row[4:] for row in ours] == [row[:3] + row[4:] for row in plain]  # same rows, same n
    for (*_, value, _), (*_, expected, _) in zip(ours, plain, strict=True):
        assert (value is None and expected is None) or value == pytest.approx(expected, abs=1e-12)
    assert any(r[0] == "s1:m-a" for r in ours) and any(r[0] == "p1" for r in ours)


def test_slots_sharing_a_key_are_not_joined():
    # two different slots given the same key (as a hash collision would): only equal trace ids match
    left = pl.DataFrame(
        {"key": [7, 7, 9], "trace_id": ["a", "b", "c"], "trace_id_b": [None, "x", None], "v": [1.0, 2.0, 3.0]},
        schema_overrides={"key": pl.UInt64, "trace_id_b": pl.String},
    )
    right = pl.DataFrame(
        {"key": [7, 7, 9], "trace_id": ["b", "a", "c"], "trace_id_b": ["x", "z", None], "v": [10.0, 20.0, 30.0]},
        schema_overrides={"key": pl.UInt64},
    )
    joined = join_slots(sorted_by_key(left), sorted_by_key(right)).sort("a")
    assert joined.rows() == [(2.0, 10.0), (3.0, 30.0)]


def test_sorting_by_key_keeps_every_row_with_its_slot():
    frame = pl.DataFrame(
        {
            "trace_id": [f"t{i % 7}" for i in range(50)],
            "trace_id_b": [None if i % 3 else f"u{i}" for i in range(50)],
            "score": [float(i) for i in range(50)],
        },
        schema_overrides={"trace_id_b": pl.String},
    )
    with_keys = keyed(frame.lazy(), "score").collect()
    ordered = sorted_by_key(with_keys)
    assert ordered["key"].is_sorted()
    assert sorted(ordered.select("trace_id", "trace_id_b", "v").rows(), key=str) == sorted(
        with_keys.select("trace_id", "trace_id_b", "v").rows(), key=str
    )


# ------------------------------------------------------------------------------------------ statistics from counts


@pytest.mark.parametrize(
    "values",
    [
        [3.0, 1.0, 2.0, 2.0, 5.0, 1.0, 1.0],
        [0.0, -0.0, 1.0, -0.0, 0.5],
        [4.0],
        list(np.random.default_rng(0).normal(size=5000)),  # many distinct values: polars' rank
        list(np.random.default_rng(1).integers(0, 4, 5000).astype(float)),
    ],
)
def test_average_ranks_equal_polars_average_rank(values):
    x = np.array(values)
    assert np.array_equal(_average_ranks(x), pl.Series(x).rank("average").to_numpy())


@pytest.mark.parametrize("seed", range(6))
def test_label_table_equals_the_contingency_table_of_the_texts(seed):
    rng = np.random.default_rng(seed)
    n = 300
    for choices in ([True, False, None], ["B", "A", "tie", None, "garbage"]):
        a = pl.Series([choices[i] for i in rng.integers(0, len(choices), n)])
        b = pl.Series([choices[i] for i in rng.integers(0, len(choices) - (seed % 2), n)])
        table, categories = label_table(a, b)
        expected, expected_categories = contingency_table(a.cast(pl.String), b.cast(pl.String))
        assert categories == expected_categories and np.array_equal(table, expected)


def _score_frame(seed: int, levels: int, n: int = 400) -> pl.DataFrame:
    """Human mean ratings and judge scores over five days (one day without rows), missing values on both sides,
    some rows without a date."""
    rng = np.random.default_rng(seed)
    human = rng.integers(1, levels + 1, n) / 2
    judge = np.where(rng.random(n) < 0.7, human, rng.integers(1, levels + 1, n) / 2)
    return pl.DataFrame(
        {
            "date": [DAYS[i] if i < len(DAYS) - 1 else None for i in rng.integers(0, len(DAYS), n)],
            "human": np.where(rng.random(n) < 0.05, np.nan, human),
            "judge": [None if rng.random() < 0.05 else float(v) for v in judge],
        }
    )


@pytest.mark.parametrize("seed", range(6))
def test_score_statistics_per_window_equal_those_of_the_windows_rows(seed):
    frame = _score_frame(seed, levels=3 + seed)
    tables = DailyScoreTables(frame)
    assert tables.fits
    for _, start, end in windows(DAYS[:-1], 2):
        part = frame if start is None else frame.filter(pl.col("date").is_between(pl.lit(start), pl.lit(end)))
        ours, plain = tables.agreement(start, end), score_agreement(part["human"], part["judge"])
        assert (ours.n, ours.note) == (plain.n, plain.note)
        for field in ("spearman", "pearson", "mae"):
            assert getattr(ours, field) == pytest.approx(getattr(plain, field), abs=1e-12)


@pytest.mark.parametrize(
    "pairs",
    [
        [],  # no item
        [(3.0, 4.0)],  # one item: no correlation
        [(1.0, 2.0), (2.0, 1.0)],  # two items: exactly -1
        [(1.0, 2.0), (2.0, 3.0), (3.0, 3.0)],
        [(2.0, 1.0), (2.0, 5.0), (2.0, 3.0)],  # constant human side
    ],
)
def test_score_table_of_a_few_items_equals_the_items_statistics(pairs):
    frame = pl.DataFrame(
        {"date": [DAYS[0]] * len(pairs), "human": [p[0] for p in pairs], "judge": [p[1] for p in pairs]},
        schema={"date": pl.String, "human": pl.Float64, "judge": pl.Float64},
    )
    ours, plain = DailyScoreTables(frame).agreement(DAYS[0], DAYS[0]), score_agreement(frame["human"], frame["judge"])
    assert (ours.n, ours.note) == (plain.n, plain.note)
    for field in ("spearman", "pearson", "mae"):
        assert getattr(ours, field) == pytest.approx(getattr(plain, field), abs=1e-12)
    if len(pairs) == 2:
        assert ours.spearman == ours.pearson == -1.0
    assert score_agreement_table(np.zeros((0, 0), dtype=np.int64), np.array([]), np.array([])).n == 0


@pytest.mark.parametrize("seed", range(4))
def test_score_agreement_by_counts_equals_that_of_the_items(seed):
    rng = np.random.default_rng(seed)
    n = 500
    for distinct in (3, 40, 100_000):  # the last: too many values for a table, ranked from the items
        a = pl.Series([None if rng.random() < 0.05 else float(v) for v in rng.integers(0, distinct, n)])
        b = pl.Series(np.where(rng.random(n) < 0.03, np.nan, rng.integers(0, distinct, n) / 2))
        ours, plain = score_agreement_by_counts(a, b), score_agreement(a, b)
        assert (ours.n, ours.note) == (plain.n, plain.note)
        for field in ("spearman", "pearson", "mae"):
            assert getattr(ours, field) == pytest.approx(getattr(plain, field), abs=1e-12)
