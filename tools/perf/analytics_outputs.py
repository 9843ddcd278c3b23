"""Before/after equality of the analysis outputs on one data root: dump them with one version of the code, dump
them again with another, compare every value.

    python -m tools.perf.analytics_outputs dump ROOT OUT [in_memory | out_of_core]  # ROOT: a data root
    python -m tools.perf.analytics_outputs compare OUT_A OUT_B

`dump` runs the bodies of `agreement` (and `ground_truth`), `experiment_results`, `judge_cost_daily` and
`judge_cost_monthly` on ROOT, as `analytics_scale` does, and writes each table to OUT/<table>.parquet (not into
ROOT). To dump with an older version of the code, run this file by path with PYTHONPATH pointing at that
version's checkout. `in_memory` or `out_of_core` forces the way `agreement` and `experiment_results` read
judge_scores (default: as the assets choose, by its size; see `eval_platform.out_of_core`), so the two paths
can be compared on one data root. `compare` matches the rows of each table on its key columns and checks that
every other value is equal: text exactly (JSON details parsed, numbers in them within the tolerance), numbers
within 1e-9 (absolute or relative), nulls in the same places; `computed_at` aside. It also says whether the row
order is the same. Exit status 1 on any difference.
"""

from __future__ import annotations

import json
import math
import os
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import polars as pl

from eval_platform.storage.location import DataRoot

TOLERANCE = 1e-9
TABLES = ["agreement", "ground_truth", "experiment_results", "judge_cost_daily", "judge_cost_monthly"]
KEYS = {
    "agreement": [
        "section",
        "task",
        "criterion",
        "subject",
        "reference",
        "period",
        "period_start",
        "period_end",
        "convention",
        "statistic",
    ],
    "ground_truth": ["task", "criterion", "item_id"],
    "experiment_results": ["experiment", "kind", "metric", "variant", "opponent"],
    "judge_cost_daily": ["day", "evaluator", "model", "project_id"],
    "judge_cost_monthly": ["month", "evaluator", "model", "project_id"],
}
IGNORED = {"computed_at"}


def dump(root: Path, out: Path, out_of_core: bool | None = None) -> None:
    from eval_platform.agreement import compute
    from eval_platform.costs import cost_rollup, monthly_rollup
    from eval_platform.defs import agreement as agreement_asset
    from eval_platform.experiments import inputs
    from eval_platform.experiments.analysis import experiment_results
    from eval_platform.experiments.config import load_experiments
    from eval_platform.judging.loading import load_evaluators
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.settings import state_dir
    from eval_platform.storage.warehouse import read_partition

    out.mkdir(parents=True, exist_ok=True)
    evaluators = load_evaluators(root / "evaluators")
    # what the asset passes: an eager frame in older versions (read_scores), a lazy scan since (scan_scores), and
    # since the out-of-core path, whichever `score_source` gives
    if hasattr(agreement_asset, "score_source"):
        from eval_platform.out_of_core import reads_out_of_core

        out_of_core = reads_out_of_core(DataRoot.from_env(root), out_of_core)
        source = agreement_asset.score_source(DataRoot.from_env(root), out_of_core)
        annotations = agreement_asset.read_annotations(DataRoot.from_env(root), lazy=out_of_core)
    else:
        source = nullcontext((getattr(agreement_asset, "scan_scores", None) or agreement_asset.read_scores)(root))
        annotations = read_partition(DataRoot.from_env(root), "human_annotations", {})
    with source as scores:
        rows, truth = compute(
            evaluators,
            scores,
            annotations,
            read_partition(DataRoot.from_env(root), "imported_judgments", {}),
            categories=agreement_asset.declared_categories(root),
        )
    rows.write_parquet(out / "agreement.parquet")
    truth.write_parquet(out / "ground_truth.parquet")
    configs = load_experiments(root / "experiments", evaluators)
    needed = sorted(
        {m.evaluator for e in configs.values() for _, m in e.metrics}
        | {e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator}
    )
    pairwise = sorted({e.pairwise_evaluator for e in configs.values() if e.pairwise_evaluator})
    if hasattr(inputs, "experiment_inputs"):
        source = inputs.experiment_inputs(DataRoot.from_env(root), needed, pairwise, out_of_core)
    else:
        source = nullcontext(
            (
                inputs.read_final_scores(DataRoot.from_env(root), needed),
                inputs.read_trace_variants(DataRoot.from_env(root)),
            )
        )
    with source as (scores, traces):
        experiment_results(configs.values(), scores, traces).write_parquet(out / "experiment_results.parquet")
    daily = cost_rollup(DataRoot.from_env(root), evaluators)
    daily.write_parquet(out / "judge_cost_daily.parquet")
    monthly_rollup(daily, BudgetLedger(state_dir(root) / "budget.sqlite"), evaluators).write_parquet(
        out / "judge_cost_monthly.parquet"
    )
    counts = {t: pl.scan_parquet(out / f"{t}.parquet").select(pl.len()).collect().item() for t in TABLES}
    print("dumped " + ", ".join(f"{t} ({n} rows)" for t, n in counts.items()))


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return a == b


def _compare_table(name: str, before: pl.DataFrame, after: pl.DataFrame) -> list[str]:
    problems = []
    if before.columns != after.columns or before.schema != after.schema:
        problems.append(f"{name}: schemas differ: {before.schema} vs {after.schema}")
        return problems
    if before.height != after.height:
        return [f"{name}: {before.height} rows before, {after.height} after"]
    keys = KEYS[name]
    for frame, side in ((before, "before"), (after, "after")):
        if frame.select(keys).is_duplicated().any():
            problems.append(f"{name}: key columns {keys} are not unique {side}")
    same_order = before.select(keys).equals(after.select(keys))
    a, b = (f.sort(keys, nulls_last=True) for f in (before, after))
    if not a.select(keys).equals(b.select(keys)):
        return problems + [f"{name}: the sets of keys differ"]
    checked, largest = 0, 0.0
    for column in before.columns:
        if column in IGNORED or column in keys:
            continue
        x, y = a[column], b[column]
        if x.dtype.is_float():
            nulls = (x.is_null() != y.is_null()).to_numpy()
            p, q = x.fill_null(0.0).to_numpy(), y.fill_null(0.0).to_numpy()
            with np.errstate(invalid="ignore"):
                far = np.abs(p - q) > TOLERANCE * np.maximum(1.0, np.maximum(np.abs(p), np.abs(q)))
            far &= ~(np.isnan(p) & np.isnan(q))
            far |= np.isnan(p) != np.isnan(q)
            bad = np.flatnonzero(nulls | far)
            both = ~(x.is_null() | y.is_null()).to_numpy() & ~np.isnan(p) & ~np.isnan(q)
            if both.any():
                largest = max(largest, float(np.max(np.abs(p[both] - q[both]))))
        elif column == "details":
            bad = [
                i
                for i, (p, q) in enumerate(zip(x.to_list(), y.to_list(), strict=True))
                if p != q and not (p is not None and q is not None and _close(json.loads(p), json.loads(q)))
            ]
        else:
            bad = (x.ne_missing(y)).arg_true()
        checked += x.len()
        if len(bad):
            i = int(bad[0])
            problems.append(f"{name}.{column}: {len(bad)} values differ, e.g. {a.row(i, named=True)} vs {y[i]!r}")
    print(
        f"{name}: {before.height} rows, {checked} values compared, largest absolute difference {largest:.1e}, "
        f"row order {'same' if same_order else 'DIFFERENT'}"
    )
    return problems


def compare(before_dir: Path, after_dir: Path) -> int:
    problems = []
    for name in TABLES:
        problems += _compare_table(
            name, pl.read_parquet(before_dir / f"{name}.parquet"), pl.read_parquet(after_dir / f"{name}.parquet")
        )
    print("\n".join(problems) if problems else f"all values equal within {TOLERANCE:g} (computed_at aside)")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if len(argv) in (3, 4) and argv[0] == "dump":
        paths = {"in_memory": False, "out_of_core": True}
        if len(argv) == 4 and argv[3] not in paths:
            print(__doc__, file=sys.stderr)
            return 2
        dump(Path(argv[1]), Path(argv[2]), paths[argv[3]] if len(argv) == 4 else None)
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
