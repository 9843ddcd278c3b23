"""Reading YAML configuration files into pydantic models, with errors that name the file and the field."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Model = TypeVar("Model", bound=BaseModel)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


Named = TypeVar("Named", bound=_Named)

# The code location's log: `dagster dev` and `dagster code-server` print what this logger writes at load time.
log = logging.getLogger("eval_platform.config")


def read_mapping(path: Path, error: type[Exception], expected: str) -> dict[str, Any]:
    """The YAML file's top-level mapping; `error` naming the file when it is not valid YAML or not a mapping."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    except ValueError as exc:  # a scalar YAML reads as a date or time but that does not exist (2026-13-11)
        raise error(f"{path}: a value is not a valid date or time: {exc}") from exc
    if not isinstance(raw, dict):
        raise error(f"{path}: expected {expected}, got {type(raw).__name__}")
    return raw


def validate(path: Path, model: type[Model], raw: dict[str, Any], error: type[Exception]) -> Model:
    """`model` from `raw`; every validation problem is listed as `field '<dotted path>': <message>`."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"field '{_field_path(err['loc'])}': {err['msg']}" for err in exc.errors())
        raise error(f"{path}: {problems}") from None


def field_errors(model: type[BaseModel], problems: list[tuple[tuple[str | int, ...], Any, str]]) -> ValidationError:
    """A validation error naming each problem's field, for a check that reads several fields at once (a model
    validator's ValueError would be reported against `(file)`): `problems` are (loc, input, message). Raised from a
    validator, pydantic reports it at the loc given (under the enclosing model's field, when nested)."""
    return ValidationError.from_exception_data(
        model.__name__,
        [
            InitErrorDetails(type=PydanticCustomError("config_field", "{why}", {"why": why}), loc=loc, input=value)
            for loc, value, why in problems
        ],
    )


def load_named(path: Path, model: type[Model], error: type[Exception], what: str, why: str = "") -> Model:
    """A config file whose `name` is the file's stem (filled in when absent, an error when different)."""
    raw = read_mapping(path, error, f"a mapping of {what} fields")
    raw.setdefault("name", path.stem)
    if raw["name"] != path.stem:
        raise error(
            f"{path}: field 'name' is '{raw['name']}' but the file is named '{path.name}'; they must match{why}"
        )
    return validate(path, model, raw, error)


def load_folder(
    folder: Path,
    load: Callable[[Path], Named],
    error: type[Exception],
    what: str,
    broken: dict[str, str] | None = None,
    *,
    skip: Collection[str] = (),
    broken_key: Callable[[Path], str] = lambda path: path.name,
) -> dict[str, Named]:
    """Every config file (`*.yaml`, `*.yml`) of a folder, loaded by `load`, by the name it declares, in file
    order; a missing folder has none; `skip`: file stems that are not such files (`benchmarks/models.yaml`).

    A file whose `load` raises `error` raises, unless `broken` is given: then its error is recorded there (under
    `broken_key(path)`, the file name by default, and in the code location's log; `what` names what a file holds)
    and the other files load, so one typo does not take the code location down. Two files declaring the same name
    are an error on the second, since one would otherwise silently replace the other."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    loaded: dict[str, Named] = {}
    files: dict[str, Path] = {}
    for path in sorted(folder.glob("*.y*ml")):
        if path.suffix not in (".yaml", ".yml") or path.stem in skip:
            continue
        try:
            config = load(path)
            if config.name in files:
                raise error(
                    f"{path}: field 'name': {what} '{config.name}' is already defined by {files[config.name].name}; "
                    f"{what} names must be unique"
                )
        except error as exc:
            if broken is None:
                raise
            record_broken(broken, broken_key(path), exc, f"{what} file")
            continue
        loaded[config.name] = config
        files[config.name] = path
    return loaded


def record_broken(broken: dict[str, str], key: str, error: Exception, what: str) -> None:
    """A config file (or entry) that did not load: kept in `broken` for the UI, and written to the code location's
    log, so an error is seen where it is looked for, not only on the asset it would have fed."""
    broken[key] = str(error)
    log.error("%s skipped (the rest loads): %s", what, error)


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(file)"
