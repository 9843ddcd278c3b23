"""The status and reason vocabulary is spelt once (schemas.py): no module fails or skips a row with a literal code.

A typo in a literal code (`"rate_limted"`) would be a new reason no analysis knows; with the names from
`schemas.py` it is an import error. Ingest quarantine reasons are a vocabulary of their own (documented in
`ingest/traces.py`) and are not checked here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import eval_platform
from eval_platform import schemas

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
    return [(line, code) for line, code in found if isinstance(code, str) and code]


def test_no_row_reason_is_a_literal_outside_schemas():
    literals = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in OTHER_VOCABULARIES or relative.name == "schemas.py":
            continue
        literals += [f"{relative}:{line}: {code!r}" for line, code in _literal_codes(ast.parse(path.read_text()))]
    # dry runs never write a row; their outcome's code is the dry run's own
    literals = [entry for entry in literals if not entry.endswith("'dry_run'")]
    assert literals == [], "reason codes spelt as literals (use the names in schemas.py):\n" + "\n".join(literals)


def test_the_vocabulary_names_each_code_once():
    for codes in (schemas.SKIP_REASONS, schemas.FAIL_REASONS):
        assert len(codes) == len(set(codes))
    # one code in both: a check skips a trace without the field it reads; a benchmark case without it fails
    assert set(schemas.SKIP_REASONS) & set(schemas.FAIL_REASONS) == {schemas.MISSING_FIELD}
    assert schemas.provider_error(503) == "provider_error:503"
