"""`Strict`, the one base of every validated config model and section (evaluator, suite, experiment, fine-tuning
export, annotation task, alerting, scorer and judge-mode options): an unknown field is an error, never ignored (a
typo is named with its file and field by `config_files.validate`), and a loaded value is frozen. A low-level module
of its own (pydantic only), so that every layer can build on it without importing another's."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown fields are refused, values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)
