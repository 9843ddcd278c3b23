"""Arize Phoenix span annotations through its REST API: one annotation per verdict on the app's judged span.

`POST <url>/v1/span_annotations?sync=true` with `{"data": [...]}`, one item per verdict: the span id, the
evaluator's name as the annotation's name, `annotator_kind: LLM` (a judge model's verdict; CODE for a check
evaluator's, whose model is `check:<scorer>`), `result: {score, label, explanation}` and `metadata` (verdict
key, judge model, config hash, the platform's trace id). Each carries the verdict key as its `identifier`:
Phoenix updates the annotation with the same (name, span, identifier) instead of adding one, so a batch sent again
after a crash between Phoenix's answer and the ledger's write does not duplicate annotations. `sync=true` makes
Phoenix answer once the annotations are stored, so a 200 means they are there. The span must already be in Phoenix
(the app sends its traces there): Phoenix refuses a batch holding a span it does not have, naming the span; those
verdicts are recorded as failed (tried again by the next run) and the rest of the batch is sent without them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import httpx
import polars as pl
from pydantic import Field

from eval_platform.export.base import Destination, ExportError
from eval_platform.export.otlp import score_label, shared_context
from eval_platform.llm.redaction import clip

ANNOTATIONS_PATH = "/v1/span_annotations"
CHECK_PREFIX = "check:"  # a check evaluator's rows: `model` is `check:<scorer>` (judging.checks)


class PhoenixDestination(Destination):
    """A Phoenix server (self-hosted or Phoenix Cloud): its base URL and, when auth is on, an API key variable."""

    type: Literal["phoenix"]
    url: str = Field(pattern=r"^https?://", description="Phoenix's base URL, e.g. http://127.0.0.1:6006.")
    api_key_env: str | None = Field(
        None, description="The environment variable holding a Phoenix API key (sent as a Bearer token)."
    )

    def secrets(self, env: Mapping[str, str]) -> list[str]:
        key = env.get(self.api_key_env or "")
        return [key] if key else []

    def _headers(self, env: Mapping[str, str]) -> dict[str, str]:
        if self.api_key_env is None:
            return {}
        key = env.get(self.api_key_env)
        if not key:
            raise ExportError(f"destination '{self.name}': ${self.api_key_env} (api_key_env) is not set")
        return {"Authorization": f"Bearer {key}"}

    def send(self, batch: pl.DataFrame, env: Mapping[str, str]) -> None:
        url = self.url.rstrip("/") + ANNOTATIONS_PATH
        body = {"data": [annotation(row) for row in batch.iter_rows(named=True)]}
        try:
            answer = httpx.post(
                url, params={"sync": "true"}, json=body, headers=self._headers(env), timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise ExportError(
                clip(f"destination '{self.name}': {url}: {type(exc).__name__}: {exc}", 500, self.secrets(env)),
                transient=isinstance(exc, httpx.TransportError),  # refused, reset or timed out: may come back
            ) from None
        if answer.status_code >= 300:
            message = clip(
                f"destination '{self.name}': {url} answered {answer.status_code}: {answer.text}", 500, self.secrets(env)
            )
            # 404 names the spans Phoenix does not have ("Spans with IDs ... do not exist"): only their verdicts
            # are refused, the rest of the batch can go without them
            named = set(re.findall(r"\b[0-9a-f]{16}\b", answer.text)) if answer.status_code == 404 else set()
            transient = answer.status_code >= 500 or answer.status_code == 429
            raise ExportError(message, frozenset(named & set(batch["otel_span_id"].to_list())), transient)


def annotation(row: Mapping[str, Any]) -> dict[str, Any]:
    """One verdict (VERDICT_COLUMNS) as a Phoenix span annotation."""
    result = {"score": row["score"], "label": score_label(row), "explanation": row["reasoning"] or None}
    return {
        "span_id": row["otel_span_id"],
        "name": row["evaluator"],
        "annotator_kind": "CODE" if str(row["model"]).startswith(CHECK_PREFIX) else "LLM",
        "result": {key: value for key, value in result.items() if value is not None},
        "metadata": {
            "source": "eval_platform",
            "verdict_key": row["verdict_key"],
            "trace_id": row["trace_id"],
            "model": row["model"],
            "provider_model": row["provider_model"],
            "config_hash": row["config_hash"],
            "date": row["date"],
            **shared_context(row),
        },
        "identifier": row["verdict_key"],
    }
