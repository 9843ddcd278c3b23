"""Before spending, know the bill: how many judge calls a backfill would make and their worst-case cost.

    python -m eval_platform.dry_run --start 2026-11-09 --end 2026-11-15 [--evaluator helpfulness ...]

Nothing is called. The evaluators' own planning runs exactly as in a real run (trigger and sampling,
models x samples, both pairwise orders, n_wise permutations, budgets aside), through a client that records
each request instead of sending it; requests the judge-call cache already answers cost nothing. Each
recorded call is priced at its worst case, the same bound a budget reserves (every prompt byte a token, the
full max_tokens), from litellm's price map or the evaluator's explicit prices. Keys are assumed present:
the bill is the live provider's, not the local judge's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from eval_platform.ingest.traces import read_trace_day
from eval_platform.judging import pricing
from eval_platform.judging.budget import BudgetLedger
from eval_platform.judging.cache import JudgeCache
from eval_platform.judging.client import CallOutcome, JudgeRequest
from eval_platform.judging.config import EvaluatorConfig, load_evaluators
from eval_platform.judging.runner import JudgeRuntime, judge_day, worst_case_prompt_tokens
from eval_platform.settings import data_root, state_dir
from eval_platform.storage.warehouse import read_partition


class CountingCache(JudgeCache):
    """The real judge-call cache, read only, counting the requests it answers."""

    def __init__(self, directory: Path):
        super().__init__(directory)
        self.hits = 0
        self.missed: set[str] = set()  # distinct requests (samples included) the cache does not answer

    def get(self, key: str):
        entry = super().get(key)
        self.hits += entry is not None
        if entry is None:
            self.missed.add(key)
        return entry

    def put(self, key: str, entry) -> None:  # a dry run writes nothing
        return None


class RecordingClient:
    """A judge client that sends nothing: it records each request and answers with a failure."""

    def __init__(self) -> None:
        self.requests: list[JudgeRequest] = []

    async def complete(self, request: JudgeRequest, before_send=None) -> CallOutcome:
        self.requests.append(request)
        return CallOutcome(error_reason="dry_run", error_detail="not sent: dry run", attempts=1)


@dataclass
class Bill:
    evaluator: str
    days: int = 0
    traces: int = 0
    calls: int = 0  # requests the run would send: an upper bound
    distinct: int = 0  # of which distinct: identical ones may be answered by the cache within the run
    cached: int = 0  # requests the cache already answers: free
    worst_case_usd: float = 0.0
    unpriced_calls: int = 0  # calls to a model with no known price: their cost is unknown, not zero
    by_model: dict[str, int] = field(default_factory=dict)


def _days(start: str, end: str) -> list[str]:
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _prices(config: EvaluatorConfig, request: JudgeRequest) -> pricing.Prices | None:
    for spec in config.judge_models():
        if spec.model == request.model:
            return spec.prices()
    return pricing.lookup(request.model, request.api_base)


def estimate(config: EvaluatorConfig, days: list[str], root: Path) -> Bill:
    """The calls a run of `config` over `days` would make, and their worst-case cost; nothing is sent."""
    bill = Bill(config.name)
    # Nothing is sent, not even a batch: a batch evaluator's calls are recorded one by one, at its discount.
    discount = config.batch.discount if config.batched else 1.0
    config = config.model_copy(update={"batch": None})
    # Keys are assumed present, so that the plan is the live provider's.
    env = {**os.environ, **{spec.api_key_env: "dry-run" for spec in config.judge_models() if spec.api_key_env}}
    with tempfile.TemporaryDirectory() as scratch:
        for day in days:
            traces = read_partition(root, "traces", {"date": day})
            if traces is None:
                traces = read_trace_day(root, day).traces
            if traces.height == 0:
                continue
            client = RecordingClient()
            cache = CountingCache(state_dir(root) / "judge_cache")
            runtime = JudgeRuntime(
                client=client,
                cache=cache,  # read only: what it answers is free
                ledger=BudgetLedger(Path(scratch) / "budget.sqlite"),  # never the real ledger
                env=env,
            )
            judge_day(config, day, traces, runtime)
            bill.days += 1
            bill.traces += traces.height
            bill.cached += cache.hits
            bill.distinct += len(cache.missed)
            for request in client.requests:
                bill.calls += 1
                bill.by_model[request.model] = bill.by_model.get(request.model, 0) + 1
                prices = _prices(config, request)
                if prices is None:
                    bill.unpriced_calls += 1
                else:
                    worst = prices.cost(worst_case_prompt_tokens(request.messages), request.max_tokens)
                    bill.worst_case_usd += worst * discount
    return bill


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", required=True, help="first day, YYYY-MM-DD")
    parser.add_argument("--end", required=True, help="last day, YYYY-MM-DD (inclusive)")
    parser.add_argument("--evaluator", action="append", help="an evaluator name (repeatable); default: all enabled")
    args = parser.parse_args(argv)
    root = data_root()
    evaluators = load_evaluators(root / "evaluators")
    names = args.evaluator or [name for name, config in evaluators.items() if config.enabled]
    unknown = sorted(set(names) - set(evaluators))
    if unknown:
        parser.error(f"no evaluator named {', '.join(unknown)}; known: {', '.join(sorted(evaluators))}")
    days = _days(args.start, args.end)
    print(f"dry run over {days[0]}..{days[-1]} ({len(days)} days), data root {root}: nothing is sent\n")
    print(f"{'evaluator':<22}{'days':>5}{'traces':>8}{'calls':>8}{'distinct':>9}{'cached':>8}{'worst case $':>14}")
    total = 0.0
    unpriced = 0
    for name in names:
        bill = estimate(evaluators[name], days, root)
        total += bill.worst_case_usd
        unpriced += bill.unpriced_calls
        print(
            f"{name:<22}{bill.days:>5}{bill.traces:>8}{bill.calls:>8}{bill.distinct:>9}{bill.cached:>8}"
            f"{bill.worst_case_usd:>14.4f}"
        )
    print(f"\nworst case in all: {total:.4f} USD (every call sent, every prompt byte a token, full max_tokens)")
    print("calls: what the run may send; distinct: identical requests may be answered by the cache within the run")
    if unpriced:
        print(f"{unpriced} call(s) go to models with no known price: their cost is unknown, not counted as 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
