"""Benchmark suites: suite files, their tasks and dependencies (no Dagster here)."""
