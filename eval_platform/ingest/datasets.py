"""Versioned test-case datasets `datasets/<name>/v<N>.<ext>`: finding the files, validating and reading their rows.

Framework-free, and the one reader of a dataset version: `read_dataset_version` gives a version's validated cases
(the same rows `dataset_versions` writes to `test_cases`) and its file's sha256. The benchmark tasks, a `reference`
evaluator's gold answers and a drift check's anchors all read through it, so a case means the same thing to each
of them and to the `test_cases` view. An `expected_output` written as JSON (a list of accepted answers, an
object) stays JSON: its JSON text is stored, flagged by `expected_output_json`, and `expected_value` gives it
back as the dataset wrote it, never as a Python repr.
"""

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.schemas import QUARANTINE_SCHEMA, TEST_CASE_SCHEMA, conform

_VERSION_FILE_RE = re.compile(r"^v(\d+)\.(csv|json|jsonl|parquet)$")


def dataset_files(root: Path) -> dict[str, Path]:
    """`<dataset>@v<N>` -> file, for every `datasets/<name>/v<N>.<ext>` under the data root."""
    found = {}
    for path in sorted((root / "datasets").glob("*/v*.*")):
        match = _VERSION_FILE_RE.match(path.name)
        if match:
            found[f"{path.parent.name}@v{int(match.group(1))}"] = path
    return found


def dataset_versions(root: Path, dataset: str) -> dict[int, Path]:
    """The versions of one dataset declared under the data root (`datasets/<dataset>/v<N>.<ext>`): N -> file."""
    folder = root / "datasets" / dataset
    found = {}
    for path in sorted(folder.glob("v*")) if folder.is_dir() else []:
        if match := _VERSION_FILE_RE.match(path.name):
            found[int(match.group(1))] = path
    return found


def version_sha256(path: Path) -> str:
    """The sha256 of a dataset version's file (hex): what names its content, whatever its version number."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_rows(path: Path) -> Iterator[tuple[int, object, str]]:
    """(line, parsed row or exception, raw text) for each row of a dataset file, one row at a time (a JSON array is
    parsed whole)."""
    if path.suffix == ".jsonl":
        # line by line, numbered as `str.splitlines` numbers the whole text (newline="": no translation)
        with open(path, encoding="utf-8", newline="") as handle:
            lines = (line for piece in handle for line in piece.splitlines())
            for line_no, line in enumerate(lines, start=1):
                if line.strip():
                    try:
                        yield line_no, json.loads(line), line
                    except json.JSONDecodeError as exc:
                        yield line_no, exc, line
        return
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON array of test cases")
        yield from ((i, row, json.dumps(row)) for i, row in enumerate(data, start=1))
        return
    frame = pl.read_csv(path, infer_schema=False) if path.suffix == ".csv" else pl.read_parquet(path)
    offset = 2 if path.suffix == ".csv" else 1  # CSV line 1 is the header
    yield from ((i + offset, row, json.dumps(row, default=str)) for i, row in enumerate(frame.iter_rows(named=True)))


def _expected_output(value: Any) -> dict[str, Any]:
    """The two test-case columns for an expected output: text as written, any other JSON value as JSON text."""
    if value is None or isinstance(value, str):
        return {"expected_output": value, "expected_output_json": False if value is not None else None}
    return {"expected_output": json.dumps(value, ensure_ascii=False), "expected_output_json": True}


def expected_value(case: Mapping[str, Any]) -> Any:
    """A case's expected output as its dataset wrote it: a list (the accepted answers), an object, a number or a
    boolean for JSON values, else the text. Scorers read this, never the column's JSON text as plain text."""
    text = case.get("expected_output")
    return json.loads(text) if text is not None and case.get("expected_output_json") else text


CASES_PER_FRAME = 10_000


def validate_dataset(root: Path, name: str, version: int, path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Valid test cases and quarantined rows of one dataset version."""
    relative = str(path.relative_to(root))
    cases: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    seen: set[str] = set()
    frames: list[pl.DataFrame] = []
    now = datetime.now(UTC)
    for line, row, raw in read_rows(path):
        if len(cases) == CASES_PER_FRAME:  # columnar a block at a time: a large dataset is never all Python dicts
            frames.append(conform(pl.DataFrame(cases), TEST_CASE_SCHEMA))
            cases = []
        problem = None
        if isinstance(row, Exception):
            problem = ("invalid_json", f"{relative} line {line}: not valid JSON ({row})")
        elif not isinstance(row, dict):
            problem = ("not_an_object", f"{relative} line {line}: a test case must be an object")
        elif not isinstance(row.get("input"), str) or not row["input"].strip():
            problem = ("missing_field:input", f"{relative} line {line}: field 'input' is required text")
        else:
            case_id = str(row.get("case_id") or row.get("id") or line)
            if case_id in seen:
                problem = ("duplicate_case_id", f"{relative} line {line}: case id '{case_id}' appears twice")
        if problem:
            rejects.append(
                {
                    "file": relative,
                    "line": line,
                    "reason": problem[0],
                    "detail": problem[1],
                    "raw": raw[:10_000],
                    "quarantined_at": now,
                }
            )
            continue
        assert isinstance(row, dict)  # a row that is not an object was quarantined above
        seen.add(case_id)
        metadata = row.get("metadata") or {}
        cases.append(
            {
                "dataset": name,
                "version": version,
                "case_id": case_id,
                "input": row["input"],
                **_expected_output(row.get("expected_output")),
                "metadata": metadata if isinstance(metadata, str) else json.dumps(metadata, sort_keys=True),
                "source_file": relative,
                "source_line": line,
            }
        )
    quarantined = (
        conform(pl.DataFrame(rejects), QUARANTINE_SCHEMA) if rejects else conform(pl.DataFrame(), QUARANTINE_SCHEMA)
    )
    quarantined = quarantined.with_columns(
        pl.lit("dataset_versions").alias("source"), pl.lit(f"{name}@v{version}").alias("partition")
    )
    frames.append(conform(pl.DataFrame(cases), TEST_CASE_SCHEMA))
    return pl.concat(frames), quarantined


@dataclass(frozen=True)
class DatasetVersion:
    """One dataset version as every reader sees it: its validated cases (TEST_CASE_SCHEMA, columnar) and its file."""

    name: str
    version: int
    cases: pl.DataFrame
    sha256: str  # of the version's file: what names its content, whatever its version number

    @property
    def partition_key(self) -> str:
        """Its `dataset_versions` partition (`<name>@v<N>`)."""
        return f"{self.name}@v{self.version}"

    def label(self) -> str:
        """`<name>@v<N> (<sha256 prefix>)`: the version and the content it had when read."""
        return f"{self.name}@v{self.version} ({self.sha256[:12]})"


def resolve_version(root: Path, name: str, version: int | None) -> tuple[int, Path]:
    """(version, file) of a declared dataset version: `version`, or the newest declared when None. Raises
    FileNotFoundError naming what is declared when there is no such file."""
    versions = dataset_versions(root, name)
    if not versions:
        raise FileNotFoundError(f"no datasets/{name}/v<N>.<ext> under {root}")
    chosen = max(versions) if version is None else version
    if chosen not in versions:
        raise FileNotFoundError(f"dataset '{name}' has no version {chosen}; it has {sorted(versions)}")
    return chosen, versions[chosen]


def read_dataset_version(root: Path, name: str, version: int | None = None) -> DatasetVersion:
    """A dataset version's cases (the newest declared when `version` is None), read from its file and validated by
    `validate_dataset`, the function `dataset_versions` writes `test_cases` with: a reader and the view never
    disagree, and a file changed in place is read as it is now (its sha256 says which content it was)."""
    chosen, path = resolve_version(root, name, version)
    return DatasetVersion(name, chosen, validate_dataset(root, name, chosen, path)[0], version_sha256(path))
