"""The Dagster instance settings this package ships (`eval_platform/instance/`): `dagster.yaml` (SQLite storage, the
default) and `dagster.postgres.yaml` (runs, events and shared state in PostgreSQL, for more than one machine).

`eval-platform init` and the demo copy the first into `<data root>/dagster_home/` when that folder has none.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

_PACKAGE = "eval_platform.instance"


def shipped_instance_file(postgres: bool = False) -> Traversable:
    """The shipped instance file: SQLite storage, or PostgreSQL with `postgres=True`."""
    return resources.files(_PACKAGE) / ("dagster.postgres.yaml" if postgres else "dagster.yaml")


def shipped_instance_yaml(postgres: bool = False) -> str:
    return shipped_instance_file(postgres).read_text(encoding="utf-8")
