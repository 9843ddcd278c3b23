"""`eval-platform sql "SELECT ..."`: a query against the data root's DuckDB catalog, read-only, on the configured
warehouse (local folder or bucket), printed as a table. Without a query it lists the views."""

from __future__ import annotations

import argparse

from eval_platform.settings import DATA_DIR_ENV, data_root, duckdb_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform sql", description=__doc__.split("\n\n")[0])
    parser.add_argument("query", nargs="?", help="the SQL (quote it); default: the list of views")
    parser.add_argument("--max-rows", type=int, default=40, help="rows printed (default 40)")
    args = parser.parse_args(argv)
    root = data_root()
    if not duckdb_path(root).exists():
        parser.error(
            f"no catalog at {duckdb_path(root)}: judge a day first (eval-platform judge --day DAY) "
            f"or set ${DATA_DIR_ENV}"
        )
    import duckdb

    from eval_platform.storage.warehouse import open_catalog

    query = args.query or "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
    with open_catalog(root) as conn:
        try:
            relation = conn.sql(query)
        except duckdb.Error as error:
            print(f"error: {error}")
            return 1
        if relation is None:
            return 0
        relation.show(max_rows=args.max_rows, max_width=200)
    return 0
