"""Every module of the call layer imports first in a fresh interpreter, and none imports the judge's semantics
(`eval_platform.judging`) when it runs: the layer sits below everything that calls models, with no cycle."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import eval_platform.llm

MODULES = sorted(info.name for info in pkgutil.walk_packages(eval_platform.llm.__path__, prefix="eval_platform.llm."))

CHECK = """
import sys
import {module}
above = sorted(name for name in sys.modules if name.startswith(("eval_platform.judging", "eval_platform.benchmarks")))
assert not above, f"{module} imports {{above}}"
"""


def test_the_layer_has_its_modules():
    assert {"eval_platform.llm.call", "eval_platform.llm.endpoint", "eval_platform.llm.batch.deliver"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_imports_first_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", CHECK.format(module=module)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
