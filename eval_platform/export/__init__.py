"""Verdicts sent back where teams look: each final judge verdict exported to the tools they already run.

Off by default: nothing is sent until `<data root>/verdict_export.yaml` declares a destination (`config`). The
`verdict_exports` asset (`defs/export.py`) exports one judge_scores partition (evaluator × day) per run:
`verdicts` picks what is sent (COMPLETED final verdicts on a trace or span the app traced with OpenTelemetry),
each destination module (`otlp`: OpenTelemetry GenAI evaluation events over OTLP/HTTP; `phoenix`: Arize Phoenix
span annotations) sends them, `registry` lists those modules, and `ledger` keeps the warehouse table
`verdict_exports`, one row per verdict and destination, so a verdict is sent once and a failed send is tried again.
"""
