"""The warehouse's contracts in one place: every table's columns, and the status and reason vocabulary.

Polars dtypes are the source of truth; Parquet files and DuckDB views follow them. `TABLES` is the catalog's
list (one DuckDB view each, DESIGN.md "Outputs"): a new table is one schema and one `TABLES` entry here, plus its
producer. Producers import their schema from here; nothing else defines a table's columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

# ---- status and reason vocabulary (judge_scores, benchmark_cases) ----
# Every selected trace (benchmark case) ends in exactly one status. A failure is never a score.
COMPLETED, FAILED, SKIPPED = "COMPLETED", "FAILED", "SKIPPED"
STATUSES = (COMPLETED, FAILED, SKIPPED)
# The rows analyses count: one final row per trace/pair/candidate (not a panel member), with a verdict.
FINAL_COMPLETED = pl.col("is_final") & (pl.col("status") == COMPLETED)

# Why a row was SKIPPED (the `reason` column); no call was paid for it.
BUDGET_EXHAUSTED = "budget_exhausted"  # the call would exceed a daily or monthly budget
DISABLED = "disabled"  # the evaluator has enabled: false
NOT_SAMPLED = "not_sampled"  # outside the evaluator's sample_rate (the same traces on every rerun)
NOT_SELECTED = "not_selected"  # trigger: manual, and the run did not name the trace
NO_CREDENTIALS = "no_credentials"  # the evaluator's provider key is not set
PROMPT_TOO_LARGE = "prompt_too_large"  # the rendered prompt is longer than max_prompt_chars
SPAN_NOT_FOUND = "span_not_found"  # the evaluator's span is not in the trace
NO_PAIR = "no_pair"  # pairwise: no other trace of the day shares the pair_by value
NO_GROUP_KEY = "no_group_key"  # pairwise / n_wise: the trace has no value for the pair_by / group_by field
GROUP_SIZE = "group_size"  # n_wise: the group has too few or too many candidates
NO_REFERENCE = "no_reference"  # reference mode: the trace has no expected_output (nor a dataset case)
# A check evaluator (judging.checks) makes no call: it skips a trace lacking the field its scorer reads (a trace
# with no tool_calls, no latency_ms) or on which the scorer has no value (a tool error rate over no calls).
MISSING_FIELD = "missing_field"  # also a benchmark case's FAILED reason: the case lacks a field the task needs
NOT_APPLICABLE = "not_applicable"
PARTIAL_TRACE = "partial_trace"  # the trace's spans did not all arrive (partial_reason): never judged as whole
# What an evaluator judges (`judging.targets`): never paid for nothing.
EMPTY_TEXT = "empty_text"  # the trace (span, session) has no text to judge: no input and no output text
APP_ERROR = "app_error"  # the judged trace's (span's) model call failed; judged only with judge_errors: true
NO_SESSION = "no_session"  # target session: the trace has no session_id
NO_FINAL_ANSWER = "no_final_answer"  # the prompt shows {{output}}, the run has no final answer (judge_missing_fields)
# (a prompt's other field empty for a row: `missing_field(name)`, e.g. missing_field:input)
# benchmark tasks:
NOT_IN_SCOPE = "not_in_scope"  # models.yaml limits the model to other suites or tasks
GATE_FAILED = "gate_failed"  # the task's gate (another task's metric) is below its minimum or missing
NO_LOCAL_JUDGE = "no_local_judge"  # a local/ model and no local judge configured
SKIP_REASONS = (
    BUDGET_EXHAUSTED,
    DISABLED,
    NOT_SAMPLED,
    NOT_SELECTED,
    NO_CREDENTIALS,
    PROMPT_TOO_LARGE,
    SPAN_NOT_FOUND,
    NO_PAIR,
    NO_GROUP_KEY,
    GROUP_SIZE,
    NO_REFERENCE,
    MISSING_FIELD,
    NOT_APPLICABLE,
    PARTIAL_TRACE,
    EMPTY_TEXT,
    APP_ERROR,
    NO_SESSION,
    NO_FINAL_ANSWER,
    NOT_IN_SCOPE,
    GATE_FAILED,
    NO_LOCAL_JUDGE,
)
# The skips that leave a trace with nothing its evaluator would judge: not selected, or no text, span, pair, group,
# session, reference or field to judge. Every other row of a partition (COMPLETED, FAILED, or SKIPPED for its
# configuration: no_credentials, no_local_judge, budget_exhausted, prompt_too_large) is a selected trace, and a
# partition with selected traces and no verdict fails its `verdicts_exist` check (ERROR). A new skip reason counts
# as selected until it is added here: the check errs loud.
NOTHING_TO_JUDGE = (
    DISABLED,
    NOT_SAMPLED,
    NOT_SELECTED,
    SPAN_NOT_FOUND,
    NO_PAIR,
    NO_GROUP_KEY,
    GROUP_SIZE,
    NO_REFERENCE,
    MISSING_FIELD,
    NOT_APPLICABLE,
    PARTIAL_TRACE,
    EMPTY_TEXT,
    APP_ERROR,
    NO_SESSION,
    NO_FINAL_ANSWER,
)


def nothing_to_judge(reason: pl.Expr) -> pl.Expr:
    """A skip reason of NOTHING_TO_JUDGE, `missing_field:<name>` (a field the prompt shows is empty) included."""
    return reason.is_in(NOTHING_TO_JUDGE) | reason.str.starts_with(f"{MISSING_FIELD}:")


# Why a row FAILED: a stable code in `reason`, its human message in `reason_detail`. Every place that fails a row
# uses these names, so a code is spelt once.
# transport (the provider's answer never came or was an error):
TIMEOUT = "timeout"
RATE_LIMITED = "rate_limited"
CONNECTION_ERROR = "connection_error"
PROVIDER_ERROR = "provider_error"  # spelt `provider_error:<HTTP status or error type>`, see provider_error()
# the reply came but holds no usable verdict:
EMPTY_REPLY = "empty_reply"
UNPARSEABLE = "unparseable"
AMBIGUOUS = "ambiguous"  # the reply holds more than one verdict
TRUNCATED = "truncated"  # the reply was cut at the token limit
SCHEMA_VIOLATION = "schema_violation"
OUT_OF_RANGE = "out_of_range"
# consensus over a panel or samples:
NO_CONSENSUS = "no_consensus"
LOW_AGREEMENT = "low_agreement"
ALL_MEMBERS_FAILED = "all_members_failed"
# batch mode:
BATCH_PENDING = "batch_pending"
BATCH_FAILED = "batch_failed"
BATCH_EXPIRED = "batch_expired"
BATCH_TIMEOUT = "batch_timeout"
BATCH_UNCONFIRMED = "batch_unconfirmed"  # the provider could not say whether a batch was created
# benchmarks:
SCORER_ERROR = "scorer_error"
LOCAL_MODEL_ERROR = "local_model_error"  # a local model folder (`model_path`) could not be loaded or run
UPSTREAM_MISSING = "upstream_missing"  # the task's `outputs_of` task has no output for the case
# a benchmark case's `judge` scorer (an evaluator, spelt `judge:<code>`, see judge_reason()):
JUDGE_MISSING = "judge_missing"  # the evaluator returned no row for the case
UNKNOWN_EVALUATOR = "unknown_evaluator"  # the scorer names an evaluator that did not load
FAIL_REASONS = (
    LOCAL_MODEL_ERROR,
    TIMEOUT,
    RATE_LIMITED,
    CONNECTION_ERROR,
    PROVIDER_ERROR,
    EMPTY_REPLY,
    UNPARSEABLE,
    AMBIGUOUS,
    TRUNCATED,
    SCHEMA_VIOLATION,
    OUT_OF_RANGE,
    NO_CONSENSUS,
    LOW_AGREEMENT,
    ALL_MEMBERS_FAILED,
    BATCH_PENDING,
    BATCH_FAILED,
    BATCH_EXPIRED,
    BATCH_TIMEOUT,
    BATCH_UNCONFIRMED,
    SCORER_ERROR,
    MISSING_FIELD,
    UPSTREAM_MISSING,
    JUDGE_MISSING,
    UNKNOWN_EVALUATOR,
)
# Why a fine-tuning export leaves a trace out (finetune.export; a manifest's `excluded_by_reason`), besides
# PARTIAL_TRACE, APP_ERROR and the verdicts' `<outcome>:<evaluator>`. A line is never repaired into something the
# trace did not say: what cannot be written in OpenAI's chat fine-tuning format is left out with its reason.
# (NO_FINAL_ANSWER above: no assistant text at the end, e.g. an agent that stopped on a tool call)
UNANSWERED_TOOL_CALL = "unanswered_tool_call"  # a tool call no tool message answers before the conversation goes on
BAD_TOOL_ARGUMENTS = "bad_tool_arguments"  # a tool call's arguments are not the JSON text of an object
BAD_FUNCTION_NAME = "bad_function_name"  # a called function's name is outside ^[a-zA-Z0-9_-]{1,64}$
BAD_TOOLS = "bad_tools"  # metadata.tools is not a list of OpenAI function tools with valid names
BAD_MESSAGES = "bad_messages"  # a role the format has no place for, a tool message answering no call, no user
EXPORT_EXCLUSIONS = (
    PARTIAL_TRACE,
    APP_ERROR,
    NO_FINAL_ANSWER,
    UNANSWERED_TOOL_CALL,
    BAD_TOOL_ARGUMENTS,
    BAD_FUNCTION_NAME,
    BAD_TOOLS,
    BAD_MESSAGES,
)
# A COMPLETED pairwise row's reason (and flag): the verdict flipped with the presentation order, counted as a tie.
INCONSISTENT_ORDER = "inconsistent_order"
# A benchmark case scored through another call carries that call's reason under a prefix (the functions below).
EMBEDDING_PREFIX = "embedding"  # the case's embedding call (semantic_similarity) did not complete
JUDGE_PREFIX = "judge"  # the case's `judge` scorer (an evaluator) gave no score


def missing_field(name: str) -> str:
    """The SKIPPED reason of a judge whose prompt shows a field empty for the row, e.g. `missing_field:input`."""
    return f"{MISSING_FIELD}:{name}"


# What an instrumentation writes in place of content it was told to hide (OpenInference's
# OPENINFERENCE_HIDE_INPUTS / _OUTPUTS and its other hide flags): no content, never judged.
HIDDEN_CONTENT = "__REDACTED__"


def provider_error(status: object) -> str:
    """The FAILED reason of a provider's error answer: `provider_error:<HTTP status or error type>`."""
    return f"{PROVIDER_ERROR}:{status}"


def embedding_reason(reason: str | None) -> str:
    """A benchmark case's FAILED reason when its embedding call did not complete: `embedding:<the call's reason>`."""
    return f"{EMBEDDING_PREFIX}:{reason}"


def judge_reason(reason: str | None) -> str:
    """A benchmark case's FAILED reason when its `judge` scorer gave no score: `judge:<the evaluator's reason>`."""
    return f"{JUDGE_PREFIX}:{reason}"


# What a pairwise winner scores on the `score` column is the pairwise mode's (`judging.modes.pairwise.PAIRWISE_SCORE`).

# ---- inputs ----

# A normalized trace (DESIGN.md "canonical trace"). Text fields hold plain text: chat messages are
# rendered as "role: content" lines; `*_messages` keep the original structure as JSON when it existed.
TRACE_SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.String(),
    "timestamp": UTC_TS,
    "date": pl.String(),  # the UTC day partition (YYYY-MM-DD) the trace was exported under
    "input": pl.String(),
    "output": pl.String(),
    "input_messages": pl.String(),  # JSON list of {role, content} or null
    "output_messages": pl.String(),  # JSON list of {role, content} or null
    "context": pl.String(),  # JSON list of strings (retrieved documents) or null
    "expected_output": pl.String(),
    "metadata": pl.String(),  # JSON object, "{}" when absent
    "project_id": pl.String(),
    "model": pl.String(),
    "experiment_id": pl.String(),
    "variant": pl.String(),
    "latency_ms": pl.Float64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "cost_usd": pl.Float64(),  # the traced application's own spend, never judge spend
    # JSON list, one object per span of the trace in start order (OTLP input; else as given, or null): span_id,
    # parent_span_id, name, kind, operation, status, error_type, model, input, output, context, tool_name,
    # tool_arguments, tool_result, latency_ms, prompt_tokens, completion_tokens, attributes, and the rest of the span's
    # `spans` columns (otel_trace_id, convention, error_message, start_time, end_time, input_messages,
    # output_messages, tool_call_id, documents, session_id, user_id, source_file, source_line): the one place spans are
    # stored
    "spans": pl.String(),
    "session_id": pl.String(),  # the conversation / session the trace belongs to, null when absent
    "user_id": pl.String(),
    # JSON list of {role, content, tool_calls?: [{id, name, arguments}], tool_call_id?, name?}: the transcript as the
    # model last saw it (OTLP: the last successful inference span's input messages plus its output), or null
    "conversation": pl.String(),
    # JSON list of {span_id, name, arguments, result, status: ok|error, error}: the tool-call trajectory, or null
    "tool_calls": pl.String(),
    "error": pl.Boolean(),  # the run failed: its root or last inference span has status ERROR (or error.type)
    "error_type": pl.String(),
    "error_message": pl.String(),
    "span_count": pl.Int64(),  # spans assembled into the trace (OTLP), else null
    "partial_reason": pl.String(),  # null when whole; missing_parent:<span_id>, parent_cycle:<span_id>, ...
    "flags": pl.String(),  # JSON list of codes (clock_skew, duplicate_span_id, ...), or null
    "source_file": pl.String(),  # path relative to the data root (OTLP: the file of the root span)
    "source_line": pl.Int64(),  # 1-based line / row / element number inside source_file
}

# The normalized operation of a span (the `operation` column of `spans` and key of `traces.spans`), whatever
# convention the span was written in (ingest.otel maps each convention's span kinds onto these); evaluators select
# spans by it (judging.targets).
SpanOperation = Literal[
    "chat",
    "text_completion",
    "embeddings",
    "execute_tool",
    "handoff",  # an agent handing the conversation to another (OpenAI Agents SDK): not a tool call
    "final_answer",  # a framework's answer tool (smolagents' final_answer): the run's answer, not a tool call
    "invoke_agent",
    "retrieval",
    "workflow",
    "task",
    "chain",
    "guardrail",
    "other",
]
SPAN_OPERATIONS: tuple[str, ...] = get_args(SpanOperation)

# One span of an OTLP trace: the `spans` view, the span objects of `traces.spans` unnested (`spans_view_sql`), for
# the accepted OTLP traces only (a quarantined span is a quarantine row instead). Not stored on its own: a span is
# stored once, in its trace's row, where the judge reads it.
SPAN_SCHEMA: dict[str, pl.DataType] = {
    "trace_id": pl.String(),  # joins traces.trace_id (the application's id when it gave one)
    "otel_trace_id": pl.String(),  # the OTLP traceId (32 lower-case hex digits)
    "span_id": pl.String(),
    "parent_span_id": pl.String(),
    "date": pl.String(),  # the day partition of its trace
    "name": pl.String(),
    "kind": pl.String(),  # internal | server | client | producer | consumer | unspecified
    # chat | text_completion | embeddings | execute_tool | invoke_agent | retrieval | workflow | task | chain |
    # guardrail | other; null for spans outside every GenAI convention (HTTP, database, ...)
    "operation": pl.String(),
    "convention": pl.String(),  # genai | openllmetry | openinference | langfuse | none
    "status": pl.String(),  # ok | error | unset
    "error_type": pl.String(),
    "error_message": pl.String(),
    "model": pl.String(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "start_time": UTC_TS,
    "end_time": UTC_TS,
    "latency_ms": pl.Float64(),
    "input": pl.String(),  # text, as in traces.input
    "output": pl.String(),
    "input_messages": pl.String(),  # JSON list of conversation messages (see traces.conversation) or null
    "output_messages": pl.String(),
    "tool_name": pl.String(),
    "tool_call_id": pl.String(),
    "tool_arguments": pl.String(),
    "tool_result": pl.String(),
    "documents": pl.String(),  # JSON list of strings (retrieved documents) or null
    "session_id": pl.String(),
    "user_id": pl.String(),
    "attributes": pl.String(),  # JSON object: the span's raw attributes
    "source_file": pl.String(),
    "source_line": pl.Int64(),
}

# The `spans` columns taken from the trace row, and those holding JSON (a list or an object) in the span's object.
_SPAN_FROM_TRACE = ("trace_id", "date")
_SPAN_JSON = ("input_messages", "output_messages", "documents", "attributes")
_DUCKDB_TYPES = {pl.String(): "VARCHAR", pl.Int64(): "BIGINT", pl.Float64(): "DOUBLE", UTC_TS: "TIMESTAMPTZ"}


def spans_view_sql(traces: str = "traces") -> str:
    """The `spans` view's query (DuckDB) over a relation with the `traces` columns: one row per span object of an
    OTLP trace's `spans` (`span_count` is set for OTLP traces only; other traces' spans are as their input gave
    them), with SPAN_SCHEMA's columns in order."""
    columns = []
    for name, dtype in SPAN_SCHEMA.items():
        if name in _SPAN_FROM_TRACE:
            columns.append(f'"{name}"')
        elif name in _SPAN_JSON:  # the JSON text of the list or object; a JSON null is NULL
            columns.append(f"nullif(CAST(s->'{name}' AS VARCHAR), 'null') AS \"{name}\"")
        else:
            columns.append(f"CAST(s->>'{name}' AS {_DUCKDB_TYPES[dtype]}) AS \"{name}\"")
    unnested = (
        f"SELECT trace_id, date, unnest(from_json(spans, '[\"JSON\"]')) AS s FROM {traces} "
        "WHERE span_count IS NOT NULL AND spans IS NOT NULL"
    )
    return f"SELECT {', '.join(columns)} FROM ({unnested})"


# A rejected input row: nothing is dropped silently.
QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),  # which asset rejected it: traces, dataset_versions, human_annotations, ...
    "partition": pl.String(),
    "file": pl.String(),  # relative to the data root
    "line": pl.Int64(),  # 1-based; null when the whole file was rejected
    "reason": pl.String(),  # short machine-readable code, e.g. missing_field:trace_id
    "detail": pl.String(),  # human-readable explanation naming the field
    "raw": pl.String(),  # the raw text of the row (truncated to 10k chars)
    "quarantined_at": UTC_TS,
}

# Why the ingest of traces quarantined an entry of `traces/` that no day reads (a folder not named YYYY-MM-DD, a file
# in no day folder); the ingest's other, per-row reasons are listed in `ingest/traces.py`.
NOT_A_DAY_FOLDER = "not_a_day_folder"

# One row per case of a dataset version (`dataset_versions`, the `test_cases` view).
TEST_CASE_SCHEMA: dict[str, pl.DataType] = {
    "dataset": pl.String(),
    "version": pl.Int64(),
    "case_id": pl.String(),
    "input": pl.String(),
    "expected_output": pl.String(),
    # true: expected_output is the JSON text of a list (any of its items is right), object, number or boolean the
    # dataset file wrote as JSON; false: plain text (CSV cells are always text)
    "expected_output_json": pl.Boolean(),
    "metadata": pl.String(),
    "source_file": pl.String(),
    "source_line": pl.Int64(),
}

# ---- judging ----

# The local judge's stand-in verdicts (`local_judge.mock_verdict`): deterministic placeholders that satisfy the reply
# schema, never a quality judgment. A row is one when its `model` or `provider_model` is this model (or under it,
# `local/mock/...`); wherever scores are shown, such rows carry PLACEHOLDER_MARK.
PLACEHOLDER_MODEL = "local/mock"
PLACEHOLDER_MARK = "PLACEHOLDER (local/mock: not a quality judgment)"


def is_placeholder_model(model: str | None) -> bool:
    """Whether a row's `model` or `provider_model` names the local judge's placeholder verdicts."""
    return model is not None and (model == PLACEHOLDER_MODEL or model.startswith(PLACEHOLDER_MODEL + "/"))


def _names_placeholder(column: str) -> pl.Expr:
    return (pl.col(column) == PLACEHOLDER_MODEL) | pl.col(column).str.starts_with(PLACEHOLDER_MODEL + "/")


# A judge_scores row answered by the placeholder (polars; `report` writes the same test in SQL).
PLACEHOLDER_ROW = (_names_placeholder("model") | _names_placeholder("provider_model")).fill_null(False)


# One verdict row per (evaluator, trace, span, session or pair, model, sample).
JUDGE_SCORE_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "date": pl.String(),
    "trace_id": pl.String(),  # for pairwise: the A-side trace of the pair
    "trace_id_b": pl.String(),  # pairwise only: the B-side trace
    "pair_key": pl.String(),  # pairwise only: the value both traces share
    "span_id": pl.String(),  # target span: the judged span of trace_id (null for trace and session rows)
    "session_id": pl.String(),  # target session: the judged session (trace_id is its last trace so far)
    "model": pl.String(),  # the configured model (or local/replay/..., local/mock)
    "provider_model": pl.String(),  # what the provider reported answering
    "sample": pl.Int64(),
    "role": pl.String(),  # verdict (the only judge) | member (one of several) | consensus (their combination)
    "is_final": pl.Boolean(),  # one final row per trace/pair/candidate: role <> 'member'
    "status": pl.String(),  # COMPLETED | FAILED | SKIPPED
    "reason": pl.String(),  # a stable code: timeout, rate_limited, unparseable, ambiguous, budget_exhausted, ...
    "reason_detail": pl.String(),  # the human message for that code (which limit, after how many attempts, ...)
    "score": pl.Float64(),  # normalized 0..1; null unless COMPLETED
    "raw_score": pl.Float64(),
    "label": pl.String(),
    "passed": pl.Boolean(),
    "winner": pl.String(),  # pairwise: A | B | tie
    "winner_trace_id": pl.String(),
    "winner_variant": pl.String(),
    "verdict_ab": pl.String(),  # pairwise: verdict with A shown first
    "verdict_ba": pl.String(),  # pairwise: verdict with B shown first (mapped back to A/B names)
    "position_consistent": pl.Boolean(),  # pairwise/n_wise: all presentation orders agreed (null: one order)
    "confidence": pl.Float64(),  # the judge's reported confidence in 0..1, when it gives one
    "flags": pl.String(),  # comma-separated: low_confidence, inconsistent_order, rank_inconsistent, disagreement
    "agreement": pl.Float64(),  # consensus rows: how much the members agreed (0..1)
    "votes": pl.Int64(),  # consensus rows: members that completed
    "reasoning": pl.String(),
    "raw_response": pl.String(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "cached_prompt_tokens": pl.Int64(),  # of prompt_tokens, served from the provider's prompt cache (cheaper)
    "cost_usd": pl.Float64(),  # judge spend actually incurred by this materialization
    "cached_cost_usd": pl.Float64(),  # what the cached call(s) had cost when first made
    "latency_ms": pl.Float64(),
    "calls": pl.Int64(),  # HTTP requests made for this row, retries included
    "cache_hit": pl.Boolean(),
    "config_hash": pl.String(),
    "experiment_id": pl.String(),
    "variant": pl.String(),
    "project_id": pl.String(),
    "judged_at": UTC_TS,
}

# The verdicts a `judge_scores` partition held before it was re-judged under a new evaluator configuration
# (`judging/history.py`): one partition per evaluator × day holding the rows of its last superseded config hashes
# (EVAL_PLATFORM_JUDGE_HISTORY_HASHES, default 3), each hash's rows as they last were. Written before the new
# verdicts replace the partition; judge_scores itself is never changed by it.
JUDGE_SCORE_HISTORY_SCHEMA: dict[str, pl.DataType] = {
    **JUDGE_SCORE_SCHEMA,
    "superseded_by": pl.String(),  # the config hash of the verdicts that replaced these in judge_scores
    "superseded_at": UTC_TS,  # when they were replaced
}

# A judge_scores partition in numbers, grouped by what the viewer's evaluators page and a day's summary tell apart:
# one row per (evaluator, day, is_final, status, reason, model, variant, config_hash), written with the partition.
JUDGE_DAY_NUMBERS_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "date": pl.String(),
    "is_final": pl.Boolean(),
    "status": pl.String(),
    "reason": pl.String(),
    "model": pl.String(),
    "variant": pl.String(),
    "config_hash": pl.String(),
    "rows": pl.Int64(),  # judge_scores rows in the group
    "score_sum": pl.Float64(),  # sum of their scores (null when none has one)
    "scores": pl.Int64(),  # rows with a score
    "passes": pl.Int64(),  # rows that passed
    "passed_known": pl.Int64(),  # rows with a pass/fail
    "calls": pl.Int64(),  # HTTP requests made, retries included
    "cache_hits": pl.Int64(),
    "cost_usd": pl.Float64(),
    # the judge_scores files summed (path, size and modification time of each; null on a bucket): a reader uses the
    # numbers only while the partition's files are still these
    "source_version": pl.String(),
}

# ---- annotations and agreement ----

HUMAN_ANNOTATION_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "item_id": pl.String(),
    "annotator": pl.String(),
    "criterion": pl.String(),
    "schema": pl.String(),  # classification | rating | ranking | text (free text: never compared)
    "label": pl.String(),
    "value": pl.Float64(),  # rating value, mapped classification value, or rank (1 = best)
    "trace_id": pl.String(),
    "response1_trace_id": pl.String(),
    "response2_trace_id": pl.String(),
    "annotated_at": UTC_TS,
    "metadata": pl.String(),  # JSON object of the row's other fields
    "source_file": pl.String(),
    "source_line": pl.Int64(),
}

IMPORTED_JUDGMENT_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),  # the judge or study, e.g. "gpt-3.5-turbo (PandaLM study)"
    "task": pl.String(),
    "criterion": pl.String(),
    "item_id": pl.String(),
    "verdict": pl.String(),  # as recorded
    "value": pl.Float64(),  # numeric score, when there is one
    "reasoning": pl.String(),
    "trace_id": pl.String(),
    "response1_trace_id": pl.String(),
    "response2_trace_id": pl.String(),
    "judged_at": UTC_TS,
    "metadata": pl.String(),  # JSON object of the row's other fields
    "source_file": pl.String(),
    "source_line": pl.Int64(),
}

# The majority label of the human annotations per (task, criterion, item).
GROUND_TRUTH_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "criterion": pl.String(),
    "item_id": pl.String(),
    "label": pl.String(),  # the majority label
    "votes": pl.Int64(),
    "top_votes": pl.Int64(),
    "consensus": pl.Float64(),  # top_votes / votes
}

# ---- annotation tasks (`eval_platform.annotation`: data/annotation_tasks/*.yaml) ----

# One item an annotation task hands to annotators (`annotation.sampling.select_items`). The text columns are what
# an annotator sees; no judge verdict is among them (anchoring). `priority` and `why` are the task owner's: they
# name judges' verdicts, so they are never shown to annotators.
ANNOTATION_TASK_ITEM_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "config_hash": pl.String(),  # the task's config hash when the items were chosen
    "position": pl.Int64(),  # 1-based order in which the items are handed out
    "item_id": pl.String(),  # traces: the trace_id; datasets: the case_id (what human_annotations rows carry)
    "trace_id": pl.String(),  # traces source: the trace (= item_id); null for a dataset case
    "source": pl.String(),  # traces | dataset
    "source_day": pl.String(),  # traces: the UTC day partition (YYYY-MM-DD) of the trace
    "dataset": pl.String(),  # dataset source: its name
    "dataset_version": pl.Int64(),  # dataset source: N of <name>@v<N>
    "dataset_sha256": pl.String(),  # dataset source: sha256 of the version's file
    "input": pl.String(),  # the text an annotator reads
    "output": pl.String(),
    "reference": pl.String(),  # the expected output, when there is one
    "context": pl.String(),  # JSON list of retrieved documents, or null
    "conversation": pl.String(),  # traces: the JSON transcript (TRACE_SCHEMA.conversation), or null
    "metadata": pl.String(),  # JSON object
    "stratum": pl.String(),  # stratified: the field's value (`(missing)` when absent); else null
    "priority": pl.Float64(),  # disagreement: the measure the items are ordered by (0..1); else null
    "why": pl.String(),  # disagreement: what the priority is made of, in words; else null
    "sampling": pl.String(),  # random | stratified | disagreement
    "seed": pl.Int64(),
    "selected_at": UTC_TS,
}

# Progress of an annotation task (`annotation.progress.progress`): per task and per annotator, over the whole item
# (criterion null: counts and time) and per criterion (counts and agreement so far).
ANNOTATION_PROGRESS_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "level": pl.String(),  # task | annotator
    "annotator": pl.String(),  # null at level task
    "criterion": pl.String(),  # null: the whole item (any criterion labelled)
    "schema": pl.String(),  # the criterion's schema; null for the whole item
    "items_total": pl.Int64(),  # the task's items (null when the items were not given)
    "annotations_per_item": pl.Int64(),  # N
    "items_done": pl.Int64(),  # items with at least one annotation (level annotator: items this annotator labelled)
    "items_complete": pl.Int64(),  # of those, items with at least N annotators
    "annotations": pl.Int64(),  # distinct (item, annotator) annotations counted
    "items_compared": pl.Int64(),  # items the agreement is over: task: >= 2 annotators; annotator: see note
    "alpha": pl.Float64(),  # task level: Krippendorff's alpha so far (null when undefined: see note)
    "alpha_level": pl.String(),  # nominal (classification) | ordinal (rating, ranking)
    "percent_agreement": pl.Float64(),  # task level: mean share of agreeing annotator pairs per item
    "agreement_with_majority": pl.Float64(),  # annotator level: share of items matching the others' majority
    "quality_kappa": pl.Float64(),  # annotator level: Cohen's kappa against the others' majority
    "time_spent_s": pl.Float64(),  # whole item rows: sum of the tool's lead times (one per item and annotator)
    "median_lead_time_s": pl.Float64(),
    "first_annotated_at": UTC_TS,
    "last_annotated_at": UTC_TS,
    "note": pl.String(),
    "computed_at": UTC_TS,
}

# The consensus label of an item and criterion (`annotation.progress.ground_truth`): at least N annotations and a
# share of agreeing annotators of at least the task's threshold. An item short of that has no row here (never a
# guess); `annotation.progress.open_items` lists it with its split.
ANNOTATION_GROUND_TRUTH_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "criterion": pl.String(),
    "item_id": pl.String(),
    "trace_id": pl.String(),  # the trace the item is, when it is one (joins judge_scores)
    "schema": pl.String(),  # classification | rating | ranking
    "label": pl.String(),  # the agreed label (rating: the value as text; ranking: `B > A > C`, best first)
    "value": pl.Float64(),  # rating: the agreed value; classification: the label's declared value; ranking: null
    "annotations": pl.Int64(),  # annotators who labelled the criterion of the item
    "agreeing": pl.Int64(),  # of those, the ones who gave `label`
    "consensus": pl.Float64(),  # agreeing / annotations
    "threshold": pl.Float64(),  # the task's consensus_threshold
    "annotations_per_item": pl.Int64(),  # the task's N (annotations is at least this)
    "config_hash": pl.String(),
    "computed_at": UTC_TS,
}

# An item and criterion with no consensus yet (`annotation.progress.open_items`); not a warehouse table of its own.
ANNOTATION_OPEN_ITEM_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "criterion": pl.String(),
    "item_id": pl.String(),
    "schema": pl.String(),
    "reason": pl.String(),  # too_few_annotations | below_threshold
    "annotations": pl.Int64(),
    "agreeing": pl.Int64(),  # votes of the most given label(s)
    "consensus": pl.Float64(),
    "split": pl.String(),  # JSON object: label -> annotators who gave it
}

AGREEMENT_SCHEMA: dict[str, pl.DataType] = {
    # inter_annotator | annotator | judge_vs_human | judge_vs_judge | position_consistency | ranking
    "section": pl.String(),
    "task": pl.String(),  # the annotation task (null for judge_vs_judge between evaluators without one)
    "criterion": pl.String(),
    "subject": pl.String(),  # the evaluator, imported judge (source), annotator or annotator pair judged
    "reference": pl.String(),  # what it is compared with: human_majority, an annotator, another judge
    "period": pl.String(),  # all | day | trailing
    "period_start": pl.String(),  # YYYY-MM-DD, null for `all`
    "period_end": pl.String(),
    "convention": pl.String(),  # failed_excluded | unusable_as_tie (judge rows); null otherwise
    "statistic": pl.String(),
    "value": pl.Float64(),  # null when undefined: see `note`
    "n": pl.Int64(),  # items (units, pairs) the value is computed over
    "interpretation": pl.String(),  # Landis & Koch bands for kappas, Krippendorff's for alpha
    "note": pl.String(),
    "floor": pl.Float64(),  # the evaluator's configured minimum kappa with humans
    "below_floor": pl.Boolean(),
    "details": pl.String(),  # JSON: confusion matrix and its labels, label counts, ...
    "computed_at": UTC_TS,
    # issue 30: true on a judge section's row whose judge side has verdicts from the local judge's placeholder in
    # the row's period (`placeholder_rows`): no statement about a real judge
    "placeholder": pl.Boolean(),
}

# ---- experiments and regressions ----

# Per experiment and metric: per-variant statistics and the significance analysis (one row per variant or pair).
_F, _I, _S, _B = pl.Float64(), pl.Int64(), pl.String(), pl.Boolean()
EXPERIMENT_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "experiment": _S,
    "experiment_id": _S,
    "kind": _S,
    "metric": _S,
    "evaluator": _S,
    "metric_role": _S,
    "direction": _S,
    "variant": _S,
    "control_variant": _S,
    "opponent": _S,
    "method": _S,
    "alpha": _F,
    "n": _I,
    "n_control": _I,
    "mean": _F,
    "std": _F,
    "ci_low": _F,
    "ci_high": _F,
    "mean_control": _F,
    "difference": _F,
    "relative_difference": _F,
    "diff_ci_low": _F,
    "diff_ci_high": _F,
    "t_statistic": _F,
    "df": _F,
    "p_value": _F,
    "prob_improvement": _F,
    "expected_lift": _F,
    "credible_low": _F,
    "credible_high": _F,
    "expected_loss": _F,
    "cohens_d": _F,
    "effect_interpretation": _S,
    "significant": _B,
    "outcome": _S,
    "insufficient_sample": _B,
    "guardrail_rule": _S,
    "guardrail_passed": _B,
    "recommendation": _S,
    "wins": _I,
    "losses": _I,
    "ties": _I,
    "win_rate": _F,
    "strength": _F,
    "rank": _I,
    "note": _S,
    "start_date": _S,
    "end_date": _S,
    "stale": _B,
    "stale_reason": _S,
    "computed_at": UTC_TS,
    # issue 21 (sequential experiments, multiple comparisons, planning); new columns go at the end
    "p_value_adjusted": _F,
    "significance_rule": _S,
    "always_valid_p_value": _F,
    "cs_low": _F,
    "cs_high": _F,
    "sequential_looks": _I,
    "mde": _F,
    "target_effect": _F,
    "required_n": _I,
    "power": _F,
    # issue 21, human-calibrated (prediction-powered) figures (`experiments.calibrated`)
    "human_n": _I,
    "ppi_mean": _F,
    "ppi_ci_low": _F,
    "ppi_ci_high": _F,
    "human_n_control": _I,
    "ppi_mean_control": _F,
    "ppi_difference": _F,
    "ppi_diff_ci_low": _F,
    "ppi_diff_ci_high": _F,
    # issue 30: true when a verdict behind the row came from the local judge's placeholder (`placeholder_rows`)
    "placeholder": _B,
}

# An alert: a day whose mean judge score fell significantly below the evaluator's trailing baseline (kind
# `regression`), or a day breaking a threshold rule of the evaluator's `alerts:` block (kind `threshold`,
# `alerting.rules`). The baseline and test columns are a regression's; `rule`, `value`, `threshold` a rule's.
ALERT_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "day": pl.String(),  # the trace day; for a budget rule, the UTC day of the calls
    "kind": pl.String(),  # regression | threshold
    "rule": pl.String(),  # the threshold rule, normalized (`rate(score < 0.5) > 2%`)
    "value": pl.Float64(),  # what the rule measured, in its unit (a rate as a fraction, a budget in percent)
    "threshold": pl.Float64(),
    "mean": pl.Float64(),
    "n": pl.Int64(),
    "baseline_mean": pl.Float64(),
    "baseline_n": pl.Int64(),
    "baseline_start": pl.String(),
    "baseline_end": pl.String(),
    "baseline_days": pl.Int64(),
    "difference": pl.Float64(),
    "relative_difference": pl.Float64(),
    "t_statistic": pl.Float64(),
    "df": pl.Float64(),
    "p_value": pl.Float64(),
    "alpha": pl.Float64(),
    "cohens_d": pl.Float64(),
    "severity": pl.String(),
    "message": pl.String(),
    "alert_key": pl.String(),  # the alert's identity: deliveries carry it as their idempotency key
    "detected_at": UTC_TS,
    # issue 21: the day's human-calibrated (prediction-powered) mean score, where humans labelled some of its traces
    "human_n": pl.Int64(),
    "ppi_mean": pl.Float64(),
    "ppi_ci_low": pl.Float64(),
    "ppi_ci_high": pl.Float64(),
    # issue 30: true when a verdict of the day (or, for a regression, its baseline) came from the local judge's
    # placeholder (`placeholder_rows`): the alert is about no quality judgment
    "placeholder": pl.Boolean(),
}

# ---- judge drift (`agreement.drift`) ----

# One anchor item's verdict in one drift check of an evaluator.
ANCHOR_VERDICT_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "check_id": pl.String(),
    "checked_at": UTC_TS,
    "config_hash": pl.String(),
    "provider_model": pl.String(),
    "case_id": pl.String(),
    "status": pl.String(),
    "reason": pl.String(),
    "score": pl.Float64(),  # null unless COMPLETED
    "expected_score": pl.Float64(),  # the anchor's expected verdict in the judge's terms (0..1)
    "cost_usd": pl.Float64(),
}

# One drift check of an evaluator's anchors, compared with its previous check.
JUDGE_DRIFT_SCHEMA: dict[str, pl.DataType] = {
    "evaluator": pl.String(),
    "check_id": pl.String(),
    "checked_at": UTC_TS,
    "trigger": pl.String(),  # first | config_changed | model_changed | schedule | manual
    "config_hash": pl.String(),
    "provider_model": pl.String(),
    "dataset": pl.String(),  # name@vN (sha256 prefix)
    "n_anchors": pl.Int64(),
    "n_completed": pl.Int64(),
    "n_failed": pl.Int64(),
    "mean_score": pl.Float64(),
    "expected_agreement": pl.Float64(),  # share of completed anchors whose verdict equals the expected one
    "expected_mae": pl.Float64(),
    "previous_check_id": pl.String(),
    "previous_config_hash": pl.String(),
    "previous_provider_model": pl.String(),
    "n_paired": pl.Int64(),  # anchors completed in both checks
    "agreement": pl.Float64(),  # share of paired anchors with equal verdicts
    "mean_shift": pl.Float64(),  # mean(current − previous) over paired anchors
    "shift_ci_low": pl.Float64(),  # paired t interval at 1 − alpha
    "shift_ci_high": pl.Float64(),
    "p_value": pl.Float64(),
    "alpha": pl.Float64(),
    "significant": pl.Boolean(),  # p < alpha: the WARN check `no_judge_drift` fails
    "cost_usd": pl.Float64(),
    "note": pl.String(),
}

# ---- costs ----

# What judging cost, summed over rows of judge_scores; the daily and monthly rollups share these.
JUDGE_COST_MEASURES: dict[str, pl.DataType] = {
    "rows": pl.Int64(),
    "calls": pl.Int64(),
    "cache_hits": pl.Int64(),
    "completed": pl.Int64(),
    "failed": pl.Int64(),
    "skipped": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "spend_usd": pl.Float64(),
    "avoided_by_cache_usd": pl.Float64(),
}
_JUDGE_COST_KEYS: dict[str, pl.DataType] = {"evaluator": pl.String(), "model": pl.String(), "project_id": pl.String()}

JUDGE_COST_DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.String(),
    **_JUDGE_COST_KEYS,
    **JUDGE_COST_MEASURES,
    "budget_daily_usd": pl.Float64(),
    "ledger_spend_usd": pl.Float64(),
    "budget_used_pct": pl.Float64(),
    "computed_at": UTC_TS,
}

JUDGE_COST_MONTHLY_SCHEMA: dict[str, pl.DataType] = {
    "month": pl.String(),  # YYYY-MM (UTC)
    **_JUDGE_COST_KEYS,
    "days": pl.Int64(),
    **JUDGE_COST_MEASURES,
    "budget_monthly_usd": pl.Float64(),
    "ledger_spend_usd": pl.Float64(),
    "budget_used_pct": pl.Float64(),
    "computed_at": UTC_TS,
}

# What `judge_cost_daily` sums: each judge_scores file's rows grouped as the rollup groups them, kept beside the file's
# version so that a rollup after an arrival reads only the files written since (`costs.judged_rows`).
JUDGE_COST_PARTS_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),  # the judge_scores file, under the table's folder (evaluator=../date=../[src=../]part.parquet)
    # its size and modification time when summed: a row whose file is no longer this version is not used
    "file_version": pl.String(),
    "day": pl.String(),  # UTC day of judging (a file with no rows has one row, with 0 rows and nulls)
    **_JUDGE_COST_KEYS,
    **JUDGE_COST_MEASURES,
}

APP_COST_DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.String(),
    "project_id": pl.String(),
    "model": pl.String(),
    "traces": pl.Int64(),
    "traces_with_cost": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "app_cost_usd": pl.Float64(),  # the traced application's own spend; never judge spend
    "computed_at": UTC_TS,
}

# ---- benchmarks ----

SCORE_STRUCT = pl.List(pl.Struct({"metric": pl.String(), "value": pl.Float64()}))

BENCHMARK_CASE_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.String(),
    "task": pl.String(),
    "model": pl.String(),  # the partition key (models.yaml name)
    "model_id": pl.String(),  # the litellm model string called
    "dataset": pl.String(),
    "dataset_version": pl.Int64(),
    "dataset_hash": pl.String(),
    "case_id": pl.String(),
    "sample": pl.Int64(),
    "presentation": pl.String(),  # judge tasks: AB (pair as listed) or BA (swapped); else ""
    "input": pl.String(),
    "expected_output": pl.String(),
    "expected_output_json": pl.Boolean(),  # expected_output is JSON text (a list of accepted answers, an object)
    "output": pl.String(),
    # judge tasks: the parsed winner in the case's terms (A = first pair field), or the score / pass / label
    "verdict": pl.String(),
    "status": pl.String(),
    "reason": pl.String(),
    "reason_detail": pl.String(),
    "scores": SCORE_STRUCT,
    "primary_metric": pl.String(),
    "primary_value": pl.Float64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "cost_usd": pl.Float64(),  # null when the row's call has no known price (never counted as free); 0 without a call
    "latency_ms": pl.Float64(),
    "cache_hit": pl.Boolean(),
    "provider_model": pl.String(),
    "task_config_hash": pl.String(),
    "scorer_config_hash": pl.String(),
    "run_at": UTC_TS,
    # issue 30: as `leaderboard.stale`: true for the last rows of a suite whose file no longer loads (or is gone),
    # kept as they were (`stale_rows.flag_suite_partitions`); `stale_reason` says why
    "stale": pl.Boolean(),
    "stale_reason": pl.String(),
}

BENCHMARK_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.String(),
    "level": pl.String(),  # task | group | suite
    "name": pl.String(),  # the task's or group's name; the suite's own name at level 'suite'
    "model": pl.String(),
    "metric": pl.String(),
    "aggregate": pl.String(),  # mean | corpus (task) | macro | micro
    "value": pl.Float64(),
    "stderr": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n": pl.Int64(),  # cases with a value
    "n_failed": pl.Int64(),  # cases with no value and a FAILED row (pass@k rows: also those with < k scored samples)
    "n_skipped": pl.Int64(),  # cases all of whose rows were SKIPPED
    "cost_usd": pl.Float64(),
    "datasets": pl.String(),  # dataset@vN (sha256 prefix), every one the row covers
    "task_config_hash": pl.String(),
    "scorer_config_hash": pl.String(),
    "computed_at": UTC_TS,
    "k": pl.Int64(),  # the k of a `<metric>.pass@k` / `<metric>.pass^k` row (`pass_at`); null for other rows
    # issue 30: as `benchmark_cases.stale` and `leaderboard.stale` (a suite whose file no longer loads)
    "stale": pl.Boolean(),
    "stale_reason": pl.String(),
}

LEADERBOARD_SCHEMA: dict[str, pl.DataType] = {
    "suite": pl.String(),
    "aggregate": pl.String(),  # macro | micro
    "model": pl.String(),
    "rank": pl.Int64(),
    "score": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "n_cases": pl.Int64(),
    "tasks_scored": pl.Int64(),
    "tasks_total": pl.Int64(),
    "leader": pl.String(),
    "gap_to_leader": pl.Float64(),
    "gap_ci_low": pl.Float64(),
    "gap_ci_high": pl.Float64(),
    "paired_cases": pl.Int64(),
    "significant_vs_leader": pl.Boolean(),
    "cost_usd": pl.Float64(),
    "computed_at": UTC_TS,
    # true for a suite whose file no longer loads (or is gone): its last rows, kept as they were (`stale_rows`)
    "stale": pl.Boolean(),
    "stale_reason": pl.String(),  # why: the load error (file and field), or the file's absence
}


# ---- verdict export (`eval_platform.export`) ----

# The export ledger: one row per (destination, verdict) the export tried to send, partitioned by destination,
# evaluator and day. A verdict whose row says `sent` is never sent to that destination again; `failed` rows (and
# verdicts with no row) are sent by the next run. Only the export writes it; judge_scores is never touched.
VERDICT_EXPORT_SCHEMA: dict[str, pl.DataType] = {
    "destination": pl.String(),  # the destination's name in verdict_export.yaml
    "evaluator": pl.String(),
    "date": pl.String(),
    "verdict_key": pl.String(),  # the verdict's identity (export.verdicts.verdict_keys)
    "trace_id": pl.String(),  # judge_scores.trace_id
    "otel_trace_id": pl.String(),  # the app's trace the verdict was attached to
    "otel_span_id": pl.String(),  # the app's span the verdict was attached to
    "status": pl.String(),  # sent | failed
    "attempts": pl.Int64(),
    "first_attempt_at": UTC_TS,
    "last_attempt_at": UTC_TS,
    "sent_at": UTC_TS,  # null until sent
    "last_error": pl.String(),  # the last failed attempt's error (redacted); null once sent
}


# ---- the catalog ----


@dataclass(frozen=True)
class Table:
    """A warehouse table: its columns and what one row is (for a reader of this file and the README)."""

    schema: dict[str, pl.DataType]
    description: str
    # Not stored: a view over other tables, this query (the catalog creates it after the stored tables' views).
    view: str | None = None


TABLES: dict[str, Table] = {
    "traces": Table(TRACE_SCHEMA, "one normalized trace per row, partitioned by UTC day"),
    "spans": Table(
        SPAN_SCHEMA, "one span of an OTLP trace of `traces` (a view: the trace's `spans` unnested)", spans_view_sql()
    ),
    "quarantine": Table(QUARANTINE_SCHEMA, "one rejected input row (or file) with its reason and raw text"),
    "judge_scores": Table(
        JUDGE_SCORE_SCHEMA, "one verdict per (evaluator, trace, span, session or pair, model, sample)"
    ),
    "judge_scores_history": Table(
        JUDGE_SCORE_HISTORY_SCHEMA,
        "one superseded verdict: a judge_scores row of an earlier config hash of its evaluator and day",
    ),
    "judge_day_numbers": Table(
        JUDGE_DAY_NUMBERS_SCHEMA, "a judge_scores partition in numbers, per status, reason, model, variant and config"
    ),
    "test_cases": Table(TEST_CASE_SCHEMA, "one case of a dataset version"),
    "judge_cost_daily": Table(JUDGE_COST_DAILY_SCHEMA, "judge spend per UTC day, evaluator, model, project"),
    "judge_cost_parts": Table(
        JUDGE_COST_PARTS_SCHEMA, "one judge_scores file's spend per UTC day of judging, model, project (daily's input)"
    ),
    "judge_cost_monthly": Table(JUDGE_COST_MONTHLY_SCHEMA, "judge spend per UTC month, evaluator, model, project"),
    "app_cost_daily": Table(APP_COST_DAILY_SCHEMA, "the traced application's own spend per day, project, model"),
    "human_annotations": Table(HUMAN_ANNOTATION_SCHEMA, "one annotator's label for one item and criterion"),
    "agreement": Table(AGREEMENT_SCHEMA, "one agreement statistic per section, subject, reference and period"),
    "ground_truth": Table(GROUND_TRUTH_SCHEMA, "the human majority label per task, criterion and item"),
    "annotation_task_items": Table(ANNOTATION_TASK_ITEM_SCHEMA, "one item an annotation task hands to annotators"),
    "annotation_progress": Table(ANNOTATION_PROGRESS_SCHEMA, "progress and agreement of a task, per annotator"),
    "annotation_ground_truth": Table(
        ANNOTATION_GROUND_TRUTH_SCHEMA, "the consensus label of an annotation task's item and criterion"
    ),
    "imported_judgments": Table(IMPORTED_JUDGMENT_SCHEMA, "one verdict produced elsewhere, with its source"),
    "experiment_results": Table(EXPERIMENT_RESULT_SCHEMA, "per experiment, metric and variant: the analysis"),
    "alerts": Table(ALERT_SCHEMA, "one regression or threshold-rule breach of an evaluator on a day"),
    "anchor_verdicts": Table(ANCHOR_VERDICT_SCHEMA, "one anchor item's verdict in one drift check of an evaluator"),
    "judge_drift": Table(JUDGE_DRIFT_SCHEMA, "one drift check of an evaluator's anchors against its previous check"),
    "benchmark_cases": Table(BENCHMARK_CASE_SCHEMA, "one model output for one benchmark case and its scores"),
    "benchmark_results": Table(BENCHMARK_RESULT_SCHEMA, "one metric of a task, group or suite for one model"),
    "leaderboard": Table(LEADERBOARD_SCHEMA, "one model's rank in one suite"),
    "verdict_exports": Table(VERDICT_EXPORT_SCHEMA, "one verdict sent (or tried) to one export destination"),
}


def table_schemas() -> dict[str, dict[str, pl.DataType]]:
    """Table name -> columns, for every stored table of the catalog (each a folder of Parquet partitions)."""
    return {name: table.schema for name, table in TABLES.items() if table.view is None}


def derived_views() -> dict[str, str]:
    """View name -> query, for the catalog's views that are not stored (`spans`)."""
    return {name: table.view for name, table in TABLES.items() if table.view is not None}


def empty_frame(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def conform(df: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add missing columns as nulls, cast to the schema's dtypes and order columns as the schema does."""
    missing = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in schema.items() if name not in df.columns]
    if missing:
        df = df.with_columns(missing)
    return df.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])
