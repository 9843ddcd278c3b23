"""A provider that echoes the Authorization header never puts the key, nor a piece of it, into judge_scores,
the cache or a log line (the same search over every file a Dagster run writes: defs/test_no_key_leaks.py)."""

from __future__ import annotations

import io
import logging
import warnings

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
from eval_platform.llm.redaction import REDACTED, clip, redact, remember
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.judging.test_runner import make_traces

CANARY = "sk-canary-7f3a9b1c2d4e5f60"


def pieces(key: str) -> list[str]:
    """Every 8-character piece of `key`: none may be kept anywhere."""
    return [key[i : i + 8] for i in range(len(key) - 7)]


def holds_a_piece(text: str | bytes | None, key: str = CANARY) -> bool:
    text = text.decode("latin-1") if isinstance(text, bytes) else text or ""
    return any(piece in text for piece in pieces(key))


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "litellm"])
@pytest.mark.parametrize("model", ["fault/echo_key", "fault/echo_key_reply", "fault/echo_key_long"])
def test_an_echoed_key_is_redacted_everywhere(local_judge, tmp_path, model, lean):
    config = EvaluatorConfig.model_validate(
        {
            "name": "leaky",
            "mode": "score",
            "model": f"openai/{model}",
            "api_base": local_judge.base_url,
            "api_key_env": "CANARY_API_KEY",
            "prompt": "Q: {{input}} A: {{output}}",
            "max_retries": 0,
        }
    )
    runtime = ModelRuntime(
        client=LiteLLMModelClient(retry=RetryPolicy(base_delay_s=0.01), lean=lean),
        cache=ModelCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={"CANARY_API_KEY": CANARY},
    )
    # Several prompts: the long echo pads each differently, so its keys straddle the 2,000-character cut at
    # different places.
    rows = judge_day(config, "2026-11-10", make_traces(6), runtime).rows
    echoed = rows["raw_response"].to_list()
    assert all(REDACTED in text for text in echoed)  # the provider did echo it: the test can fail
    text_columns = [c for c, t in rows.schema.items() if t == pl.String]
    assert not any(holds_a_piece(value) for c in text_columns for value in rows[c].to_list())
    path = write_partition(
        DataRoot.from_env(tmp_path), "judge_scores", {"evaluator": "leaky", "date": "2026-11-10"}, rows
    )
    assert not holds_a_piece(path.read_bytes())
    cached = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    if model == "fault/echo_key_reply":
        assert cached and rows["provider_model"][0] == f"fault-echo for Bearer {REDACTED}"  # cached, and the
        # model name the provider reported was redacted too
    assert not holds_a_piece(cached)


def test_no_cut_leaves_a_piece_of_a_key():
    key = "vB8qN3xR6tK1wZ9mJ4cH7pL2sF5gD0y"
    text = f"error 401: the header was 'Authorization: Bearer {key}', twice: {key}!"
    for cut in range(len(text) + 1):
        assert not holds_a_piece(clip(text, cut, [key]), key), cut
        # redacting what another cut left behind catches the piece at its edge
        assert not holds_a_piece(redact(text[:cut], [key]), key), cut
        assert not holds_a_piece(redact(text[cut:], [key]), key), cut
    assert redact(f"{key}{key} and {key[3:20]}", [key]) == f"{REDACTED} and {REDACTED}"
    assert redact("ordinary text, with vB8qN3x in it", [key]) == "ordinary text, with vB8qN3x in it"  # 7 chars


def test_every_log_record_and_warning_is_redacted():
    """Log records of any logger (a library's, Dagster's, litellm's) are redacted as they are created, before
    a handler writes them; so are printed warnings and logged tracebacks."""
    key = "mQ7vT2kX9pR4wB6nZ1cJ8hL3sD5fG0a"
    remember(key)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("some.library.polling")
    logger.addHandler(handler)
    try:
        logger.warning("polling %s failed: %s", "batch_1", f"HTTP 503: Authorization: Bearer {key}")
        try:
            raise RuntimeError(f"the gateway said: {key[:20]}")
        except RuntimeError:
            logger.exception("request failed")
    finally:
        logger.removeHandler(handler)
    logged = stream.getvalue()
    assert "polling batch_1 failed: HTTP 503: Authorization: Bearer [REDACTED]" in logged
    assert "RuntimeError: the gateway said: [REDACTED]" in logged and not holds_a_piece(logged, key)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(f"unclosed session for {key}", ResourceWarning, stacklevel=1)
    (warning,) = caught
    printed = warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
    assert "unclosed session for [REDACTED]" in printed and not holds_a_piece(printed, key)
