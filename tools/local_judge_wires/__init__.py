"""The local judge's test-only wires (`eval_platform.local_judge.server.Wire`), kept out of the product.

`WiredJudgeServer` is the local judge with all of them, as the tests and the development tools start it:
- `fault/<kind>`: a provider failing (`faults`), and `fault/echo_key*`: one echoing the caller's key (`echo_key`);
- `echo/<block>`, `longest`: judges whose replies a test scripts (`scripted`);
- `app/<name>`: an instrumented application's own chat model (`app_model`);
- Azure OpenAI's paths (`azure`) and Anthropic's Messages API and Message Batches (`message_batches`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eval_platform.local_judge.server import LocalJudgeServer, Wire
from tools.local_judge_wires.app_model import AppModel
from tools.local_judge_wires.azure import Azure
from tools.local_judge_wires.echo_key import EchoKey
from tools.local_judge_wires.faults import Faults
from tools.local_judge_wires.message_batches import MessageBatches
from tools.local_judge_wires.scripted import Scripted


def all_wires(retry_after_s: float = 1.0, slow_s: float = 5.0) -> list[Wire]:
    """Every test wire, in the order they are asked (the key echo before the other `fault/` kinds)."""
    return [EchoKey(), Faults(retry_after_s, slow_s), Scripted(), AppModel(), Azure(), MessageBatches()]


class WiredJudgeServer(LocalJudgeServer):
    """`LocalJudgeServer` with the test wires: a `fault/` 429 asks to retry after `retry_after_s`, a `slow` fault
    takes `slow_s`; `wires` are asked after them."""

    def __init__(
        self,
        data_root: Path | None = None,
        *,
        retry_after_s: float = 1.0,
        slow_s: float = 5.0,
        wires: Sequence[Wire] = (),
        **options,
    ):
        super().__init__(data_root, wires=[*all_wires(retry_after_s, slow_s), *wires], **options)


__all__ = ["WiredJudgeServer", "all_wires"]
