"""Every third-party package `eval_platform` imports is declared in pyproject.toml, so `pip install .` brings it.

A package that arrives only through another one (httpx through the test extra, numpy through scipy, yarl through
aiohttp) works on the developer's machine and breaks, or changes under the user, when that other package drops it.
Every import of every module is read (a lazy import inside a function too), its top-level name mapped to the
distributions that provide it (importlib.metadata.packages_distributions) and one of them must be declared in
`[project] dependencies`. The local models (local_models) may use their extra (local-models) instead, the OTLP
verdict export (export/otlp.py) its extra (otel-export). The development scripts (benchmarks, the sample-data
generator and its instrumented demo app) are in tools/, outside the package: they use the test extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import eval_platform

PACKAGE = Path(eval_platform.__file__).resolve().parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
EXTRA_SCOPES = {
    "local_models/": "local-models",
    "export/otlp.py": "otel-export",  # the OTLP verdict export, imported only when an otlp destination sends
}
NOT_INSTALLED_HERE: set[str] = set()


def _normalized(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def imported_top_levels(source: str) -> set[str]:
    """The top-level names of every absolute import in `source` (module level or inside a function)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__", "eval_platform"}


def undeclared_imports(package: Path, pyproject: dict) -> list[str]:
    """`<file>: <import> (<distributions>)` for each import no declaration in its scope covers."""
    project = pyproject["project"]
    required = {_normalized(r) for r in project["dependencies"]}
    extras = {name: {_normalized(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}
    providers = packages_distributions()
    missing = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        allowed = set(required)
        for scope, extra in EXTRA_SCOPES.items():
            if relative.startswith(scope):
                allowed |= extras[extra]
        for name in sorted(imported_top_levels(path.read_text(encoding="utf-8"))):
            if name in NOT_INSTALLED_HERE:
                continue
            distributions = {_normalized(d) for d in providers.get(name, [])}
            if not distributions & allowed:
                missing.append(f"{relative}: {name} ({', '.join(sorted(distributions)) or 'not installed'})")
    return missing


def test_every_imported_package_is_declared():
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    missing = undeclared_imports(PACKAGE, pyproject)
    assert missing == [], "imported but not declared in pyproject.toml [project] dependencies:\n" + "\n".join(missing)


def test_the_check_sees_a_lazy_import_of_a_test_only_package(tmp_path):
    (tmp_path / "module.py").write_text("def f():\n    import httpx\n    import statsmodels.api\n    import json\n")
    pyproject = {"project": {"dependencies": ["httpx>=0.27"], "optional-dependencies": {"test": ["statsmodels"]}}}
    assert undeclared_imports(tmp_path, pyproject) == ["module.py: statsmodels (statsmodels)"]
