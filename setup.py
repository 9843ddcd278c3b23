"""The wheel's demo data: the demo's inputs from `data/` copied into the built package as `eval_platform/demo_data/`,
licence files included, so `eval-platform demo` runs from a wheel installed from an index (no checkout). The
repository keeps one copy of them, in `data/`; everything else about the package is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# The demo's inputs (data/README.md says what each is and where it comes from; each source keeps its LICENSE and
# PROVENANCE.md). Not the outputs a run writes beside them (warehouse/, state/, dagster_home/, the catalog, reports/),
# nor the sources only the tests read (sources/llmfao, sources/reference_stats).
DEMO_INPUTS = (
    "README.md",
    "agent_recordings.json",
    "annotation_tasks",
    "annotations",
    "benchmarks",
    "datasets",
    "evaluators",
    "experiments",
    "judgments",
    "sources/gsm8k",
    "sources/llmbar",
    "sources/pandalm",
    "traces",
)


class BuildPyWithDemoData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads data/ of the checkout itself
            return
        target = Path(self.build_lib) / "eval_platform" / "demo_data"
        shutil.rmtree(target, ignore_errors=True)
        for name in DEMO_INPUTS:
            source = HERE / "data" / name
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", ".*"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildPyWithDemoData})
