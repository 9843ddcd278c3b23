"""Agent frameworks as their users run them, each instrumented the way its documentation says (`FRAMEWORKS`):

- `openai_agents`: the OpenAI Agents SDK (`agents`) with `openinference-instrumentation-openai-agents`; a weather
  agent, an order agent whose tool raises, a triage agent that hands off to a math agent;
- `openai_agents_hidden`: the same with OpenInference's `OPENINFERENCE_HIDE_INPUTS` / `_OUTPUTS` set;
- `langgraph`: LangGraph's `create_react_agent` on `langchain-openai`'s `ChatOpenAI`, with
  `openinference-instrumentation-langchain`;
- `pydantic_ai`: pydantic-ai's `Agent` with its own OpenTelemetry GenAI spans (`InstrumentationSettings`);
- `smolagents`: smolagents' `ToolCallingAgent` on `OpenAIServerModel`, with
  `openinference-instrumentation-smolagents`.

Every model call goes to the local judge's `app/assistant` through the framework's OpenAI chat-completions
client. Each framework runs the same scenarios (`FrameworkConvention.scenarios`): one question answered with a
tool, a 3-turn conversation with a session id whose last turn calls no tool, a tool that raises, two tool calls
in parallel, a model answering HTTP 500 (`app/error`; not smolagents, whose instrumentation then never ends the
run's span); `openai_agents` adds a handoff. The frameworks are not in the project's test extra (their pins clash
with it): they are recorded from a scratch venv (`record --python`, eval_platform_tests/fixtures/otel/README.md),
and the committed recordings are what the tests read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tools.sample_data.agent_app.app import APP_MODEL, DUMMY_API_KEY, FAILING_MODEL, WEATHER
from tools.sample_data.agent_app.convention import Convention, add_otlp_export, tracer_provider

SINGLE_TURN = "What's the weather in Paris today?"
MULTI_TURN = ("What's the weather in Zürich today?", "And what about Rome?", "Thanks, that's all.")
TOOL_ERROR = "Where is my order A-1001?"
PARALLEL = "What's the weather in Lisbon and Oslo?"
HANDOFF = "What is 12 times 7?"
WEATHER_INSTRUCTIONS = "You are a travel assistant. Use the tools to answer questions about the weather."
ORDER_INSTRUCTIONS = "You are an order-tracking assistant."
MAX_STEPS = 4
# The versions a framework recording depends on (its manifest's `packages`).
FRAMEWORK_PACKAGES = (
    "openai-agents",
    "openinference-instrumentation-openai-agents",
    "langgraph",
    "langchain-core",
    "langchain-openai",
    "openinference-instrumentation-langchain",
    "pydantic-ai-slim",
    "smolagents",
    "openinference-instrumentation-smolagents",
)
REQUIREMENTS = (
    "openai-agents==0.24.0",
    "openinference-instrumentation-openai-agents==2.6.0",
    "langgraph==1.2.22",
    "langchain-openai==1.7.4",
    "openinference-instrumentation-langchain==0.1.80",
    "pydantic-ai==2.62.0",
    "smolagents==1.26.0",
    "openinference-instrumentation-smolagents==0.1.43",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
)


class OrderNotFound(RuntimeError):
    """The order tool's failure (it always raises, as a tool does when its backend says no)."""


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return json.dumps({"city": city, "weather": WEATHER.get(city, "unknown")}, ensure_ascii=False)


def lookup_order(order_id: str) -> str:
    """Status of a customer's order."""
    raise OrderNotFound(f"order {order_id!r} not found")


class FrameworkConvention(Convention):
    """A framework run as its users run it: `run_framework` runs the scenarios itself (the framework makes every
    span; the app opens none), noting each scenario's trace ids in the ledger."""

    requirements = REQUIREMENTS
    packages = FRAMEWORK_PACKAGES
    scenarios: tuple[str, ...] = ("single_turn", "multi_turn", "tool_error", "parallel", "model_error")
    model = APP_MODEL  # the app's model; `model_error` asks the failing one (HTTP 500)

    def setup(self) -> None:
        self.tracer_provider = self.provider()
        self.tracer_provider.add_span_processor(self.ledger)
        add_otlp_export(self.tracer_provider, self.endpoint)
        self.instrument()

    def provider(self) -> Any:
        return tracer_provider(self.name)

    def instrument(self) -> None:
        """Instrument the framework with `self.tracer_provider`."""

    def run_framework(self, base_url: str) -> dict[str, list[str]]:
        """Every scenario once; the trace ids each started."""
        for scenario in self.scenarios:
            self.ledger.current = scenario
            getattr(self, scenario)(base_url)
        self.ledger.current = None
        return self.ledger.traces

    def single_turn(self, base_url: str) -> None:
        self.ask(base_url, "weather", [SINGLE_TURN], None)

    def multi_turn(self, base_url: str) -> None:
        self.ask(base_url, "weather", list(MULTI_TURN), f"session-{self.name}-1")

    def tool_error(self, base_url: str) -> None:
        self.ask(base_url, "order", [TOOL_ERROR], None)

    def parallel(self, base_url: str) -> None:
        self.ask(base_url, "weather", [PARALLEL], None)

    def model_error(self, base_url: str) -> None:
        """The model answers HTTP 500: the run fails, the app's caller gets the error."""
        self.model = FAILING_MODEL
        try:
            self.ask(base_url, "weather", [SINGLE_TURN], None)
        except Exception as error:  # the framework's own wrapping of the provider's error
            if "app/error" not in str(error) and "500" not in str(error):
                raise
        finally:
            self.model = APP_MODEL

    def ask(self, base_url: str, agent: str, questions: list[str], session_id: str | None) -> None:
        """The questions as turns of one conversation with the agent (`weather` or `order`), one run each."""
        raise NotImplementedError

    # unused: the framework makes every span
    def run_request(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def run_agent(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def run_tool(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def run_retrieval(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()


def _session(session_id: str | None) -> Any:
    """OpenInference's `using_session` (every span inside carries `session.id`), or nothing."""
    from contextlib import nullcontext

    from openinference.instrumentation import using_session

    return using_session(session_id) if session_id else nullcontext()


class OpenAIAgentsConvention(FrameworkConvention):
    """The OpenAI Agents SDK, chat-completions API (a non-OpenAI endpoint), OpenInference's processor."""

    name = "openai_agents"
    scenarios = (*FrameworkConvention.scenarios, "handoff")

    def provider(self) -> Any:
        from openinference.instrumentation import TracerProvider

        return tracer_provider(self.name, TracerProvider)

    def instrument(self) -> None:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=self.tracer_provider)

    def _agents(self, base_url: str) -> dict[str, Any]:
        from agents import Agent, OpenAIChatCompletionsModel, function_tool
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=base_url, api_key=DUMMY_API_KEY, max_retries=0)
        model = OpenAIChatCompletionsModel(model=self.model, openai_client=client)
        weather = function_tool(get_weather)
        order = function_tool(lookup_order)  # its default failure function tells the model the tool failed
        math = Agent(name="math_agent", instructions="You answer arithmetic questions.", model=model)
        return {
            "weather": Agent(name="weather_agent", instructions=WEATHER_INSTRUCTIONS, model=model, tools=[weather]),
            "order": Agent(name="order_agent", instructions=ORDER_INSTRUCTIONS, model=model, tools=[order]),
            "triage": Agent(
                name="triage_agent",
                instructions="Hand arithmetic questions to the math agent.",
                model=model,
                handoffs=[math],
            ),
        }

    def ask(self, base_url: str, agent: str, questions: list[str], session_id: str | None) -> None:
        from agents import RunConfig, Runner

        async def turns() -> None:  # one event loop for the conversation (its client lives on it)
            chosen = self._agents(base_url)[agent]
            history: list[Any] = []
            for question in questions:
                config = RunConfig(workflow_name=f"{agent} turn", group_id=session_id)
                with _session(session_id):
                    result = await Runner.run(
                        chosen, [*history, {"role": "user", "content": question}], run_config=config
                    )
                history = result.to_input_list()

        asyncio.run(turns())

    def handoff(self, base_url: str) -> None:
        self.ask(base_url, "triage", [HANDOFF], None)


class OpenAIAgentsHiddenConvention(OpenAIAgentsConvention):
    """The OpenAI Agents SDK with OpenInference's hide flags: inputs and outputs recorded as `__REDACTED__`."""

    name = "openai_agents_hidden"
    env = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}
    scenarios = ("single_turn", "tool_error")


class LangGraphConvention(FrameworkConvention):
    """LangGraph's prebuilt ReAct agent on `ChatOpenAI`, OpenInference's LangChain instrumentor."""

    name = "langgraph"

    def provider(self) -> Any:
        from openinference.instrumentation import TracerProvider

        return tracer_provider(self.name, TracerProvider)

    def instrument(self) -> None:
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=self.tracer_provider)

    def ask(self, base_url: str, agent: str, questions: list[str], session_id: str | None) -> None:
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.prebuilt import create_react_agent

        model = ChatOpenAI(model=self.model, base_url=base_url, api_key=DUMMY_API_KEY, max_retries=0)
        tools = [tool(get_weather)] if agent == "weather" else [tool(lookup_order)]
        prompt = WEATHER_INSTRUCTIONS if agent == "weather" else ORDER_INSTRUCTIONS
        graph = create_react_agent(model, tools, prompt=prompt)
        messages: list[Any] = []
        for question in questions:
            with _session(session_id):
                try:
                    state = graph.invoke(
                        {"messages": [*messages, ("user", question)]}, {"recursion_limit": 2 * MAX_STEPS}
                    )
                except OrderNotFound:
                    return  # ToolNode's default re-raises a tool's own exception: the app's caller gets it
            messages = state["messages"]


class PydanticAIConvention(FrameworkConvention):
    """pydantic-ai's `Agent` with its own OpenTelemetry spans (content included), on an OpenAI-compatible provider."""

    name = "pydantic_ai"

    def ask(self, base_url: str, agent: str, questions: list[str], session_id: str | None) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(base_url=base_url, api_key=DUMMY_API_KEY)
        model = OpenAIChatModel(self.model, provider=provider)
        Agent.instrument_all(InstrumentationSettings(tracer_provider=self.tracer_provider))
        tools = [get_weather] if agent == "weather" else [lookup_order]
        prompt = WEATHER_INSTRUCTIONS if agent == "weather" else ORDER_INSTRUCTIONS
        runner = Agent(model, instructions=prompt, tools=tools, name=f"{agent}_agent")
        history: list[Any] = []
        for question in questions:
            try:
                result = runner.run_sync(question, message_history=history, conversation_id=session_id)
            except OrderNotFound:
                return  # the app's caller gets the error; the trace keeps it
            history = result.all_messages()


class SmolagentsConvention(FrameworkConvention):
    """smolagents' `ToolCallingAgent` on `OpenAIServerModel`, OpenInference's smolagents instrumentor."""

    name = "smolagents"
    # no model_error: openinference-instrumentation-smolagents 0.1.43 never ends the run's span when the run raises,
    # so that trace's root never arrives (README, Known gaps)
    scenarios = ("single_turn", "multi_turn", "tool_error", "parallel")

    def provider(self) -> Any:
        from openinference.instrumentation import TracerProvider

        return tracer_provider(self.name, TracerProvider)

    def instrument(self) -> None:
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor

        SmolagentsInstrumentor().instrument(tracer_provider=self.tracer_provider)

    def ask(self, base_url: str, agent: str, questions: list[str], session_id: str | None) -> None:
        from smolagents import OpenAIServerModel, ToolCallingAgent, tool

        @tool
        def weather_tool(city: str) -> str:
            """Current weather for a city.

            Args:
                city: City name.
            """
            return get_weather(city)

        @tool
        def order_tool(order_id: str) -> str:
            """Status of a customer's order.

            Args:
                order_id: The order's id.
            """
            return lookup_order(order_id)

        weather_tool.name, order_tool.name = "get_weather", "lookup_order"
        model = OpenAIServerModel(model_id=self.model, api_base=base_url, api_key=DUMMY_API_KEY)
        tools = [weather_tool] if agent == "weather" else [order_tool]
        runner = ToolCallingAgent(tools=tools, model=model, max_steps=MAX_STEPS, verbosity_level=0)
        for turn, question in enumerate(questions):
            with _session(session_id):
                runner.run(question, reset=turn == 0)
