"""The PandaLM test set turned into application traces: one trace per (item, compared model).

Reads only the project's own verbatim copy under `data/sources/pandalm/`. Everything random (which day an
item lands on, timestamps, latencies, token counts, costs) comes from seeded generators, so a rebuild
writes the same bytes.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

PROJECT_ID = "pandalm-demo"
EXPERIMENT_ID = "pandalm-model-comparison"
TESTSET_FILE = "testset-v1.json"
GPT_FILE = "gpt-3.5-turbo-testset-v1.json"
PANDALM_FILE = "pandalm-7b-testset-v1.json"

# Per compared model: fixed overhead (ms), decode speed (ms per output token), price per million tokens.
MODEL_PROFILES: dict[str, tuple[float, float, float]] = {
    "bloom-7b": (210.0, 31.0, 0.20),
    "cerebras-gpt-6.7B": (190.0, 29.0, 0.18),
    "llama-7b": (170.0, 24.0, 0.20),
    "opt-7b": (200.0, 27.0, 0.16),
    "pythia-6.9b": (185.0, 26.0, 0.17),
}
DEFAULT_PROFILE = (200.0, 28.0, 0.20)


def item_id(idx: int) -> str:
    return f"pandalm-{idx:04d}"


def trace_id(idx: int, model: str) -> str:
    return f"pandalm-{idx:04d}-{model}"


def trace_input_text(item: dict[str, Any]) -> str:
    """The instruction, then the item's input after a blank line (exactly; the PandaLM replay relies on it)."""
    return item["instruction"] if not item["input"] else item["instruction"] + "\n\n" + item["input"]


def response_text(value: Any) -> str:
    """A response as text; a handful of upstream responses are JSON `true`, which becomes "True"."""
    return value if isinstance(value, str) else str(value)


def compared_models(item: dict[str, Any]) -> tuple[str, str]:
    """cmp_key "modelA_modelB": modelA answered response1, modelB response2."""
    first, second = item["cmp_key"].split("_")
    return first, second


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass
class Trace:
    """One generated trace, format-independent."""

    idx: int
    model: str
    response_slot: int  # 1 or 2: which PandaLM response this trace's output is
    item: dict[str, Any]
    start: datetime
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def trace_id(self) -> str:
        return trace_id(self.idx, self.model)

    @property
    def input(self) -> str:
        return trace_input_text(self.item)

    @property
    def output(self) -> str:
        return response_text(self.item[f"response{self.response_slot}"])

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "item_id": item_id(self.idx),
            "motivation_app": self.item["motivation_app"],
            "cmp_key": self.item["cmp_key"],
        }

    @property
    def end(self) -> datetime:
        return self.start + timedelta(milliseconds=self.latency_ms)

    def canonical(self) -> dict[str, Any]:
        """The trace under canonical field names (timestamps as ISO 8601 text with a Z)."""
        return {
            "trace_id": self.trace_id,
            "timestamp": iso_z(self.start),
            "project_id": PROJECT_ID,
            "experiment_id": EXPERIMENT_ID,
            "variant": self.model,
            "model": self.model,
            "input": self.input,
            "output": self.output,
            "metadata": self.metadata,
            "latency_ms": self.latency_ms,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


def iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tokens(text: str, rng: random.Random) -> int:
    """A plausible token count: about 1.3 tokens per word, a little noise."""
    words = len(text.split())
    return max(0, round(words * 1.3 * rng.uniform(0.9, 1.1) + (rng.randint(0, 3) if words else 0)))


def make_traces(item: dict[str, Any], day: str, seed: int) -> list[Trace]:
    """The two traces of one item on `day`: a request to the first model, then one to the second."""
    rng = random.Random(seed * 100_003 + item["idx"])
    day_start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    start = day_start + timedelta(seconds=rng.uniform(120, 86_400 - 900), microseconds=0)
    start = start.replace(microsecond=(start.microsecond // 1000) * 1000)
    traces = []
    for slot, model in enumerate(compared_models(item), start=1):
        overhead, per_token, price = MODEL_PROFILES.get(model, DEFAULT_PROFILE)
        prompt_tokens = max(1, _tokens(trace_input_text(item), rng) + 12)  # plus the chat template
        completion_tokens = _tokens(response_text(item[f"response{slot}"]), rng)
        latency = (overhead + 0.4 * prompt_tokens + per_token * completion_tokens) * math.exp(rng.gauss(0, 0.15))
        cost = round((prompt_tokens + completion_tokens) * price / 1e6, 9)
        trace = Trace(
            idx=item["idx"],
            model=model,
            response_slot=slot,
            item=item,
            start=start,
            latency_ms=round(latency, 1),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
        )
        traces.append(trace)
        gap = timedelta(milliseconds=round(rng.uniform(40, 2500)))
        start = trace.end + gap
        start = start.replace(microsecond=(start.microsecond // 1000) * 1000)
    return traces


def annotation_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for item in sorted(items, key=lambda entry: entry["idx"]):
        first, second = compared_models(item)
        for annotator in ("annotator1", "annotator2", "annotator3"):
            rows.append(
                {
                    "task": "pandalm_pairwise",
                    "item_id": item_id(item["idx"]),
                    "annotator": annotator,
                    "criterion": "preference",
                    "label": item[annotator],
                    "label_meaning": "0 tie, 1 response1 better, 2 response2 better",
                    "response1_trace_id": trace_id(item["idx"], first),
                    "response2_trace_id": trace_id(item["idx"], second),
                }
            )
    return rows


def judgment_rows(
    items: list[dict[str, Any]], results: list[dict[str, Any]], source: str, result_key: str, reason_key: str
) -> list[dict[str, Any]]:
    by_idx = {item["idx"]: item for item in items}
    rows = []
    for result in sorted(results, key=lambda entry: entry["idx"]):
        first, second = compared_models(by_idx[result["idx"]])
        rows.append(
            {
                "source": source,
                "item_id": item_id(result["idx"]),
                "verdict": str(result[result_key]),
                "reason": result[reason_key],
                "response1_trace_id": trace_id(result["idx"], first),
                "response2_trace_id": trace_id(result["idx"], second),
            }
        )
    return rows
