"""The `finetune_exports` asset end to end: a real Dagster instance in a temp DAGSTER_HOME, traces (OTLP agent
traces with tool calls, and JSONL), judge scores from the local judge over HTTP, and the JSONL checked line by line
against OpenAI's fine-tuning chat format (`openai_format`, written from OpenAI's documentation; the conftest also
checks every export any test writes); which traces pass is checked against the judge_scores rows themselves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.finetune.config import FinetuneExportError, load_exports
from eval_platform.judging.loading import load_evaluators
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_dir
from eval_platform_tests.conftest import REPO_DATA, write_evaluator
from eval_platform_tests.finetune.openai_format import check_line, line_problems

DAY = "2026-11-09"


def verdict(passed) -> str:
    return json.dumps({"passed": passed, "reasoning": "scripted"}) if isinstance(passed, bool) else passed


def write_project(root: Path, judge_url: str) -> None:
    day = root / "traces" / DAY
    day.mkdir(parents=True)
    shutil.copyfile(REPO_DATA / "traces" / DAY / "agent_genai.jsonl.gz", day / "agent_genai.jsonl.gz")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    agentic_input = [
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 2}}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    rows = [
        # strict (echo/expected) answers with each trace's expected_output: a scripted verdict per trace
        {"trace_id": "j-pass", "input": "Say hi", "output": "Hi!", "expected_output": verdict(True)},
        {"trace_id": "j-fail", "input": "Say bye", "output": "No.", "expected_output": verdict(False)},
        {"trace_id": "j-garbled", "input": "Say yes", "output": "Yes", "expected_output": "not a verdict"},
        {"trace_id": "j-no-answer", "input": "Say nothing", "expected_output": verdict(True)},
        {
            "trace_id": "j-tools",
            "input": agentic_input,
            "output": "It is 5.",
            "expected_output": verdict(True),
            "metadata": {"tools": tools},
        },
    ]
    lines = [json.dumps({**row, "timestamp": f"{DAY}T09:00:0{i}Z"}) for i, row in enumerate(rows)]
    (day / "export.jsonl").write_text("\n".join(lines) + "\n")
    common = {"api_base": judge_url, "temperature": 0.0, "max_retries": 0}
    write_evaluator(
        root,
        "quality",
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/mock",
        prompt="{{input}} -> {{output}}",
        **common,
    )
    write_evaluator(
        root,
        "strict",
        mode="binary",
        model="openai/echo/expected",
        prompt="{{input}} {{output}} {{expected}}",
        **common,
    )
    exports = root / "finetune_exports"
    exports.mkdir()
    (exports / "good_quality.yaml").write_text(
        yaml.safe_dump({"evaluators": [{"evaluator": "quality", "min_score": 0.4}], "system_prompt": "Be brief."})
    )
    (exports / "strict_pass.yaml").write_text(
        yaml.safe_dump(
            {"evaluators": [{"evaluator": "quality", "min_score": 0.0}, {"evaluator": "strict", "verdict": "pass"}]}
        )
    )


@pytest.fixture
def project(data_root, local_judge, tmp_path):
    write_project(data_root, local_judge.base_url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield data_root, build_definitions(data_root), instance


def materialize(defs, asset, partition, instance) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        assets=list(defs.assets),
        selection=[asset],
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
    )
    assert result.success
    return result


def exported(root: Path, name: str) -> tuple[list[str], dict]:
    folder = partition_dir(DataRoot.from_env(root), "finetune_exports", {"export": name, "date": DAY})
    return (folder / "train.jsonl").read_text().splitlines(), json.loads((folder / "manifest.json").read_text())


def test_exports_the_traces_passing_every_threshold_in_openai_chat_format(project):
    root, defs, instance = project
    materialize(defs, "traces", DAY, instance)
    for evaluator in ("quality", "strict"):
        materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": evaluator}), instance)
    result = materialize(defs, "finetune_exports", DAY, instance)

    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        traces = dict(conn.execute("SELECT trace_id, output FROM traces").fetchall())
        quality = dict(
            conn.execute(
                "SELECT trace_id, score FROM judge_scores WHERE evaluator = 'quality' AND status = 'COMPLETED'"
            ).fetchall()
        )
        strict = dict(
            conn.execute(
                "SELECT trace_id, status || ':' || coalesce(passed::TEXT, '')"
                " FROM judge_scores WHERE evaluator = 'strict'"
            ).fetchall()
        )
    assert len(traces) == 17

    # good_quality: every trace with a final answer whose quality score (a real judge reply) is >= 0.4
    lines, manifest = exported(root, "good_quality")
    expected = {t for t, score in quality.items() if score >= 0.4 and traces[t]}
    assert set(manifest["trace_ids"]) == expected and len(lines) == len(expected)
    assert 0 < len(expected) < len(traces)
    parsed = [check_line(line) for line in lines]
    # the export's system prompt where the trace had none; the agent's own system message is kept
    assert all(p["messages"][0]["role"] == "system" for p in parsed)
    assert {"role": "system", "content": "Be brief."} in [p["messages"][0] for p in parsed]
    assert any("tool_calls" in m for p in parsed for m in p["messages"]), "agent traces keep their tool calls"
    below = sum(1 for t, s in quality.items() if s < 0.4 and traces[t])
    assert manifest["excluded_by_reason"].get("below_threshold:quality", 0) == below
    assert manifest["traces_considered"] == 17
    assert sum(manifest["excluded_by_reason"].values()) + manifest["traces_passed"] == 17

    # strict_pass: exactly the scripted verdicts; FAILED never passes, a trace with no final answer is not written
    lines, manifest = exported(root, "strict_pass")
    assert strict["j-garbled"].startswith("FAILED") and strict["j-fail"] == "COMPLETED:false"
    assert manifest["trace_ids"] == ["j-pass", "j-tools"]
    assert manifest["excluded_by_reason"] == {
        "app_error": 1,  # the agent run that failed: never training data (include_failed_runs: false)
        "below_threshold:strict": 1,
        "failed:strict": 12,  # j-garbled (unparseable), and 11 agent traces: no expected_output to echo (empty reply)
        "no_final_answer": 1,
    }
    assert manifest["filter"]["rule"] == "quality: score >= 0 AND strict: passed"
    first, tools = (check_line(line) for line in lines)
    assert first == {"messages": [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "Hi!"}]}
    assert tools["tools"][0]["function"]["name"] == "add"
    assert [m["role"] for m in tools["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert tools["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"a": 2}'

    metadata = result.asset_materializations_for_node("finetune_exports")[0].metadata
    summary = metadata["exports"].value
    assert summary["strict_pass"]["traces_passed"] == 2
    assert summary["strict_pass"]["filter"]["thresholds"][1] == {"evaluator": "strict", "verdict": "pass"}
    assert summary["strict_pass"]["excluded_by_reason"]["failed:strict"] == 12


def test_a_day_rerun_replaces_its_file_and_an_unscored_evaluator_passes_nothing(project):
    root, defs, instance = project
    materialize(defs, "traces", DAY, instance)
    materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "quality"}), instance)
    materialize(defs, "finetune_exports", DAY, instance)
    lines, manifest = exported(root, "strict_pass")
    assert lines == [] and manifest["excluded_by_reason"]["not_scored:strict"] > 0
    assert manifest["evaluators_not_scored_that_day"] == ["strict"]
    materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "strict"}), instance)
    materialize(defs, "finetune_exports", DAY, instance)
    lines, _ = exported(root, "strict_pass")
    assert len(lines) == 2
    folder = partition_dir(DataRoot.from_env(root), "finetune_exports", {"export": "strict_pass", "date": DAY})
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "train.jsonl"]  # no temporary file left


def test_a_broken_export_file_names_the_file_and_field(data_root, local_judge):
    write_project(data_root, local_judge.base_url)
    evaluators = load_evaluators(data_root / "evaluators")
    folder = data_root / "finetune_exports"
    (folder / "typo.yaml").write_text(yaml.safe_dump({"evaluators": [{"evaluator": "qualty", "min_score": 0.5}]}))
    with pytest.raises(FinetuneExportError, match=r"typo.yaml: field 'evaluators.0.evaluator': no loaded evaluator"):
        load_exports(folder, evaluators)
    (folder / "typo.yaml").write_text(
        yaml.safe_dump({"evaluators": [{"evaluator": "quality", "min_score": 0.5, "verdict": "pass"}]})
    )
    with pytest.raises(FinetuneExportError, match=r"typo.yaml: field 'evaluators.0'.*exactly one of min_score"):
        load_exports(folder, evaluators)
    (folder / "typo.yaml").write_text(yaml.safe_dump({"evaluators": [{"evaluator": "quality", "min": 0.5}]}))
    with pytest.raises(FinetuneExportError, match=r"field 'evaluators.0.min': Extra inputs are not permitted"):
        load_exports(folder, evaluators)
    broken: dict[str, str] = {}
    assert sorted(load_exports(folder, evaluators, broken=broken)) == ["good_quality", "strict_pass"]
    assert list(broken) == ["typo.yaml"]


def _call(call_id: str, name: str, arguments) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


WEATHER_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
ASK = {"role": "user", "content": "Weather in Lima?"}


def agent_rows() -> list[dict]:
    """One JSONL agent trace per way a line can break OpenAI's format, and one good trace; each passes the judge."""

    def turn(*calls) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": list(calls)}

    answered = [
        ASK,
        turn(_call("c1", "get_weather", '{"city": "Lima"}')),
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    ]
    return [
        {"trace_id": "a-good", "input": answered, "output": "It is 18C in Lima.", "metadata": {"tools": WEATHER_TOOLS}},
        # the agent stopped on its tool call: its output is the call rendered as text, never an answer
        {"trace_id": "a-stopped", "input": [ASK], "output": [turn(_call("c1", "get_weather", '{"city": "Lima"}'))]},
        {
            "trace_id": "a-args",
            "input": [
                ASK,
                turn(_call("c1", "get_weather", "city=Lima")),
                {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            ],
            "output": "It is 18C.",
        },
        {
            "trace_id": "a-unanswered",
            "input": [ASK, turn(_call("c1", "get_weather", '{"city": "Lima"}')), {"role": "user", "content": "Well?"}],
            "output": "Sunny.",
        },
        {
            "trace_id": "a-dotted",
            "input": [
                ASK,
                turn(_call("c1", "web.search", '{"q": "Lima"}')),
                {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            ],
            "output": "It is 18C.",
        },
        {
            "trace_id": "a-tools",
            "input": answered,
            "output": "It is 18C.",
            "metadata": {"tools": [{"type": "function", "function": {"name": "web.search"}}]},
        },
    ]


def test_lines_the_format_cannot_hold_are_left_out_with_their_reason_never_repaired(data_root, local_judge, tmp_path):
    day = data_root / "traces" / DAY
    day.mkdir(parents=True)
    rows = [
        {**row, "expected_output": verdict(True), "timestamp": f"{DAY}T09:00:0{i}Z"}
        for i, row in enumerate(agent_rows())
    ]
    (day / "agents.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_evaluator(
        data_root,
        "strict",
        mode="binary",
        model="openai/echo/expected",
        prompt="{{input}} {{output}} {{expected}}",
        api_base=local_judge.base_url,
        temperature=0.0,
        max_retries=0,
    )
    (data_root / "finetune_exports").mkdir()
    (data_root / "finetune_exports" / "agents.yaml").write_text(
        yaml.safe_dump({"evaluators": [{"evaluator": "strict", "verdict": "pass"}]})
    )
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        defs = build_definitions(data_root)
        materialize(defs, "traces", DAY, instance)
        materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": DAY, "evaluator": "strict"}), instance)
        materialize(defs, "finetune_exports", DAY, instance)
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        passed = {t for (t,) in conn.execute("SELECT trace_id FROM judge_scores WHERE passed").fetchall()}
        stopped_output = conn.execute("SELECT output FROM traces WHERE trace_id = 'a-stopped'").fetchone()[0]
    assert passed == {row["trace_id"] for row in rows}  # every trace passed the judge: what is left out is the format's
    assert stopped_output.startswith("[tool_call get_weather(")

    lines, manifest = exported(data_root, "agents")
    assert manifest["trace_ids"] == ["a-good"]
    assert manifest["excluded_by_reason"] == {
        "bad_function_name": 1,  # web.search: never renamed (the agent did not call web_search)
        "bad_tool_arguments": 1,  # "city=Lima": never rewritten as JSON the agent did not send
        "bad_tools": 1,  # a declared tool named web.search
        "no_final_answer": 1,  # stopped on its tool call: no made-up final message
        "unanswered_tool_call": 1,  # the user spoke before the tool answered: the chat API refuses it
    }
    (good,) = (check_line(line) for line in lines)
    assert [m["role"] for m in good["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert good["messages"][-1] == {"role": "assistant", "content": "It is 18C in Lima."}
    assert "[tool_call" not in "\n".join(lines)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            {"messages": [ASK, {"role": "assistant", "tool_calls": [_call("c1", "get_weather", "city=Lima")]}]},
            "not JSON text",
        ),
        (
            {"messages": [ASK, {"role": "assistant", "content": "x", "tool_calls": [_call("c1", "web.search", "{}")]}]},
            "not ^",
        ),
        (
            {
                "messages": [
                    ASK,
                    {"role": "assistant", "tool_calls": [_call("c1", "get_weather", "{}")]},
                    {"role": "assistant", "content": "18C"},
                ]
            },
            "not answered",
        ),
        (
            {
                "messages": [
                    ASK,
                    {"role": "tool", "tool_call_id": "c9", "content": "18C"},
                    {"role": "assistant", "content": "x"},
                ]
            },
            "answers no open call",
        ),
        (
            {"messages": [ASK, {"role": "assistant", "tool_calls": [_call("c1", "get_weather", "{}")]}]},
            "ends on tool call",
        ),
        (
            {
                "messages": [
                    ASK,
                    {"role": "assistant", "content": "[tool_call get_weather({})]"},
                    {"role": "user", "content": "?"},
                ]
            },
            "final answer",
        ),
        (
            {
                "messages": [ASK, {"role": "assistant", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "a b"}}],
            },
            "tool name",
        ),
        ({"messages": [{"role": "function", "content": "x"}]}, "a message with a role"),
    ],
)
def test_the_validator_refuses_what_openai_documents_as_invalid(line, problem):
    problems = line_problems(json.dumps(line))
    assert any(problem in p for p in problems), problems
