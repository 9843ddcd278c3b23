"""The evaluator examples in the documentation (README.md and docs/) are valid evaluator files."""

from __future__ import annotations

import re

import pytest

from eval_platform.judging.loading import load_evaluator
from eval_platform_tests.conftest import docs_text

BLOCKS = re.findall(r"```yaml\n# evaluator: (\w+)\n(.*?)```", docs_text(), re.DOTALL)


def test_every_mode_has_an_example():
    judges = [body for _, body in BLOCKS if not body.startswith("check:") and "\ncheck:" not in body]
    modes = {re.search(r"^mode: (\w+)", body, re.MULTILINE).group(1) for body in judges}
    assert modes == {"score", "binary", "assertion", "categorical", "reference", "pairwise", "n_wise"}
    assert len(judges) < len(BLOCKS)  # and check evaluators (no mode, no model) have theirs


@pytest.mark.parametrize(("name", "body"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_readme_example_loads(tmp_path, name, body):
    path = tmp_path / f"{name}.yaml"
    path.write_text(body, encoding="utf-8")
    assert load_evaluator(path).name == name
