"""`python -m tools.sample_data.agent_app record --out DIR [--instrumentation NAME ...]`: record the demo
app's traces under every (or the named) instrumentation into DIR/<instrumentation>/. `run` is the per-process
step `record` starts (one instrumentation, exporting to a running receiver)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tools.sample_data.agent_app import CONVENTIONS, FRAMEWORKS, LEGACY_CONVENTIONS

NAMES = [*CONVENTIONS, *LEGACY_CONVENTIONS, *FRAMEWORKS]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(prog="python -m tools.sample_data.agent_app", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="start the local judge and an OTLP receiver, run every scenario")
    record.add_argument("--out", type=Path, required=True, help="folder to write <instrumentation>/ folders into")
    record.add_argument(
        "--instrumentation", action="append", choices=NAMES, help="repeatable; default: every one in CONVENTIONS"
    )
    record.add_argument("--traces-file", default="traces.jsonl", help="e.g. traces.json or traces.jsonl.gz")
    record.add_argument("--logs-file", default="logs.jsonl", help="where log records (GenAI events) go")
    record.add_argument("--run", help="a run name: its own questions, session ids and trace ids (default: the tests')")
    record.add_argument(
        "--python", help="the interpreter that runs the app, e.g. a scratch venv's with older library releases"
    )
    record.add_argument(
        "--scenario", action="append", help="repeatable: only these scenarios (EXTRA_SCENARIOS too); default: all"
    )
    run = commands.add_parser("run", help="run the scenarios once in this process (used by record)")
    run.add_argument("--instrumentation", choices=NAMES, required=True)
    run.add_argument("--base-url", required=True, help="the app model's OpenAI base URL (the local judge)")
    run.add_argument("--endpoint", required=True, help="the OTLP/HTTP receiver's base URL")
    run.add_argument("--manifest", type=Path, required=True, help="where to write the scenarios' trace ids")
    run.add_argument("--run", help="the run name (see record)")
    run.add_argument("--scenario", action="append", help="only these scenarios (see record)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen command."""
    args = parse_args(argv)
    if args.command == "run":
        from tools.sample_data.agent_app.recorder import run_in_process

        run_in_process(args.instrumentation, args.base_url, args.endpoint, args.manifest, args.run, args.scenario)
        return 0
    from tools.sample_data.agent_app.recorder import record

    results = record(
        args.out,
        args.instrumentation,
        traces_file=args.traces_file,
        logs_file=args.logs_file,
        run=args.run,
        python=args.python,
        scenarios=args.scenario,
    )
    for name, result in results.items():
        print(json.dumps({"instrumentation": name, **result.summary()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
