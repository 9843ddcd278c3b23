"""Build the committed sample data under `data/` from the project's copy of the PandaLM files.

    python -m tools.sample_data.build [--data-dir data]

Reads only `<data dir>/sources/pandalm/` and writes, deterministically (fixed seed) and idempotently (it
first removes exactly what it generates):

* `traces/2026-11-09/` ... `traces/2026-11-15/`: the 999 PandaLM items as 1998 traces, one per compared
  model, in JSONL plus, on some days, CSV, Parquet, a JSON array and one OTLP/JSON file (see `LAYOUT`);
  `traces/2026-11-12/zz_bad_rows.jsonl` (one broken row per defect) and `traces/2026-11-12/notes.txt`;
* `annotations/pandalm_human.jsonl`: the three human preference labels per item;
* `judgments/pandalm_gpt-3.5-turbo.jsonl`, `judgments/pandalm_pandalm-7b.jsonl`: the study's judge verdicts;
* `traces/<day>/agent_*.jsonl.gz` and `agent_recordings.json`: the agent app recorded under the real
  instrumentation libraries, one run per day (`sample_data.agent_traces`; needs the `test` extra).

`data/README.md` describes the result.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tools.sample_data.agent_traces import build_agent_traces, require_test_extra
from tools.sample_data.bad_rows import NOTES_TEXT, bad_rows
from tools.sample_data.otlp_export import otlp_document
from tools.sample_data.pandalm import (
    EXPERIMENT_ID,
    GPT_FILE,
    PANDALM_FILE,
    PROJECT_ID,
    TESTSET_FILE,
    Trace,
    annotation_rows,
    judgment_rows,
    load_json,
    make_traces,
)

SEED = 20261109
DAYS = tuple(f"2026-11-{day:02d}" for day in range(9, 16))
# Items per day written in a format other than the day's main JSONL file.
LAYOUT: dict[str, dict[str, int]] = {
    "2026-11-10": {"csv": 20},
    "2026-11-11": {"parquet": 20},
    "2026-11-12": {"json": 20},
    "2026-11-13": {"otlp": 16},
    "2026-11-14": {"csv": 10, "parquet": 10, "json": 10},
}
FILE_NAMES = {
    "jsonl": "traces.jsonl",
    "csv": "export.csv",
    "parquet": "export.parquet",
    "json": "chat_export.json",
    "otlp": "otel_genai_spans.json",
}
BAD_ROWS_DAY = "2026-11-12"
BAD_ROWS_FILE = "zz_bad_rows.jsonl"  # sorts after traces.jsonl, so the duplicate is the later copy
NOTES_FILE = "notes.txt"
ANNOTATIONS_FILE = Path("annotations") / "pandalm_human.jsonl"
JUDGMENT_FILES = {
    "gpt-3.5-turbo": (
        Path("judgments") / "pandalm_gpt-3.5-turbo.jsonl",
        "gpt-3.5-turbo (PandaLM study)",
        GPT_FILE,
        "gpt_result",
        "gpt_reason",
    ),
    "pandalm-7b": (
        Path("judgments") / "pandalm_pandalm-7b.jsonl",
        "pandalm-7b (PandaLM study)",
        PANDALM_FILE,
        "pandalm_result",
        "pandalm_reason",
    ),
}
OTLP_RAG_ITEMS, OTLP_AGENT_RETRIEVAL_ITEMS, OTLP_AGENT_ITEMS = 6, 2, 2


def default_data_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "data"


def assign_days(items: list[dict[str, Any]], seed: int) -> dict[str, list[dict[str, Any]]]:
    """A seeded shuffle split into len(DAYS) near-equal consecutive chunks."""
    order = sorted(items, key=lambda item: item["idx"])
    random.Random(seed).shuffle(order)
    size, extra = divmod(len(order), len(DAYS))
    chunks, start = {}, 0
    for number, day in enumerate(DAYS):
        end = start + size + (1 if number < extra else 0)
        chunks[day] = order[start:end]
        start = end
    return chunks


def split_formats(day: str, items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The day's items per format: the LAYOUT counts first, the rest in JSONL."""
    split, start = {}, 0
    for fmt, count in LAYOUT.get(day, {}).items():
        split[fmt] = items[start : start + count]
        start += count
    split["jsonl"] = items[start:]
    return split


def _by_time(traces: list[Trace]) -> list[Trace]:
    return sorted(traces, key=lambda trace: (trace.start, trace.trace_id))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def _write_csv(path: Path, traces: list[Trace]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = list(traces[0].canonical())
    writer.writerow(columns)
    for trace in traces:
        row = trace.canonical()
        row["timestamp"] = trace.start.isoformat(timespec="milliseconds")  # "+00:00" offset form
        row["metadata"] = json.dumps(row["metadata"], ensure_ascii=False)
        writer.writerow([row[column] for column in columns])
    path.write_text(buffer.getvalue(), encoding="utf-8")


def _write_parquet(path: Path, traces: list[Trace]) -> None:
    rows = [trace.canonical() for trace in traces]
    for row, trace in zip(rows, traces, strict=True):
        row["timestamp"] = trace.start
        row["metadata"] = json.dumps(row["metadata"], ensure_ascii=False)
    schema = pa.schema(
        [
            ("trace_id", pa.string()),
            ("timestamp", pa.timestamp("ms", tz="UTC")),
            ("project_id", pa.string()),
            ("experiment_id", pa.string()),
            ("variant", pa.string()),
            ("model", pa.string()),
            ("input", pa.string()),
            ("output", pa.string()),
            ("metadata", pa.string()),
            ("latency_ms", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="snappy")


def _chat_export_element(trace: Trace) -> dict[str, Any]:
    """A trace as a chat-style export would hold it, using field aliases and chat messages."""
    return {
        "id": trace.trace_id,
        "start_time": trace.start.isoformat(timespec="milliseconds"),
        "end_time": trace.end.isoformat(timespec="microseconds"),
        "project": PROJECT_ID,
        "experiment": EXPERIMENT_ID,
        "variant": trace.model,
        "model": trace.model,
        "input": [{"role": "user", "content": trace.input}],
        "output": [{"role": "assistant", "content": [{"type": "text", "text": trace.output}]}],
        "usage": {"prompt_tokens": trace.prompt_tokens, "completion_tokens": trace.completion_tokens},
        "cost": trace.cost_usd,
        "metadata": trace.metadata,
    }


def _otlp_shapes(items: list[dict[str, Any]]) -> dict[int, tuple[str, bool]]:
    """Span shape per item: RAG and agent-with-retrieval need an item input to retrieve."""
    with_input = [item["idx"] for item in items if item["input"]]
    without = [item["idx"] for item in items if not item["input"]]
    needed = OTLP_RAG_ITEMS + OTLP_AGENT_RETRIEVAL_ITEMS
    if len(with_input) < needed:
        raise SystemExit(f"only {len(with_input)} OTLP items have an input; {needed} are needed")
    shapes = {idx: ("rag", False) for idx in with_input[:OTLP_RAG_ITEMS]}
    shapes.update({idx: ("agent", True) for idx in with_input[OTLP_RAG_ITEMS:needed]})
    rest = with_input[needed:] + without
    shapes.update({idx: ("agent", False) for idx in rest[:OTLP_AGENT_ITEMS]})
    shapes.update({idx: ("chat", False) for idx in rest[OTLP_AGENT_ITEMS:]})
    return shapes


def _clear(data_dir: Path) -> None:
    for day in DAYS:
        shutil.rmtree(data_dir / "traces" / day, ignore_errors=True)
    for path in [ANNOTATIONS_FILE] + [spec[0] for spec in JUDGMENT_FILES.values()]:
        (data_dir / path).unlink(missing_ok=True)


def build(data_dir: Path, seed: int = SEED) -> dict[str, Any]:
    """Write all sample data under `data_dir`; returns a summary (files and trace counts)."""
    source = data_dir / "sources" / "pandalm"
    items = load_json(source / TESTSET_FILE)
    require_test_extra()  # before anything is deleted
    _clear(data_dir)
    written: Counter[int] = Counter()
    summary: dict[str, Any] = {"days": {}, "traces": 0}

    for day, day_items in assign_days(items, seed).items():
        folder = data_dir / "traces" / day
        folder.mkdir(parents=True, exist_ok=True)
        summary["days"][day] = {}
        for fmt, fmt_items in split_formats(day, day_items).items():
            traces = _by_time([trace for item in fmt_items for trace in make_traces(item, day, seed)])
            path = folder / FILE_NAMES[fmt]
            if fmt == "jsonl":
                _write_jsonl(path, [trace.canonical() for trace in traces])
            elif fmt == "csv":
                _write_csv(path, traces)
            elif fmt == "parquet":
                _write_parquet(path, traces)
            elif fmt == "json":
                path.write_text(
                    json.dumps([_chat_export_element(t) for t in traces], ensure_ascii=False, indent=2) + "\n",
                    encoding="utf-8",
                )
            elif fmt == "otlp":
                shapes = _otlp_shapes(fmt_items)
                document = otlp_document([(t, *shapes[t.idx]) for t in traces], seed + 1)
                path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
            written.update(trace.idx for trace in traces)
            summary["days"][day][path.name] = len(traces)
            summary["traces"] += len(traces)
            if fmt == "jsonl" and day == BAD_ROWS_DAY:
                duplicate_of = traces[0].trace_id
        if day == BAD_ROWS_DAY:
            lines = [line for line, _ in bad_rows(day, duplicate_of)]
            (folder / BAD_ROWS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
            (folder / NOTES_FILE).write_text(NOTES_TEXT, encoding="utf-8")
            summary["days"][day][BAD_ROWS_FILE] = f"{len(lines)} bad rows"
            summary["days"][day][NOTES_FILE] = "unsupported file type"

    # Count check: every item exactly once overall, as exactly its two traces.
    all_idx = {item["idx"] for item in items}
    wrong = {idx: written[idx] for idx in all_idx | set(written) if written[idx] != 2}
    if wrong or summary["traces"] != 2 * len(items):
        raise SystemExit(
            f"sample data count check failed: {summary['traces']} traces; items not written twice: {wrong}"
        )

    annotations = data_dir / ANNOTATIONS_FILE
    annotations.parent.mkdir(parents=True, exist_ok=True)
    _write_jsonl(annotations, annotation_rows(items))
    for path, source_name, file_name, result_key, reason_key in JUDGMENT_FILES.values():
        (data_dir / path).parent.mkdir(parents=True, exist_ok=True)
        _write_jsonl(
            data_dir / path, judgment_rows(items, load_json(source / file_name), source_name, result_key, reason_key)
        )
    summary["annotations"] = 3 * len(items)
    agents = build_agent_traces(data_dir, DAYS)
    for day, recordings in agents["days"].items():
        for recording in recordings.values():
            traces = sum(len(ids) for ids in recording["scenarios"].values())
            summary["days"][day][recording["files"]["traces"]] = traces
            summary["agent_traces"] = summary.get("agent_traces", 0) + traces
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", type=Path, default=default_data_dir(), help="the data folder (default: the checkout's data/)"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    summary = build(args.data_dir.resolve(), args.seed)
    for day, files in summary["days"].items():
        print(day, ", ".join(f"{name}: {count}" for name, count in files.items()))
    print(f"{summary['traces']} PandaLM traces, {summary['agent_traces']} agent traces", end=", ")
    print(f"{summary['annotations']} annotations")


if __name__ == "__main__":
    main()
