"""The local judge's `app/...` models answer an application's calls over real HTTP, through the official SDK."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
def client(local_judge):
    return openai.OpenAI(base_url=local_judge.base_url, api_key="sk-test-dummy", max_retries=0)


def test_plain_chat_is_deterministic_and_counts_tokens(client):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    first = client.chat.completions.create(model="app/assistant", messages=messages)
    second = client.chat.completions.create(model="app/assistant", messages=messages)
    assert first.choices[0].message.content == second.choices[0].message.content
    assert "What is the capital of France?" in first.choices[0].message.content
    assert first.choices[0].finish_reason == "stop"
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def test_tool_loop_calls_the_first_tool_then_answers_with_its_result(client):
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    reply = client.chat.completions.create(model="app/assistant", messages=messages, tools=[WEATHER_TOOL])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}

    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"})
    final = client.chat.completions.create(model="app/assistant", messages=messages, tools=[WEATHER_TOOL])
    assert final.choices[0].finish_reason == "stop"
    assert "get_weather returned 18 C and sunny" in final.choices[0].message.content

    # a new user turn after the tool result asks for the tool again
    messages += [
        {"role": "assistant", "content": final.choices[0].message.content},
        {"role": "user", "content": "Rome?"},
    ]
    again = client.chat.completions.create(model="app/assistant", messages=messages, tools=[WEATHER_TOOL])
    assert again.choices[0].finish_reason == "tool_calls"


def test_n_choices_differ(client):
    reply = client.chat.completions.create(
        model="app/assistant", messages=[{"role": "user", "content": "Name a cat."}], n=2
    )
    texts = [choice.message.content for choice in reply.choices]
    assert [choice.index for choice in reply.choices] == [0, 1]
    assert len(set(texts)) == 2


def test_streaming_gives_the_same_answer_and_usage_last(client):
    messages = [{"role": "user", "content": "Write a haiku about logs."}]
    whole = client.chat.completions.create(model="app/assistant", messages=messages)
    chunks = list(
        client.chat.completions.create(
            model="app/assistant", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == whole.choices[0].message.content
    assert len(chunks) > 3
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_streamed_tool_call_reassembles(client):
    stream = client.chat.completions.create(
        model="app/assistant",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER_TOOL],
        stream=True,
    )
    arguments, names, finish = "", [], None
    for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or []:
            names += [delta.function.name] if delta.function.name else []
            arguments += delta.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert names == ["get_weather"] and json.loads(arguments)["city"] == "Oslo" and finish == "tool_calls"


def test_app_error_is_an_http_500_with_an_openai_error_body(client, local_judge):
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="app/error", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 500
    assert raised.value.body["type"] == "server_error"

    response = httpx.post(
        f"{local_judge.base_url}/chat/completions",
        json={"model": "app/assistant", "messages": [{"role": "user", "content": "hi"}]},
        headers={"X-App-Error": "503"},
    )
    assert response.status_code == 503 and response.json()["error"]["code"] == "internal_error"


def test_judge_models_still_refuse_streaming(local_judge):
    response = httpx.post(
        f"{local_judge.base_url}/chat/completions",
        json={"model": "mock", "messages": [{"role": "user", "content": "hi"}], "stream": True},
    )
    assert response.status_code == 400


CITY_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
FINAL_ANSWER_TOOL = {
    "type": "function",
    "function": {
        "name": "final_answer",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    },
}


def test_what_agent_frameworks_need_parallel_calls_thanks_and_a_final_answer_tool(client):
    """Two places: one call each, in one message; a user's thanks asks nothing: text even with tools; a
    `final_answer` tool (smolagents) carries the answer; smolagents' `Observation:` user message is a tool result."""
    ask = [{"role": "user", "content": "What's the weather in Lisbon and Oslo?"}]
    calls = client.chat.completions.create(model="app/assistant", messages=ask, tools=[CITY_TOOL]).choices[0]
    arguments = [json.loads(call.function.arguments) for call in calls.message.tool_calls]
    assert arguments == [{"city": "Lisbon"}, {"city": "Oslo"}]
    assert len({call.id for call in calls.message.tool_calls}) == 2

    thanks = [{"role": "user", "content": "Thanks, that's all."}]
    reply = client.chat.completions.create(model="app/assistant", messages=thanks, tools=[CITY_TOOL]).choices[0]
    assert reply.finish_reason == "stop" and reply.message.tool_calls is None

    smolagents = [
        {"role": "user", "content": "New task:\nWhat's the weather in Paris?"},
        {"role": "assistant", "content": "Calling tools: get_weather"},
        {"role": "user", "content": 'Observation:\n{"city": "Paris", "weather": "sunny"}'},
    ]
    tools = [CITY_TOOL, FINAL_ANSWER_TOOL]
    final = client.chat.completions.create(model="app/assistant", messages=smolagents, tools=tools).choices[0]
    [call] = final.message.tool_calls
    assert call.function.name == "final_answer"
    assert "sunny" in json.loads(call.function.arguments)["answer"]
