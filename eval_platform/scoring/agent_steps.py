"""How many steps an agent took and how many turns a conversation had, against bounds.

The value is 1 when the count lies within the bounds (both inclusive; an omitted bound does not limit), else 0;
the count itself is what `describe` measures (a check row's raw_score). Steps are counted from the trace's
`spans` (model calls: spans whose operation is an inference) or its `tool_calls`; turns are the user messages
of its `conversation` (TRACE_SCHEMA). A trace without the field it counts lacks it: never a count of 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from eval_platform.ingest.otel.fields import INFERENCE
from eval_platform.scoring.base import Scorer, ScorerOptions
from eval_platform.scoring.tool_calls import TOOL_CALLS, called_tools, json_list


class Bounds(ScorerOptions):
    min: int | None = Field(None, ge=0, description="Fewest allowed (inclusive).")
    max: int | None = Field(None, ge=0, description="Most allowed (inclusive).")

    @model_validator(mode="after")
    def _ordered(self) -> Bounds:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def within(self, count: int) -> bool:
        return (self.min is None or count >= self.min) and (self.max is None or count <= self.max)

    def text(self) -> str:
        limits = [f"min {self.min}" if self.min is not None else "", f"max {self.max}" if self.max is not None else ""]
        return ", ".join(filter(None, limits)) or "no bounds"


class StepCountOptions(Bounds):
    steps: Literal["model_calls", "tool_calls"] = Field(
        "model_calls", description="model_calls: the trace's inference spans; tool_calls: its tool calls."
    )


def _steps(case: Mapping[str, Any], options: StepCountOptions) -> tuple[float, str]:
    if options.steps == "tool_calls":
        count = len(called_tools(case))
    else:
        spans = json_list(case, "spans")
        count = sum(1 for span in spans if isinstance(span, dict) and span.get("operation") in INFERENCE)
    return count, f"{count} {options.steps.replace('_', ' ')} ({options.text()})"


def _turns(case: Mapping[str, Any], options: Bounds) -> tuple[float, str]:
    messages = json_list(case, "conversation")
    count = sum(1 for message in messages if isinstance(message, dict) and message.get("role") == "user")
    return count, f"{count} user turns in {len(messages)} messages ({options.text()})"


SCORERS = [
    Scorer(
        "step_count",
        StepCountOptions,
        lambda _output, case, options: float(options.within(_steps(case, options)[0])),
        lambda options: (TOOL_CALLS,) if options.steps == "tool_calls" else ("spans",),
        reads_output=False,
        describe=lambda _output, case, options: _steps(case, options),
    ),
    Scorer(
        "turn_count",
        Bounds,
        lambda _output, case, options: float(options.within(_turns(case, options)[0])),
        lambda _options: ("conversation",),
        reads_output=False,
        describe=lambda _output, case, options: _turns(case, options),
    ),
]
