"""What an evaluator judges (trace, span, session), what feeds {{context}}, and what is never paid for: judged over
real HTTP by the local judge. `echo/<block>` judges answer with the fenced block they received, so `raw_response`
shows exactly what the judge was sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.loading import load_evaluator
from eval_platform.judging.prompts import build_messages
from eval_platform.judging.runner import judge_day
from eval_platform.judging.targets import session_values, trace_values
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform_tests.conftest import REPO_DATA, judge_requests

DAY = "2026-11-10"
FINAL = "It is 18 degrees and sunny in Paris."
TOOL_CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}


def trace(trace_id: str, day: str = DAY, minute: int = 0, **fields) -> dict:
    return {
        "trace_id": trace_id,
        "timestamp": datetime.fromisoformat(f"{day}T10:{minute:02d}:00+00:00").astimezone(UTC),
        "date": day,
        "metadata": "{}",
        **fields,
    }


def frame(*traces: dict) -> pl.DataFrame:
    rows = [{k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in t.items()} for t in traces]
    return conform(pl.DataFrame(rows, infer_schema_length=None), TRACE_SCHEMA)


def tool_loop_trace(trace_id: str = "loop", error: bool = False, **fields) -> dict:
    """An agent run as ingest writes it: two chat calls (a tool call, then the answer) around a tool span."""
    conversation = [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"temp_c": 18, "sky": "sun"}'},
        {"role": "assistant", "content": FINAL},
    ]
    spans = [
        {
            "span_id": "a1",
            "parent_span_id": None,
            "name": "invoke_agent weather",
            "operation": "invoke_agent",
            "status": "ok",
            "input": "What is the weather in Paris?",
            "output": FINAL,
        },
        {
            "span_id": "c1",
            "parent_span_id": "a1",
            "name": "chat gpt-4o-mini",
            "operation": "chat",
            "status": "ok",
            "input": "What is the weather in Paris?",
            "output": '[tool_call get_weather({"city": "Paris"})]',
        },
        {
            "span_id": "t1",
            "parent_span_id": "a1",
            "name": "execute_tool get_weather",
            "operation": "execute_tool",
            "status": "ok",
            "tool_name": "get_weather",
            "tool_arguments": '{"city": "Paris"}',
            "tool_result": '{"temp_c": 18, "sky": "sun"}',
        },
        {
            "span_id": "c2",
            "parent_span_id": "a1",
            "name": "chat gpt-4o-mini",
            "operation": "chat",
            "status": "ok",
            "input": "What is the weather in Paris?",
            "output": FINAL,
            "attributes": {"gen_ai.request.model": "gpt-4o"},
        },
    ]
    tool_calls = [
        {
            "span_id": "t1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "result": '{"temp_c": 18, "sky": "sun"}',
            "status": "ok",
            "error": None,
        }
    ]
    return trace(
        trace_id,
        input="What is the weather in Paris?",
        output=FINAL,
        conversation=conversation,
        spans=spans,
        tool_calls=tool_calls,
        error=error,
        **fields,
    )


def evaluator(local_judge, model: str = "mock", **fields) -> EvaluatorConfig:
    base = {
        "name": "agent_eval",
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "model": f"openai/{model}",
        "api_base": local_judge.base_url,
        "prompt": "Question: {{input}}\nAnswer: {{output}}",
        "max_retries": 0,
        "timeout_s": 5,
    }
    return EvaluatorConfig.model_validate({**base, **fields})


# ---------------------------------------------------------------------------------------------- target trace


def test_a_tool_loop_is_judged_on_its_final_answer_with_the_conversation(local_judge, runtime):
    traces = frame(tool_loop_trace())
    output = judge_day(evaluator(local_judge, "echo/output"), DAY, traces, runtime).rows
    assert output["raw_response"].to_list() == [FINAL]  # what the judge received as {{output}}: not the tool call

    prompt = "{{input}}\n{{conversation}}\nTools used:\n{{tool_calls}}\n{{output}}"
    conversation = judge_day(evaluator(local_judge, "echo/conversation", prompt=prompt), DAY, traces, runtime).rows
    assert conversation["raw_response"][0].splitlines() == [
        "system: You are a weather assistant.",
        "user: What is the weather in Paris?",
        'assistant calls tool get_weather({"city": "Paris"}) [id call_1]',
        'tool result (get_weather, call_1): {"temp_c": 18, "sky": "sun"}',
        f"assistant: {FINAL}",
    ]
    trajectory = judge_day(evaluator(local_judge, "echo/tool_calls", prompt=prompt), DAY, traces, runtime).rows
    assert trajectory["raw_response"].to_list() == ['1. get_weather({"city": "Paris"}) -> {"temp_c": 18, "sky": "sun"}']

    judged = judge_day(evaluator(local_judge, prompt=prompt), DAY, traces, runtime).rows
    assert judged["status"].to_list() == ["COMPLETED"] and judged["span_id"].to_list() == [None]


def test_conversation_shows_the_last_n_messages_and_says_how_many_are_not_shown(local_judge, runtime):
    config = evaluator(local_judge, "echo/conversation", prompt="{{conversation}} {{output}}", conversation_last_n=2)
    shown = judge_day(config, DAY, frame(tool_loop_trace()), runtime).rows["raw_response"][0].splitlines()
    assert shown == [
        "(3 earlier messages not shown)",
        'tool result (get_weather, call_1): {"temp_c": 18, "sky": "sun"}',
        f"assistant: {FINAL}",
    ]


def test_context_from_names_what_feeds_context(local_judge, runtime):
    rag = trace(
        "rag",
        input="Who wrote Dune?",
        output="Frank Herbert.",
        metadata=json.dumps({"policy": "cite sources"}),
        spans=[
            {"span_id": "r1", "name": "retrieve", "operation": "retrieval", "context": ["Dune (1965), Frank Herbert"]},
            {"span_id": "c1", "name": "chat", "operation": "chat", "input": "Who wrote Dune?", "output": "Herbert."},
        ],
        tool_calls=[{"name": "lookup", "arguments": "{}", "result": "Herbert, Frank", "status": "ok"}],
    )
    config = evaluator(
        local_judge,
        "echo/context",
        prompt="{{context}} {{input}} {{output}}",
        context_from=["retrieval", "tool_results", "metadata.policy"],
    )
    context = judge_day(config, DAY, frame(rag), runtime).rows["raw_response"][0]
    assert context == "Dune (1965), Frank Herbert\n\nlookup: Herbert, Frank\n\ncite sources"


# ---------------------------------------------------------------------------------------------- target span


def test_span_target_gives_one_row_per_matching_span_and_never_shares_a_verdict(local_judge, runtime):
    same_text = tool_loop_trace()
    for span in same_text["spans"]:
        if span["operation"] == "chat":
            span["output"] = FINAL  # both chat spans now read alike: still two verdicts, two calls
    config = evaluator(local_judge, target="span", span={"operation": "chat"})
    before = judge_requests(local_judge)
    rows = judge_day(config, DAY, frame(same_text, tool_loop_trace("loop2")), runtime).rows
    assert sorted(zip(rows["trace_id"], rows["span_id"], strict=True)) == [
        ("loop", "c1"),
        ("loop", "c2"),
        ("loop2", "c1"),
        ("loop2", "c2"),
    ]
    assert rows["status"].to_list() == ["COMPLETED"] * 4
    assert judge_requests(local_judge) - before == 4  # the span is in the cache key: no span got another's reply
    again = judge_day(config, DAY, frame(same_text, tool_loop_trace("loop2")), runtime).rows
    assert again["cache_hit"].all() and judge_requests(local_judge) - before == 4  # each span finds its own


def test_span_selector_picks_the_last_call_that_the_old_name_option_could_not_reach(local_judge, runtime):
    traces = frame(tool_loop_trace())
    old = judge_day(evaluator(local_judge, "echo/output", span="chat gpt-4o-mini"), DAY, traces, runtime).rows
    assert old["span_id"].to_list() == ["c1"]  # `span: <name>` keeps its meaning: the first span of that name
    assert old["raw_response"].to_list() == ['[tool_call get_weather({"city": "Paris"})]']
    last = evaluator(local_judge, "echo/output", span={"name": "chat gpt-4o-mini", "pick": "last"})
    rows = judge_day(last, DAY, traces, runtime).rows
    assert rows["span_id"].to_list() == ["c2"] and rows["raw_response"].to_list() == [FINAL]
    by_attribute = evaluator(local_judge, "echo/input", span={"attribute": {"gen_ai.request.model": "gpt-4o"}})
    assert judge_day(by_attribute, DAY, traces, runtime).rows["span_id"].to_list() == ["c2"]
    tool = evaluator(local_judge, "echo/input", target="span", span={"operation": "execute_tool"})
    tool_rows = judge_day(tool, DAY, traces, runtime).rows
    assert tool_rows["span_id"].to_list() == ["t1"] and tool_rows["raw_response"].to_list() == ['{"city": "Paris"}']


def test_a_trace_without_the_span_is_skipped_span_not_found(local_judge, runtime):
    config = evaluator(local_judge, target="span", span={"operation": "retrieval"})
    rows = judge_day(config, DAY, frame(tool_loop_trace()), runtime).rows
    assert rows.select("status", "reason", "span_id").rows() == [("SKIPPED", "span_not_found", None)]
    assert "span with operation 'retrieval' not found in trace loop" in rows["reason_detail"][0]


# ---------------------------------------------------------------------------------------------- target session


def session_traces() -> pl.DataFrame:
    """Session s1: one turn late on the 9th, two on the 10th; s0 lies on the 9th only; one trace has no session."""

    def turn(i: int, day: str, minute: int) -> dict:
        messages = [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        return trace(
            f"s1-t{i}", day, minute, session_id="s1", input=f"question {i}", output=f"answer {i}", conversation=messages
        )

    return frame(
        trace("s0-t1", "2026-11-09", 5, session_id="s0", input="earlier", output="done"),
        turn(1, "2026-11-09", 50),
        turn(3, DAY, 20),
        turn(2, DAY, 10),
        trace("lone", DAY, 30, input="hi", output="hello"),
    )


def test_a_session_is_judged_once_on_its_last_day_with_every_turn(local_judge, runtime):
    config = evaluator(local_judge, "echo/conversation", target="session", prompt="{{conversation}}")
    rows = judge_day(config, DAY, session_traces(), runtime).rows
    judged = rows.filter(pl.col("session_id").is_not_null())
    assert judged.select("session_id", "trace_id", "span_id").rows() == [("s1", "s1-t3", None)]  # s0 ended the 9th
    assert judged["raw_response"][0].splitlines() == [
        "user: question 1",
        "assistant: answer 1",
        "user: question 2",
        "assistant: answer 2",
        "user: question 3",
        "assistant: answer 3",
    ]
    lone = rows.filter(pl.col("trace_id") == "lone")
    assert lone.select("status", "reason").rows() == [("SKIPPED", "no_session")]

    mock = evaluator(local_judge, target="session", prompt="{{conversation}}")
    assert judge_day(mock, DAY, session_traces(), runtime).rows.filter(pl.col("session_id") == "s1")[
        "status"
    ].to_list() == ["COMPLETED"]


def test_a_session_continuing_the_next_day_was_judged_on_each_day_with_the_turns_so_far(local_judge, runtime):
    config = evaluator(local_judge, "echo/conversation", target="session", prompt="{{conversation}}")
    rows = judge_day(config, "2026-11-09", session_traces(), runtime).rows
    by_session = {r["session_id"]: r for r in rows.to_dicts()}
    assert set(by_session) == {"s0", "s1"}  # the 10th's traces are not in the 9th's window
    assert by_session["s1"]["trace_id"] == "s1-t1"
    assert by_session["s1"]["raw_response"].splitlines() == ["user: question 1", "assistant: answer 1"]


def test_session_lookback_bounds_what_is_read_and_flags_the_edge(local_judge, runtime):
    config = evaluator(
        local_judge, "echo/conversation", target="session", prompt="{{conversation}}", session_lookback_days=0
    )
    row = judge_day(config, DAY, session_traces(), runtime).rows.filter(pl.col("session_id") == "s1").row(0, named=True)
    assert row["raw_response"].splitlines() == [
        "user: question 2",
        "assistant: answer 2",
        "user: question 3",
        "assistant: answer 3",
    ]
    assert row["flags"] == "session_at_lookback_edge"


# ---------------------------------------------------------------------------------------------- never paid for nothing


def test_empty_failed_and_partial_traces_cost_nothing(local_judge, runtime):
    traces = frame(
        trace("empty", input=None, output="  "),
        tool_loop_trace("failed", error=True, error_type="openai.InternalServerError", error_message="HTTP 500"),
        tool_loop_trace("partial", partial_reason="missing_parent:c9"),
        tool_loop_trace("fine"),
    )
    config = evaluator(local_judge, max_daily_cost_usd=1.0, input_cost_per_million=1.0, output_cost_per_million=1.0)
    before = judge_requests(local_judge)
    rows = judge_day(config, DAY, traces, runtime).rows.sort("trace_id")
    assert rows.select("trace_id", "status", "reason").rows() == [
        ("empty", "SKIPPED", "empty_text"),
        ("failed", "SKIPPED", "app_error"),
        ("fine", "COMPLETED", None),
        ("partial", "SKIPPED", "partial_trace"),
    ]
    assert "openai.InternalServerError: HTTP 500" in rows.filter(pl.col("trace_id") == "failed")["reason_detail"][0]
    assert judge_requests(local_judge) - before == 1  # only "fine" was sent
    assert rows.filter(pl.col("status") == "SKIPPED")["cost_usd"].to_list() == [0.0, 0.0, 0.0]
    spent = runtime.ledger.spent("agent_eval", day=datetime.now(UTC).date().isoformat())
    assert spent == pytest.approx(rows.filter(pl.col("trace_id") == "fine")["cost_usd"][0])  # the ledger: one call

    opted_in = evaluator(local_judge, judge_errors=True)
    rows = judge_day(opted_in, DAY, traces, runtime).rows.sort("trace_id")
    assert rows.filter(pl.col("trace_id") == "failed")["status"].to_list() == ["COMPLETED"]


def test_an_empty_or_failed_span_costs_nothing(local_judge, runtime):
    loop = tool_loop_trace()
    loop["spans"][1].update(output=None, input=None)  # content not captured on the first chat
    loop["spans"][3].update(status="error", error_type="timeout")
    before = judge_requests(local_judge)
    rows = judge_day(evaluator(local_judge, span={"operation": "chat"}), DAY, frame(loop), runtime).rows
    assert rows.select("span_id", "status", "reason").rows() == [
        ("c1", "SKIPPED", "empty_text"),
        ("c2", "SKIPPED", "app_error"),
    ]
    assert judge_requests(local_judge) == before


# ---------------------------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"target": "span"}, "target 'span' needs `span`"),
        ({"target": "session", "span": "chat"}, "with target 'session' use context_from"),
        ({"target": "trace", "span": {"operation": "chat"}}, "with target 'trace' use context_from"),
        ({"span": {"pick": "last"}}, "a span selector needs `name`, `operation` or `attribute`"),
        ({"span": {"operation": "llm"}}, "span selector 'operation': Input should be 'chat', 'text_completion'"),
        ({"context_from": [{"nme": "x"}]}, "span selector 'nme': Extra inputs are not permitted"),
        ({"context_from": ["documents"]}, "context_from: unknown source 'documents'"),
        ({"session_lookback_days": 3}, "session_lookback_days only applies to target 'session'"),
        ({"prompt": "{{conversatoin}} {{output}}"}, "unknown variable '{{conversatoin}}'"),
        (
            {"mode": "pairwise", "score_scale": None, "target": "session", "prompt": "{{output_a}} {{output_b}}"},
            "target 'session' judges one span or session per call; mode 'pairwise' judges pairs",
        ),
        (
            {"mode": "pairwise", "score_scale": None, "prompt": "{{conversation}} {{output_a}} {{output_b}}"},
            "unknown variable '{{conversation}}'",
        ),
    ],
)
def test_target_options_are_checked_at_load(local_judge, fields, message):
    with pytest.raises(ValueError) as error:
        evaluator(local_judge, **fields)
    assert message in str(error.value)


def test_existing_evaluators_keep_their_config_hash(local_judge):
    """The new options enter config_hash only when used: rows of evaluators that do not use them stay comparable."""
    plain = evaluator(local_judge)
    assert plain.config_hash == evaluator(local_judge, target="trace", conversation_last_n=20).config_hash
    named = evaluator(local_judge, span="chat").config_hash
    assert named == evaluator(local_judge, target="span", span="chat").config_hash
    assert plain.config_hash != evaluator(local_judge, target="session").config_hash
    assert plain.config_hash != evaluator(local_judge, conversation_last_n=5).config_hash
    assert plain.config_hash == evaluator(local_judge, judge_errors=True).config_hash  # which traces, not what verdict


# ---------------------------------------------------------------------------------------------- built-in templates


@pytest.mark.parametrize(
    ("name", "target", "shown"),
    [
        ("task_completion", "trace", [FINAL, 'assistant calls tool get_weather({"city": "Paris"}) [id call_1]']),
        ("tool_use", "trace", ['1. get_weather({"city": "Paris"}) -> {"temp_c": 18, "sky": "sun"}', FINAL]),
        ("conversation_quality", "session", ["user: question 1", "assistant: answer 3", "user: question 2"]),
    ],
)
def test_builtin_agent_templates_render_and_parse(local_judge, runtime, name, target, shown):
    builtin = load_evaluator(REPO_DATA / "evaluators" / f"{name}.yaml")
    assert builtin.judged_target == target
    # shipped off, or on for the demo's agent app only: judging your own traces with one is a choice to pay
    assert not builtin.enabled or builtin.projects == ["agent-demo-app"]
    config = builtin.model_copy(
        update={
            "enabled": True,
            "model": "openai/mock",
            "api_base": local_judge.base_url,
            "api_key_env": None,
            "projects": None,
        }
    )
    if target == "session":
        traces = session_traces()
        s1 = traces.filter(pl.col("session_id") == "s1").sort("timestamp").to_dicts()
        values = session_values(s1, config.conversation_last_n)
    else:
        traces = frame(tool_loop_trace())
        values = trace_values(traces.row(0, named=True), conversation_last_n=config.conversation_last_n)
    prompt = build_messages(config, values)[1]["content"]
    assert all(text in prompt for text in shown)
    rows = judge_day(config, DAY, traces, runtime).rows.filter(pl.col("status") != "SKIPPED")
    assert rows["status"].to_list() == ["COMPLETED"] and rows["score"].is_between(0, 1).all()


def test_a_dumped_evaluator_loads_again(local_judge):
    for fields in ({}, {"target": "session", "session_lookback_days": 2}, {"span": {"operation": "chat"}}):
        config = evaluator(local_judge, **fields)
        again = EvaluatorConfig.model_validate(config.model_dump())
        assert again == config and again.config_hash == config.config_hash
