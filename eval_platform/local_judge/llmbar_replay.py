"""LLMBar's recorded judge completions, served by item and presentation order.

Zeng et al. (LLMBar, ICLR 2024) published every completion of 28 judge runs, once with the pair shown as
recorded (`swap = False`: output_1 first) and once swapped (`swap = True`: output_2 first). The local
judge serves them as models `replay/llmbar/<judge>/<strategy>` (e.g. `replay/llmbar/GPT-4/Vanilla_NoRules`),
so a benchmark can run those judges over HTTP like any other model under test.

A prompt finds its recording by the texts of its fenced `input`, `output_a` and `output_b` blocks: the item
whose instruction and two outputs they are, and the order is which output is shown first. No two items of
the recorded subsets share those three texts, so the key is exact. The completion goes back verbatim (the
benchmark's parser reads it, as the authors' did). A prompt whose item the run did not record (the run
never saw that subset) is a miss, never a borrowed verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

LLMBAR_DIR = Path("sources") / "llmbar" / "Dataset"
SHOWN_AS_RECORDED, SHOWN_SWAPPED = "swap = False", "swap = True"


@dataclass(frozen=True)
class LLMBarRecordings:
    """Run name (`<judge>/<strategy>`) -> (input, output shown first, output shown second) -> completion."""

    runs: dict[str, dict[tuple[str, str, str], str]]

    @classmethod
    def load(cls, data_root: Path) -> LLMBarRecordings:
        runs: dict[str, dict[tuple[str, str, str], str]] = {}
        for result in sorted((data_root / LLMBAR_DIR).glob("**/evaluators/*/*/result.json")):
            run = f"{result.parent.parent.name}/{result.parent.name}"
            table = runs.setdefault(run, {})
            for row in json.loads(result.read_text(encoding="utf-8")):
                recorded = row["results"][-1]
                text, one, two = row["input"], row["output_1"], row["output_2"]
                table[(text, one, two)] = recorded[SHOWN_AS_RECORDED]["completion"][0]
                table[(text, two, one)] = recorded[SHOWN_SWAPPED]["completion"][0]
        return cls(runs)

    def lookup(self, run: str, text: str, shown_first: str, shown_second: str) -> str | None:
        """The recorded completion for this item in this order, or None when the run did not record it."""
        return self.runs[run].get((text, shown_first, shown_second))
