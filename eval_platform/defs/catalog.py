"""The DuckDB catalog: one view per warehouse table, named as DESIGN.md lists them (`schemas.TABLES`): a stored
table's view reads its Parquet partitions, a derived one (`spans`) is a query over them."""

from eval_platform.schemas import derived_views, table_schemas
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import refresh_catalog


def refresh(root: DataRoot) -> bool:
    return refresh_catalog(root, table_schemas(), derived_views())
