"""pairwise: which of two outputs ({{output_a}}, {{output_b}}) is better, or a tie; consensus by vote.

Read from JSON `winner` (or `verdict`, `choice`), else `[[A]]` / `[[B]]` / `[[C]]` (MT-Bench), `Output (a)`
(LLMBar), a candidate's name or `Response 1` alone on the first or last line (PandaLM), `Tie`, `Winner: B`.
A reply naming both candidates in those places is `ambiguous`, unless the evaluator declares
`when_both_named: first_shown` (LLMBar's parser's convention).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import JudgeMode
from eval_platform.judging.replies import ParseFailure, Verdict, choices_in_text, field, norm, one_verdict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig

# Words that mean a tie, so never allowed as a candidate's name.
TIE_WORDS = frozenset({"tie", "draw", "equal", "c"})
_CANDIDATE_WORDS = ("output", "response", "assistant", "candidate", "model", "answer", "option")


def pairwise_aliases(names: tuple[str, str]) -> dict[str, str]:
    """Every way a judge may name the first-shown (A) or second-shown (B) candidate, or a tie."""
    aliases: dict[str, str] = {}
    for position, name in zip("AB", names, strict=True):
        inner = re.fullmatch(r".*\((\w+)\)", name.strip())
        bases = {norm(name)} | ({inner.group(1).lower()} if inner else set())
        for base in bases:
            aliases[base] = position
            for word in _CANDIDATE_WORDS:
                aliases[f"{word} {base}"] = position
                aliases[f"{word} ({base})"] = position
    for word in TIE_WORDS | {"both", "tied", "it's a tie", "it is a tie"}:
        aliases.setdefault(word, "tie")
    return aliases


def verdict_schema(config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    options = config.pairwise
    names = list(options.candidate_names) + (["tie"] if options.allow_ties else [])
    return {"winner": {"type": "string", "enum": names}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    options = config.pairwise
    aliases = pairwise_aliases(options.candidate_names)
    value = field(obj, "winner", "verdict", "choice")
    if obj is not None and value is not None:
        winner = aliases.get(norm(str(value)))
        if winner is None:
            names = [*options.candidate_names, *(["tie"] if options.allow_ties else [])]
            raise ParseFailure("schema_violation", f"'winner' must be one of {names}, got {value!r}")
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'winner'")
    else:
        found = choices_in_text(text, aliases)
        if options.when_both_named == "first_shown" and {named for _, named in found} == {"A", "B"}:
            found = [(where, named) for where, named in found if named == "A"]  # LLMBar's parser tries (a) first
        winner = one_verdict(found, "candidate")
        if winner is None:
            raise ParseFailure("unparseable", "no JSON object and no single candidate on its own line or in [[...]]")
    if winner == "tie" and not options.allow_ties:
        raise ParseFailure("schema_violation", "the judge answered tie, but this evaluator forbids ties")
    return Verdict({"A": 1.0, "B": 0.0, "tie": 0.5}[winner], None, winner, None, winner, None)


MODE = JudgeMode(
    "pairwise", "label", ("winner", "verdict", "choice"), "winner",
    options=("pairwise",), output_variables=("output_a", "output_b"),
    parse=parse, verdict_schema=verdict_schema,
)
