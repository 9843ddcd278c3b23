"""The analysis assets at production scale, beside the peer packages on the same annotations and scores.

    python -m tools.perf.analytics_scale [--rows 10000000] [--annotations 1000000] [--repeat 3]

Writes a seeded synthetic data root (see `synthetic_warehouse`) into a temporary directory, never the checkout,
then runs each computation in a fresh interpreter: the `agreement` asset's body, the `experiment_results`
asset's body, the two cost rollups, and the statistics the peers also compute (Krippendorff's alpha,
Fleiss' and Cohen's kappa, Welch's t-test), ours and the peer's in separate processes. Krippendorff's alpha
and Fleiss' kappa are compared twice: from the long table of annotations (ours as the asset calls it; the
peer's pivot to the matrix it takes timed with it) and from a ready matrix (the peer's input, built before
timing, given to both). Each reports the wall and CPU time of the computation alone (imports and input
preparation are not timed) and the process's peak RSS, and every peer row the largest absolute difference
between our values and the peer's. The peers are the test extras (krippendorff, statsmodels, scipy).
`--keep` keeps the data root, `--root DIR` reuses it, `--only` runs some computations. `--path in_memory` or
`out_of_core` makes `agreement` and `experiment_results` read judge_scores that way (default: as the assets
choose, out of core above 20M rows; see `eval_platform.out_of_core`), and `--compare-paths` also dumps every
output of the three assets both ways and compares them value by value (`analytics_outputs`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from eval_platform.llm.budget import BudgetLedger
from eval_platform.markdown_table import markdown_table
from eval_platform.schemas import FINAL_COMPLETED
from eval_platform.settings import state_dir
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    read_partition,
    scan_parquet,
    table_glob,
    write_partition,
)
from tools.perf.synthetic_warehouse import PER_ITEM, VARIANTS, generate

# ------------------------------------------------------------------------------------------ computations
# Each runs in its own child process and imports only what it needs (litellm, which the judging configs import,
# costs about 100 MB of RSS), then prepares its inputs and returns the computation, the only part timed, whose
# values are checked against the peer's.


ANALYTICS_PATH = "ANALYTICS_SCALE_PATH"  # --path, handed to the child processes
PATHS = {"auto": None, "in_memory": False, "out_of_core": True}


def _evaluators(root: Path):
    from eval_platform.judging.loading import load_evaluators

    return load_evaluators(root / "evaluators")


def _out_of_core(root: Path) -> bool:
    """In memory or out of core, as `--path` says (`ANALYTICS_PATH`), else as the assets choose by size."""
    from eval_platform.out_of_core import reads_out_of_core

    return reads_out_of_core(DataRoot.from_env(root), PATHS[os.environ.get(ANALYTICS_PATH, "auto")])


def agreement(root: Path):
    """The `agreement` asset's body: read judge_scores, annotations and judgments, compute, write both tables."""
    from eval_platform.agreement import compute
    from eval_platform.defs.agreement import declared_categories, read_annotations, score_source

    evaluators = _evaluators(root)
    out_of_core = _out_of_core(root)

    def run():
        with score_source(DataRoot.from_env(root), out_of_core) as scores:
            rows, truth = compute(
                evaluators,
                scores,
                read_annotations(DataRoot.from_env(root), lazy=out_of_core),
                read_partition(DataRoot.from_env(root), "imported_judgments", {}),
                categories=declared_categories(root),
            )
        write_partition(DataRoot.from_env(root), "agreement", {}, rows)
        write_partition(DataRoot.from_env(root), "ground_truth", {}, truth)
        return {"rows": rows.height, "ground_truth": truth.height}

    return run


def experiments(root: Path):
    """The `experiment_results` asset's body: load the experiments, read final scores and trace variants, analyze."""
    from eval_platform.experiments.analysis import experiment_results
    from eval_platform.experiments.config import load_experiments
    from eval_platform.experiments.inputs import experiment_inputs

    configs = load_experiments(root / "experiments", _evaluators(root))
    needed = sorted(
        {m.evaluator for e in configs.values() for _, m in e.metrics}
        | {e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator}
    )
    pairwise = sorted({e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator})
    out_of_core = _out_of_core(root)

    def run():
        with experiment_inputs(DataRoot.from_env(root), needed, pairwise, out_of_core) as (scores, traces):
            frame = experiment_results(configs.values(), scores, traces)
        write_partition(DataRoot.from_env(root), "experiment_results", {}, frame)
        return {"rows": frame.height}

    return run


def costs(root: Path):
    """`judge_cost_daily` then `judge_cost_monthly`, as their assets do it (the ledger has a row per call)."""
    from eval_platform.costs import cost_rollup, monthly_rollup

    evaluators = _evaluators(root)

    def run():
        daily = cost_rollup(DataRoot.from_env(root), evaluators)
        write_partition(DataRoot.from_env(root), "judge_cost_daily", {}, daily)
        monthly = monthly_rollup(
            read_partition(DataRoot.from_env(root), "judge_cost_daily", {}),
            BudgetLedger(state_dir(root) / "budget.sqlite"),
            evaluators,
        )
        write_partition(DataRoot.from_env(root), "judge_cost_monthly", {}, monthly)
        return {"daily_rows": daily.height, "monthly_rows": monthly.height}

    return run


def _tasks(root: Path, level: str = "nominal") -> dict[str, tuple[pl.DataFrame, str]]:
    """Each task's annotations and the column its alpha is computed on, as `inter_annotator` does: the rating
    for the rating task, the label for the classifications (which have no interval alpha)."""
    columns = ["task", "item_id", "annotator", "label", "value"]  # only these, so that loading sets no peak
    annotations = read_partition(DataRoot.from_env(root), "human_annotations", {}, columns=columns)  # on either store
    tasks = {task: part for (task,), part in annotations.partition_by("task", as_dict=True).items()}
    return {
        t: (p, "value" if t == "quality" else "label")
        for t, p in sorted(tasks.items())
        if level == "nominal" or t == "quality"
    }


def alpha_ours(root: Path, level: str):
    """From the long table (one row per item, annotator and value), as the agreement asset has its annotations."""
    from eval_platform.stats.reliability import krippendorff_alpha_long

    tasks = _tasks(root, level).values()
    return lambda: [
        krippendorff_alpha_long(p["item_id"], p["annotator"], p[column], level).value for p, column in tasks
    ]


def _matrix(part: pl.DataFrame, column: str) -> np.ndarray:
    """Coders × units, NaN where not rated; labels as codes: the `krippendorff` package's input."""
    codes = part.with_columns(pl.col(column).rank("dense").cast(pl.Float64) if column == "label" else pl.col(column))
    wide = codes.pivot(on="annotator", index="item_id", values=column, aggregate_function="first")
    return wide.drop("item_id").to_numpy().T.astype(float)


def alpha_peer(root: Path, level: str):
    """From the same long table: the matrix the package needs (pivot, labels coded) is built in the timed part,
    as ours dedupes and codes the long table in it."""
    import krippendorff

    tasks = _tasks(root, level).values()
    return lambda: [
        krippendorff.alpha(reliability_data=_matrix(p, column), level_of_measurement=level) for p, column in tasks
    ]


def alpha_matrix_ours(root: Path, level: str):
    """From a ready coders × units matrix, the same one the peer gets (built before timing)."""
    from eval_platform.stats.reliability import krippendorff_alpha

    matrices = [_matrix(part, column) for part, column in _tasks(root, level).values()]
    return lambda: [krippendorff_alpha(m, level).value for m in matrices]


def alpha_matrix_peer(root: Path, level: str):
    import krippendorff

    matrices = [_matrix(part, column) for part, column in _tasks(root, level).values()]
    return lambda: [krippendorff.alpha(reliability_data=m, level_of_measurement=level) for m in matrices]


def _fully_rated(root: Path) -> list[pl.DataFrame]:
    """Per task, the items all PER_ITEM annotators rated: Fleiss' kappa needs as many ratings on every item."""
    return [part.filter(pl.len().over("item_id") == PER_ITEM) for part, _ in _tasks(root).values()]


def fleiss_ours(root: Path):
    """From the long table, as the agreement asset calls it."""
    from eval_platform.stats.kappa import category_counts, fleiss_kappa

    parts = _fully_rated(root)
    return lambda: [fleiss_kappa(category_counts(p["item_id"], p["label"])).value for p in parts]


def _raters(part: pl.DataFrame) -> np.ndarray:
    """Items × raters of label codes, statsmodels' input (a rater's column is their position on the item)."""
    return (
        part.with_columns(pl.col("label").rank("dense"), pl.col("annotator").rank("ordinal").over("item_id"))
        .pivot(on="annotator", index="item_id", values="label")
        .drop("item_id")
        .to_numpy()
    )


def fleiss_peer(root: Path):
    """From the same long table: its items × raters input built in the timed part, as ours codes the table in it."""
    from statsmodels.stats import inter_rater

    parts = _fully_rated(root)
    return lambda: [inter_rater.fleiss_kappa(inter_rater.aggregate_raters(_raters(p))[0]) for p in parts]


def fleiss_matrix_ours(root: Path):
    """From the items × raters matrix statsmodels takes (built before timing): its cells as (item, label) rows."""
    from eval_platform.stats.kappa import category_counts, fleiss_kappa

    wides = [_raters(part) for part in _fully_rated(root)]
    return lambda: [
        fleiss_kappa(category_counts(np.repeat(np.arange(w.shape[0]), w.shape[1]), w.ravel())).value for w in wides
    ]


def fleiss_matrix_peer(root: Path):
    from statsmodels.stats import inter_rater

    wides = [_raters(part) for part in _fully_rated(root)]
    return lambda: [inter_rater.fleiss_kappa(inter_rater.aggregate_raters(w)[0]) for w in wides]


def _pairs(root: Path) -> list[tuple[pl.Series, pl.Series, tuple]]:
    """Every pair of annotators of every task: their labels on the items both rated, and the weightings the
    agreement asset reports for the task."""
    out = []
    for part, column in _tasks(root).values():
        wide = part.pivot(on="annotator", index="item_id", values=column, aggregate_function="first")
        names = sorted(c for c in wide.columns if c != "item_id")
        weightings = (None, "linear", "quadratic") if column == "value" else (None,)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                shared = wide.select(a, b).drop_nulls()
                out.append((shared[a], shared[b], weightings))
    return out


def cohen_ours(root: Path):
    """As the agreement asset does it: one contingency table per pair, every weighting from it."""
    from eval_platform.stats.kappa import cohen_kappa_table, contingency_table

    pairs = _pairs(root)

    def run():
        tables = [(contingency_table(a, b)[0], weightings) for a, b, weightings in pairs]
        return [cohen_kappa_table(table, weights=w).value for table, weightings in tables for w in weightings]

    return run


def cohen_peer(root: Path):
    from statsmodels.stats import inter_rater

    pairs = [(np.column_stack([a.to_numpy(), b.to_numpy()]), weightings) for a, b, weightings in _pairs(root)]

    def run():  # to_table codes both raters' labels together (np.unique), as our contingency table does
        tables = [(inter_rater.to_table(x)[0], weightings) for x, weightings in pairs]
        return [inter_rater.cohens_kappa(table, wt=w).kappa for table, weightings in tables for w in weightings]

    return run


def _groups(root: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """(control, treatment) final completed scores of three evaluators, for each of the two treatments."""
    scores = (
        scan_parquet(
            DataRoot.from_env(root), table_glob(DataRoot.from_env(root), "judge_scores"), hive_partitioning=False
        )
        .filter(FINAL_COMPLETED & pl.col("evaluator").is_in(["helpfulness", "relevance", "toxicity"]))
        .select("evaluator", "variant", "score")
        .collect()
    )
    out = []
    for _, part in sorted(scores.partition_by("evaluator", as_dict=True).items()):
        control = part.filter(pl.col("variant") == VARIANTS[0])["score"].to_numpy()
        out += [(control, part.filter(pl.col("variant") == v)["score"].to_numpy()) for v in VARIANTS[1:]]
    return out


def welch_ours(root: Path):
    import scipy.special  # noqa: F401  (imported lazily by our code: loaded before timing, as the peer's import is)

    from eval_platform.stats.experiments import welch_t_test

    groups = _groups(root)
    return lambda: [(r.t, r.df, r.p_value) for r in (welch_t_test(c, t) for c, t in groups)]


def welch_peer(root: Path):
    from scipy import stats

    groups = _groups(root)
    return lambda: [(r.statistic, r.df, r.pvalue) for r in (stats.ttest_ind(t, c, equal_var=False) for c, t in groups)]


# name -> (what, ours, peer, the peer's name); ours or peer None when there is nothing to put beside it.
COMPUTATIONS = {
    "agreement": ("agreement asset (read + compute + write)", agreement, None, None),
    "experiments": ("experiment_results asset (read + analyze + write)", experiments, None, None),
    "costs": ("judge_cost_daily + judge_cost_monthly", costs, None, None),
    "alpha_nominal": (
        "Krippendorff's alpha, nominal, 4 tasks, from the long table",
        lambda r: alpha_ours(r, "nominal"),
        lambda r: alpha_peer(r, "nominal"),
        "krippendorff.alpha",
    ),
    "alpha_interval": (
        "Krippendorff's alpha, interval, rating task, from the long table",
        lambda r: alpha_ours(r, "interval"),
        lambda r: alpha_peer(r, "interval"),
        "krippendorff.alpha",
    ),
    "alpha_nominal_matrix": (
        "Krippendorff's alpha, nominal, 4 tasks, from a ready matrix",
        lambda r: alpha_matrix_ours(r, "nominal"),
        lambda r: alpha_matrix_peer(r, "nominal"),
        "krippendorff.alpha",
    ),
    "alpha_interval_matrix": (
        "Krippendorff's alpha, interval, rating task, from a ready matrix",
        lambda r: alpha_matrix_ours(r, "interval"),
        lambda r: alpha_matrix_peer(r, "interval"),
        "krippendorff.alpha",
    ),
    "fleiss": (
        "Fleiss' kappa, 4 tasks (fully rated items), from the long table",
        fleiss_ours,
        fleiss_peer,
        "statsmodels fleiss_kappa + aggregate_raters",
    ),
    "fleiss_matrix": (
        "Fleiss' kappa, 4 tasks (fully rated items), from a ready items × raters matrix",
        fleiss_matrix_ours,
        fleiss_matrix_peer,
        "statsmodels fleiss_kappa + aggregate_raters",
    ),
    "cohen": (
        "Cohen's kappa, 180 annotator pairs, 270 kappas",
        cohen_ours,
        cohen_peer,
        "statsmodels to_table + cohens_kappa",
    ),
    "welch": ("Welch's t-test, 3 metrics × 2 treatments", welch_ours, welch_peer, "scipy.stats.ttest_ind"),
}


def _peak_rss_mb() -> float:
    """This process's peak RSS. Not ru_maxrss: Linux carries the parent's RSS at fork over exec into it."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


def _cpu_seconds() -> float:
    """User and system CPU time of this process, all threads: steadier than wall time on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(name: str, side: str, root: Path) -> None:
    _, ours, peer, _ = COMPUTATIONS[name]
    started = time.perf_counter()
    run = (ours if side == "ours" else peer)(root)
    prepared, prepared_rss, cpu = time.perf_counter(), _peak_rss_mb(), _cpu_seconds()
    result = run()
    seconds = time.perf_counter() - prepared
    report = {
        "prepare_s": prepared - started,
        "prepared_rss_mb": prepared_rss,
        "seconds": seconds,
        "cpu_s": _cpu_seconds() - cpu,
        "peak_rss_mb": _peak_rss_mb(),
        "result": result,
    }
    print(json.dumps(report, default=float))


def _measure(name: str, side: str, root: Path, repeat: int) -> dict:
    """Run one computation `repeat` times, each in a fresh interpreter so that its peak RSS is its own: the
    median time and the largest peak (the machine is shared, so one run can be slowed by a neighbour)."""
    command = [sys.executable, "-m", "tools.perf.analytics_scale", "--child", name, side, str(root)]
    runs = [
        json.loads(subprocess.run(command, stdout=subprocess.PIPE, check=True).stdout.decode().splitlines()[-1])
        for _ in range(repeat)
    ]
    return {
        "seconds": float(np.median([r["seconds"] for r in runs])),
        "runs_s": [round(r["seconds"], 2) for r in runs],
        "cpu_s": float(np.median([r["cpu_s"] for r in runs])),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "before_rss_mb": max(r["prepared_rss_mb"] for r in runs),
        "result": runs[0]["result"],
    }


def _compare_paths(root: Path) -> int:
    """Every output of the three assets dumped in memory and out of core, each in a fresh process
    (`analytics_outputs dump`, outside the data root), then compared value by value; 1 on any difference."""
    with tempfile.TemporaryDirectory(prefix="analytics_paths-") as folder:
        for path in ("in_memory", "out_of_core"):
            started = time.perf_counter()
            dump = [sys.executable, "-m", "tools.perf.analytics_outputs", "dump", str(root)]
            subprocess.run([*dump, f"{folder}/{path}", path], check=True)
            print(f"{path}: dumped in {time.perf_counter() - started:.0f} s", flush=True)
        compare = [sys.executable, "-m", "tools.perf.analytics_outputs", "compare"]
        return subprocess.run([*compare, f"{folder}/in_memory", f"{folder}/out_of_core"]).returncode


def _cell(measured: dict) -> str:
    return f"{measured['seconds']:.2f} s ({measured['cpu_s']:.2f} s CPU), {measured['peak_rss_mb']:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="judge_scores rows (about)")
    parser.add_argument("--annotations", type=int, default=1_000_000, help="human_annotations rows (about)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="runs per computation; the median time is reported")
    parser.add_argument("--keep", action="store_true", help="keep the generated data root and print where it is")
    parser.add_argument("--root", type=Path, help="reuse a data root kept by an earlier --keep instead of generating")
    parser.add_argument("--only", nargs="+", choices=list(COMPUTATIONS), help="run only these computations")
    parser.add_argument(
        "--path",
        choices=list(PATHS),
        default="auto",
        help="how agreement and experiment_results read judge_scores (auto: as the assets choose, by size)",
    )
    parser.add_argument(
        "--compare-paths",
        action="store_true",
        help="also dump every output in memory and out of core (analytics_outputs, fresh processes) and compare",
    )
    parser.add_argument("--child", nargs=3, metavar=("NAME", "SIDE", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's price map
    os.environ[ANALYTICS_PATH] = os.environ.get(ANALYTICS_PATH) if args.child else args.path  # children inherit it
    if args.child:
        _child(args.child[0], args.child[1], Path(args.child[2]))
        return 0

    checkout = Path(__file__).resolve().parents[2]
    root = (args.root or Path(tempfile.mkdtemp(prefix="analytics_scale-")) / "data").resolve()
    if root.is_relative_to(checkout):
        parser.error(f"--root {root} is inside the checkout; the benchmark writes only outside it")
    try:
        if args.root is None:
            started = time.perf_counter()
            written = generate(root, args.rows, args.annotations, args.seed)
            print(
                f"generated in {time.perf_counter() - started:.0f} s under {root}: "
                + ", ".join(f"{count:,} {table}" for table, count in written.items())
            )
        print(
            f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, polars {pl.__version__}; "
            f"median of {args.repeat} run(s) per computation, peak RSS the largest"
        )
        columns = ["computation", "ours", "peer", "peer's time", "max abs difference"]
        rows = []
        for name in args.only or COMPUTATIONS:
            what, _, peer, peer_name = COMPUTATIONS[name]
            ours = _measure(name, "ours", root, args.repeat)
            theirs = _measure(name, "peer", root, args.repeat) if peer is not None else None
            difference = None
            if theirs is not None:
                ours_values, peer_values = (np.asarray(x["result"], float) for x in (ours, theirs))
                difference = float(np.max(np.abs(ours_values - peer_values)))
            report = {"name": name, "ours": ours, "peer": theirs, "max_abs_difference": difference}
            print(json.dumps(report), flush=True)
            peer_cells = [_cell(theirs), f"{difference:.1e}"] if theirs else [None, None]
            rows.append(dict(zip(columns, [what, _cell(ours), peer_name, *peer_cells], strict=True)))
        print(markdown_table(rows, columns))
        if args.compare_paths:
            return _compare_paths(root)
    finally:
        if args.keep:
            print(f"kept {root}")
        elif args.root is None:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
