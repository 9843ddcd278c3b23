"""Recorded verdicts of the PandaLM study, found by item id (or, failing that, by the prompt's exact texts).

The PandaLM authors published, for 999 (instruction, response1, response2) items, the verdicts of
gpt-3.5-turbo and of PandaLM-7B. Replaying them lets the platform's pairwise pipeline be checked against
published agreement figures without any model access. A prompt may present the two responses in either
order; the recorded verdict is mapped to the order the prompt used.

How a prompt finds its recording:
1. By item id. When the prompt's fenced `metadata` block is a JSON object whose `item_id` names a recorded
   item (`pandalm-0042`, the id the sample traces carry), that item's verdict is used, and comparing the
   shown responses with the item's `response1`/`response2` tells which one is A. The test set repeats 86
   (instruction, responses) groups, some in swapped order, so only the id tells repeats apart: without it a
   repeat shown in swapped order would get a sibling's verdict and could flip with the presentation order.
   If the shown responses are not that item's two responses, the lookup is a `ReplayMismatch` (the server
   answers 400 `replay_miss`, which the judge records as FAILED): a wrong id must not borrow a verdict.
2. By text, when the prompt carries no usable item id (no metadata block, no `item_id`, or an id that is not
   a recorded item): the exact (input, response A, response B) texts, in either order. For repeated texts the
   item recorded in the presented order wins, then the lowest idx.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PANDALM_SOURCE_DIR = Path("sources") / "pandalm"
TESTSET_FILE = "testset-v1.json"
# The item ids of the sample traces (`metadata.item_id`): `pandalm-` and the test set's idx, zero-padded.
ITEM_ID_RE = re.compile(r"pandalm-(\d+)")


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
    matched_by: str  # "item_id" or "text"


class ReplayMismatch(LookupError):
    """The prompt names a recorded item, but the responses it shows are not that item's two responses."""


def item_index(item_id: object) -> int | None:
    """The test-set idx an item id such as `pandalm-0042` names, or None when it is not such an id."""
    match = ITEM_ID_RE.fullmatch(item_id.strip()) if isinstance(item_id, str) else None
    return int(match.group(1)) if match else None


def item_id_from_metadata(metadata: str | None) -> str | None:
    """`item_id` of a fenced metadata block holding a JSON object; None when absent or not JSON."""
    if not metadata:
        return None
    try:
        value = json.loads(metadata)
    except ValueError:
        return None
    item_id = value.get("item_id") if isinstance(value, dict) else None
    return str(item_id) if item_id is not None else None


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
        self._items = {item["idx"]: item for item in items}
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

    def lookup(
        self, judge_name: str, trace_input: str, output_a: str, output_b: str, item_id: str | None = None
    ) -> RecordedVerdict | None:
        """The recorded verdict of `judge_name` for this presentation, or None if no item matches.

        With an `item_id` naming a recorded item the recording is that item's (see the module docstring);
        raises ReplayMismatch when the shown responses are not that item's. Otherwise the texts decide.
        """
        idx = item_index(item_id)
        if idx is not None and idx in self._items:
            item = self._items[idx]
            response1, response2 = response_text(item["response1"]), response_text(item["response2"])
            if (output_a, output_b) == (response1, response2):
                return self._verdict(judge_name, idx, swapped=False, matched_by="item_id")
            if (output_a, output_b) == (response2, response1):
                return self._verdict(judge_name, idx, swapped=True, matched_by="item_id")
            raise ReplayMismatch(f"the responses shown are not the two responses of recorded item {item_id}")

        idx = self._index.get((trace_input, output_a, output_b))
        swapped = False
        if idx is None:
            idx = self._index.get((trace_input, output_b, output_a))
            swapped = True
        if idx is None:
            return None
        return self._verdict(judge_name, idx, swapped=swapped, matched_by="text")

    def _verdict(self, judge_name: str, idx: int, *, swapped: bool, matched_by: str) -> RecordedVerdict:
        judge = RECORDED_JUDGES[judge_name]
        row = self._verdicts[judge_name][idx]
        raw_result = str(row[judge.result_field])
        winner = _WINNER_BY_RESULT.get(raw_result)
        if winner is not None and swapped:
            winner = _SWAPPED[winner]
        return RecordedVerdict(
            idx=idx, winner=winner, reasoning=row[judge.reason_field], raw_result=raw_result, matched_by=matched_by
        )
