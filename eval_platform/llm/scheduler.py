"""Many model calls at once, their results handed on in the order they were started: `InOrder`.

What a judge day (or any caller with thousands of units of work, each a few calls) needs from the event loop:
units run at once up to a bound set by the endpoint's concurrency, the oldest unit's result is handed on first
(rows come out in the order the units were planned, whatever order the replies come in), what is held is
bounded (units started and not yet handed on), and a failure leaves no unit running behind it. It knows nothing
of what a unit is: a coroutine giving a result, and a function taking it.

While it runs, the garbage collector is tuned for a process allocating quickly (`calls_gc`), and left as found.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Units started and not yet handed on, at most: many times the concurrency, so that while the oldest unit
# waits (a retry, a slow reply) the others keep every slot busy; small enough to bound what is held.
IN_FLIGHT_UNITS = 4096
# Units running at once (calling, or waiting for a slot of the endpoint's limiter): RUNNING_PER_SLOT times the
# client's concurrency, at least RUNNING_MIN, so a freed slot is taken at once and units sleeping before a retry do
# not leave slots idle. More costs CPU for nothing: every unit past the slots waits in the limiter (a future, and a
# wake-up through its coroutines) and stays alive for the garbage collector to walk; 4,096 running instead of 512
# measured 3.3% more instructions per call at concurrency 128 (README, "Performance: judge throughput").
RUNNING_PER_SLOT = 4
RUNNING_MIN = 256


class InOrder(Generic[T]):
    """Units of work run at once, their results handed on in the order they were started.

    `async with InOrder(slots) as line:` (`slots`: the client's concurrency), then per unit
    `await line.start(work, take)` (`work` a coroutine, `take` called with its result in order; `start` waits
    while the line is full) and `line.then(callback)` to call `callback` once everything started before it is
    handed on (the end of a batch of units). Leaving the block waits for every unit and hands its result on; a
    failure (raised by the block, a unit or a `take`) cancels the units still running.
    """

    def __init__(self, slots: int) -> None:
        self._window = max(IN_FLIGHT_UNITS, 8 * slots)
        self._running_limit = min(self._window, max(RUNNING_MIN, RUNNING_PER_SLOT * slots))
        # The loop wakes once per `refill` finished units (not once per unit: a wake-up per call was a tenth of our
        # CPU per call), then hands on every finished unit at the head of the line and starts as many.
        self._refill = max(1, self._running_limit // 4)
        self._running = 0
        self._room = asyncio.Event()
        # In order: (a unit's task, what takes its result), or (None, a callback) queued by `then`.
        self._pending: deque[tuple[asyncio.Task[T] | None, Callable[..., None]]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gc: AbstractContextManager[None] | None = None

    async def __aenter__(self) -> InOrder[T]:
        # Once: `asyncio.create_task` looks the loop up per task (a getpid() in Python 3.11).
        self._loop = asyncio.get_running_loop()
        self._gc = calls_gc()
        self._gc.__enter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            if kind is None:
                await self._settle(0)
        finally:
            for task, _ in self._pending:  # a failure: the units still running are not left behind
                if task is not None:
                    task.cancel()
            if self._gc is not None:
                self._gc.__exit__(None, None, None)

    async def start(self, work: Coroutine[Any, Any, T], take: Callable[[T], None]) -> None:
        """Start `work` once there is room; `take` gets its result after every unit started before it."""
        assert self._loop is not None, "InOrder.start outside `async with`"
        if self._running >= self._running_limit:
            self._room.clear()
            await self._room.wait()
            self._take_done()
        if len(self._pending) >= 4 * self._window:  # the oldest unit holds the line (a slow retry): wait for it
            await self._settle(3 * self._window)
        task = self._loop.create_task(work)
        task.add_done_callback(self._finished)
        self._running += 1
        self._pending.append((task, take))

    def then(self, callback: Callable[[], None]) -> None:
        """Call `callback` once every unit started so far is handed on."""
        self._pending.append((None, callback))

    def _finished(self, _task: asyncio.Task[T]) -> None:
        self._running -= 1
        if self._running <= self._running_limit - self._refill:
            self._room.set()

    @staticmethod
    def _take(task: asyncio.Task[T] | None, take: Callable[..., None]) -> None:
        if task is None:
            take()
        else:
            take(task.result())

    def _take_done(self) -> None:
        pending = self._pending
        while pending and (pending[0][0] is None or pending[0][0].done()):
            self._take(*pending.popleft())

    async def _settle(self, limit: int) -> None:
        """Hand on the oldest units' results, in order, until at most `limit` remain pending."""
        pending = self._pending
        while len(pending) > limit:
            task, _ = pending[0]
            if task is not None:
                await asyncio.wait([task])
            self._take(*pending.popleft())


# Many calls allocate objects quickly (traces, prompts, requests, replies, rows, futures: hundreds of calls a
# second), and each full collection of the cyclic garbage collector walks every object of the process (the loaded
# modules, the day's traces and prompts): measured, ~0.1 ms of CPU per call at concurrency 128, a fifth of the judge
# path. Measured again (issue 33: `tools.perf.judge_throughput --traces 2000 --before` a copy without it, on a
# loaded machine): 0.56 ms of CPU per call with it, 0.85 ms without.
# While calls run, what existed before them is frozen (`gc.freeze`: kept out of collections, not collected until it
# is unfrozen) and the youngest generation collects every CALLS_GC_THRESHOLD allocations instead of 700; both are
# restored when the last running `calls_gc` ends. Cyclic garbage is still collected, later. Scoped: the process's
# collector is left as found: its thresholds are restored; a process that froze objects itself keeps its freeze
# (nothing is frozen or unfrozen then), and a collector turned off (or threshold 0) is not touched.
CALLS_GC_THRESHOLD = 10_000
_gc_lock = threading.Lock()
_gc_users = 0
_gc_previous: tuple[tuple[int, int, int], bool] | None = None  # (thresholds, whether this froze the heap)


@contextmanager
def calls_gc() -> Iterator[None]:
    global _gc_users, _gc_previous
    with _gc_lock:
        if _gc_users == 0:
            threshold = gc.get_threshold()
            tune = gc.isenabled() and threshold[0] > 0  # a collector turned off stays off
            freeze = tune and gc.get_freeze_count() == 0
            _gc_previous = (threshold, freeze)
            if freeze:
                gc.freeze()
            if tune:
                gc.set_threshold(max(CALLS_GC_THRESHOLD, threshold[0]), *threshold[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0 and _gc_previous is not None:
                threshold, froze = _gc_previous
                _gc_previous = None
                gc.set_threshold(*threshold)
                if froze:
                    gc.unfreeze()
