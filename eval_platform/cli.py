"""`eval-platform`: the one command a user runs.

    eval-platform init [DIR]          a new data root for your own app
    eval-platform demo                the daily job on the bundled sample data
    eval-platform ui                  the Dagster webserver and daemon on the data root
    eval-platform view                the results viewer in the browser (read-only, 127.0.0.1)
    eval-platform dry-run ...         what a backfill or a suite would cost, nothing sent
    eval-platform judge --day DAY     ingest and judge one day now (the runs show in the UI)
    eval-platform sql "SELECT ..."    query the results
    eval-platform check               is this data root ready: evaluators, keys, schedules, today's worst case
    eval-platform migrate-state ...   move the shared state into the instance's PostgreSQL (once)
    eval-platform local-judge ...     run the local OpenAI-compatible judge (placeholder verdicts, no key)

Each verb has `--help`. The data root is `--data-dir` or `$EVAL_PLATFORM_DATA_DIR` (default `./data`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from eval_platform.settings import DATA_DIR_ENV
from eval_platform.startup import start_process

# verb -> (one line of help, "module:function" taking argv and returning an exit code)
_VERBS: dict[str, tuple[str, str]] = {
    "init": ("create a data root for your own app", "eval_platform.init_root:main"),
    "demo": ("run the daily job on the bundled sample data", "eval_platform.demo:main"),
    "ui": ("start the Dagster webserver and daemon on the data root", "eval_platform.ui:main"),
    "view": ("the results viewer in the browser: evaluators, days, traces, compare", "eval_platform.viewer.serve:main"),
    "dry-run": ("price a backfill or a benchmark suite; nothing is sent", "eval_platform.dry_run:main"),
    "judge": ("ingest and judge one day now, as the daily schedule does (paid calls)", "eval_platform.judge_day:main"),
    "sql": ("query the results (the DuckDB catalog) and print a table", "eval_platform.sql:main"),
    "check": ("check a data root: evaluators, keys, schedules, today's worst case", "eval_platform.doctor:main"),
    "migrate-state": (
        "move the shared state (ledger, cache, batches) into the instance's PostgreSQL",
        "eval_platform.llm.migrate_state:main",
    ),
    "local-judge": ("run the local OpenAI-compatible judge server", "eval_platform.local_judge.__main__:main"),
}


def _load(target: str) -> Callable[[list[str]], int | None]:
    import importlib

    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def main(argv: Sequence[str] | None = None) -> int:
    start_process()  # the console script's process starts here (key redaction on every log line)
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="eval-platform",
        description="LLM-as-judge evaluation on Dagster.",
        epilog="Run `eval-platform <verb> --help` for a verb's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", type=Path, help=f"the data root (default: ${DATA_DIR_ENV} or ./data)")
    verbs = parser.add_subparsers(dest="verb", metavar="<verb>")
    for verb, (help_text, _) in _VERBS.items():
        verbs.add_parser(verb, help=help_text, add_help=False)
    # Everything after the verb belongs to the verb's own parser (its --help included).
    index = next((i for i, arg in enumerate(args) if arg in _VERBS), len(args))
    options = parser.parse_args(args[: index + 1])
    if options.verb is None:
        parser.print_help()
        return 2
    if options.data_dir is not None:
        os.environ[DATA_DIR_ENV] = str(options.data_dir.resolve())
    _, target = _VERBS[options.verb]
    code = _load(target)(args[index + 1 :])
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
