"""Judges whose replies a test chooses, to exercise parsing, position bias and consensus over real HTTP.

- `fixed/<reply>`: always answers `<reply>` verbatim (e.g. `fixed/[[A]]`, a judge that always prefers the
  candidate shown first, or `fixed/{"passed": true, "reasoning": "ok"}`).
- `echo/<block>`: answers with the text of the prompt's first fenced block named `<block>`
  (e.g. `echo/output`: the trace's own output is the reply, so each trace scripts its verdict).
- `longest`: a verbosity-biased but position-consistent judge: prefers the longest candidate.
  Pairwise (output_a / output_b blocks): `{"winner": "A" | "B" | "tie"}` with the prompt's candidate
  names taken from its reply schema; n_wise (candidate_<letter> blocks): the letters by length, longest first.
"""

from __future__ import annotations

import json

from eval_platform.judging.fencing import unfence_all
from eval_platform.local_judge.answers import Answer, JudgeRequestError
from eval_platform.local_judge.mock_verdict import find_reply_schema

SCRIPTED_PREFIXES = ("fixed/", "echo/", "longest")


def scripted_answer(model: str, prompt: str) -> Answer:
    if model.startswith("fixed/"):
        return Answer(model.removeprefix("fixed/"), f"local/{model}")
    blocks = unfence_all(prompt)
    if model.startswith("echo/"):
        name = model.removeprefix("echo/")
        if name not in blocks:
            raise JudgeRequestError(400, f"echo: the prompt has no fenced block named {name!r}", code="echo_miss")
        return Answer(blocks[name][0], f"local/{model}")
    candidates = {
        name.removeprefix("candidate_").upper(): texts[0]
        for name, texts in blocks.items()
        if name.startswith("candidate_")
    }
    if candidates:
        ranking = sorted(candidates, key=lambda letter: (-len(candidates[letter]), letter))
        return Answer(json.dumps({"ranking": ranking, "reasoning": "longest first"}), "local/longest")
    if "output_a" in blocks and "output_b" in blocks:
        schema = find_reply_schema(prompt) or {}
        names = schema.get("properties", {}).get("winner", {}).get("enum", ["A", "B", "tie"])
        a, b = len(blocks["output_a"][0]), len(blocks["output_b"][0])
        winner = names[0] if a > b else names[1] if b > a else "tie"
        return Answer(json.dumps({"winner": winner, "reasoning": "the longer one"}), "local/longest")
    raise JudgeRequestError(
        400, "longest: the prompt has neither output_a/output_b nor candidate blocks", code="longest_miss"
    )
