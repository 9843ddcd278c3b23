"""An instrumented demo app that produces real agent and chat traces, the way users' applications do.

`app.py` holds the scenarios (plain chat, multi-turn sessions, system messages, an agent with a tool loop, a
failing tool, retrieval, streaming, n=2, an HTTP 500), run through the official `openai` SDK against the local
judge's `app/assistant` model. Each module beside it wires one tracing library (`CONVENTIONS`); `recorder.py`
runs them, each in its own process, exporting over OTLP/HTTP to `otlp_receiver`, which writes the files the
OpenTelemetry Collector's file exporter would. Command: `python -m tools.sample_data.agent_app record`.
"""

from __future__ import annotations

import importlib

from tools.sample_data.agent_app.convention import Convention

# name -> "module:class"; imported only when used (each library patches `openai` globally on import/instrument)
CONVENTIONS: dict[str, str] = {
    "genai": "tools.sample_data.agent_app.genai:GenAIConvention",
    "genai_events": "tools.sample_data.agent_app.genai:GenAIEventsConvention",
    "genai_no_content": "tools.sample_data.agent_app.genai:GenAINoContentConvention",
    "openllmetry": "tools.sample_data.agent_app.openllmetry:OpenLLMetryConvention",
    "openinference": "tools.sample_data.agent_app.openinference:OpenInferenceConvention",
    "langfuse": "tools.sample_data.agent_app.langfuse_sdk:LangfuseConvention",
}
# Older releases' forms (`legacy.py`): recorded only with `record --python` pointing at a scratch venv holding those
# releases, never by default (the test extra holds the current releases).
LEGACY_CONVENTIONS: dict[str, str] = {
    "openllmetry_indexed": "tools.sample_data.agent_app.legacy:IndexedOpenLLMetryConvention",
    "genai_log_events": "tools.sample_data.agent_app.legacy:GenAILogEventsConvention",
    "genai_log_events_no_content": "tools.sample_data.agent_app.legacy:GenAILogEventsNoContentConvention",
    "openlit_prompt_events": "tools.sample_data.agent_app.legacy:OpenLITConvention",
}

# Agent frameworks as their users run them (`frameworks.py`): recorded with `record --python` pointing at a scratch
# venv holding the frameworks (their pins clash with the test extra's), never by default.
FRAMEWORKS: dict[str, str] = {
    "openai_agents": "tools.sample_data.agent_app.frameworks:OpenAIAgentsConvention",
    "openai_agents_hidden": "tools.sample_data.agent_app.frameworks:OpenAIAgentsHiddenConvention",
    "langgraph": "tools.sample_data.agent_app.frameworks:LangGraphConvention",
    "pydantic_ai": "tools.sample_data.agent_app.frameworks:PydanticAIConvention",
    "smolagents": "tools.sample_data.agent_app.frameworks:SmolagentsConvention",
}


def convention_class(name: str) -> type[Convention]:
    """The Convention registered under `name`; a clear error listing the valid names otherwise."""
    known = {**CONVENTIONS, **LEGACY_CONVENTIONS, **FRAMEWORKS}
    if name not in known:
        raise ValueError(f"unknown instrumentation {name!r}; valid: {', '.join(known)}")
    module, _, attribute = known[name].partition(":")
    return getattr(importlib.import_module(module), attribute)
