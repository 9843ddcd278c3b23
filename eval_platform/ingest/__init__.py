"""Reading inputs from the data root: trace exports (JSONL, JSON, CSV, Parquet, OTLP/JSON) with quarantine."""

from eval_platform.ingest.traces import TraceDay, list_trace_files, read_trace_day

__all__ = ["TraceDay", "list_trace_files", "read_trace_day"]
