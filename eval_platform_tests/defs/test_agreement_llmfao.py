"""LLMFAO's published rank correlations between crowd, GPT-4 and GPT-3 come out of the `agreement` view when
the votes go in as a labelling tool's export and the judges' verdicts as judgment exports.

The conversion below is the export step: one crowd vote per annotation row (task `llmfao`, criterion
`preference`, annotator = the worker, item = the comparison id, label left | right | tie, and the two
compared models as `candidate_a` = left and `candidate_b` = right, which the ingest keeps in `metadata`);
one judge verdict per judgment row. The GPT-3 export names no candidates: its verdicts take the models of
the annotated item with the same id. The published method (data/sources/llmfao/PROVENANCE.md): Bradley–Terry
on each source's votes, rank the models, Pearson correlation of the ranks; the `agreement` asset writes it
as `section = 'ranking'`, `statistic = 'bradley_terry_rank_pearson'`. Tolerance 5e-7: the six printed
decimals, as in eval_platform_tests/stats/test_llmfao.py. Two GPT-3 strengths are exactly equal (Claude v1 and
Jurassic 2 Ultra); only giving both the best rank of the two reproduces the GPT-3 figures (average ranks,
i.e. `bradley_terry_spearman`, give 0.715703 against the humans).
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA

LLMFAO = REPO_DATA / "sources" / "llmfao"
TASKS = {
    "tasks": {"llmfao": {"criteria": {"preference": {"schema": "classification", "labels": ["left", "right", "tie"]}}}}
}
# (subject, reference) as the asset writes them: each judge against the humans, then judges in name order
PUBLISHED_RANK_CORRELATION = {
    ("gpt-4", "human_votes"): 0.730918,
    ("gpt-3", "human_votes"): 0.716610,
    ("gpt-3", "gpt-4"): 0.717136,
}
PUBLISHED_HUMAN_TOP = [("GPT 4", 0.041215), ("Platypus-2 Instruct (70B)", 0.029233)]


def export_llmfao(root: Path) -> pl.DataFrame:
    """The crowd votes as an annotation export and GPT-4 / GPT-3 verdicts as judgment exports (CSV)."""
    crowd = pl.read_csv(LLMFAO / "crowd-comparisons.csv")
    (root / "annotations").mkdir(parents=True)
    (root / "annotations" / "tasks.yaml").write_text(yaml.safe_dump(TASKS))
    crowd.select(
        pl.lit("llmfao").alias("task"),
        pl.col("id").alias("item_id"),
        pl.format("worker-{}", "worker").alias("annotator"),
        pl.lit("preference").alias("criterion"),
        pl.col("winner").alias("label"),
        pl.col("left").alias("candidate_a"),
        pl.col("right").alias("candidate_b"),
    ).write_csv(root / "annotations" / "llmfao_crowd.csv")
    (root / "judgments").mkdir()
    for source, file_name, candidates in (
        ("gpt-4", "gpt4-crowd-comparisons.csv", True),
        ("gpt-3", "gpt3-crowd-comparisons.csv", False),
    ):
        verdicts = pl.read_csv(LLMFAO / file_name)
        named = [pl.col("left").alias("candidate_a"), pl.col("right").alias("candidate_b")] if candidates else []
        verdicts.select(
            pl.lit(source).alias("source"),
            pl.lit("llmfao").alias("task"),
            pl.lit("preference").alias("criterion"),
            pl.col("id").alias("item_id"),
            pl.col("winner").alias("verdict"),
            *named,
        ).write_csv(root / "judgments" / f"llmfao_{source}.csv")
    return crowd


@pytest.fixture(scope="module")
def llmfao(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llmfao")
    root = tmp / "data"
    (root / "evaluators").mkdir(parents=True)
    crowd = export_llmfao(root)
    (tmp / "dagster_home").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
        defs = build_definitions(root)
        with dg.instance_for_test(temp_dir=str(tmp / "dagster_home")) as instance:
            result = dg.materialize(
                assets=list(defs.assets),
                selection=["human_annotations", "imported_judgments", "agreement"],
                instance=instance,
                resources=defs.resources,
            )
            assert result.success
    return root, crowd


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def ranking(root: Path, subject: str, reference: str, statistic: str = "bradley_terry_rank_pearson") -> tuple:
    rows = query(
        root,
        "SELECT value, n, note, details FROM agreement WHERE section = 'ranking' AND task = 'llmfao' "
        "AND criterion = 'preference' AND period = 'all' AND statistic = ? AND subject = ? AND reference = ?",
        [statistic, subject, reference],
    )
    assert len(rows) == 1, rows
    return rows[0]


def test_every_vote_and_verdict_is_loaded(llmfao):
    root, _ = llmfao
    loaded = query(
        root,
        "SELECT (SELECT count(*) FROM human_annotations), (SELECT count(*) FROM imported_judgments), "
        "(SELECT count(*) FROM quarantine)",
    )
    assert loaded == [(8931, 2 * 2139, 0)]


@pytest.mark.parametrize(("subject", "reference"), PUBLISHED_RANK_CORRELATION)
def test_published_rank_correlation_from_the_agreement_view(llmfao, subject, reference):
    root, _ = llmfao
    value, n, note, _ = ranking(root, subject, reference)
    assert n == 59 and note is None
    assert value == pytest.approx(PUBLISHED_RANK_CORRELATION[(subject, reference)], abs=5e-7)


def test_details_hold_both_rankings(llmfao):
    root, _ = llmfao
    _, _, _, details = ranking(root, "gpt-4", "human_votes")
    rankings = json.loads(details)
    humans = rankings["reference"]
    # converged strengths; the notebook's evalica stopped a little earlier (see the stats test): 5e-6
    assert [m["model"] for m in humans[:2]] == [model for model, _ in PUBLISHED_HUMAN_TOP]
    assert [m["score"] for m in humans[:2]] == pytest.approx([score for _, score in PUBLISHED_HUMAN_TOP], abs=5e-6)
    assert sum(m["comparisons"] for m in humans) == 2 * 8931  # every crowd vote counts, on both sides
    assert rankings["subject"][0]["model"] == "GPT 3.5 Turbo"


def test_spearman_equals_the_rank_pearson_when_no_strength_is_tied(llmfao):
    """GPT-4's strengths are all distinct, so Spearman is the published Pearson-on-ranks."""
    root, _ = llmfao
    spearman = ranking(root, "gpt-4", "human_votes", "bradley_terry_spearman")[0]
    assert spearman == pytest.approx(ranking(root, "gpt-4", "human_votes")[0], abs=1e-12)


def test_left_right_verdicts_are_compared_with_the_crowd_majority(llmfao):
    """Item-level agreement (not published): each judge against the crowd's majority of left/right/tie."""
    root, crowd = llmfao
    counts = crowd.group_by("id", "winner").len()
    top = counts.filter(pl.col("len") == pl.col("len").max().over("id"))
    with_majority = top.group_by("id").len().filter(pl.col("len") == 1).height  # a unique most-voted label
    rows = query(
        root,
        "SELECT subject, n FROM agreement WHERE section = 'judge_vs_human' AND task = 'llmfao' "
        "AND statistic = 'accuracy' AND convention = 'failed_excluded' ORDER BY subject",
    )
    assert rows == [("gpt-3", with_majority), ("gpt-4", with_majority)]
