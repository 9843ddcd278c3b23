"""Alerts that reach someone: threshold rules declared per evaluator (`rules`), where alerts go
(`destinations`, from `<data root>/alerting.yaml`) and the record of what was delivered (`delivery`).

The `alerts` asset writes regression and threshold alerts into one table; a Dagster sensor
(`defs/alerting.py`) delivers each row once per destination.
"""
