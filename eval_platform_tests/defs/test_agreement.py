"""The `agreement` asset reproduces PandaLM's published figures from raw data, twice: from the imported
verdicts, and from `judge_scores` produced by replaying the recorded GPT-3.5 verdicts over real HTTP."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA, copy_sample_days, write_evaluator

DAYS = [f"2026-11-{d:02d}" for d in range(9, 16)]
GPT = "gpt-3.5-turbo (PandaLM study)"


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def materialize(defs, instance, asset: str, partition=None) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
    )
    assert result.success
    return result


@pytest.fixture(scope="module")
def pandalm(tmp_path_factory, local_judge):
    """All seven sample days judged by the replayed GPT-3.5 over HTTP, then `agreement` materialized."""
    tmp = tmp_path_factory.mktemp("pandalm")
    root = tmp / "data"
    copy_sample_days(root, DAYS)
    for folder in ("annotations", "judgments"):
        shutil.copytree(REPO_DATA / folder, root / folder)
    (root / "evaluators").mkdir()
    source = REPO_DATA / "evaluators" / "pairwise_preference.yaml"
    shutil.copy(source, root / "evaluators")
    # The same judge with an unreachable floor: its identical calls are served from the cache.
    strict = source.read_text().replace("floor: 0.4", "floor: 0.95")
    (root / "evaluators" / "pairwise_high_floor.yaml").write_text(strict)
    (tmp / "dagster_home").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
        mp.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
        mp.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
        mp.delenv("OPENAI_API_KEY", raising=False)
        defs = build_definitions(root)
        with dg.instance_for_test(temp_dir=str(tmp / "dagster_home")) as instance:
            for day in DAYS:
                materialize(defs, instance, "traces", day)
                for evaluator in ("pairwise_preference", "pairwise_high_floor"):
                    materialize(
                        defs, instance, "judge_scores", dg.MultiPartitionKey({"date": day, "evaluator": evaluator})
                    )
            for asset in ("human_annotations", "imported_judgments"):
                materialize(defs, instance, asset)
            checks = materialize(defs, instance, "agreement").get_asset_check_evaluations()
            yield root, instance, checks


def stat(root: Path, subject: str, convention: str, statistic: str, window: str = "all") -> tuple[float, int]:
    rows = query(
        root,
        f"SELECT value, n FROM agreement WHERE section = 'judge_vs_human' AND subject = '{subject}' "
        f"AND convention = '{convention}' AND statistic = '{statistic}' AND period = '{window}'",
    )
    assert len(rows) == 1, rows
    return rows[0]


def test_annotators_agree_as_published(pandalm):
    root, _, _ = pandalm
    kappas = query(
        root,
        "SELECT subject, reference, round(value, 2) FROM agreement "
        "WHERE section = 'inter_annotator' AND statistic = 'cohen_kappa' ORDER BY 1, 2",
    )
    assert kappas == [
        ("annotator1", "annotator2", 0.85),
        ("annotator1", "annotator3", 0.88),
        ("annotator2", "annotator3", 0.86),
    ]
    counts = query(root, "SELECT label, count(*) FROM ground_truth GROUP BY 1 ORDER BY 1")
    assert counts == [("0", 105), ("1", 422), ("2", 472)]


@pytest.mark.parametrize(
    ("subject", "published"),
    [(GPT, (71.07, 58.79, 57.36, 57.55)), ("pandalm-7b (PandaLM study)", (66.77, 57.38, 57.50, 57.43))],
)
def test_imported_judges_reproduce_pandalm(pandalm, subject, published):
    root, _, _ = pandalm
    ours = [
        stat(root, subject, "unusable_as_tie", s)[0]
        for s in ("accuracy", "macro_precision", "macro_recall", "macro_f1")
    ]
    assert [round(100 * v, 2) for v in ours] == list(published)


def test_replayed_judge_scores_reproduce_pandalm_under_its_convention(pandalm):
    """PandaLM counts an unusable verdict as a tie (its 71.07); ours leaves FAILED rows out (71.56 over 974)."""
    root, _, _ = pandalm
    names = ("accuracy", "macro_precision", "macro_recall", "macro_f1")
    as_published = [stat(root, "pairwise_preference", "unusable_as_tie", s) for s in names]
    assert [round(100 * v, 2) for v, _ in as_published] == [71.07, 58.79, 57.36, 57.55]
    assert {n for _, n in as_published} == {999}
    excluded = [stat(root, "pairwise_preference", "failed_excluded", s) for s in names]
    imported = [stat(root, GPT, "failed_excluded", s) for s in names]
    assert excluded == imported and excluded[0][1] == 974  # the 25 recorded "garbage" replies are FAILED
    same = query(
        root,
        "SELECT statistic, value, n FROM agreement WHERE section = 'judge_vs_judge' "
        f"AND subject = 'pairwise_preference' AND reference = '{GPT}' AND statistic LIKE 'agreement%'",
    )
    # identical on every usable item; S2 leaves out the 38 recorded ties
    assert sorted(same) == [("agreement_with_ties_s1", 1.0, 974), ("agreement_without_ties_s2", 1.0, 936)]


def test_windows_position_consistency_and_floor_check(pandalm):
    root, instance, _ = pandalm
    days = query(
        root,
        "SELECT period_start, n FROM agreement WHERE subject = 'pairwise_preference' AND period = 'day' "
        "AND statistic = 'accuracy' AND convention = 'unusable_as_tie' ORDER BY 1",
    )
    assert [d for d, _ in days] == DAYS and sum(n for _, n in days) == 999
    trailing = query(
        root,
        "SELECT n FROM agreement WHERE subject = 'pairwise_preference' AND period = 'trailing' "
        "AND period_end = '2026-11-15' AND statistic = 'accuracy' AND convention = 'unusable_as_tie'",
    )
    assert trailing == [(999,)]  # the seven days ending on the 15th
    consistency = query(
        root,
        "SELECT value, n FROM agreement WHERE section = 'position_consistency' AND period = 'all' "
        "AND subject = 'pairwise_preference'",
    )
    assert consistency == [(1.0, 974)]  # a replayed recording cannot depend on the order
    kappas = query(
        root,
        "SELECT subject, floor, below_floor, value FROM agreement WHERE period = 'trailing' "
        "AND period_end = '2026-11-15' AND statistic = 'cohen_kappa' AND convention = 'failed_excluded' "
        "AND section = 'judge_vs_human' AND floor IS NOT NULL ORDER BY 1",
    )
    assert [row[:3] for row in kappas] == [("pairwise_high_floor", 0.95, True), ("pairwise_preference", 0.4, False)]
    assert 0.4 < kappas[1][3] < 0.95


def test_warn_check_names_the_judge_below_its_floor(pandalm):
    _, _, checks = pandalm
    [check] = checks
    assert check.check_name == "judges_agree_with_humans" and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    below = check.metadata["below_floor"].value
    assert [entry["subject"] for entry in below] == ["pairwise_high_floor"]


def test_an_agreement_without_judge_rows_says_what_it_needs_and_which_part_is_missing(data_root):
    """ "Can this judge be trusted?" used to get an empty table (or only the annotators' rows) and no word on why."""
    judge = {"mode": "pairwise", "prompt": "{{output_a}} or {{output_b}}", "model": "openai/mock"}
    block = {"task": "pandalm_pairwise", "criterion": "preference"}
    labels = "task,item_id,annotator,criterion,label\npandalm_pairwise,pandalm-0000,annotator1,preference,1\n"

    def needs(with_block: bool, with_labels: bool) -> tuple[int, str]:
        write_evaluator(data_root, "pairwise", **judge, **({"human_agreement": block} if with_block else {}))
        if with_labels:
            (data_root / "annotations").mkdir(exist_ok=True)
            shutil.copy(REPO_DATA / "annotations" / "tasks.yaml", data_root / "annotations")
            (data_root / "annotations" / "one_annotator.csv").write_text(labels)
        defs = build_definitions(data_root)
        with dg.instance_for_test() as instance:
            materialize(defs, instance, "human_annotations")
            materialize(defs, instance, "agreement")
            event = instance.get_latest_materialization_event(dg.AssetKey("agreement"))
        metadata = event.asset_materialization.metadata
        return metadata["rows"].value, metadata["needs"].value

    no_labels, no_block = (
        "no human label: put annotation exports in annotations/",
        "no evaluator has a `human_agreement:`",
    )
    rows, said = needs(with_block=False, with_labels=False)
    assert rows == 0 and "needs human labels in annotations/ and a `human_agreement:` block" in said
    assert no_labels in said and no_block in said
    rows, said = needs(with_block=True, with_labels=False)
    assert rows == 0 and no_labels in said and no_block not in said
    rows, said = needs(with_block=False, with_labels=True)  # the annotator's rows only: no judge is checked
    assert no_labels not in said and no_block in said
