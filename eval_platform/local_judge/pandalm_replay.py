"""Recorded verdicts of the PandaLM study, looked up by the exact texts a pairwise judge prompt shows.

The PandaLM authors published, for 999 (instruction, response1, response2) items, the verdicts of
gpt-3.5-turbo and of PandaLM-7B. Replaying them lets the platform's pairwise pipeline be checked against
published agreement figures without any model access. A prompt may present the two responses in either
order; the recorded verdict is mapped to the order the prompt used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PANDALM_SOURCE_DIR = Path("sources") / "pandalm"
TESTSET_FILE = "testset-v1.json"


@dataclass(frozen=True)
class RecordedJudge:
    """Where one judge's recorded verdicts live and how to read them."""

    file_name: str
    result_field: str
    reason_field: str
    reply_model: str


RECORDED_JUDGES: dict[str, RecordedJudge] = {
    "gpt-3.5-turbo": RecordedJudge(
        "gpt-3.5-turbo-testset-v1.json", "gpt_result", "gpt_reason", "gpt-3.5-turbo (PandaLM recording)"
    ),
    "pandalm-7b": RecordedJudge(
        "pandalm-7b-testset-v1.json", "pandalm_result", "pandalm_reason", "pandalm-7b (PandaLM recording)"
    ),
}

# Recorded results in the order response1/response2 were shown: gpt-3.5-turbo uses "1"/"2"/"Tie",
# PandaLM-7B uses 1/2/0. Anything else ("garbage") is a reply the authors could not parse.
_WINNER_BY_RESULT = {"1": "A", "2": "B", "Tie": "tie", "0": "tie"}
_SWAPPED = {"A": "B", "B": "A", "tie": "tie"}


@dataclass(frozen=True)
class RecordedVerdict:
    """A verdict as it applies to the prompt's presentation order; `winner` None means unusable."""

    idx: int
    winner: str | None
    reasoning: str
    raw_result: str


def trace_input_text(item: dict[str, Any]) -> str:
    """The trace input a PandaLM item becomes: the instruction, then its input after a blank line."""
    return item["instruction"] if not item["input"] else item["instruction"] + "\n\n" + item["input"]


def response_text(value: Any) -> str:
    """A response as text; a handful of responses are JSON `true`, which becomes "True"."""
    return value if isinstance(value, str) else str(value)


class PandaLMRecordings:
    """The PandaLM test set and the recorded judge verdicts, indexed by exact prompt texts."""

    def __init__(self, items: list[dict[str, Any]], verdicts: dict[str, dict[int, dict[str, Any]]]):
        self._verdicts = verdicts
        # Keyed in presentation order so a prompt showing the responses as recorded hits its own item.
        # Some items repeat the same texts under other model pairs; the lowest idx wins, deterministically.
        self._index: dict[tuple[str, str, str], int] = {}
        for item in sorted(items, key=lambda entry: entry["idx"]):
            key = (trace_input_text(item), response_text(item["response1"]), response_text(item["response2"]))
            self._index.setdefault(key, item["idx"])

    @classmethod
    def load(cls, data_root: Path) -> PandaLMRecordings:
        """Read the test set and every recorded judge's file from `<data_root>/sources/pandalm/`."""
        source_dir = data_root / PANDALM_SOURCE_DIR
        items = json.loads((source_dir / TESTSET_FILE).read_text(encoding="utf-8"))
        verdicts = {}
        for judge_name, judge in RECORDED_JUDGES.items():
            rows = json.loads((source_dir / judge.file_name).read_text(encoding="utf-8"))
            verdicts[judge_name] = {row["idx"]: row for row in rows}
        return cls(items, verdicts)

    def lookup(self, judge_name: str, trace_input: str, output_a: str, output_b: str) -> RecordedVerdict | None:
        """The recorded verdict of `judge_name` for this presentation, or None if no item matches."""
        idx = self._index.get((trace_input, output_a, output_b))
        swapped = False
        if idx is None:
            idx = self._index.get((trace_input, output_b, output_a))
            swapped = True
        if idx is None:
            return None

        judge = RECORDED_JUDGES[judge_name]
        row = self._verdicts[judge_name][idx]
        raw_result = str(row[judge.result_field])
        winner = _WINNER_BY_RESULT.get(raw_result)
        if winner is not None and swapped:
            winner = _SWAPPED[winner]
        return RecordedVerdict(idx=idx, winner=winner, reasoning=row[judge.reason_field], raw_result=raw_result)
