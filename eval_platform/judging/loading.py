"""Loading evaluator files: one YAML file in `<data root>/evaluators/` is one evaluator.

Any mistake is an `EvaluatorConfigError` that names the file, the field and what to do about it; a
`reference` evaluator's dataset (and version) must be declared under the data root.
A valid file becomes one value of the `evaluator` partition dimension of `judge_scores`.
"""

from __future__ import annotations

from pathlib import Path

from eval_platform.config_files import load_folder, load_named
from eval_platform.ingest.datasets import dataset_versions
from eval_platform.judging.config import EvaluatorConfig


class EvaluatorConfigError(ValueError):
    """A broken evaluator file: the message names the file and the field."""


def load_evaluator(path: Path, data_root: Path | None = None) -> EvaluatorConfig:
    """Load and validate one evaluator file; errors name the file and the field. With `data_root`, a reference
    dataset (and version) the evaluator names must be declared there (see `check_reference_dataset`)."""
    config = load_named(path, EvaluatorConfig, EvaluatorConfigError, "evaluator", " (the name is the partition key)")
    if data_root is not None:
        check_reference_dataset(path, config, data_root)
    return config


def check_reference_dataset(path: Path, config: EvaluatorConfig, data_root: Path) -> None:
    """A `reference` evaluator's dataset must exist when it loads, where "exists" means declared: a file
    `datasets/<name>/v<N>.<ext>` under the data root (the version named, or any when none is). Whether that
    version is materialized in `test_cases` yet is checked by the run, which can then say to materialize it."""
    options = config.reference
    if options is None or options.source != "dataset":
        return
    assert options.dataset is not None  # `ReferenceOptions`: source 'dataset' names its dataset
    versions = dataset_versions(data_root, options.dataset)
    if not versions:
        raise EvaluatorConfigError(
            f"{path}: field 'reference.dataset': unknown dataset '{options.dataset}' "
            f"(no datasets/{options.dataset}/v<N>.<ext> under {data_root})"
        )
    if options.version is not None and options.version not in versions:
        raise EvaluatorConfigError(
            f"{path}: field 'reference.version': dataset '{options.dataset}' has no version {options.version}; "
            f"declared: {sorted(versions)} (datasets/{options.dataset}/v<N>.<ext>)"
        )


def load_evaluators(
    directory: Path, broken: dict[str, str] | None = None, data_root: Path | None = None
) -> dict[str, EvaluatorConfig]:
    """All evaluators in a folder, by name, sorted. A missing folder has none.

    A file that does not validate raises, unless `broken` is given: then its error is recorded there
    (by file name, and in the code location's log) and the other evaluators load, so one typo does not take
    the code location down. `data_root`: where reference datasets are declared; by default the folder holding
    `directory` (the data root's layout: `<data root>/evaluators/`).
    """
    return load_folder(
        directory,
        lambda path: load_evaluator(path, data_root or directory.parent),
        EvaluatorConfigError,
        "evaluator",
        broken,
    )


def whole_trace_evaluator(
    evaluators: dict[str, EvaluatorConfig], name: str, where: str, error: type[Exception], use: str
) -> EvaluatorConfig:
    """The loaded evaluator `name`, named by a config that reads its verdicts per trace (an annotation task's
    source, a fine-tuning export's threshold); `error` at `where` (the file and field) when it is not loaded
    (unknown or broken) or does not judge one whole trace per row: its verdicts then cannot `use`."""
    evaluator = evaluators.get(name)
    if evaluator is None:
        known = ", ".join(sorted(evaluators)) or "none"
        raise error(f"{where}: no loaded evaluator '{name}' (unknown or broken; known: {known})")
    if evaluator.judge_mode.unit != "trace" or evaluator.judged_target != "trace":
        raise error(
            f"{where}: evaluator '{name}' judges {evaluator.judge_mode.unit}s / {evaluator.judged_target}s, not "
            f"one whole trace per row: its verdicts cannot {use}"
        )
    return evaluator
