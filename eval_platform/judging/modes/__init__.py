"""The judge modes, one module each, and the `MODES` registry (mode name -> `JudgeMode`).

A `JudgeMode` states everything the rest of the platform needs to know about a mode, so that no other file
names a mode or types out a set of mode names:

- its options: the evaluator sections it needs (filled with their defaults when absent), the other fields it
  accepts, a check of its own (`check`), its template variables, whether few-shot examples apply;
- its reply: the JSON Schema of its verdict fields (`verdict_schema`, which the prompt shows the judge), the
  JSON keys its verdict is read from and its parser (`parse`, a JSON object or the text shapes real judges
  write, to a `Verdict`); `parsing.parse_reply` and `prompts.reply_schema` only dispatch on the mode;
- its planning of units (`unit`, `plan`): one trace (the default, `units.single_units`), a pair or a group,
  with the values a trace must have to be judged (`needs_values`);
- how its verdicts combine across models and samples (`consensus`: the rules it allows, the first its
  default; `vote_column`, `split_vote`, `vote_fields`); across presentation orders, its `plan` does it;
- what agreement compares (`agreement`: scores, labels or pairwise preferences);
- how a benchmark checks it as a judge against gold verdicts (`as_judge`, `gold_text`).

Adding a mode is one module here defining `MODE`, its entry in `MODES` below, and its tests. A mode module
imports this base and `judging.units`, never the registry's users (config, prompts, runner): what it needs of
them at run time (trace values, messages) the runner hands it in a `units.Day`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from eval_platform.judging import units
from eval_platform.scoring.base import GoldKind

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig

VerdictKind = Literal["scaled", "boolean", "label", "ranking"]
UnitKind = Literal["trace", "pair", "group"]
AgreementKind = Literal["scores", "labels", "preference"]
ConsensusRule = Literal["median", "mean", "majority_vote", "unanimous"]
VOTES: tuple[ConsensusRule, ...] = ("majority_vote", "unanimous")
AVERAGES: tuple[ConsensusRule, ...] = ("mean", "median")
BASE_VARIABLES = frozenset({"input", "output", "context", "expected", "metadata"})
# One trace's (span's, session's) transcript and trajectory, and the judged span's tool, name and operation
# (`judging.targets`, target span only): not offered to modes that show several traces in one prompt, where they
# would be one candidate's.
AGENT_VARIABLES = frozenset({"conversation", "tool_calls", "tool_name", "span_name", "span_operation"})
# The evaluator fields that belong to some mode: set on an evaluator of another mode, they are refused.
MODE_FIELDS = ("score_scale", "rubric", "labels", "expect", "pairwise", "n_wise", "reference")


@dataclass(frozen=True)
class JudgeMode:
    name: str
    verdict: VerdictKind
    verdict_keys: tuple[str, ...]  # where a JSON reply holds the verdict, most usual key first
    vote_column: str  # the judge_scores column a consensus vote counts
    agreement: AgreementKind  # what agreement compares: raw scores, labels (the vote column) or A/B/tie
    consensus: tuple[ConsensusRule, ...]  # the rules allowed; the first is the default
    options: tuple[str, ...] = ()  # evaluator sections the mode needs, defaulted to {} when absent
    accepts: tuple[str, ...] = ()  # other evaluator fields of MODE_FIELDS it allows (rubric, labels, expect)
    output_variables: tuple[str, ...] = ("output",)  # what the prompt shows in place of {{output}}
    required_variables: tuple[tuple[str, str], ...] = ()  # (variable, why) the prompt must use
    # Every mode has both (keyword-only: they follow fields with defaults).
    # (config, JSON object or None, reply text, n candidates) -> Verdict; raises replies.ParseFailure
    parse: Callable[..., Any] = field(kw_only=True)
    # (config, n candidates) -> the verdict fields of the reply's JSON Schema
    verdict_schema: Callable[..., dict[str, Any]] = field(kw_only=True)
    system_note: str | None = None  # a line the system message adds for this mode
    check: Callable[[EvaluatorConfig], None] | None = None  # raises ValueError on a config the mode refuses
    few_shot: bool = True  # few-shot examples (shown with output_variables) apply
    unit: UnitKind = "trace"  # what one call judges: a trace, a pair of traces or a group
    plan: Callable[[units.Day], list[units.Unit]] | None = None  # the day's units; None: one per trace
    # (config) -> the trace field (`metadata.<key>` too) whose value puts traces in one unit (pair, group); None:
    # each trace is its own. A day's traces are handed to `plan` in batches that never split such a group.
    group_by: Callable[[EvaluatorConfig], str] | None = None
    needs_values: tuple[tuple[str, str, str], ...] = ()  # (value, skip code, detail): a trace without it is SKIPPED
    split_vote: str | None = None  # what a vote without a majority gives; None: FAILED no_consensus
    # (winning vote, a member row that cast it or None) -> the consensus row's verdict columns
    vote_fields: Callable[[Any, dict | None], dict[str, Any]] | None = None
    as_judge: GoldKind | None = None  # how a benchmark checks it against gold verdicts; None: not benchmarked
    gold_text: Callable[[Any], str | None] | None = None  # a Verdict as the benchmark's `verdict` column holds it

    @property
    def numeric(self) -> bool:
        """Its per-case value is a number: consensus may average, agreement is a correlation."""
        return self.verdict in ("scaled", "ranking")

    @property
    def labelled(self) -> bool:
        """Its per-case value is a label: consensus is a vote, agreement is on labels."""
        return self.verdict in ("boolean", "label")

    @property
    def relative(self) -> bool:
        """Its per-trace score is relative to the other candidates of its pair or group (a daily mean says nothing)."""
        return self.unit != "trace"

    @property
    def default_consensus(self) -> ConsensusRule:
        return self.consensus[0]

    def template_variables(self) -> set[str]:
        agent = AGENT_VARIABLES if self.unit == "trace" else frozenset()
        return set(BASE_VARIABLES - {"output"}) | agent | set(self.output_variables)

    def units(self, day: units.Day) -> list[units.Unit]:
        """The day's units: what each member judges at once (a trace, a pair, a group)."""
        return (self.plan or units.single_units)(day)


from eval_platform.judging.modes import (  # noqa: E402  (the modules import JudgeMode from here)
    assertion,
    binary,
    categorical,
    n_wise,
    pairwise,
    reference,
    score,
)

MODES: dict[str, JudgeMode] = {
    m.MODE.name: m.MODE for m in (score, binary, assertion, categorical, pairwise, n_wise, reference)
}


def modes_where(predicate: Callable[[JudgeMode], bool]) -> frozenset[str]:
    """The names of the modes for which `predicate(mode)` holds."""
    return frozenset(name for name, mode in MODES.items() if predicate(mode))


LABEL_MODES = modes_where(lambda m: m.labelled)  # a verdict that is a label (pairwise's winner too): voted on
NUMERIC_MODES = modes_where(lambda m: m.numeric)  # a verdict that is a number (n_wise's mean rank too): averaged
