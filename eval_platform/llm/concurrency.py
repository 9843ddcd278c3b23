"""How many judge calls one endpoint gets at once: adaptive (AIMD), paused by Retry-After, retries first.

A provider that answers 429 is saying "slower". Keeping the same concurrency makes a rate-limited day
hammer it: every new call meets the same limit, and the retries wait behind a queue of new calls. Per
endpoint (model string) and event loop, the `EndpointLimiter`:
- pauses every call to the endpoint until the Retry-After has passed (not only the call that got the 429);
- halves its concurrency on a 429 (multiplicative decrease, at most once per pause, never below 1) and adds
  one slot per `limit` successes (additive increase) back up to the configured maximum;
- hands a free slot to a waiting retry before any new call, oldest first within each kind.
"""

from __future__ import annotations

import asyncio
from collections import deque

RETRY, NEW = 0, 1  # priorities: lower goes first


class EndpointLimiter:
    def __init__(self, max_concurrency: int, adaptive: bool = True):
        self.max_concurrency = max_concurrency
        self.adaptive = adaptive
        self.limit = float(max_concurrency)
        self.in_flight = 0
        self.paused_until = 0.0
        self.decreases = 0
        self._cooldown_until = 0.0
        # Waiting calls per priority (RETRY, NEW), oldest first: a deque each, so a hand-over costs the same with
        # thousands waiting (a day's calls all wait here at once).
        self._waiters: tuple[deque[asyncio.Future], deque[asyncio.Future]] = (deque(), deque())
        self._timer: asyncio.TimerHandle | None = None
        # The event loop it serves (a limiter is per loop: `client.limiter`), taken on first use. In Python 3.11
        # `asyncio.get_running_loop()` is a getpid() system call each time, and a call asked for it ~10 times.
        self._bound_loop: asyncio.AbstractEventLoop | None = None

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._bound_loop
        if loop is None:
            loop = self._bound_loop = asyncio.get_running_loop()
        return loop

    @property
    def capacity(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self, priority: int = NEW) -> None:
        loop = self._loop()
        retries, new = self._waiters
        if not retries and not new and self.in_flight < self.capacity and not self._paused(loop):
            self.in_flight += 1
            return
        future = loop.create_future()
        (retries if priority == RETRY and self.adaptive else new).append(future)
        self._dispatch()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was granted as the waiter was cancelled: give it back
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._dispatch()

    def _paused(self, loop: asyncio.AbstractEventLoop) -> bool:
        # Never rate limited (the usual case): no clock read.
        return bool(self.paused_until) and loop.time() < self.paused_until

    def _dispatch(self) -> None:
        retries, new = self._waiters
        if not retries and not new:
            return
        loop = self._loop()
        if self._paused(loop):
            if self._timer is None:
                self._timer = loop.call_later(self.paused_until - loop.time(), self._resume)
            return
        capacity = self.capacity
        while self.in_flight < capacity and (retries or new):
            future = (retries or new).popleft()
            if future.done():
                continue  # cancelled while waiting
            self.in_flight += 1
            future.set_result(None)

    def _resume(self) -> None:
        self._timer = None
        self._dispatch()

    def rate_limited(self, retry_after_s: float | None) -> None:
        """A 429: pause the endpoint for the Retry-After and halve the concurrency (once per pause)."""
        if not self.adaptive:
            return
        now = self._loop().time()
        pause = retry_after_s if retry_after_s is not None else 1.0
        self.paused_until = max(self.paused_until, now + pause)
        if now >= self._cooldown_until:
            self.limit = max(1.0, self.limit / 2)
            self.decreases += 1
            self._cooldown_until = now + max(pause, 0.5)

    def succeeded(self) -> None:
        if self.adaptive and self.limit < self.max_concurrency:
            self.limit = min(float(self.max_concurrency), self.limit + 1.0 / self.limit)
            self._dispatch()
