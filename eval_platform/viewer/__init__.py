"""`eval-platform view`: a local, read-only results viewer over the warehouse (docs/viewer.md).

- `queries.py`: every question a page asks, as DuckDB SQL over the warehouse's Parquet partitions (one partition's
  file for one evaluator's day, never the whole table); the only module that reads data.
- `app.py`: the Starlette routes rendering Jinja2 templates (`templates/`, autoescaped) with the CSS in `static/`.
- `links.py`: the links between the viewer and the Dagster UI.
- `trend.py`: the small inline SVG trend plots.
- `serve.py`: the command (uvicorn on 127.0.0.1 by default).
"""
