"""The DuckDB catalog: one view per warehouse table, named as DESIGN.md lists them (`schemas.TABLES`)."""

from pathlib import Path

from eval_platform.schemas import table_schemas
from eval_platform.storage.warehouse import refresh_catalog


def refresh(root: Path) -> bool:
    return refresh_catalog(root, table_schemas())
