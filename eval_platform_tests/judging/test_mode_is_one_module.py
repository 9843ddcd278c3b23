"""A judge mode is one module: a new mode, written in one file outside the package and registered in MODES,
validates, is planned, judged over real HTTP to the local judge, combined across models and compared by
agreement, with no other file changed; and no file of the package outside `judging/modes/` names a mode."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import polars as pl

import eval_platform
from eval_platform.agreement import compute
from eval_platform.ingest.annotations import HUMAN_ANNOTATION_SCHEMA
from eval_platform.ingest.judgments import IMPORTED_JUDGMENT_SCHEMA
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes import MODES
from eval_platform.judging.runner import judge_day
from eval_platform.schemas import empty_frame
from eval_platform_tests.judging.test_runner import DAY, make_traces

TOY = '''
"""grade: good or bad; a trace whose output is shorter than `min_chars` (8) is not judged; split votes are unsure."""

from __future__ import annotations

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.replies import ParseFailure, Verdict, field
from eval_platform.judging.units import Day, Unit, single_units

SCORES = {"good": 1.0, "bad": 0.0, "unsure": 0.5}


def verdict_schema(_config, _n):
    return {"grade": {"type": "string", "enum": ["good", "bad"]}}


def parse(_config, obj, _text, _n):
    grade = field(obj, "grade")
    if grade not in ("good", "bad"):
        raise ParseFailure("unparseable", "no grade")
    return Verdict(SCORES[grade], None, grade, None, None, None)


def plan(day: Day) -> list[Unit]:
    units = single_units(day)
    for unit, trace in zip(units, day.records, strict=True):
        if len(trace["output"] or "") < 8:
            unit.skip = ("too_short", "the output is shorter than 8 characters")
    return units


def vote_fields(top, _carrier):
    return {"label": top, "score": SCORES[top]}


MODE = JudgeMode(
    "grade", "label", ("grade",), "label", agreement="labels", consensus=VOTES,
    parse=parse, verdict_schema=verdict_schema, plan=plan, split_vote="unsure", vote_fields=vote_fields,
)
'''


def _toy_mode(tmp_path, monkeypatch):
    (tmp_path / "toy_grade_mode.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_grade_mode")
    monkeypatch.setitem(MODES, "grade", module.MODE)
    return module


def _evaluator(local_judge, name: str, *replies: str) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": name,
            "mode": "grade",
            "prompt": "Grade: {{output}}",
            "api_base": local_judge.base_url,
            "max_retries": 0,
            "timeout_s": 5,
            "models": [{"model": f"openai/fixed/{reply}"} for reply in replies],
        }
    )


def test_a_mode_in_one_new_module_is_judged_combined_and_compared(tmp_path, monkeypatch, local_judge, runtime):
    _toy_mode(tmp_path, monkeypatch)
    traces = make_traces(3).with_columns(
        pl.when(pl.col("trace_id") == pl.col("trace_id").first())
        .then(pl.lit("short"))
        .otherwise(pl.col("output"))
        .alias("output")
    )
    split = _evaluator(local_judge, "split", '{"grade": "good"}', '{"grade": "bad"}')
    rows = judge_day(split, DAY, traces, runtime).rows
    final = rows.filter(pl.col("is_final")).sort("trace_id")
    short = traces["trace_id"][0]
    assert final.filter(pl.col("trace_id") == short).select("status", "reason").row(0) == ("SKIPPED", "too_short")
    judged = final.filter(pl.col("trace_id") != short)
    assert judged["status"].to_list() == ["COMPLETED"] * 2
    assert judged["label"].to_list() == ["unsure"] * 2 and judged["score"].to_list() == [0.5, 0.5]
    members = rows.filter(pl.col("role") == "member")
    assert sorted(members.filter(pl.col("status") == "COMPLETED")["label"].to_list()) == ["bad", "bad", "good", "good"]

    agreeing = _evaluator(local_judge, "agreeing", '{"grade": "good"}', '{"grade":"good"}')
    both = pl.concat([rows, judge_day(agreeing, DAY, traces, runtime).rows], how="diagonal_relaxed")
    table, _ = compute(
        {"split": split, "agreeing": agreeing},
        both,
        empty_frame(HUMAN_ANNOTATION_SCHEMA),
        empty_frame(IMPORTED_JUDGMENT_SCHEMA),
    )
    compared = table.filter(pl.col("section") == "judge_vs_judge")
    # compared as labels (kappa, no correlations): the two evaluators' finals, and each one's two member models
    assert set(compared["statistic"]) == {"cohen_kappa"} and compared.height == 3
    finals = compared.filter(pl.col("subject") == "agreeing")
    assert finals["reference"].to_list() == ["split"] and finals["n"].to_list() == [2]


_MODE = re.compile(r"mode(?!l)", re.IGNORECASE)  # mode, .mode, LABEL_MODES; not model


def _names_a_mode(node: ast.AST, names: set[str]) -> bool:
    strings = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return bool(strings & names)


def mode_name_uses(path: Path, names: set[str]) -> list[str]:
    """Comparisons of something called mode with a mode's name, collections of mode names bound to a *MODE*
    name, and lookups keyed by mode names: what a new mode would have to be added to."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if _names_a_mode(node, names) and any(_MODE.search(ast.unparse(o)) for o in operands):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (
                node.value is not None
                and any(_MODE.search(ast.unparse(t)) for t in targets)
                and isinstance(node.value, ast.Tuple | ast.List | ast.Set | ast.Call | ast.Dict)
                and _names_a_mode(node.value, names)
            ):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
        elif (
            isinstance(node, ast.Dict) and sum(isinstance(k, ast.Constant) and k.value in names for k in node.keys) > 1
        ):
            found.append(f"{path}:{node.lineno}: a dict keyed by mode names")
    return found


def test_no_file_outside_the_modes_names_a_mode():
    package = Path(eval_platform.__file__).parent
    modes = package / "judging" / "modes"
    names = set(MODES)
    found = [
        use
        for path in sorted(package.rglob("*.py"))
        if modes not in path.parents
        for use in mode_name_uses(path, names)
    ]
    assert found == []


def test_the_scan_finds_the_comparisons_it_forbids(tmp_path):
    source = tmp_path / "old.py"
    source.write_text(
        textwrap.dedent("""
        LABEL_MODES = ("binary", "categorical")
        planners = {"pairwise": 1, "n_wise": 2}
        if config.mode == "pairwise" or mode in {"score", "reference"}:
            pass
        if row["score"] == "pairwise_rate":
            pass
    """)
    )
    assert len(mode_name_uses(source, set(MODES))) == 4  # not the column compared with a text
