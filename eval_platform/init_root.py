"""`eval-platform init [DIR]`: a new data root for your own app.

It writes the folders the platform reads, the Dagster instance settings (`dagster_home/dagster.yaml`: the run
queue, the judge pool, run monitoring, tick history pruned, telemetry off), the evaluators you pick from the
built-in templates (on your model and key variable) and one example trace line. It never overwrites a file that
is already there.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.settings import DATA_DIR_ENV

TEMPLATES = "eval_platform.templates"
DEFAULT_EVALUATORS = ("helpfulness", "relevance")
FOLDERS = ("traces", "evaluators", "datasets", "annotations", "judgments", "experiments", "benchmarks")
EXAMPLE_TRACE_FILE = "example_trace.jsonl"


def template_names() -> list[str]:
    """The built-in evaluator templates shipped with the package."""
    return sorted(
        p.name.removesuffix(".yaml") for p in resources.files(TEMPLATES).iterdir() if p.name.endswith(".yaml")
    )


def render_template(name: str, model: str, api_key_env: str | None) -> str:
    """A template's YAML with the model and key variable set (comments and layout kept)."""
    text = (resources.files(TEMPLATES) / f"{name}.yaml").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^model: .*$", f"model: {model}", text)
    if api_key_env:
        text = re.sub(r"(?m)^api_key_env: .*$", f"api_key_env: {api_key_env}", text)
    else:  # a model that needs no key (a server of your own)
        text = re.sub(r"(?m)^api_key_env: .*\n", "", text)
    return text


def example_trace() -> str:
    """One trace line with the required fields (trace_id, timestamp) and the usual ones."""
    line = {
        "trace_id": "example-0001",
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "input": "How do I reset my password?",
        "output": "Open Settings > Account > Reset password, then follow the link we email you.",
        "project_id": "my-app",
        "model": "gpt-4o-mini",
        "metadata": {"user_tier": "free"},
    }
    return json.dumps(line, ensure_ascii=False) + "\n"


def _write_new(path: Path, text: str, written: list[Path]) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    written.append(path)


def init_root(root: Path, evaluators: list[str], model: str, api_key_env: str | None) -> tuple[list[Path], list[Path]]:
    """Create the data root; returns (files written, files kept because they existed)."""
    unknown = sorted(set(evaluators) - set(template_names()))
    if unknown:
        raise ValueError(f"no built-in template named {', '.join(unknown)}; known: {', '.join(template_names())}")
    root.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        (root / folder).mkdir(exist_ok=True)
    written: list[Path] = []
    wanted = [root / "dagster_home" / "dagster.yaml", root / EXAMPLE_TRACE_FILE]
    wanted += [root / "evaluators" / f"{name}.yaml" for name in evaluators]
    kept = [p for p in wanted if p.exists()]
    _write_new(root / "dagster_home" / "dagster.yaml", shipped_instance_yaml(), written)
    for name in evaluators:
        _write_new(root / "evaluators" / f"{name}.yaml", render_template(name, model, api_key_env), written)
    _write_new(root / EXAMPLE_TRACE_FILE, example_trace(), written)
    return written, kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform init", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", type=Path, help=f"the new data root (default: ${DATA_DIR_ENV} or ./data)")
    parser.add_argument(
        "--evaluator",
        action="append",
        metavar="TEMPLATE",
        help=f"a built-in template to start from (repeatable; default: {', '.join(DEFAULT_EVALUATORS)}); "
        "--list shows them",
    )
    parser.add_argument("--model", default="openai/gpt-4o-mini", help="the judge model, a litellm model string")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="the variable holding the provider key ('' for none)"
    )
    parser.add_argument("--list", action="store_true", help="list the built-in templates and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in template_names():
            text = (resources.files(TEMPLATES) / f"{name}.yaml").read_text(encoding="utf-8")
            match = re.search(r"(?m)^description: (.*)$", text)
            print(f"{name:<22}{match.group(1) if match else ''}")
        return 0
    from eval_platform.settings import data_root

    root = (args.dir or data_root()).resolve()
    try:
        written, kept = init_root(root, args.evaluator or list(DEFAULT_EVALUATORS), args.model, args.api_key_env)
    except ValueError as error:
        parser.error(str(error))
    for path in written:
        print(f"wrote {path}")
    for path in kept:
        print(f"kept  {path} (already there)")
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    key = f"export {args.api_key_env}=...; " if args.api_key_env else ""
    print(
        f"""
Next:
  export {DATA_DIR_ENV}={root}
  put your traces in {root / "traces" / day}/ (one folder per UTC day; {EXAMPLE_TRACE_FILE} shows a line)
  {key}eval-platform check                     # is everything in place, what would it cost
  eval-platform dry-run --start {day} --end {day}
  eval-platform ui                                # its daemon judges files as they arrive (the sensors are on)"""
    )
    return 0
