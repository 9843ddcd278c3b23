"""Before spending, know the bill: how many judge calls a backfill would make and their worst-case cost, or what a
benchmark suite would cost for the models under test.

    python -m eval_platform.dry_run --start 2026-11-09 --end 2026-11-15 [--evaluator helpfulness ...]
    python -m eval_platform.dry_run --suite gsm8k [--model gpt-4o-mini ...]

Nothing is called. The evaluators' own planning runs exactly as in a real run (trigger and sampling,
models x samples, both pairwise orders, n_wise permutations, budgets aside), through a client that records
each request instead of sending it; requests the judge-call cache already answers cost nothing. Each
recorded call is priced at its worst case, the same bound a budget reserves (every prompt byte a token, the
full max_tokens), from litellm's price map or the evaluator's explicit prices. Keys are assumed present:
the bill is the live provider's, not the local judge's.

A suite is planned task by task in dependency order through the benchmark runner itself (`run_task`), with the
same recording client: the model's calls and, for tasks scored by a judge evaluator, the judge's calls. Gates
are assumed passed. Outputs do not exist before the run, so a judge that scores generated outputs is priced with
each output at `OUTPUT_BYTES_PER_TOKEN` bytes per `max_tokens` token of the task that generates it, then, like
every prompt, a byte per token: an estimate, unlike the rest of the bill, which is a bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import partial
from pathlib import Path

import polars as pl

from eval_platform.benchmarks.config import (
    ModelUnderTest,
    Suite,
    load_models,
    load_suites,
    upstream,
)
from eval_platform.benchmarks.runner import TaskRun, run_task
from eval_platform.ingest.traces import stream_trace_day
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.evaluator_day import READ_BATCH_ROWS, judged_batches
from eval_platform.judging.loading import load_evaluators
from eval_platform.judging.runner import judge_stream
from eval_platform.llm import pricing
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import BeforeSend, CallOutcome, ModelRequest
from eval_platform.llm.embeddings import EmbeddingRequest
from eval_platform.llm.endpoint import model_endpoint
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import SKIPPED
from eval_platform.settings import EVALUATORS_FOLDER, DataRootError, checked_data_root, start_date, state_dir
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import iter_partition


class CountingCache(ModelCache):
    """The real judge-call cache, read only, counting the requests it answers."""

    def __init__(self, directory: Path, missed: set[int] | None = None):
        super().__init__(directory)
        self.hits = 0
        # distinct requests (samples included) the cache does not answer: the first 64 bits of their keys (sha256);
        # `missed`: a set shared with the other days of the run, where a run's cache answers what an earlier day paid
        self.missed: set[int] = set() if missed is None else missed

    def get(self, key: str):
        entry = super().get(key)
        self.hits += entry is not None
        if entry is None:
            self.missed.add(int(key[:16], 16))
        return entry

    def put(self, key: str, entry) -> None:  # a dry run writes nothing
        return None


class RecordingClient:
    """A judge client that sends nothing: it records each request and answers with a failure, or with `stand_in`
    as the reply when one is given (a benchmark's outputs, for the tasks and judges that read them)."""

    def __init__(
        self, stand_in: str | None = None, record: Callable[[ModelRequest | EmbeddingRequest], None] | None = None
    ) -> None:
        self.requests: list[ModelRequest | EmbeddingRequest] = []
        self.record = record or self.requests.append  # `record`: each request handed on, none kept
        self.calls = 0
        self.stand_in = stand_in
        self.closed_after: int | None = None  # requests made before the client was first closed

    async def complete(
        self, request: ModelRequest | EmbeddingRequest, before_send: BeforeSend | None = None
    ) -> CallOutcome:
        self.record(request)
        self.calls += 1
        if self.stand_in is not None and not isinstance(request, EmbeddingRequest):  # a stand-in is text, no vectors
            return CallOutcome(content=self.stand_in, attempts=1)
        return CallOutcome(error_reason="dry_run", error_detail="not sent: dry run", attempts=1)

    async def aclose(self) -> None:  # the benchmark runner closes its client once the model's calls are done
        if self.closed_after is None:
            self.closed_after = self.calls


@dataclass
class Bill:
    evaluator: str
    days: int = 0
    traces: int = 0
    calls: int = 0  # requests the run would send: an upper bound
    distinct: int = 0  # of which distinct: what the run sends (identical requests are sent once, see `llm.call`)
    cached: int = 0  # requests the cache already answers: free
    worst_case_usd: float = 0.0
    unpriced_calls: int = 0  # calls to a model with no known price: their cost is unknown, not zero
    by_model: dict[str, int] = field(default_factory=dict)


def _days(start: str, end: str) -> list[str]:
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _prices(configs: Iterable[EvaluatorConfig], request: ModelRequest | EmbeddingRequest) -> pricing.Prices | None:
    """The request's price: its judge model's explicit prices in these evaluators, else litellm's map."""
    for config in configs:
        for spec in config.judge_models():
            if spec.model == request.model:
                return spec.prices()
    return pricing.lookup(request.model, request.api_base)


def _day_batches(stack: ExitStack, root: DataRoot, day: str) -> Iterator[pl.DataFrame] | None:
    """A day's traces a batch at a time, as ingested, else as its export files would be ingested (read a chunk
    at a time, `stream_trace_day`, open until `stack` closes); None when it has neither."""
    batches = iter_partition(root, "traces", {"date": day}, READ_BATCH_ROWS)
    if batches is not None:
        return batches
    if not (root.path / "traces" / day).is_dir():
        return None
    return stack.enter_context(stream_trace_day(root.path, day)).traces()


def _counted(batches: Iterable[pl.DataFrame], counts: list[int]) -> Iterator[pl.DataFrame]:
    for batch in batches:
        counts[0] += batch.height
        yield batch


def estimate(config: EvaluatorConfig, days: list[str], root: DataRoot) -> Bill:
    """The calls a run of `config` over `days` would make, and their worst-case cost; nothing is sent. A day is
    read and planned a batch at a time, as a run reads it (`judged_batches`), and each request is priced as it is
    recorded, so the memory a day takes does not grow with it (but for the set of distinct requests' 64-bit
    digests, 8 bytes and a set slot per distinct request)."""
    bill = Bill(config.name)
    # Nothing is sent, not even a batch: a batch evaluator's calls are recorded one by one, at its discount.
    discount = config.batch.discount if config.batch is not None and config.batched else 1.0
    config = config.model_copy(update={"batch": None})
    # Keys are assumed present, so that the plan is the live provider's.
    env = {**os.environ, **{spec.api_key_env: "dry-run" for spec in config.judge_models() if spec.api_key_env}}

    def priced(request: ModelRequest | EmbeddingRequest) -> None:
        if not isinstance(request, ModelRequest):  # a judge sends chat requests; its worst case is priced on them
            raise TypeError(f"the dry run prices a judge's chat requests; {request.model} was asked for embeddings")
        bill.calls += 1
        bill.by_model[request.model] = bill.by_model.get(request.model, 0) + 1
        prices = _prices([config], request)
        if prices is None:
            bill.unpriced_calls += 1
        else:
            bill.worst_case_usd += pricing.worst_case_cost(prices, request.messages, request.max_tokens) * discount

    missed: set[int] = set()  # distinct over the run's days: a day's replies answer the next days' from the cache
    with tempfile.TemporaryDirectory() as scratch:
        for day in days:
            with ExitStack() as stack:
                raw = _day_batches(stack, root, day)
                if raw is None:
                    continue
                in_day = [0]
                # A session's prompt holds its earlier days' turns too: priced on them, read as a run would read
                # them (or from the export files when not ingested yet), never on the day's turns alone.
                batches, _ = judged_batches(
                    root, config, day, _counted(raw, in_day), other_day=partial(_day_batches, stack, root)
                )
                cache = CountingCache(state_dir(root.path) / "judge_cache", missed)
                runtime = ModelRuntime(
                    client=RecordingClient(record=priced),
                    cache=cache,  # read only: what it answers is free
                    ledger=BudgetLedger(Path(scratch) / "budget.sqlite"),  # never the real ledger
                    env=env,
                )
                judge_stream(config, day, batches, runtime, None, lambda _rows: None)
                if not in_day[0]:
                    continue
                bill.days += 1
                bill.traces += in_day[0]
                bill.cached += cache.hits
    bill.distinct = len(missed)
    return bill


OUTPUT_BYTES_PER_TOKEN = 4  # a generated output's stand-in size per max_tokens token (see the module doc)
DRY_RUN_KEY = "dry-run"


@dataclass
class TaskBill:
    suite: str
    task: str
    model: str
    cases: int = 0  # rows of the task: case x sample (x presentation order)
    model_calls: int = 0  # to the model under test
    judge_calls: int = 0  # to the judge evaluators that score the task
    distinct: int = 0
    cached: int = 0
    worst_case_usd: float = 0.0
    unpriced_calls: int = 0
    skipped: int = 0  # rows the run would not call for (out of the model's scope, a missing field, ...)
    out_of_scope: bool = False  # models.yaml's `only` leaves this task out for this model


def estimate_suite(
    root: Path,
    suite_name: str,
    suite: Suite,
    model_name: str,
    model: ModelUnderTest,
    evaluators: dict[str, EvaluatorConfig],
) -> list[TaskBill]:
    """The calls one model's run of a suite would make, task by task, and their worst-case cost; nothing is sent."""
    # Budgets are left out: a dry run never writes the benchmark ledger (and reports what a budget would cap).
    model = model.model_copy(update={"max_daily_cost_usd": None, "max_monthly_cost_usd": None})
    env = {**os.environ, **({model.api_key_env: DRY_RUN_KEY} if model.api_key_env else {})}
    env |= {
        spec.api_key_env: DRY_RUN_KEY
        for config in evaluators.values()
        for spec in config.judge_models()
        if spec.api_key_env
    }
    edges, bills = upstream(suite), []
    done: set[str] = set()
    outputs: dict[str, pl.DataFrame | None] = {}
    order: list[str] = []
    while len(order) < len(suite.tasks):  # dependency order (load_suites refuses cycles)
        ready = sorted(t for t in suite.tasks if t not in done and all(u in done for u in edges[t]))
        order += ready
        done |= set(ready)
    with tempfile.TemporaryDirectory() as scratch:
        for task_name in order:
            task = suite.tasks[task_name]
            # The model's replies are stand-ins of their worst size, so the judges scoring them (in this task or a
            # later one) are planned and priced as in a real run.
            client = RecordingClient(stand_in="x" * (OUTPUT_BYTES_PER_TOKEN * task.max_tokens))
            cache = CountingCache(state_dir(root) / "judge_cache")
            runtime = ModelRuntime(
                client=client,
                cache=cache,
                ledger=BudgetLedger(Path(scratch) / "budget.sqlite"),
                env=env,
                local_judge_url="http://127.0.0.1:9/v1",
            )  # never called: nothing is sent
            run = TaskRun(
                root,
                suite_name,
                suite,
                task_name,
                model_name,
                model,
                runtime,
                evaluators,
                upstream_rows=outputs.get(task.outputs_of) if task.outputs_of else None,
                gate_value=float("inf") if task.gate else None,
            )
            outputs[task_name] = frame = run_task(run)
            bill = TaskBill(
                suite_name, task_name, model_name, cases=frame.height, cached=cache.hits, distinct=len(cache.missed)
            )
            bill.skipped = int((frame["status"] == SKIPPED).sum())
            bill.out_of_scope = not model.runs(suite_name, task_name)
            endpoint, _ = model_endpoint(model.address(), runtime) if task.calls_model else (None, None)
            split = (client.closed_after or 0) if task.calls_model else 0  # the model's calls come first
            for i, request in enumerate(client.requests):
                if i < split:
                    bill.model_calls += 1
                    prices = endpoint.prices if endpoint is not None else None
                else:
                    bill.judge_calls += 1
                    prices = _prices(evaluators.values(), request)
                if prices is None:
                    bill.unpriced_calls += 1
                else:
                    bill.worst_case_usd += pricing.worst_case_cost(prices, request.messages, request.max_tokens)
            bills.append(bill)
    return bills


def _evaluators(root: Path) -> tuple[dict[str, EvaluatorConfig], dict[str, str]]:
    """The evaluators that load, and the files that do not (file name -> the error naming its field), each named
    on stdout: a broken file leaves only itself out, as in the UI."""
    broken: dict[str, str] = {}
    evaluators = load_evaluators(root / EVALUATORS_FOLDER, broken=broken)
    if broken:
        print(f"left out, broken in {EVALUATORS_FOLDER}/ ({len(broken)} file(s)):")
        for error in broken.values():
            print(f"  {error}")
        print()
    return evaluators, broken


def _bounded_days(parser: argparse.ArgumentParser, start: str, end: str, first_day: str) -> list[str]:
    """The days from `start` to `end`, refused (exit 2) unless every one is a day partition from `first_day` (the
    start date the caller read once): a day outside them can be neither ingested nor judged, so its price would be
    a bill never sent. The message names the setting."""
    from eval_platform.defs.partitions import not_a_trace_day, trace_days  # Dagster's: imported only when asked

    try:
        days = _days(start, end)
    except ValueError as exc:
        parser.error(f"--start and --end are days, YYYY-MM-DD ({exc})")
    if not days:
        parser.error(f"--end ({end}) is before --start ({start})")
    partitions = trace_days(first_day)
    outside = [why for why in (not_a_trace_day(day, partitions) for day in (days[0], days[-1])) if why is not None]
    if outside:
        parser.error("no partition to price: " + "; ".join(outside))
    return days


def _suite_main(parser: argparse.ArgumentParser, args: argparse.Namespace, root: Path) -> int:
    evaluators, broken_evaluators = _evaluators(root)
    suites, broken = load_suites(root / "benchmarks", root, set(evaluators))
    if args.suite not in suites:
        why = f" ({broken[args.suite]})" if args.suite in broken else ""
        parser.error(f"no suite named {args.suite}{why}; known: {', '.join(sorted(suites))}")
    broken_models: dict[str, str] = {}
    models = load_models(root / "benchmarks" / "models.yaml", broken_models)
    names = args.model or sorted(models)
    if set(broken_models) & set(names):
        parser.error(
            "; ".join(f"model {n} cannot run: {broken_models[n]}" for n in sorted(set(broken_models) & set(names)))
        )
    if broken_models and not args.model:
        print(f"left out, broken in benchmarks/models.yaml: {', '.join(sorted(broken_models))}\n")
    unknown = sorted(set(names) - set(models))
    if unknown:
        parser.error(
            f"no model named {', '.join(unknown)} in benchmarks/models.yaml; known: {', '.join(sorted(models))}"
        )
    print(f"dry run of suite {args.suite} for {len(names)} model(s), data root {root}: nothing is sent\n")
    w = max(16, *(len(t) + 2 for t in suites[args.suite].tasks))
    print(
        f"{'model':<34}{'task':<{w}}{'rows':>7}{'model calls':>12}{'judge calls':>12}{'distinct':>9}{'cached':>8}"
        f"{'worst case $':>14}"
    )
    total, unpriced, estimated, outside = 0.0, 0, False, []
    for name in names:
        bills = estimate_suite(root, args.suite, suites[args.suite], name, models[name], evaluators)
        if all(bill.out_of_scope for bill in bills):
            outside.append(name)
            continue
        subtotal = 0.0
        for bill in bills:
            subtotal += bill.worst_case_usd
            unpriced += bill.unpriced_calls
            estimated |= bill.judge_calls > 0 and suites[args.suite].tasks[bill.task].outputs_of is not None
            scope = "   (not in the model's scope)" if bill.out_of_scope else ""
            print(
                f"{name:<34}{bill.task:<{w}}{bill.cases:>7}{bill.model_calls:>12}{bill.judge_calls:>12}"
                f"{bill.distinct:>9}{bill.cached:>8}{bill.worst_case_usd:>14.4f}{scope}"
            )
        total += subtotal
        limits = [
            f"{kind} {value:g} USD"
            for kind, value in (
                ("daily budget", models[name].max_daily_cost_usd),
                ("monthly budget", models[name].max_monthly_cost_usd),
            )
            if value is not None
        ]
        print(
            f"{name:<34}{'(all tasks)':<{w}}{'':>55}{subtotal:>14.4f}"
            + (f"   capped by its {', '.join(limits)}" if limits else "")
        )
    if outside:
        print(f"\nnot in this suite's scope (models.yaml `only`), nothing to call: {', '.join(outside)}")
    print(
        f"\nworst case in all: {total:.4f} USD (every call sent, every prompt byte a token, "
        "full max_tokens, gates passed)"
    )
    if estimated:
        print(
            f"judge calls on generated outputs: each output priced as {OUTPUT_BYTES_PER_TOKEN} "
            "bytes per max_tokens token "
            "(an estimate: outputs do not exist before the run)"
        )
    if unpriced:
        print(f"{unpriced} call(s) go to models with no known price: their cost is unknown, not counted as 0")
    return 1 if broken_evaluators and args.strict else 0


def main(argv: list[str] | None = None) -> int:
    # EVAL_PLATFORM_START_DATE, read once as the command starts (as `build_definitions` reads it), then passed on
    first_day = start_date()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", help="first day, YYYY-MM-DD")
    parser.add_argument("--end", help="last day, YYYY-MM-DD (inclusive)")
    parser.add_argument("--evaluator", action="append", help="an evaluator name (repeatable); default: all enabled")
    parser.add_argument("--suite", help="a benchmark suite (data/benchmarks/<suite>.yaml) instead of a judge backfill")
    parser.add_argument(
        "--model", action="append", help="with --suite: a model of models.yaml (repeatable); default: all"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when an evaluator file is broken (the others are still priced)"
    )
    args = parser.parse_args(argv)
    try:
        root = checked_data_root()
    except DataRootError as exc:
        parser.error(str(exc))
    if args.suite:
        return _suite_main(parser, args, root)
    if not (args.start and args.end):
        parser.error("give --start and --end (a judge backfill), or --suite (a benchmark suite)")
    days = _bounded_days(parser, args.start, args.end, first_day)
    evaluators, broken = _evaluators(root)
    names = args.evaluator or [name for name, config in evaluators.items() if config.enabled]
    unknown = sorted(set(names) - set(evaluators))
    if unknown:
        # a named evaluator whose file is broken: its own error (the file is named after the evaluator)
        why = [
            f"evaluator {name} cannot be priced: {error}"
            for name in unknown
            for file, error in broken.items()
            if Path(file).stem == name
        ]
        parser.error(
            "; ".join(why)
            if len(why) == len(unknown)
            else f"no evaluator named {', '.join(unknown)}; known: {', '.join(sorted(evaluators)) or 'none'}"
        )
    if not evaluators:
        cause = f"{len(broken)} broken file(s), above" if broken else "no *.yaml file"
        print(f"nothing to price: no evaluator loads from {root / EVALUATORS_FOLDER} ({cause})", file=sys.stderr)
        return 1
    if not names:
        print(f"no enabled evaluator in {root / EVALUATORS_FOLDER}: name one with --evaluator to price it\n")
    print(f"dry run over {days[0]}..{days[-1]} ({len(days)} days), data root {root}: nothing is sent\n")
    print(f"{'evaluator':<22}{'days':>5}{'traces':>8}{'calls':>8}{'distinct':>9}{'cached':>8}{'worst case $':>14}")
    where = DataRoot.from_env(root)  # this command's warehouse: the environment's store
    total = 0.0
    unpriced = 0
    for name in names:
        bill = estimate(evaluators[name], days, where)
        total += bill.worst_case_usd
        unpriced += bill.unpriced_calls
        print(
            f"{name:<22}{bill.days:>5}{bill.traces:>8}{bill.calls:>8}{bill.distinct:>9}{bill.cached:>8}"
            f"{bill.worst_case_usd:>14.4f}"
        )
    print(f"\nworst case in all: {total:.4f} USD (every call sent, every prompt byte a token, full max_tokens)")
    print(
        "calls: the requests the run plans; distinct: those it sends and pays for (an identical request is sent "
        "once: it waits for the one in flight, or the cache answers it)"
    )
    if unpriced:
        print(f"{unpriced} call(s) go to models with no known price: their cost is unknown, not counted as 0")
    if broken:
        print(f"{len(broken)} broken evaluator file(s) left out of this bill (listed above)")
        if args.strict:
            return 1
    return 0


if __name__ == "__main__":
    from eval_platform.startup import start_process

    start_process()
    sys.exit(main())
