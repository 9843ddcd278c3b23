"""eval_platform: LLM-as-judge evaluation on Dagster, with results in Parquet and DuckDB.

Importing the package (or any of its modules) changes nothing process-wide: no environment variable, logging
hook or garbage-collector setting. A process sets itself up where it starts (`eval_platform/startup.py`).
"""
