"""A local OpenAI-compatible judge server: mock verdicts, replayed PandaLM verdicts and injected faults."""

from eval_platform.local_judge.server import LocalJudgeServer

__all__ = ["LocalJudgeServer"]
