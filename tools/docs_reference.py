"""Write `docs/reference/tables.md`, the reference of every table and column, from `eval_platform/schemas.py`.

    python tools/docs_reference.py          # rewrite the page
    python tools/docs_reference.py --check  # exit 1 when the page is not what schemas.py gives

`schemas.py` is the one source: a table's description is its `TABLES` entry, a column's type its polars dtype and its
note the comment written beside it there (on its line, or on the comment lines just above it). The test
`eval_platform_tests/test_docs.py` keeps the page current.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "eval_platform" / "schemas.py"
PAGE = REPO / "docs" / "reference" / "tables.md"


def _comments(source: str) -> tuple[dict[int, str], set[int]]:
    """Trailing comments by line, and the lines that hold only a comment."""
    trailing: dict[int, str] = {}
    alone: set[int] = set()
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line = token.start[0]
            text = token.string.lstrip("#").strip()
            if line in code_lines:
                trailing[line] = text
            else:
                trailing[line] = text
                alone.add(line)
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.add(token.start[0])
    return trailing, alone


def column_notes(source: str) -> dict[str, dict[str, str]]:
    """Schema variable name -> column -> the comment written beside the column."""
    trailing, alone = _comments(source)
    notes: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and target.id.endswith("_SCHEMA") and isinstance(value, ast.Dict)):
            continue
        columns: dict[str, str] = {}
        for key in value.keys:
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            line = key.lineno
            if line in trailing and line not in alone:
                columns[key.value] = trailing[line]
                continue
            above = []
            previous = line - 1
            while previous in alone:
                above.insert(0, trailing[previous])
                previous -= 1
            columns[key.value] = " ".join(above)
        notes[target.id] = columns
    return notes


def sql_type(dtype) -> str:
    """The column's type as DuckDB shows it in the view."""
    import polars as pl

    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP WITH TIME ZONE" if dtype.time_zone else "TIMESTAMP"
    if isinstance(dtype, pl.List):
        return f"{sql_type(dtype.inner)}[]"
    names = {pl.String: "VARCHAR", pl.Int64: "BIGINT", pl.Int32: "INTEGER", pl.Float64: "DOUBLE"}
    names |= {pl.Boolean: "BOOLEAN", pl.Date: "DATE", pl.Float32: "FLOAT", pl.UInt64: "UBIGINT"}
    return names.get(type(dtype), str(dtype))


def render() -> str:
    sys.path.insert(0, str(REPO))
    import eval_platform.schemas as schemas
    from eval_platform.markdown_table import markdown_table

    source = SCHEMAS.read_text(encoding="utf-8")
    notes = column_notes(source)
    by_schema = {id(value): name for name, value in vars(schemas).items() if name.endswith("_SCHEMA")}
    lines = [
        "# Reference: tables and columns",
        "",
        "Every table of the warehouse, as a DuckDB view of `<data root>/eval_platform.duckdb` and Parquet files",
        "under `<data root>/warehouse/<table>/`. Generated from `eval_platform/schemas.py` by",
        "`python tools/docs_reference.py`; do not edit by hand (a test fails when this page and `schemas.py` differ).",
        "",
        "The status and reason codes of `judge_scores`:",
        "[Outcomes of a judge call](../judge-modes.md#outcomes-of-a-judge-call).",
        "",
    ]
    lines += [f"- [`{name}`](#{name}): {table.description}" for name, table in schemas.TABLES.items()]
    for name, table in schemas.TABLES.items():
        columns = notes.get(by_schema.get(id(table.schema), ""), {})
        lines += ["", f"## {name}", "", table.description[0].upper() + table.description[1:] + ".", ""]
        rows = [
            {"column": f"`{column}`", "type": sql_type(dtype), "note": columns.get(column, "")}
            for column, dtype in table.schema.items()
        ]
        lines.append(markdown_table(rows, ["column", "type", "note"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(REPO)} is out of date: run python tools/docs_reference.py")
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
