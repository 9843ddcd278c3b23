"""Calling models: the one path every feature that calls a model takes (judges, benchmark tasks, batch mode,
the dry run).

- `endpoint`: where a model is called (its key from the environment, the local judge when there is none).
- `runtime`: what a run calls with (client, cache, budget ledger, environment).
- `call`: the single call path: request -> cache -> budget reserve -> send -> redact -> cost -> settle ->
  the caller's parse -> cache write (only replies the caller accepted are cached).
- `client`, `openai_compat`, `concurrency`: sending, with retries and bounded concurrency per endpoint.
- `cache`, `budget`, `pricing`, `redaction`: the money and secrets rules, each written once.
- `batch/`: the same calls delivered through a provider's batch API.
"""
