"""The package's floors hold: no import circle between its packages, and no import that runs back up the floors
that docs/architecture.md draws (its "Floors" table: the call layer `llm/` below judging, judging below
benchmarks, and so on).

Read from the source (ast), not from a running interpreter: a package is a folder directly under
`eval_platform/` (with its subfolders: `llm/batch/` is `llm`) or a module directly under it (`schemas`, `costs`).
Every import counts, wherever it stands: at module level, under `if TYPE_CHECKING:` (a type named is a dependency
a reader follows) and inside a function (it runs when the function does: an import moved into a function hides a
circle, it does not open it). Imports within one package are not looked at (a registry imports its members).
`KNOWN` names the arrows still to remove, each with why it stands; one that is gone fails until it is struck.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import eval_platform

PACKAGE = Path(eval_platform.__file__).resolve().parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
_ROW = re.compile(r"^\|\s*(\d+)\s*\|(.*)\|\s*$")
# (package, package it imports) -> why the arrow still stands (docs/known-gaps.md)
KNOWN: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """`eval_platform.llm.batch.api` -> `llm`; `eval_platform.schemas` -> `schemas`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imported(path: Path) -> list[tuple[str, int]]:
    """(module named, line) of every `eval_platform` import of the file, wherever it stands, relative ones
    resolved. `from a.b import c` names `a.b` (and `a.b.c`, which may be a module)."""
    module = module_name(path)
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = here[: len(here) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found += [(base, node.lineno)] + [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name == "eval_platform" or name.startswith("eval_platform.")]


def arrows() -> dict[tuple[str, str], list[str]]:
    """(package, package it imports) -> where: `file:line` of each import between two packages."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = package_of(module_name(path))
        for name, line in imported(path):
            target = package_of(name)
            if target != source and target != "eval_platform":
                where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                if where not in found[source, target]:
                    found[source, target].append(where)
    return {pair: where for pair, where in found.items() if pair not in KNOWN}


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def floors() -> dict[str, int]:
    """package -> its floor, from the "Floors" table of docs/architecture.md (1 is the ground)."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## Floors", 1)[1]
    placed = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            for name in re.findall(r"`([\w./]+?)/?`", match.group(2)):
                placed[name.removesuffix(".py")] = int(match.group(1))
    return placed


def packages() -> set[str]:
    return {package_of(module_name(path)) for path in PACKAGE.rglob("*.py")} - {"eval_platform"}


def test_the_floors_place_every_package():
    placed = floors()
    assert not packages() - set(placed), f"docs/architecture.md places no floor for {sorted(packages() - set(placed))}"
    assert not set(placed) - packages(), f"docs/architecture.md places what is no package: {set(placed) - packages()}"


def test_no_import_circle_between_packages():
    found = arrows()
    tied = circles(set(found))
    detail = [
        f"{a} -> {b}: {', '.join(found[a, b])}" for circle in tied for a in circle for b in circle if (a, b) in found
    ]
    assert not tied, f"import circles between packages: {tied}\n" + "\n".join(detail)


def test_no_import_runs_back_up_the_floors():
    placed = floors()
    upward = [
        f"{a} (floor {placed[a]}) -> {b} (floor {placed[b]}): {', '.join(where)}"
        for (a, b), where in sorted(arrows().items())
        if a in placed and b in placed and placed[b] > placed[a]
    ]
    assert not upward, "imports that run back up the floors:\n" + "\n".join(upward)


def test_the_call_layer_knows_nothing_of_evaluators():
    """`llm/` takes a request, an endpoint and a budget: the judge's configuration is never named there."""
    named = [
        f"{path.relative_to(PACKAGE.parent)}:{number}"
        for path in sorted((PACKAGE / "llm").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\bEvaluatorConfig\b", line)
    ]
    assert not named, f"the call layer names EvaluatorConfig: {named}"


def test_every_known_arrow_still_stands():
    """An arrow of `KNOWN` that is gone is struck from it, so the test holds it from then on."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = package_of(module_name(path))
        found |= {(source, package_of(name)) for name, _ in imported(path)}
    assert not set(KNOWN) - found, f"gone, strike them from KNOWN: {sorted(set(KNOWN) - found)}"
