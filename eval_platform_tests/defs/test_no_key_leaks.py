"""No provider key, nor any 8-character piece of one, is kept anywhere, whatever the provider echoes.

The local judge plays a provider that echoes the caller's credentials on every path (see
`tools/local_judge_wires/echo_key.py`): in error bodies long enough that a key straddles any cut a client makes, in
replies that parse (reasoning and reported model), and in a 503 answering the first poll of a batch. A fresh process
materializes, on a real Dagster instance in a temporary DAGSTER_HOME, judge_scores through the lean
OpenAI-compatible path, the litellm path (Azure and Anthropic) and batch mode (OpenAI, Azure, Anthropic), and a
benchmark suite whose models under test echo the key; then the dry run plans the same. Every file under the data
root and DAGSTER_HOME (Parquet and SQLite decoded cell by cell, compute logs, the judge cache, plain files) and
everything those processes printed is searched for every 8-character piece of the key. It runs twice: on an
instance on SQLite (the state in SQLite files under the data root), and on the shipped PostgreSQL configuration
against the real server the suite starts, where the judge cache, both ledgers and batch state are tables of the
instance's database: every cell of every table of that database is searched too.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml

from eval_platform_tests.conftest import write_evaluator
from tools.local_judge_wires import WiredJudgeServer

# 50 characters that are no word, no common prefix and no piece of anything the platform writes itself.
KEY = "qZ4xV8mK2wT9rB7nJ3pL6sY1hF5cG0dA8eU2oI7kM4wN9vX3tQ"
KEY_ENV = "LEAKY_PROVIDER_CREDENTIAL"  # a name no pattern would take for a key's: only its use marks it secret
PIECES = sorted({KEY[i : i + 8] for i in range(len(KEY) - 7)})
DAY = "2026-11-09"
MODELS = ["leaky-reply", "leaky-error"]
BATCH = {"poll_interval_s": 0.05}

RUN = r"""
import sys
from pathlib import Path

import dagster as dg

from eval_platform.definitions import build_definitions

root, day, models = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
defs = build_definitions(root)
assets = list(defs.assets)
instance = dg.DagsterInstance.get()  # the one DAGSTER_HOME names
instance.add_dynamic_partitions("benchmark_models", models)


def run(selection, partition):
    result = dg.materialize(assets=assets, selection=selection, partition_key=partition, instance=instance,
                            resources=defs.resources, raise_on_error=False)
    print(f"materialized {selection} {partition}: {'ok' if result.success else 'FAILED'}", flush=True)


run(["traces"], day)
evaluators = defs.resolve_assets_def("judge_scores").partitions_def.get_partitions_def_for_dimension("evaluator")
for name in evaluators.get_partition_keys():
    run(["judge_scores"], dg.MultiPartitionKey({"date": day, "evaluator": name}))
for model in models:
    run(dg.AssetSelection.groups("benchmark_leaky"), model)
"""


def write_project(root: Path, server: WiredJudgeServer) -> None:
    v1, provider_root = server.base_url, server.base_url.removesuffix("/v1")
    traces = root / "traces" / DAY
    traces.mkdir(parents=True)
    # Inputs of different lengths: the long echo's padding differs, so the keys straddle different cuts.
    lines = [
        {"trace_id": f"t{i}", "timestamp": f"{DAY}T10:00:0{i}Z", "input": "Why? " * (i + 1), "output": "Because."}
        for i in range(4)
    ]
    (traces / "export.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    def models(provider: str, base: str) -> list[dict]:
        return [
            {"model": f"{provider}/fault/{kind}", "api_base": base, "api_key_env": KEY_ENV}
            for kind in ("echo_key_long", "echo_key_reply", "echo_key")
        ]

    common = {
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "prompt": "Q: {{input}} A: {{output}}",
        "max_retries": 0,
        "timeout_s": 30,
    }
    # Priced, with a budget: their calls (a batch's included) reserve and settle in the judges' ledger.
    budget = {"input_cost_per_million": 1.0, "output_cost_per_million": 1.0, "max_daily_cost_usd": 100.0}
    write_evaluator(root, "lean", name="lean", models=models("openai", v1), **budget, **common)
    write_evaluator(root, "litellm_azure", name="litellm_azure", models=models("azure", provider_root), **common)
    write_evaluator(
        root, "litellm_anthropic", name="litellm_anthropic", models=models("anthropic", provider_root), **common
    )
    for provider, base in (("openai", v1), ("azure", provider_root), ("anthropic", provider_root)):
        priced = budget if provider == "openai" else {}
        write_evaluator(
            root,
            f"batch_{provider}",
            name=f"batch_{provider}",
            models=models(provider, base),
            batch=BATCH,
            **priced,
            **common,
        )
    write_evaluator(
        root,
        "reply_judge",
        name="reply_judge",
        model="openai/fault/echo_key_reply",
        api_base=v1,
        api_key_env=KEY_ENV,
        **common,
    )

    dataset = root / "datasets" / "tiny"
    dataset.mkdir(parents=True)
    cases = [{"case_id": f"c{i}", "input": "What? " * (i + 1), "expected_output": "That."} for i in range(4)]
    (dataset / "v1.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    benchmarks = root / "benchmarks"
    benchmarks.mkdir()
    suite = {
        "name": "leaky",
        "tasks": {
            "answer": {
                "dataset": "tiny",
                "prompt": "{{input}}",
                "max_tokens": 64,
                "max_failed_rate": 1.0,
                "scorers": [{"name": "regex", "options": {"pattern": "authorised"}}],
            },
            "judged": {
                "dataset": "tiny",
                "outputs_of": "answer",
                "max_failed_rate": 1.0,
                "scorers": [{"name": "judge", "options": {"evaluator": "reply_judge"}}],
            },
        },
    }
    (benchmarks / "leaky.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    under_test = {"leaky-reply": "openai/fault/echo_key_reply", "leaky-error": "openai/fault/echo_key_long"}
    models_file = {name: {"model": model, "api_base": v1, "api_key_env": KEY_ENV} for name, model in under_test.items()}
    (benchmarks / "models.yaml").write_text(yaml.safe_dump({"models": models_file}))


def decoded_texts(path: Path) -> Iterator[str]:
    """The file's bytes as text, and for Parquet and SQLite files every cell of every table or column."""
    data = path.read_bytes()
    yield data.decode("latin-1")
    if data[:4] == b"PAR1":
        frame = pl.read_parquet(path)
        for column in frame.columns:
            yield "\n".join(map(str, frame[column].to_list()))
    if data[:16] == b"SQLite format 3\x00":
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    for cell in row:
                        if isinstance(cell, bytes):
                            try:
                                cell = zlib.decompress(cell)  # Dagster stores its snapshots compressed
                            except zlib.error:
                                pass
                            cell = cell.decode("latin-1")
                        yield str(cell)


def _cell_text(cell) -> str:
    if isinstance(cell, memoryview):
        cell = bytes(cell)
    if isinstance(cell, bytes):
        try:
            cell = zlib.decompress(cell)  # Dagster stores its snapshots compressed
        except zlib.error:
            pass
        return cell.decode("latin-1")
    return str(cell)


def database_texts(database) -> Iterator[tuple[str, int, str]]:
    """(table, rows, text) for every table of a PostgreSQL database: every cell of it, as text."""
    with database.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        for (table,) in cursor.fetchall():
            cursor.execute(f'SELECT * FROM "{table}"')
            rows = cursor.fetchall()
            yield table, len(rows), "\n".join(_cell_text(cell) for row in rows for cell in row)


def leak(text: str) -> str | None:
    """How many pieces of the key `text` holds, and where the first one is; None when it holds none."""
    pieces = [piece for piece in PIECES if piece in text]
    if not pieces:
        return None
    at = text.index(pieces[0])
    return f"{len(pieces)} piece(s), the first in ...{text[max(0, at - 60) : at + 20]!r}..."


def run_and_capture(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return output


@pytest.fixture(params=["sqlite", "postgres"])
def instance_home(request, tmp_path) -> tuple[Path, object]:
    """(DAGSTER_HOME, its PostgreSQL database or None): the default instance on SQLite, or the shipped
    dagster.postgres.yaml against a fresh database of the suite's server (its variables set by `postgres_home`)."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_home"), request.getfixturevalue("postgres_db")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home, None


def test_no_piece_of_an_echoed_key_is_stored_logged_or_printed(data_root, tmp_path, instance_home):
    home, database = instance_home
    with WiredJudgeServer() as server:
        write_project(data_root, server)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "EVAL_PLATFORM_DATA_DIR": str(data_root),
            KEY_ENV: KEY,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        }
        env.pop("EVAL_PLATFORM_LOCAL_JUDGE_URL", None)
        printed = {"run": run_and_capture([sys.executable, "-c", RUN, str(data_root), DAY, ",".join(MODELS)], env)}
        dry_run = [sys.executable, "-m", "eval_platform.dry_run"]
        printed["dry run"] = run_and_capture([*dry_run, "--start", DAY, "--end", DAY], env)
        printed["suite dry run"] = run_and_capture([*dry_run, "--suite", "leaky"], env)

    # Every path ran and the provider did echo on each: the search below has something to find.
    assert "FAILED" not in printed["run"] and printed["run"].count(": ok") == 1 + 7 + len(MODELS), printed["run"]
    assert "polling batch" in printed["run"]  # the poll answered with the key echoed was logged
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        echoed = dict(
            conn.execute(
                "SELECT evaluator, count(*) FILTER (WHERE raw_response LIKE '%Authoriz%' OR raw_response LIKE "
                "'%authorised%' OR reason_detail LIKE '%Authoriz%') FROM judge_scores GROUP BY ALL"
            ).fetchall()
        )
        outputs = conn.execute(
            "SELECT count(*) FILTER (WHERE output LIKE '%authorised%'), count(*) FILTER (WHERE reason_detail LIKE "
            "'%Authoriz%') FROM benchmark_cases WHERE task = 'answer'"
        ).fetchone()
    assert len(echoed) == 7 and all(echoed.values()), echoed
    assert outputs[0] > 0 and outputs[1] > 0, outputs

    found = {}
    for folder in (data_root, home):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            where = next(filter(None, map(leak, decoded_texts(path))), None)
            if where:
                found[str(path.relative_to(tmp_path))] = where
    for name, text in printed.items():
        if leak(text):
            found[f"printed by the {name}"] = leak(text)
    if database is not None:
        # The state is in the database, not under the data root (the search above would find nothing there).
        assert not list((data_root / "state").rglob("*.sqlite")) and not list((data_root / "state").rglob("*.json"))
        rows = {}
        for table, count, text in database_texts(database):
            rows[table] = count
            if leak(text):
                found[f"PostgreSQL table {table}"] = leak(text)
        stored = ("judge_cache", "judge_spend_daily", "judge_batches")
        assert all(rows.get(f"eval_platform_{table}", 0) > 0 for table in stored), rows
        assert rows.get("event_logs", 0) > 0, rows  # Dagster's own tables were searched too
    assert not found, "pieces of the key found:\n" + "\n".join(f"{k}: {v}" for k, v in found.items())


def test_dagster_context_log_lines_are_redacted(tmp_path):
    """What an asset logs through `context.log` reaches the event log and the compute logs redacted."""
    from eval_platform.llm.redaction import remember

    remember(KEY)  # as judging does for every key it uses

    @dg.asset
    def chatty(context) -> None:  # unannotated: the module's annotations are strings
        context.log.warning(f"the provider answered: Authorization: Bearer {KEY}")

    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = dg.materialize([chatty], instance=instance)
        messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert "the provider answered: Authorization: Bearer [REDACTED]" in messages
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "home").rglob("*.err"))
    assert "Bearer [REDACTED]" in logs and not leak(logs) and not any(leak(m) for m in messages)
