"""A local OpenAI-compatible judge server: placeholder (mock) verdicts and replayed recorded verdicts, for the demo
and a trial without a key; more behaviour plugs in as `Wire`s (the tests' are in tools/local_judge_wires)."""

from eval_platform.local_judge.server import LocalJudgeServer, Wire

__all__ = ["LocalJudgeServer", "Wire"]
