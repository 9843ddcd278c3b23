"""The status and reason vocabulary is spelt once (schemas.py): no module fails or skips a row with a literal code.

A typo in a literal code (`"rate_limted"`) would be a new reason no analysis knows; with the names from
`schemas.py` it is an import error. Read in every module: a code or status written into a row in any form (a
keyword, a dict, a subscript, a `(code, detail)` pair wherever it is built), a reason's prefix spelt as a literal
(`f"judge:{code}"`), and a module-level copy of a code of `schemas.py` (`FAILED = "FAILED"`); and the README's
list of SKIPPED reasons against SKIP_REASONS. Ingest quarantine reasons are a vocabulary of their own (documented in
`ingest/traces.py`) and are not checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import eval_platform
from eval_platform import schemas
from eval_platform_tests.conftest import docs_text

PACKAGE = Path(eval_platform.__file__).parent
# Quarantine reasons (ingest), the local judge's own error codes, and benchmark scripts are other vocabularies.
OTHER_VOCABULARIES = ("ingest", "local_judge", "perf", "sample_data")
ROW_RESULTS = {"ParseFailure", "CallResult", "CallOutcome"}
REASON_KEYWORDS = {"reason", "error_reason"}
CODE = re.compile(r"[a-z]+(_[a-z]+)+")  # what a reason code looks like: snake_case words


def _code_at(node: ast.Tuple, index: int) -> list[tuple[int, str]]:
    """The tuple's element at `index` when it is a literal reason code."""
    if len(node.elts) > index:
        element = node.elts[index]
        if isinstance(element, ast.Constant) and isinstance(element.value, str) and CODE.fullmatch(element.value):
            return [(node.lineno, element.value)]
    return []


def _literal_codes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in ROW_RESULTS and node.args and isinstance(node.args[0], ast.Constant):
                found.append((node.lineno, node.args[0].value))
            for keyword in node.keywords:
                if keyword.arg in REASON_KEYWORDS and isinstance(keyword.value, ast.Constant):
                    found.append((node.lineno, keyword.value.value))
            for keyword in node.keywords:  # skip=("code", detail); needs_values=((name, "code", detail), ...)
                if keyword.arg == "skip" and isinstance(keyword.value, ast.Tuple):
                    found += _code_at(keyword.value, 0)
                if keyword.arg == "needs_values" and isinstance(keyword.value, ast.Tuple):
                    for need in keyword.value.elts:
                        found += _code_at(need, 1) if isinstance(need, ast.Tuple) else []
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
            # unit.skip = ("code", detail), reason = ("code", detail)
            if any(getattr(t, "attr", getattr(t, "id", None)) in ("skip", "reason") for t in node.targets):
                found += _code_at(node.value, 0)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "reason" and isinstance(value, ast.Constant):
                    found.append((node.lineno, value.value))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            first = node.value.elts[0]  # `return "code", detail`: a (reason, detail) pair
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and CODE.fullmatch(first.value):
                found.append((node.lineno, first.value))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(getattr(target, "attr", None) == "error_reason" for target in node.targets):
                found.append((node.lineno, node.value.value))
            # row["reason"] = "code", row["status"] = "FAILED"
            if any(_subscript_key(target) in ROW_CODE_KEYS for target in node.targets):
                found.append((node.lineno, node.value.value))
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and _is_detail(node.elts[1]):
            found += _code_at(node, 0)  # ("code", "what happened"): a (reason, detail) pair, wherever it is built
        # a row's status="FAILED" (an upper-case word: a provider batch's own "status": "failed" is not a row's)
        if isinstance(node, ast.Call):
            found += [(node.lineno, k.value.value) for k in node.keywords if k.arg == "status" and _is_status(k.value)]
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "status" and _is_status(value):
                    found.append((node.lineno, value.value))
    return [(line, code) for line, code in found if isinstance(code, str) and code]


ROW_CODE_KEYS = {"reason", "status"}
STATUS = re.compile(r"[A-Z]+")  # what a row status looks like (COMPLETED, FAILED, SKIPPED)
PREFIX = re.compile(r"[a-z]+(_[a-z]+)*:")  # `embedding:`, `judge:`: a code's prefix spelt as a literal


def _is_status(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and STATUS.fullmatch(node.value) is not None


def _subscript_key(node: ast.AST) -> object:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value
    return None


def _is_detail(node: ast.AST) -> bool:
    """A human message: an f-string, or a literal with a space in it."""
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value
    )


def _reason_values(tree: ast.AST) -> list[tuple[int, ast.AST]]:
    """Every expression written as a row's reason: reason= keywords, "reason" keys and subscripts, the first of a
    (reason, detail) pair."""
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            values += [(node.lineno, k.value) for k in node.keywords if k.arg in REASON_KEYWORDS]
        elif isinstance(node, ast.Dict):
            values += [
                (node.lineno, value)
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and key.value in REASON_KEYWORDS
            ]
        elif isinstance(node, ast.Assign) and any(_subscript_key(t) in REASON_KEYWORDS for t in node.targets):
            values.append((node.lineno, node.value))
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and _is_detail(node.elts[1]):
            values.append((node.lineno, node.elts[0]))
    return values


def _literal_prefixes(tree: ast.AST) -> list[tuple[int, str]]:
    """Reasons built as f"prefix:{code}" with the prefix spelt here."""
    found = []
    for line, value in _reason_values(tree):
        if isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant):
            head = str(value.values[0].value)
            if PREFIX.match(head):
                found.append((line, head))
    return found


def _vocabulary_values() -> dict[str, str]:
    """The value -> name of every status and reason code schemas.py spells."""
    codes = {*schemas.STATUSES, *schemas.SKIP_REASONS, *schemas.FAIL_REASONS}
    return {value: name for name, value in vars(schemas).items() if isinstance(value, str) and value in codes}


def _redefinitions(tree: ast.Module) -> list[tuple[int, str]]:
    """Module-level names bound to a code of schemas.py (or named as one), instead of imported from it."""
    values, found = _vocabulary_values(), []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            constants = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for name, constant in zip(names, constants, strict=False):
                if not isinstance(name, ast.Name) or not isinstance(constant, ast.Constant):
                    continue
                if constant.value in values or name.id in values.values():
                    found.append((node.lineno, f"{name.id} = {constant.value!r}"))
    return found


def _product_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in OTHER_VOCABULARIES or relative.name == "schemas.py":
            continue
        yield relative, ast.parse(path.read_text())


def test_no_row_reason_is_a_literal_outside_schemas():
    literals = []
    for relative, tree in _product_files():
        literals += [f"{relative}:{line}: {code!r}" for line, code in _literal_codes(tree)]
    # dry runs never write a row; their outcome's code is the dry run's own
    literals = [entry for entry in literals if not entry.endswith("'dry_run'")]
    assert literals == [], "reason codes spelt as literals (use the names in schemas.py):\n" + "\n".join(literals)


def test_the_vocabulary_names_each_code_once():
    for codes in (schemas.SKIP_REASONS, schemas.FAIL_REASONS):
        assert len(codes) == len(set(codes))
    # one code in both: a check skips a trace without the field it reads; a benchmark case without it fails
    assert set(schemas.SKIP_REASONS) & set(schemas.FAIL_REASONS) == {schemas.MISSING_FIELD}
    assert schemas.provider_error(503) == "provider_error:503"


def test_no_reason_prefix_is_a_literal_outside_schemas():
    literals = []
    for relative, tree in _product_files():
        literals += [f"{relative}:{line}: {prefix!r}" for line, prefix in _literal_prefixes(tree)]
    assert literals == [], "reason prefixes spelt as literals (use the functions in schemas.py):\n" + "\n".join(
        literals
    )


def test_no_module_redefines_a_code_of_schemas():
    copies = []
    for relative, tree in _product_files():
        copies += [f"{relative}:{line}: {what}" for line, what in _redefinitions(tree)]
    assert copies == [], "codes of schemas.py defined again (import them):\n" + "\n".join(copies)


def test_every_documented_skip_reason_is_in_the_vocabulary():
    """The README's list of SKIPPED reasons (judge_scores' `status` section) names only codes of SKIP_REASONS."""
    readme = docs_text()
    section = readme[readme.index("- **`SKIPPED`**, with a reason:") :]
    section = section[: section.index("\n\n")]
    documented = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", section))
    assert documented and documented <= set(schemas.SKIP_REASONS), documented - set(schemas.SKIP_REASONS)


def test_the_checks_see_each_way_a_code_is_written():
    source = """
COMPLETED, FAILED = "COMPLETED", "FAILED"
PARTIAL = "partial_trace"
def f(row, outcome, key):
    code, detail = outcome or ("judge_missing", "the judge returned no row")
    row["reason"] = "no_group_key"
    row.update(status="FAILED", reason=f"judge:{code}")
    lone = [(key, ("no_group_key", f"{key} is missing"))]
    return {"status": "SKIPPED", "reason": f"embedding:{code}"}
"""
    tree = ast.parse(source)
    assert sorted(code for _, code in _literal_codes(tree)) == [
        "FAILED",
        "SKIPPED",
        "judge_missing",
        "no_group_key",
        "no_group_key",
    ]
    assert [prefix for _, prefix in _literal_prefixes(tree)] == ["judge:", "embedding:"]
    assert [what for _, what in _redefinitions(tree)] == [
        "COMPLETED = 'COMPLETED'",
        "FAILED = 'FAILED'",
        "PARTIAL = 'partial_trace'",
    ]
