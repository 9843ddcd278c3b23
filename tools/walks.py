"""Walks: how many of the package's files one tiny, real run passes through, and how often it comes back to one.

Run from a tree's root (its `eval_platform/` is the one measured): `python -m tools.walks`.

Two walks, each a real run in a fresh Dagster instance (temp `DAGSTER_HOME`) over a temp data root, judged over real
HTTP by the project's local judge server, started as a separate process on 127.0.0.1 (so its files are not counted):

- (a) `jsonl`: one JSONL trace (the first line of `data/traces/2026-11-09/traces.jsonl`) in a trace file, ingested
  (`traces` partition) and judged by one trace-target evaluator (`judge_scores` partition) into its row;
- (b) `otlp`: one OTLP agent trace (the `single_turn` trace of the openai_agents recording under
  `eval_platform_tests/fixtures/otel/`), ingested and judged by one span-target evaluator (`execute_tool` spans).

Only the two `dagster.materialize` calls are profiled. Before them the script imports the package and builds the
definitions (so import-time code is not part of a walk); module bodies (`<module>` code, a lazy import during the
run) are not counted either. Dagster's, DuckDB's, Polars' and every other non-package frame are not counted, but they
do not break a walk: what counts is which package file the nearest package frame on the stack belongs to.

How it counts (`sys.setprofile` and `threading.setprofile`, the interpreter's "call" event of every Python frame,
generators and coroutines resumed included; C functions ignored):

- a package file is a `.py` file under the measured tree's `eval_platform/`;
- an *entry* into package file F is a call of a function defined in F whose nearest package frame further down the
  same thread's stack is in another file than F, or which has no package frame below it (a call from Dagster, or the
  first package frame of a worker thread). A call from F into F is no entry, even through non-package frames;
- *files entered*: how many distinct package files had at least one entry;
- a *re-entry*: every entry into a file after its first entry in the same walk (F was left for another package
  file, or back to the framework, and control came back into F through a call).

The run's result is checked (the row is in `judge_scores`, COMPLETED) so a walk that stopped early is not reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path.cwd()
PACKAGE = (ROOT / "eval_platform").resolve()
JSONL_DAY = "2026-11-09"
OTEL_FOLDER = ROOT / "eval_platform_tests" / "fixtures" / "otel" / "openai_agents"


class Walk:
    """Counts entries into package files (see the module docstring) while installed as the profile function."""

    def __init__(self) -> None:
        self.entries: Counter[str] = Counter()
        self._is_package: dict[str, str | None] = {}

    def _file(self, code) -> str | None:
        name = code.co_filename
        known = self._is_package.get(name, "?")
        if known == "?":
            path = Path(name).resolve() if name.endswith(".py") else None
            known = str(path.relative_to(PACKAGE.parent)) if path and path.is_relative_to(PACKAGE) else None
            self._is_package[name] = known
        return known

    def __call__(self, frame, event, arg) -> None:
        if event != "call":
            return
        code = frame.f_code
        here = self._file(code)
        if here is None or code.co_name == "<module>":
            return
        below = frame.f_back
        while below is not None:
            there = self._file(below.f_code)
            if there is not None:
                if there == here:
                    return
                break
            below = below.f_back
        self.entries[here] += 1

    def start(self) -> None:
        threading.setprofile(self)
        sys.setprofile(self)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def start_judge() -> tuple[subprocess.Popen, str]:
    """The local judge in a process of its own, on a free port of 127.0.0.1."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_platform.local_judge", "--port", "0", "--data-root", str(ROOT / "data")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise SystemExit(f"the local judge did not start: {line!r}")
    return process, line.rsplit(" ", 1)[-1]


def evaluator_yaml(base_url: str, span: bool) -> str:
    config = {
        "name": "walk",
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "model": "openai/mock",
        "api_base": base_url,
        "prompt": "Question: {{input}}\nAnswer: {{output}}",
        "max_retries": 0,
        "timeout_s": 10,
    }
    if span:
        config |= {"target": "span", "span": {"operation": "execute_tool"}}
    return json.dumps(config)  # JSON is YAML


def one_otlp_trace(target: Path) -> str:
    """The single_turn trace's spans of the recording, in an OTLP/JSON file; returns the day of its first span.
    Its times are moved 10 days back (a recording of today would have no daily partition yet)."""
    from datetime import UTC, datetime

    shift = 10 * 86400 * 10**9

    def moved(value):
        if isinstance(value, dict):
            return {k: str(int(v) - shift) if k.endswith("UnixNano") else moved(v) for k, v in value.items()}
        return [moved(v) for v in value] if isinstance(value, list) else value

    [trace_id] = json.loads((OTEL_FOLDER / "manifest.json").read_text())["scenarios"]["single_turn"]
    lines, day = [], None
    for text in (OTEL_FOLDER / "traces.jsonl").read_text().splitlines():
        request = moved(json.loads(text))
        kept = False
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if s["traceId"] == trace_id]
                kept = kept or bool(scope["spans"])
                if scope["spans"] and day is None:
                    start = int(scope["spans"][0]["startTimeUnixNano"]) / 1e9
                    day = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d")
        if kept:
            lines.append(json.dumps(request))
    assert day is not None, "the recording lost its single_turn trace"
    (target / day).mkdir(parents=True)
    (target / day / "traces.jsonl").write_text("\n".join(lines) + "\n")
    return day


def one_jsonl_trace(target: Path) -> str:
    first = (ROOT / "data" / "traces" / JSONL_DAY / "traces.jsonl").read_text().splitlines()[0]
    (target / JSONL_DAY).mkdir(parents=True)
    (target / JSONL_DAY / "walk.jsonl").write_text(first + "\n")
    return JSONL_DAY


def materialize(defs, asset_key: str, partition_key, instance) -> bool:
    """One asset partition in a run of the instance (as `eval-platform judge --day` does, not counted: the harness)."""
    import dagster as dg

    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset_key],
        partition_key=partition_key,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    return result.success


def walk(kind: str, base_url: str) -> Walk:
    with tempfile.TemporaryDirectory(prefix=f"walk-{kind}-") as tmp:
        root = Path(tmp) / "data"
        (root / "evaluators").mkdir(parents=True)
        (root / "evaluators" / "walk.yaml").write_text(evaluator_yaml(base_url, span=kind == "otlp"))
        day = (one_otlp_trace if kind == "otlp" else one_jsonl_trace)(root / "traces")
        os.environ["EVAL_PLATFORM_DATA_DIR"] = str(root)
        os.environ["DAGSTER_HOME"] = str(Path(tmp) / "dagster_home")

        import dagster as dg

        from eval_platform.definitions import build_definitions
        from eval_platform.storage.warehouse import open_catalog
        from eval_platform.ui import dagster_home

        dagster_home(root)
        defs = build_definitions(root)
        key = dg.MultiPartitionKey({"date": day, "evaluator": "walk"})
        counted = Walk()
        with dg.DagsterInstance.get() as instance:
            counted.start()
            try:
                ingested = materialize(defs, "traces", day, instance)
                judged = ingested and materialize(defs, "judge_scores", key, instance)
            finally:
                counted.stop()
        if not judged:
            raise SystemExit(f"walk {kind}: the run failed (ingested: {ingested})")
        with open_catalog(root) as conn:
            statuses = conn.execute("SELECT status FROM judge_scores WHERE evaluator = 'walk'").fetchall()
        if ("COMPLETED",) not in statuses:
            raise SystemExit(f"walk {kind}: no COMPLETED row, only {statuses}")
        return counted


WALKS = {"jsonl": "(a) a JSONL trace to its judge_scores row", "otlp": "(b) an OTLP agent trace to a span-target row"}


def main(argv: list[str] | None = None) -> int:
    """Each walk in a fresh process (nothing cached by the other walk); `--one KIND` is that process."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        for kind in WALKS:
            subprocess.run([sys.executable, "-m", "tools.walks", "--one", kind], cwd=ROOT, check=True)
        return 0
    kind = argv[1]
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import eval_platform

    assert Path(eval_platform.__file__).resolve().parent == PACKAGE, eval_platform.__file__
    judge, base_url = start_judge()
    try:
        counted = walk(kind, base_url)
    finally:
        judge.terminate()
        judge.wait(timeout=10)
    reentries = sum(n - 1 for n in counted.entries.values())
    print(f"{WALKS[kind]}: {len(counted.entries)} files entered, {reentries} re-entries", flush=True)
    for name in sorted(counted.entries, key=lambda f: (-counted.entries[f], f)):
        print(f"  {counted.entries[name]:>5}  {name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
