"""BERTScore from a local model folder (`local_models.bertscore`), against the case's reference(s).

`bertscore` gives each case its own value (the pair's precision, recall or F1, token weights 1), so its task value
is their mean and it can be a check. `bertscore_idf` weights tokens by their inverse document frequency over the
references of the task's scored rows (Zhang et al.'s importance weighting): a case's value depends on every other
case's reference, so it is a corpus scorer. Its task value is the mean over rows of the idf-weighted score, with
an interval that resamples cases (the idf weights kept fixed); a row's own stored value, computed before the
task's references are all known, is the unweighted score `bertscore` gives. Two names rather than an `idf`
option, because what a scorer is (per case or corpus) is declared on it, never switched by an option.

The model is read from `model_path` and never downloaded; the options are checked when the suite loads (the
folder, its layer count, torch and transformers installed), without loading the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from eval_platform.local_models import bertscore as local_bertscore
from eval_platform.local_models.loading import check_installed, read_layout
from eval_platform.scoring.base import Scorer, ScorerOptions, reference_field
from eval_platform.scoring.squad import references


class BertScoreOptions(ScorerOptions):
    model_path: str = Field(
        description="A model folder on this machine (save_pretrained's, or a sentence-transformers model's)."
    )
    num_layers: int | None = Field(
        None, ge=0, description="The output of this many transformer layers; by default all of the model's."
    )
    metric: Literal["f1", "precision", "recall"] = "f1"
    reference_field: str = "expected_output"
    batch_size: int = Field(local_bertscore.DEFAULT_BATCH_SIZE, ge=1, description="Texts per forward pass.")

    @field_validator("model_path")
    @classmethod
    def _usable(cls, model_path: str) -> str:
        check_installed()  # without importing torch: a suite loads in milliseconds
        read_layout(model_path)  # a missing folder or one without config.json: an error naming it
        return model_path

    @model_validator(mode="after")
    def _layers(self) -> BertScoreOptions:
        layers = read_layout(self.model_path).num_hidden_layers
        if self.num_layers is not None and layers is not None and self.num_layers > layers:
            raise ValueError(f"num_layers {self.num_layers} is more than the model's {layers} layers")
        return self


def _scores(
    outputs: Sequence[str], cases: Sequence[Mapping[str, Any]], options: BertScoreOptions, idf: bool
) -> list[float]:
    refs = [references(case, options.reference_field) for case in cases]
    weights = None
    if idf:
        weights = local_bertscore.idf_weights(options.model_path, [r for group in refs for r in group])
    scores = local_bertscore.bertscore(
        options.model_path, list(outputs), refs, options.num_layers, weights, options.batch_size
    )
    return [score.metric(options.metric) for score in scores]


def _value(output: str, case: Mapping[str, Any], options: BertScoreOptions) -> float:
    (value,) = _scores([output], [case], options, idf=False)
    return value


def _idf_statistics(outputs: Sequence[str], cases: Sequence[Mapping[str, Any]], options: BertScoreOptions):
    # A row's idf-weighted value and a count: summed over any set of cases, their mean is sum / count.
    values = _scores(outputs, cases, options, idf=True) if outputs else []
    return np.column_stack([np.asarray(values, dtype=float), np.ones(len(values))]).reshape(len(values), 2)


def _from_statistics(summed: np.ndarray, _options: BertScoreOptions) -> float:
    return float(summed[0] / summed[1])


def _idf_aggregate(_values, outputs: Sequence[str], cases: Sequence[Mapping[str, Any]], options) -> float | None:
    if not outputs:
        return None
    return float(np.mean(_scores(outputs, cases, options, idf=True)))


SCORERS = [
    Scorer("bertscore", BertScoreOptions, _value, reference_field),
    Scorer(
        "bertscore_idf",
        BertScoreOptions,
        _value,
        reference_field,
        _idf_aggregate,
        aggregation="corpus",
        statistics=_idf_statistics,
        from_statistics=_from_statistics,
    ),
]
