"""Judges whose replies a test chooses, to exercise parsing, position bias and consensus over real HTTP.

(`fixed/<reply>`, a reply given verbatim, is the server's own: the demo's benchmark uses it.)
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
from eval_platform.local_judge.server import Wire

SCRIPTED_PREFIXES = ("echo/", "longest")


class Scripted(Wire):
    models = ("echo/<block>", "longest")

    async def answer(self, model: str, prompt: str, credentials: str) -> Answer | None:
        return scripted_answer(model, prompt) if model.startswith(SCRIPTED_PREFIXES) else None


def scripted_answer(model: str, prompt: str) -> Answer:
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
