"""`eval-platform check`: is this data root ready to judge, and what would the next day cost?

It reads, never writes: the data root and its folders, every evaluator file (a broken one is named with its
error), each enabled evaluator's key variable (set or not: never its value), the schedules and sensors (on or off in
the instance of `$DAGSTER_HOME`, else their shipped default), and the worst-case cost of judging the latest day that
has trace files, priced by the dry run. It exits 1 when something would stop a judge day (no data root, no
evaluator, a broken file, an enabled evaluator without its key), else 0.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path

from eval_platform.settings import DATA_DIR_ENV, data_root
from eval_platform.storage.location import DataRoot


def _trace_days(root: Path) -> list[str]:
    folder = root / "traces"
    if not folder.is_dir():
        return []
    days = []
    for path in folder.iterdir():
        try:
            datetime.strptime(path.name, "%Y-%m-%d")
        except ValueError:
            continue
        if path.is_dir() and any(path.iterdir()):
            days.append(path.name)
    return sorted(days)


def _automation_states(root: Path) -> list[tuple[str, str, str]]:
    """(kind, name, on/off) of each schedule and sensor: the instance's state where it has one, else the default."""
    import dagster as dg

    from eval_platform.definitions import build_definitions

    defs = build_definitions(root)
    stored: dict[str, str] = {}
    home = Path(os.environ.get("DAGSTER_HOME") or root / "dagster_home")
    if (home / "dagster.yaml").exists():
        os.environ["DAGSTER_HOME"] = str(home)
        with dg.DagsterInstance.get() as instance:
            for state in instance.all_instigator_state():
                stored[state.instigator_name] = state.status.value
    rows = []
    for kind, items in (("schedule", defs.schedules or []), ("sensor", defs.sensors or [])):
        for item in items:
            default = "RUNNING" if item.default_status.value == "RUNNING" else "STOPPED"
            status = stored.get(item.name, default)
            if status == "DECLARED_IN_CODE":
                status = default
            rows.append((kind, item.name, "on" if status == "RUNNING" else "off"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cost", action="store_true", help="skip pricing the latest day (faster)")
    args = parser.parse_args(argv)
    root = data_root()
    problems = 0
    print(f"data root: {root}")
    if not root.is_dir():
        print(f"  ✗ does not exist: run `eval-platform init {root}` or set ${DATA_DIR_ENV}")
        return 1
    if not (root / "evaluators").is_dir():
        print(f"  ✗ no evaluators/ folder: run `eval-platform init {root}`")
        return 1

    from eval_platform.judging.loading import load_evaluators

    broken: dict[str, str] = {}
    evaluators = load_evaluators(root / "evaluators", broken=broken)
    print(f"\nevaluators: {len(evaluators)} loaded, {len(broken)} broken")
    for name, config in evaluators.items():
        key = config.api_key_env
        if not config.enabled:
            state = "disabled"
        elif key and not os.environ.get(key):
            state = f"✗ ${key} is not set: its traces would be SKIPPED (no_credentials)"
            problems += 1
        else:
            state = f"${key} set" if key else "no key needed"
        print(f"  {name:<24}{config.model or ', '.join(spec.model for spec in config.models or [])}: {state}")
    for file, error in broken.items():
        print(f"  ✗ {file}: {error}")
        problems += 1
    if not evaluators and not broken:
        print(f"  ✗ none: add one with `eval-platform init {root} --evaluator <template>`")
        problems += 1

    print("\nschedules and sensors (turn them on in the UI: Automation):")
    states = _automation_states(root)
    width = max((len(name) for _, name, _ in states), default=0) + 2  # the longest name fits its column
    for kind, name, state in states:
        print(f"  {kind:<9}{name:<{width}}{state}")

    days = _trace_days(root)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    print(f"\ntraces: {len(days)} day folder(s) with files" + (f", latest {days[-1]}" if days else ""))
    if not days:
        print(f"  put trace files in {root / 'traces' / today}/ (one folder per UTC day)")
    elif not args.no_cost:
        from eval_platform.dry_run import estimate

        enabled = {name: config for name, config in evaluators.items() if config.enabled}
        where = DataRoot.from_env(root)  # this command's warehouse: the environment's store
        total = 0.0
        for name, config in enabled.items():
            bill = estimate(config, [days[-1]], where)
            total += bill.worst_case_usd
            print(f"  {name:<24}{bill.traces} traces, {bill.calls} calls, worst case {bill.worst_case_usd:.4f} USD")
        print(f"  judging {days[-1]} would cost at most {total:.4f} USD (`eval-platform dry-run` for any range)")
    print("\nready" if not problems else f"\n{problems} problem(s) above")
    return 1 if problems else 0
