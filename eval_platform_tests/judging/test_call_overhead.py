"""What a judge day does once instead of once per call (the CPU per call at hundreds of calls a second), that the
garbage collector is left as it was, and the throughput benchmark that measures it; over real HTTP to the local
judge. No timings are asserted: the benchmark prints them (README, "Performance: judge throughput")."""

from __future__ import annotations

import asyncio
import gc
import json
import random
import subprocess
import sys

import uvloop

from eval_platform.judging import prompts
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm import client as client_module
from eval_platform.llm import request_json, scheduler
from eval_platform.llm.client import LiteLLMModelClient, ModelRequest
from eval_platform.llm.openai_compat import chat_body, chat_body_json
from eval_platform_tests.judging.test_runner import DAY, evaluator, make_traces


def test_a_day_hashes_its_config_and_builds_its_system_prompt_once(local_judge, runtime, monkeypatch):
    config = evaluator(local_judge, rubric={"criteria": "Correct arithmetic."})
    expected_hash = config.config_hash
    counts = {"config_hash": 0, "system_message": 0, "parse_template": 0}
    hash_of = EvaluatorConfig.config_hash.fget

    def counted_hash(self):
        counts["config_hash"] += 1
        return hash_of(self)

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(EvaluatorConfig, "config_hash", property(counted_hash))
    monkeypatch.setattr(prompts, "system_message", counted("system_message", prompts.system_message))
    monkeypatch.setattr(prompts, "parse_template", counted("parse_template", prompts.parse_template))
    rows = judge_day(config, DAY, make_traces(30), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 30
    assert set(rows["config_hash"].to_list()) == {expected_hash}
    # Per row before: 30 model dumps and hashes, 30 parsed templates, 30 system messages with their JSON schema.
    assert counts == {"config_hash": 1, "system_message": 1, "parse_template": 1}
    # Each request still has its own fence secret (the system message is the shared part).
    bodies = [prompts.build_messages(config, {"input": "a", "output": "b"}) for _ in range(2)]
    assert bodies[0][0] == bodies[1][0] and bodies[0].fence_secret != bodies[1].fence_secret


def test_the_garbage_collector_is_as_it_was_after_a_day(local_judge, runtime):
    threshold = gc.get_threshold()
    rows = judge_day(evaluator(local_judge), DAY, make_traces(10), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 10
    assert gc.get_threshold() == threshold and gc.get_freeze_count() == 0
    # A day whose calls all fail ends the same way.
    failing = evaluator(local_judge, model="fault/server_error", max_retries=0)
    rows = judge_day(failing, DAY, make_traces(3), runtime).rows
    assert rows["status"].to_list() == ["FAILED"] * 3
    assert gc.get_threshold() == threshold and gc.get_freeze_count() == 0


def test_a_process_that_froze_its_own_objects_keeps_them_frozen_after_a_day(local_judge, runtime):
    """A server that froze its start-up objects (`gc.freeze`, before forking workers) finds them still frozen: the
    day's tuning undoes only what it did."""
    gc.freeze()
    try:
        frozen, threshold = gc.get_freeze_count(), gc.get_threshold()
        assert frozen > 0
        rows = judge_day(evaluator(local_judge), DAY, make_traces(5), runtime).rows
        assert rows["status"].to_list() == ["COMPLETED"] * 5
        # still frozen (a frozen object freed since leaves the count), and nothing of the day frozen on top
        assert 0 < gc.get_freeze_count() <= frozen and gc.get_threshold() == threshold
    finally:
        gc.unfreeze()


def test_a_collector_turned_off_stays_off_through_a_day(local_judge, runtime):
    gc.disable()
    try:
        threshold = gc.get_threshold()
        rows = judge_day(evaluator(local_judge), DAY, make_traces(5), runtime).rows
        assert rows["status"].to_list() == ["COMPLETED"] * 5
        assert not gc.isenabled() and gc.get_threshold() == threshold and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_each_request_writes_its_messages_as_json_once_for_its_key_and_its_body(local_judge, runtime, monkeypatch):
    written = []

    def counted(messages):
        written.append(messages)
        return request_json.messages_json(messages)

    monkeypatch.setattr(client_module, "messages_json", counted)
    rows = judge_day(evaluator(local_judge), DAY, make_traces(20), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 20
    # Before: the key wrote them, then json.dumps wrote the body again.
    assert len(written) == 20
    again = judge_day(evaluator(local_judge), DAY, make_traces(20), runtime).rows  # cache hits: the key only
    assert again["cache_hit"].to_list() == [True] * 20 and len(written) == 40


def test_the_posted_body_is_the_json_of_the_chat_body():
    """Whatever the messages hold (escapes, surrogates, other shapes), the body sent is the request litellm sends."""
    rng = random.Random(3)
    alphabet = ['"', "\\", "\n", "\u00e9", "\U0001f600", "\ud800", "\x00", "a", " ", "<<<", "u00"]
    for _ in range(500):
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(2)]
        messages = [{"role": "system", "content": texts[0]}, {"role": "user", "content": texts[1]}][: rng.randint(0, 2)]
        if rng.random() < 0.2:
            messages.append({"role": "user", "content": [{"type": "text", "text": texts[0]}], "name": "x"})
        temperature = rng.choice([0.0, 0.7, 1, 2.5e-9, float("nan")])
        model, max_tokens = "openai/" + texts[1][:4], rng.randint(1, 9999)
        request = ModelRequest(model, messages, None, None, temperature, max_tokens, 1.0, 0)
        body = chat_body_json(request.model, messages, temperature, request.max_tokens, request.messages_json.text)
        expected = chat_body(request.model, messages, temperature, request.max_tokens)
        assert json.dumps(json.loads(body), sort_keys=True) == json.dumps(expected, sort_keys=True)
        assert body == chat_body_json(request.model, messages, temperature, request.max_tokens)


class InFlightRecordingClient(LiteLLMModelClient):
    """The real client, noting how many calls were inside `complete` at once (sent, or waiting for a slot)."""

    inside = most = 0

    async def complete(self, request, before_send=None):
        self.inside += 1
        self.most = max(self.most, self.inside)
        try:
            return await super().complete(request, before_send)
        finally:
            self.inside -= 1


def test_a_day_runs_a_few_units_per_slot_not_its_whole_window(local_judge, runtime, monkeypatch):
    """Units past the endpoint's slots only wait in its limiter (CPU per call for nothing): at most RUNNING_PER_SLOT
    per slot run at once, while the day's rows still come out whole and in order."""
    monkeypatch.setattr(scheduler, "RUNNING_MIN", 16)
    runtime.client = client = InFlightRecordingClient(max_concurrency=4)
    traces = make_traces(300)
    rows = judge_day(evaluator(local_judge), DAY, traces, runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 300
    assert rows["trace_id"].to_list() == traces["trace_id"].to_list()
    assert client.most == 16  # RUNNING_PER_SLOT (4) per slot; before: all 300 at once


def test_a_call_asks_for_its_event_loop_twice_at_most(local_judge, runtime, monkeypatch):
    """`asyncio.get_running_loop()` is a getpid() system call in Python 3.11: the client asks once (its limiter), the
    lean path once (its session and URL); the limiter keeps the loop it serves."""
    asked = []
    get_running_loop = asyncio.get_running_loop

    def counted():
        asked.append(1)
        return get_running_loop()

    monkeypatch.setattr(asyncio, "get_running_loop", counted)
    runtime.client = LiteLLMModelClient(max_concurrency=4)
    rows = judge_day(evaluator(local_judge), DAY, make_traces(40), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 40
    assert len(asked) <= 2 * 40 + 5  # before: 4-6 per call (the limiter's acquire and hand-overs, session, URL)


class LoopRecordingClient(LiteLLMModelClient):
    """The real client (real HTTP to the local judge), noting which event loop each call ran on."""

    loops: set[type] = set()

    async def complete(self, request, before_send=None):
        self.loops.add(type(asyncio.get_running_loop()))
        return await super().complete(request, before_send)


def test_a_days_calls_run_on_uvloop(local_judge, runtime):
    runtime.client = client = LoopRecordingClient(max_concurrency=8)
    rows = judge_day(evaluator(local_judge), DAY, make_traces(12), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 12
    assert client.loops == {uvloop.Loop}
    # Failures and retries on that loop end as they do on asyncio's: a FAILED row with the provider's reason.
    failing = evaluator(local_judge, model="fault/server_error", max_retries=1)
    rows = judge_day(failing, DAY, make_traces(3), runtime).rows
    assert rows["status"].to_list() == ["FAILED"] * 3 and set(rows["reason"].to_list()) == {"provider_error:500"}


def test_the_throughput_benchmark_alternates_fresh_processes_and_reports_cpu_per_call():
    command = [sys.executable, "-m", "tools.perf.judge_throughput"]
    done = subprocess.run(
        [*command, "--traces", "40", "--concurrency", "8", "--rounds", "2"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    bare = next(line for line in lines if line.startswith("bare aiohttp client"))
    ours = next(line for line in lines if line.startswith("eval_platform judge"))
    assert "CPU per call" in bare and "CPU per call" in ours and ours.endswith("completed 40")
    ratio = next(line for line in lines if line.startswith("ratio ours / bare"))
    assert ratio.count("round by round") == 1 and len(ratio.split("round by round: ")[1].split(";")[0].split(",")) == 2


def test_the_throughput_benchmark_reports_the_calls_and_cost_of_a_day_with_duplicates():
    command = [sys.executable, "-m", "tools.perf.judge_throughput", "--traces", "40", "--concurrency", "8"]
    command += ["--rounds", "1", "--duplicates", "0.2", "--budget"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    paid = next(line for line in done.stdout.splitlines() if line.startswith("paid once ours"))
    assert "40 traces, 32 distinct: 32 calls, 8 cache hits, cost 0.00" in paid
