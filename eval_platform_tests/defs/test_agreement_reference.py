"""The published agreement figures of data/sources/reference_stats/ come out of the `agreement` view when
the raw ratings go in as a labelling tool's export.

Each case becomes one annotation task (one row per rating: task, item_id, annotator, label) declared in
`annotations/tasks.yaml`: `rating` where the values are ordered (so all four alpha levels and the weighted
Cohen's kappas are computed), `classification` where they are nominal. `human_annotations` and `agreement`
are materialized in a real Dagster instance and the expected values, read from the JSON files, are compared
at the precision their source asserts. eval_platform_tests/stats/test_reference_values.py checks the same
cases on the statistics functions directly.

Fleiss' tables give only how many raters chose each category per subject, so each count becomes that many
ratings by annotators r1..rk numbered within the subject; Fleiss' and Randolph's kappa ignore who rated
what, so this arbitrary naming cannot change them (the per-pair Cohen's kappas it also yields are
meaningless and not checked). Their tasks declare every category as a label: Randolph's kappa counts the
categories annotators could choose, used or not ([[6, 1, 0], [0, 7, 0]] has three). Not reachable through
the asset, and checked only in the stats test: the table with fractional counts (6.99 / 0.01 ratings cannot
be exported), Cohen's kappa with a custom weight matrix, and the ASE, confidence interval and z-test of
Cohen's kappa (the agreement table has no columns for them).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA

REFERENCE = REPO_DATA / "sources" / "reference_stats"
CRITERION = "value"


def _load(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


class Cases:
    """The export rows, the tasks.yaml entries and the expected agreement rows of every case."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.tasks: dict[str, dict] = {}
        # (task, statistic, subject, reference, expected, tolerance)
        self.expected: list[tuple[str, str, str, str, float, float]] = []

    def task(self, name: str, schema: str, labels: list[str] | None = None) -> str:
        criterion = {"schema": schema} if labels is None else {"schema": schema, "labels": labels}
        self.tasks[name] = {"criteria": {CRITERION: criterion}}
        return name

    def rate(self, task: str, item: str, annotator: str, label) -> None:
        self.rows.append(
            {"task": task, "item_id": item, "annotator": annotator, "criterion": CRITERION, "label": label}
        )

    def expect(self, task: str, statistic: str, value: float, tolerance: float, pair=("annotators", "annotators")):
        self.expected.append((task, statistic, *pair, value, tolerance))


def _at_decimals(decimals: int) -> float:
    """Agreement to `decimals` places, as a tolerance: the published value is the true one rounded."""
    return 0.5 * 10.0**-decimals + 1e-12


def _coders_x_units(cases: Cases, task: str, matrix: list[list], coders: list[str]) -> None:
    for coder, row in zip(coders, matrix, strict=True):
        for unit, value in enumerate(row):
            if value is not None:  # a missing rating is simply not exported
                cases.rate(task, f"u{unit:02d}", coder, value)


def _subjects_x_categories(cases: Cases, task: str, counts: list[list[int]]) -> None:
    for subject, row in enumerate(counts):
        raters = (f"r{i}" for i in itertools.count(1))
        for category, count in enumerate(row, start=1):
            for _ in range(count):
                cases.rate(task, f"s{subject:02d}", next(raters), str(category))


def _two_raters(cases: Cases, task: str, first: list, second: list, names=("y1", "y2")) -> None:
    for item, (a, b) in enumerate(zip(first, second, strict=True)):
        cases.rate(task, f"i{item:03d}", names[0], a)
        cases.rate(task, f"i{item:03d}", names[1], b)


def _runs(runs: list[list[int]]) -> list[int]:
    return [label for label, count in runs for _ in range(count)]


def _table_pairs(table: list[list[int]]) -> tuple[list[int], list[int]]:
    cells = [(i, j) for i, row in enumerate(table) for j, count in enumerate(row) for _ in range(count)]
    return [i for i, _ in cells], [j for _, j in cells]


def build_cases() -> Cases:
    cases = Cases()

    for name in ("krippendorff_alpha_krippendorff2011", "krippendorff_alpha_wikipedia_3coders"):
        case = _load(name)
        task = cases.task(name, "rating")
        matrix = case["reliability_data"]
        _coders_x_units(cases, task, matrix, case.get("observers", [f"coder{i + 1}" for i in range(len(matrix))]))
        for level, expected in case["expected"].items():
            cases.expect(task, f"krippendorff_alpha_{level}", expected["value"], _at_decimals(expected["decimals"]))

    for name in ("fleiss_kappa_fleiss1971_diagnoses", "fleiss_kappa_wikipedia_example"):
        case = _load(name)
        counts = case["counts_subjects_x_categories"]
        task = cases.task(name, "classification", [str(c) for c in range(1, len(counts[0]) + 1)])
        _subjects_x_categories(cases, task, counts)
        expected = case["expected"]["fleiss_kappa"]
        cases.expect(task, "fleiss_kappa", expected["value"], _at_decimals(expected["decimals"]))

    statistic = {"fleiss_fixed_marginal": "fleiss_kappa", "randolph_free_marginal": "randolph_kappa"}
    for number, case in enumerate(_load("fleiss_vs_randolph_kappa_small_tables")["cases"]):
        counts = case["counts"]
        if any(not float(c).is_integer() for row in counts for c in row):
            continue  # fractional ratings cannot be exported (see the module docstring)
        task = cases.task(
            f"fleiss_vs_randolph_{number}", "classification", [str(c) for c in range(1, len(counts[0]) + 1)]
        )
        _subjects_x_categories(cases, task, [[int(c) for c in row] for row in counts])
        for field, value in case["expected"].items():
            if field in statistic:
                cases.expect(task, statistic[field], value, case.get("atol", 1e-12))

    weights = {
        "kappa": "cohen_kappa",
        "kappa_unweighted": "cohen_kappa",
        "kappa_linear": "cohen_kappa_linear",
        "kappa_quadratic": "cohen_kappa_quadratic",
    }
    for case in _load("cohen_kappa_artstein_poesio_sklearn")["cases"]:
        weighted = any(key in ("kappa_linear", "kappa_quadratic") for key in case["expected"])
        task = cases.task(f"cohen_kappa_{case['name']}", "rating" if weighted else "classification")
        _two_raters(cases, task, _runs(case["y1_runs"]), _runs(case["y2_runs"]))
        for key, expected in case["expected"].items():
            cases.expect(task, weights[key], expected["value"], _at_decimals(expected["decimals"]), ("y1", "y2"))

    sas = _load("cohen_kappa_sas_statsmodels")
    task = cases.task("cohen_kappa_sas", "rating")
    _two_raters(cases, task, *_table_pairs(sas["contingency"]), names=("rater1", "rater2"))
    for key, statistic_name in (("unweighted", "cohen_kappa"), ("weighted_linear", "cohen_kappa_linear")):
        expected = sas["expected"][key]
        cases.expect(task, statistic_name, expected["kappa"], _at_decimals(expected["decimals"]), ("rater1", "rater2"))

    irr = _load("cohen_kappa_irr_anxiety")
    task = cases.task("cohen_kappa_irr_anxiety", "rating")
    ratings = irr["ratings_subjects_x_raters"]
    _coders_x_units(
        cases, task, [list(column) for column in zip(*ratings, strict=True)], ["rater1", "rater2", "rater3"]
    )
    irr_statistics = {
        "unweighted": "cohen_kappa",
        "equal_linear": "cohen_kappa_linear",
        "squared_quadratic": "cohen_kappa_quadratic",
    }  # weights_0_0_1_1_2: custom, not in the table
    for key, statistic_name in irr_statistics.items():
        # R prints 7 significant digits
        cases.expect(task, statistic_name, irr["expected_rater2_vs_rater3"][key]["kappa"], 1e-7, ("rater2", "rater3"))
    return cases


CASES = build_cases()


@pytest.fixture(scope="module")
def agreement_root(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("reference_stats")
    root = tmp / "data"
    (root / "evaluators").mkdir(parents=True)
    (root / "annotations").mkdir()
    (root / "annotations" / "tasks.yaml").write_text(yaml.safe_dump({"tasks": CASES.tasks}, sort_keys=False))
    with (root / "annotations" / "reference_stats.jsonl").open("w") as export:
        export.writelines(json.dumps(row) + "\n" for row in CASES.rows)
    (tmp / "dagster_home").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
        defs = build_definitions(root)
        with dg.instance_for_test(temp_dir=str(tmp / "dagster_home")) as instance:
            result = dg.materialize(
                assets=list(defs.assets),
                selection=["human_annotations", "agreement"],
                instance=instance,
                resources=defs.resources,
            )
            assert result.success
    return root


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql, params or []).fetchall()


def test_every_rating_is_loaded(agreement_root):
    [(rows, quarantined)] = query(
        agreement_root,
        "SELECT (SELECT count(*) FROM human_annotations), "
        "(SELECT count(*) FROM quarantine WHERE source = 'human_annotations')",
    )
    assert (rows, quarantined) == (len(CASES.rows), 0)


@pytest.mark.parametrize(
    ("task", "statistic", "subject", "reference", "expected", "tolerance"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in CASES.expected],
)
def test_published_value_from_the_agreement_view(
    agreement_root, task, statistic, subject, reference, expected, tolerance
):
    rows = query(
        agreement_root,
        "SELECT value, n FROM agreement WHERE section = 'inter_annotator' AND period = 'all' "
        "AND task = ? AND criterion = ? AND statistic = ? AND subject = ? AND reference = ?",
        [task, CRITERION, statistic, subject, reference],
    )
    assert len(rows) == 1, rows
    value, _ = rows[0]
    assert value is not None and math.isfinite(value)
    assert abs(value - expected) <= tolerance, (value, expected)
