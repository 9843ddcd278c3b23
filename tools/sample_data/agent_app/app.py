"""The demo application: a small support assistant calling its chat model through the official `openai` SDK.

Every scenario is what a real app does; the tracing library in use (a `Convention`) decides how it shows in the
trace. Scenarios and the traces each makes (`SCENARIOS`):
- `single_turn`: one bare chat completion (the chat span is the whole trace);
- `system_prompt`: a bare completion with a system message;
- `multi_turn`: three turns of one conversation, one trace each, sharing a session id and a user id;
- `agent`: two turns of an agent conversation (session and user), each an agent run with a tool loop:
  chat -> `get_weather` tool call -> tool span -> chat -> final answer;
- `agent_tool_error`: an agent whose tool fails (tool span in error), then answers from the error;
- `rag`: a retrieval step, then a chat completion whose system message carries the documents;
- `streaming`: a streamed completion with `stream_options.include_usage`;
- `n2`: one completion with `n=2` choices;
- `http_500`: a request whose model call fails with HTTP 500 (the error propagates through the request span).

`EXTRA_SCENARIOS`, recorded only when named (`record --scenario NAME`), not in the demo's days:
- `tool_call_only`: a planning call: one bare completion with tools whose answer is a tool call, which the app
  hands on (the trace ends on the tool call: it has no final answer).

What the users ask is a `Script`: `script_for(None)` is the questions of the committed test recordings; a named
run (`record --run NAME`, e.g. one per sample day of the demo) draws its own questions, cities and order number
from small pools, seeded by the name, and suffixes the session ids with it, so two runs never share a session.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools.sample_data.agent_app.convention import Convention

APP_MODEL = "app/assistant"
FAILING_MODEL = "app/error"
# The app's provider key: a dummy, and the tests check it never reaches a recorded file.
DUMMY_API_KEY = "sk-dummy-Qx7Lm2Vb9Tz4Kp8Hn1Wr5"
MAX_AGENT_STEPS = 4

SESSION_MULTI_TURN, USER_MULTI_TURN = "session-multi-turn-1", "user-alice"
SESSION_AGENT, USER_AGENT = "session-agent-1", "user-bob"
USER_TOOL_ERROR = "user-carol"
PIRATE_SYSTEM = "You are a pirate-themed support assistant. Keep answers to one sentence."
AGENT_SYSTEM = "You are a travel assistant. Use the tools to answer questions about the weather."

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Status of a customer's order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
WEATHER = {
    "Paris": "18 C and sunny",
    "Rome": "24 C, clear sky",
    "Lisbon": "21 C, light wind",
    "Oslo": "6 C, rain",
    "Tokyo": "15 C, cloudy",
    "Madrid": "26 C and sunny",
    "Dublin": "11 C, showers",
    "Vienna": "14 C, overcast",
}
KNOWLEDGE_BASE = [
    ("kb-returns", "Items can be returned within 30 days of delivery with the receipt.", 0.92),
    ("kb-refunds", "Refunds reach the original payment method within 5 business days.", 0.81),
]


@dataclass(frozen=True)
class Script:
    """What the app's users ask in one run of the scenarios, and the session ids their conversations carry."""

    single_turn: str = "What is the capital of France?"
    system_prompt: str = "How do I reset my password?"
    multi_turn: tuple[str, ...] = (
        "How long do I boil an egg?",
        "And for a soft yolk?",
        "Thanks! Any tip for peeling it?",
    )
    cities: tuple[str, str] = ("Paris", "Rome")
    order_id: str = "A-1001"
    rag: str = "Can I return a jacket I bought three weeks ago?"
    haiku: str = "observability"
    session_suffix: str = ""

    @property
    def session_multi_turn(self) -> str:
        return SESSION_MULTI_TURN + self.session_suffix

    @property
    def session_agent(self) -> str:
        return SESSION_AGENT + self.session_suffix


# The pools a named run draws from (the first of each is the default script's).
SINGLE_TURN = (
    "What is the capital of France?",
    "How many minutes are there in a day?",
    "Which planet is closest to the sun?",
    "What is the boiling point of water in Fahrenheit?",
)
SYSTEM_PROMPT = (
    "How do I reset my password?",
    "How do I change the email address on my account?",
    "Can I cancel my subscription at any time?",
    "Why was I charged twice this month?",
)
MULTI_TURN = (
    ("How long do I boil an egg?", "And for a soft yolk?", "Thanks! Any tip for peeling it?"),
    ("How do I cook basmati rice?", "Should I rinse it first?", "Can I freeze the leftovers?"),
    ("What can I bake with overripe bananas?", "Can I make it without eggs?", "How long does it keep?"),
    ("How do I make a vinaigrette?", "Which vinegar works best?", "How long can I keep it in the fridge?"),
)
RAG = (
    "Can I return a jacket I bought three weeks ago?",
    "How long does a refund take to arrive?",
    "I lost my receipt. Can I still return my shoes?",
    "Do refunds go back to my credit card?",
)
HAIKU = ("observability", "a slow database", "the first snow", "a flaky test")


def script_for(run: str | None) -> Script:
    """The default script (the test recordings') for no run; else one drawn from the pools, seeded by `run`."""
    if run is None:
        return Script()
    pick = random.Random(f"agent-app-script:{run}")
    return Script(
        single_turn=pick.choice(SINGLE_TURN),
        system_prompt=pick.choice(SYSTEM_PROMPT),
        multi_turn=pick.choice(MULTI_TURN),
        cities=tuple(pick.sample(sorted(WEATHER), 2)),
        order_id=f"{pick.choice('ABCDEFGH')}-{pick.randrange(1000, 10000)}",
        rag=pick.choice(RAG),
        haiku=pick.choice(HAIKU),
        session_suffix=f"-{run}",
    )


class ToolFailed(RuntimeError):
    """A tool that could not do its job (the agent reports it and carries on)."""


def get_weather(city: str) -> str:
    """The app's weather tool."""
    return json.dumps({"city": city, "weather": WEATHER.get(city, "unknown")})


def lookup_order(order_id: str) -> str:
    """The app's order tool: it always fails."""
    raise ToolFailed(f"order {order_id!r} not found")


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "lookup_order": lookup_order}


def search_knowledge_base(query: str) -> list[tuple[str, str, float]]:
    """The app's retrieval: (document id, text, score) of the support knowledge base, best first."""
    return list(KNOWLEDGE_BASE)


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def single_turn(conv: Convention, client: Any, script: Script) -> None:
    client.chat.completions.create(model=APP_MODEL, messages=[_user(script.single_turn)])


def system_prompt(conv: Convention, client: Any, script: Script) -> None:
    messages = [{"role": "system", "content": PIRATE_SYSTEM}, _user(script.system_prompt)]
    client.chat.completions.create(model=APP_MODEL, messages=messages, temperature=0.2, max_tokens=200)


def multi_turn(conv: Convention, client: Any, script: Script) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a concise cooking assistant."}]
    session = script.session_multi_turn

    def chat_turn(question: str) -> str:
        history.append(_user(question))
        reply = client.chat.completions.create(model=APP_MODEL, messages=history)
        answer = reply.choices[0].message.content
        history.append({"role": "assistant", "content": answer})
        return answer

    for question in script.multi_turn:
        conv.run_request("chat_turn", chat_turn, question, session_id=session, user_id=USER_MULTI_TURN)


def _agent_turn(conv: Convention, client: Any, history: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The agent loop: call the model; run each tool it asks for as a tool step; until it answers in text."""
    for _ in range(MAX_AGENT_STEPS):
        reply = client.chat.completions.create(model=APP_MODEL, messages=history, tools=tools)
        message = reply.choices[0].message
        history.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            function = TOOLS.get(call.function.name)
            try:
                if function is None:
                    raise ToolFailed(f"no tool named {call.function.name!r}")
                result = conv.run_tool(call.function.name, call.id, function, arguments)
            except ToolFailed as error:
                result = f"error: {error}"
            history.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise RuntimeError(f"the agent did not answer within {MAX_AGENT_STEPS} model calls")


def agent(conv: Convention, client: Any, script: Script) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": AGENT_SYSTEM}]

    def weather_assistant(question: str) -> str:
        return _agent_turn(conv, client, history, [WEATHER_TOOL])

    def agent_turn(question: str) -> str:
        history.append(_user(question))
        return conv.run_agent("weather-assistant", weather_assistant, question)

    first, second = script.cities
    for question in (f"What's the weather in {first} today?", f"And what about {second}?"):
        conv.run_request("agent_turn", agent_turn, question, session_id=script.session_agent, user_id=USER_AGENT)


def agent_tool_error(conv: Convention, client: Any, script: Script) -> None:
    question = f"Where is my order {script.order_id}?"
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are an order-tracking assistant."}]

    def order_assistant(question: str) -> str:
        return _agent_turn(conv, client, history, [ORDER_TOOL])

    def order_support(question: str) -> str:
        history.append(_user(question))
        return conv.run_agent("order-assistant", order_assistant, question)

    conv.run_request("order_support", order_support, question, user_id=USER_TOOL_ERROR)


def rag(conv: Convention, client: Any, script: Script) -> None:
    def rag_answer(question: str) -> str:
        found = conv.run_retrieval("support-kb", search_knowledge_base, question)
        context = "\n".join(f"[{doc_id}] {text}" for doc_id, text, _ in found)
        messages = [{"role": "system", "content": f"Answer from these documents only:\n{context}"}, _user(question)]
        reply = client.chat.completions.create(model=APP_MODEL, messages=messages)
        return reply.choices[0].message.content

    conv.run_request("rag_answer", rag_answer, script.rag)


def streaming(conv: Convention, client: Any, script: Script) -> None:
    stream = client.chat.completions.create(
        model=APP_MODEL,
        messages=[_user(f"Write a haiku about {script.haiku}.")],
        stream=True,
        stream_options={"include_usage": True},
    )
    "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def n2(conv: Convention, client: Any, script: Script) -> None:
    client.chat.completions.create(model=APP_MODEL, messages=[_user("Suggest a name for a cat.")], n=2)


def http_500(conv: Convention, client: Any, script: Script) -> None:
    import openai

    def chat_request(question: str) -> str | None:
        return (
            client.chat.completions.create(model=FAILING_MODEL, messages=[_user(question)]).choices[0].message.content
        )

    try:
        conv.run_request("chat_request", chat_request, "Summarise my last invoice.")
    except openai.InternalServerError:
        pass  # the app answers its own caller with an error; the trace keeps the failure


def tool_call_only(conv: Convention, client: Any, script: Script) -> None:
    question = f"What's the weather in {script.cities[0]} today?"
    client.chat.completions.create(model=APP_MODEL, messages=[_user(question)], tools=[WEATHER_TOOL])


# name -> (scenario, number of traces it makes)
SCENARIOS: dict[str, tuple[Callable[[Convention, Any, Script], None], int]] = {
    "single_turn": (single_turn, 1),
    "system_prompt": (system_prompt, 1),
    "multi_turn": (multi_turn, 3),
    "agent": (agent, 2),
    "agent_tool_error": (agent_tool_error, 1),
    "rag": (rag, 1),
    "streaming": (streaming, 1),
    "n2": (n2, 1),
    "http_500": (http_500, 1),
}
EXTRA_SCENARIOS: dict[str, tuple[Callable[[Convention, Any, Script], None], int]] = {
    "tool_call_only": (tool_call_only, 1),
}


def run_scenarios(
    conv: Convention, base_url: str, script: Script | None = None, names: list[str] | None = None
) -> dict[str, list[str]]:
    """Run every scenario (or the named ones, `EXTRA_SCENARIOS` too) once against the app model at `base_url`
    (with `script`'s questions, by default the test recordings'); the trace ids each one started."""
    client = conv.openai_client(base_url, DUMMY_API_KEY)
    known = {**SCENARIOS, **EXTRA_SCENARIOS}
    chosen = {name: known[name] for name in names} if names else SCENARIOS
    for name, (scenario, _) in chosen.items():
        conv.ledger.current = name
        scenario(conv, client, script or Script())
    conv.ledger.current = None
    return conv.ledger.traces
