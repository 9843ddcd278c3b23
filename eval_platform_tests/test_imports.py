"""Every module of `eval_platform` imports first, alone, in a fresh interpreter.

A registry whose members import it back (or any other cycle) works when something else happened to import the
right module first and breaks for the user who imports that one module directly: a script, a notebook, a test run
alone. One subprocess per module is the only way to see it; a shared interpreter hides it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import eval_platform

PACKAGE = Path(eval_platform.__file__).resolve().parent


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":  # running it is its purpose (it starts a server); importing it is not a use
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _import_alone(module: str) -> tuple[str, str | None]:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
        timeout=300,
    )
    return module, None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def test_every_module_imports_first_in_a_fresh_interpreter():
    modules = _modules()
    assert "eval_platform.scoring.squad" in modules and "eval_platform.definitions" in modules
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        failures = {module: error for module, error in pool.map(_import_alone, modules) if error}
    assert not failures, "\n".join(f"{module}: {error}" for module, error in failures.items())
