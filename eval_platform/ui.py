"""`eval-platform ui`: the Dagster webserver and daemon (`dagster dev`) on the data root, on 127.0.0.1.

The instance lives in `$DAGSTER_HOME` (default `<data root>/dagster_home`, created with the shipped settings when
it has none). Schedules and sensors run while this command runs: the daemon is part of it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.settings import DATA_DIR_ENV, data_root


def dagster_home(root: Path) -> Path:
    """`$DAGSTER_HOME`, or `<data root>/dagster_home` holding the shipped instance settings, its storage created."""
    home = Path(os.environ.get("DAGSTER_HOME") or root / "dagster_home")
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(shipped_instance_yaml(), encoding="utf-8")
    create_instance_storage(home)
    return home


def create_instance_storage(home: Path) -> None:
    """Open the instance once, so its storage (SQLite files, or the PostgreSQL schema) exists before `dagster dev`.

    `dagster dev` starts the webserver, the daemon and the code server at once; on a new home each creates the
    storage itself and two of them can stamp the schema together ("Version table 'alembic_version' has more than
    one head present"), which leaves the code location unloaded. Created first, they only open it.
    """
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)):
        pass


def dev_command(host: str, port: int) -> list[str]:
    """`dagster dev` on this package's code location (no workspace file needed)."""
    return [sys.executable, "-m", "dagster", "dev", "-m", "eval_platform.definitions", "-h", host, "-p", str(port)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=3000)
    args = parser.parse_args(argv)
    root = data_root()
    if not root.is_dir():
        parser.error(f"the data root {root} does not exist: run `eval-platform init {root}` or set ${DATA_DIR_ENV}")
    home = dagster_home(root)
    env = {**os.environ, DATA_DIR_ENV: str(root), "DAGSTER_HOME": str(home)}
    print(f"Dagster UI on http://{args.host}:{args.port} (data root {root}, DAGSTER_HOME {home}); Ctrl-C stops it")
    try:
        return subprocess.call(dev_command(args.host, args.port), env=env)
    except KeyboardInterrupt:
        return 0
