"""The lean OpenAI-compatible path and litellm give the same judge_scores rows on the same calls.

Each evaluator is judged twice against the local judge, once with `lean=False` (every call through litellm)
and once with the lean path, each with an empty cache; the rows must match in every column except the
call's latency and the time it was judged. For a failed call the reason code, attempts and everything else
must match too; only the free-text detail is worded by the client that raised it (and a refused connection,
which litellm files as a provider 500, is a connection_error on the lean path).
"""

from __future__ import annotations

import json
import socket

import polars as pl
import pytest

from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
from eval_platform.llm.openai_compat import is_openai_compatible
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.judging.test_modes import judge
from eval_platform_tests.judging.test_runner import DAY, make_traces

VARYING = ["latency_ms", "judged_at"]
WORDED_BY_CLIENT = ["reason_detail", "raw_response"]

CASES = {
    "score": dict(mode="score", score_scale={"min": 1, "max": 5}),
    "binary": dict(mode="binary"),
    "assertion": dict(mode="assertion", expect="no"),
    "categorical": dict(mode="categorical", labels={"good": 1.0, "partial": 0.5, "bad": 0.0}),
    "reference": dict(mode="reference", score_scale={"min": 0, "max": 10}),
    "pairwise_both_orders": dict(mode="pairwise", model="longest", pairwise={"pair_by": "metadata.item_id"}),
    "n_wise": dict(mode="n_wise", model="longest", n_wise={"group_by": "metadata.item_id", "min_candidates": 2}),
    "consensus_samples": dict(
        mode="score", samples=2, consensus="median", score_scale={"min": 1, "max": 5}, temperature=0.7
    ),
    "priced_with_budget": dict(
        mode="score",
        score_scale={"min": 1, "max": 5},
        input_cost_per_million=2.0,
        output_cost_per_million=8.0,
        max_daily_cost_usd=5.0,
    ),
    "retry_after_then_ok": dict(mode="score", model="fault/rate_limit_once", max_retries=2),
    "server_error": dict(mode="score", model="fault/server_error", max_retries=1),
    "timeout": dict(mode="score", model="fault/slow", timeout_s=1, max_retries=0),
    "connection_refused": dict(mode="score", api_base="CLOSED_PORT", max_retries=1),
    "unparseable": dict(mode="score", model="fault/malformed"),
    "truncated": dict(mode="score", model="fault/truncated"),
    "prose": dict(mode="score", model="fault/prose"),
}


def _closed_port_url() -> str:
    """A loopback URL nothing listens on: the port was bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _rows(local_judge, tmp_path, name: str, lean: bool) -> pl.DataFrame:
    fields = dict(CASES[name])
    if fields.get("api_base") == "CLOSED_PORT":
        fields["api_base"] = _closed_port_url()
    mode = fields.pop("mode")
    config = judge(local_judge, mode, **fields)
    traces = make_traces(4, expected_output="It is 2.")
    state = tmp_path / ("lean" if lean else "litellm")
    runtime = ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=4, retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.05), lean=lean),
        cache=ModelCache(state / "cache"),
        ledger=BudgetLedger(state / "budget.sqlite"),
        env={},
    )
    rows = judge_day(config, DAY, traces, runtime).rows
    return rows.sort(["trace_id", "trace_id_b", "model", "sample", "role"], nulls_last=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lean_path_and_litellm_give_identical_rows(local_judge, tmp_path, name):
    through_litellm = _rows(local_judge, tmp_path, name, lean=False)
    lean = _rows(local_judge, tmp_path, name, lean=True)
    assert through_litellm.height == lean.height > 0
    compared = [c for c in through_litellm.columns if c not in VARYING]
    if name == "connection_refused":
        # litellm reports a refused connection as InternalServerError 500 ("Connection error."), so its rows
        # say provider_error:500; the lean path names it connection_error. Both retry it the same way.
        assert set(through_litellm["reason"].to_list()) == {"provider_error:500"}
        compared.remove("reason")
    failed = pl.col("status") == "FAILED"
    blank_worded = [pl.when(failed).then(None).otherwise(pl.col(c)).alias(c) for c in WORDED_BY_CLIENT]
    a = through_litellm.select(compared).with_columns(blank_worded)
    b = lean.select(compared).with_columns(blank_worded)
    assert a.to_dicts() == b.to_dicts()
    # Both runs did judge something: the comparison is not between two empty or all-skipped frames.
    assert set(lean["status"].to_list()) & {"COMPLETED", "FAILED"}
    expected_reason = {"timeout": "timeout", "connection_refused": "connection_error"}.get(name)
    if expected_reason:
        assert lean["reason"].to_list() == [expected_reason] * lean.height
    if name == "priced_with_budget":
        assert lean["cost_usd"].sum() > 0  # spend is computed, and equal, on both paths


def test_fault_rows_keep_their_reason_codes_on_the_lean_path(local_judge, tmp_path):
    rows = _rows(local_judge, tmp_path, "server_error", lean=True)
    assert rows["reason"].to_list() == ["provider_error:500"] * rows.height
    assert rows["calls"].to_list() == [2] * rows.height  # one retry, as max_retries says
    assert all("internal error injected" in detail for detail in rows["reason_detail"].to_list())


def test_which_calls_take_the_lean_path():
    assert is_openai_compatible("openai/mock", "http://127.0.0.1:8000/v1")
    assert is_openai_compatible("openai/gpt-4o-mini", None)
    assert is_openai_compatible("my-vllm-model", "http://gpu-box:8000/v1")
    # litellm keeps every other provider, and the reasoning models whose parameters it rewrites.
    assert not is_openai_compatible("anthropic/claude-3-5-sonnet-20241022", None)
    assert not is_openai_compatible("gpt-4o-mini", None)
    assert not is_openai_compatible("openai/o1", None)
    assert not is_openai_compatible("ollama/llama3", "http://127.0.0.1:11434")


def test_lean_path_reports_cached_prompt_tokens(tmp_path):
    from tools.local_judge_wires import WiredJudgeServer

    with WiredJudgeServer(prompt_cache=True) as server:
        config = judge(server, "score", score_scale={"min": 1, "max": 5})
        runtime = ModelRuntime(
            LiteLLMModelClient(max_concurrency=1),
            ModelCache(tmp_path / "c"),
            BudgetLedger(tmp_path / "b.sqlite"),
            env={},
        )
        rows = judge_day(config, DAY, make_traces(3), runtime).rows
    cached = rows.sort("trace_id")["cached_prompt_tokens"].to_list()
    # One request at a time: the first pays for the system prompt, the next ones find it cached.
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])
    assert json.dumps(cached)  # plain ints


def test_openai_models_without_api_base_read_litellms_environment_on_both_paths(local_judge, tmp_path, monkeypatch):
    """`openai/<model>` with no api_base or key: litellm reads OPENAI_BASE_URL and OPENAI_API_KEY; so does
    the lean path (the local judge echoes the Authorization header it received into the reasoning, redacted)."""
    monkeypatch.setenv("OPENAI_BASE_URL", local_judge.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    config = judge(local_judge, "score", model="fault/echo_key_reply", api_base=None)
    for lean in (False, True):
        state = tmp_path / str(lean)
        runtime = ModelRuntime(
            LiteLLMModelClient(lean=lean), ModelCache(state / "c"), BudgetLedger(state / "b.sqlite"), env={}
        )
        rows = judge_day(config, DAY, make_traces(1), runtime).rows
        assert rows["status"].to_list() == ["COMPLETED"]
        # The key was sent, and echoed back: an environment key is redacted as an evaluator's is.
        assert "Bearer [REDACTED]" in rows["reasoning"][0] and "sk-from-the-environment" not in rows["reasoning"][0]


class _StallingProvider:
    """An OpenAI-compatible endpoint on 127.0.0.1 that answers a chat completion's status and headers and the start
    of its body, then sends nothing more; it closes the connection after STALL_S seconds."""

    STALL_S = 15.0

    def __init__(self) -> None:
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import time

        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += connection.recv(65536)
                head, body = data.split(b"\r\n\r\n", 1)
                length = int(
                    next(
                        v
                        for k, v in (h.split(b":", 1) for h in head.split(b"\r\n")[1:])
                        if k.lower() == b"content-length"
                    )
                )
                while len(body) < length:
                    body += connection.recv(65536)
                self.requests += 1
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n"
                    b'{"choices": [{"message": {"content": "'
                )
                time.sleep(self.STALL_S)

    def close(self) -> None:
        self.sock.close()


def test_a_reply_whose_body_stalls_is_failed_timeout_after_timeout_s(tmp_path):
    # The timeout bounds the call whole: the status and headers came in time, the body never does.
    provider = _StallingProvider()
    try:
        config = judge(provider, "score", timeout_s=1, max_retries=0, score_scale={"min": 1, "max": 5})
        runtime = ModelRuntime(
            LiteLLMModelClient(max_concurrency=1),
            ModelCache(tmp_path / "c"),
            BudgetLedger(tmp_path / "b.sqlite"),
            env={},
        )
        rows = judge_day(config, DAY, make_traces(1), runtime).rows
    finally:
        provider.close()
    assert provider.requests == 1
    assert rows.select("status", "reason", "calls").rows() == [("FAILED", "timeout", 1)]
    assert rows["latency_ms"][0] < provider.STALL_S * 1000  # ended by the timeout, not by the provider hanging up
