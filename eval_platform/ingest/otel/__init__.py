"""OTLP/JSON traces from the instrumentations applications already use -> whole canonical traces and spans.

The path of a day's OTLP input, one module per idea:

- `envelope.py`: one OTLP/JSON request (`resourceSpans`, and `resourceLogs` carrying GenAI events) -> spans and
  log records, with the envelope's errors (`invalid_otlp:<what>`); `values.py`: OTLP `AnyValue`s;
- the conventions, each one module filling `fields.SpanFields` (`conventions.py` holds their order):
  `genai.py` (OpenTelemetry GenAI semantic conventions: attributes, span events, log events, the deprecated
  `gen_ai.prompt`/`gen_ai.completion`), `openllmetry.py` (Traceloop), `openinference.py` (Arize Phoenix),
  `langfuse.py`; `transcript.py` reads every message shape into one;
- `assembly.py`: the day's spans grouped into whole traces across lines and files; the rule for traces over
  midnight; orphans, duplicate span ids, parent cycles, clock skew; what a *row* is (a span);
- `model.py`: the trace model: a trace's `traces` row (input, final answer, conversation, tool-call trajectory,
  totals, error, session and user) and its `spans` rows;
- `day.py`: reads a day's requests in two passes (which traces each holds; then each trace whole, assembled and
  modelled as soon as its last request is read), so a day holds its open traces, not all its spans; pass 1's
  index of the day's trace ids is on disk (`day_index.py`), so it holds no object per trace either.
"""
