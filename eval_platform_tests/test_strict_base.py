"""One strict base: every config model refuses unknown fields through `eval_platform.strict.Strict`, the only place
that says `extra="forbid"`, so a new config section cannot quietly accept a typo or forget to freeze."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
import pytest

import eval_platform
from eval_platform.alerting.destinations import AlertingConfig
from eval_platform.annotation.config import TasksFile, TraceSource
from eval_platform.benchmarks.config import Suite
from eval_platform.experiments.config import ExperimentConfig
from eval_platform.finetune.config import FinetuneExport
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.scoring.base import ScorerOptions
from eval_platform.strict import Strict

PACKAGE = Path(eval_platform.__file__).parent
FORBID = re.compile(r"""ConfigDict\([^)]*extra\s*=\s*["']forbid["']""")


def test_only_the_strict_base_says_extra_forbid():
    sayers = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if FORBID.search(path.read_text()))
    assert sayers == ["strict.py"]


@pytest.mark.parametrize(
    "model",
    [
        AlertingConfig,
        TraceSource,
        Suite,
        ExperimentConfig,
        FinetuneExport,
        TasksFile,
        EvaluatorConfig,
        ScorerOptions,
    ],
)
def test_every_config_model_is_strict(model):
    assert issubclass(model, Strict)
    assert model.model_config["extra"] == "forbid" and model.model_config["frozen"] is True


def test_a_field_given_by_its_python_name_still_loads_where_the_file_uses_an_alias():
    source = TraceSource(from_="2026-11-09", to="2026-11-10")
    assert source.day_keys() == ["2026-11-09", "2026-11-10"]
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        TraceSource(days=["2026-11-09"], day="2026-11-09")
