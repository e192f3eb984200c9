"""How many calls one model endpoint gets at once, and how fast: the policy, in one place.

An `Endpoint` is a gate every call to one model server passes through (`async with
endpoint.slot(tokens) as slot`). It keeps

- an adaptive concurrency limit (AIMD, as TCP congestion control and Phoenix evals' executors
  do): it starts at `initial`, grows by one for each success until the first sign of overload
  (slow start), then by one per limit's worth of successes (one per round trip); it is cut
  by `decrease` (default half) on a 429, a 503 or a timeout, at most once per `cooldown_s`
  (one burst of rejections is one signal), never below 1 nor above `maximum`;
- an endpoint-wide pause: a Retry-After from the server holds every new call to this
  endpoint, not only the one that was told;
- a pace, once a 429 says the provider limits the request rate: calls then start evenly spaced
  (bursts are what a strict rate limit rejects), at 90 % of the rate that was succeeding; it
  doubles each second (one per success) until the next 429, is cut by 15 % at each 429 burst,
  and otherwise grows by one call per second each second (AIMD on the rate, as Phoenix evals'
  adaptive token bucket does). A 429 moves the pace; a 503 or a timeout moves the concurrency;
- recovery after an outage: where calls were refused for `outage_s` or more with none succeeding
  (a provider refusing everything for a while), the cuts during it say nothing of the capacity or
  the rate the endpoint takes once it answers again, so the first success after it starts a slow
  start again (as TCP does after a retransmission timeout): the concurrency and the pace double
  each round trip back to one cut below what succeeded before the outage, then grow as before;
- optional requests-per-minute and tokens-per-minute limits (aiolimiter's leaky buckets).

One Endpoint serves one event loop (a process's CLI run, API server or worker). Judges know
nothing of the policy: they report each attempt's outcome on the slot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from aiolimiter import AsyncLimiter
from pydantic import BaseModel

log = logging.getLogger("framejudge.endpoint")


class EndpointState(BaseModel):
    """What an endpoint's controller is doing now (the CLI's bar, /readyz, metrics)."""

    name: str
    limit: int
    maximum: int
    in_flight: int
    pace_per_s: float | None  # calls started per second, once a 429 asked for a pace
    paused_for_s: float
    successes: int
    overloads: int
    failures: int
    decreases: int


RECENT_S = 2.0  # the window over which the succeeding rate is measured
PACE_START = 0.9  # the first pace: this share of the rate that was succeeding
PACE_CUT = 0.85  # each later 429 burst
MIN_PACE = 0.05  # calls per second
OUTAGE_S = 10.0  # refused this long with no success: an outage, recovered from by a slow start


class EndpointBusy(TimeoutError):
    """No place at the endpoint within the time the caller could wait: `limited` when the server
    or a rate limit held it (a Retry-After pause, requests or tokens per minute), not when the
    calls in flight simply did not finish in time."""

    def __init__(self, message: str, limited: bool) -> None:
        super().__init__(message)
        self.limited = limited


def _bucket(per_minute: float | None) -> AsyncLimiter | None:
    """Requests: a leaky bucket of `per_minute` with about one second's worth of burst (at least 1)."""
    if per_minute is None:
        return None
    capacity = max(1.0, per_minute / 60)
    return AsyncLimiter(capacity, capacity * 60 / per_minute)


def _token_bucket(per_minute: float | None) -> AsyncLimiter | None:
    """Tokens: a minute's worth, refilled over a minute (as providers count them); a call asks for
    its estimated prompt tokens, and one larger than a minute's worth waits for a full bucket."""
    return None if per_minute is None else AsyncLimiter(per_minute, 60)


@dataclass
class Slot:
    """One attempt's place at an endpoint. Report a failure on it; no report is a success."""

    outcome: str = "success"  # success, overload, failure
    retry_after: float | None = None

    rate_limited: bool = False

    def overloaded(self, retry_after: float | None = None, rate_limited: bool = False) -> None:
        """The server said it is over capacity (503; a 429 is `rate_limited`) or did not answer in
        time."""
        self.outcome = "overload"
        self.retry_after = retry_after
        self.rate_limited = rate_limited

    def failed(self) -> None:
        """Any other failure: it says nothing about the server's capacity."""
        self.outcome = "failure"


class Endpoint:
    def __init__(self, name: str, initial: int = 4, maximum: int = 32, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None, decrease: float = 0.5, cooldown_s: float = 1.0,
                 outage_s: float = OUTAGE_S) -> None:
        if not 1 <= initial <= maximum:
            raise ValueError(f"concurrency must satisfy 1 <= initial ({initial}) <= maximum ({maximum})")
        if not 0 < decrease < 1:
            raise ValueError("decrease must be a factor between 0 and 1")
        self.name = name
        self.maximum = maximum
        self.decrease = decrease
        self.cooldown_s = cooldown_s
        self.outage_s = outage_s
        self._limit = float(initial)
        self._slow_start = True
        self._limit_ceiling: float | None = None  # where a slow start after an outage ends
        self._pace_ceiling: float | None = None
        # the first overload since the last success, and the limit and pace (each with its slow start) before it
        self._refused_since: float | None = None
        self._before_refusals: tuple[float, bool, float | None, bool] = (self._limit, True, None, True)
        self._in_flight = 0
        self._paused_until = 0.0
        self._last_decrease = float("-inf")
        self._changed = asyncio.Condition()
        self._requests = _bucket(requests_per_minute)
        self._tokens = _token_bucket(tokens_per_minute)
        self._pace: float | None = None  # requests per second, once a 429 asked for one
        self._pace_slow_start = True
        self._next_start = 0.0
        self._last_pace_cut = float("-inf")
        self._recent: deque[float] = deque()  # when recent calls succeeded (the last RECENT_S)
        self.successes = self.overloads = self.failures = self.decreases = 0

    @property
    def limit(self) -> int:
        return max(1, int(self._limit))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def pace(self) -> float | None:
        return self._pace

    def state(self) -> EndpointState:
        return EndpointState(name=self.name, limit=self.limit, maximum=self.maximum, in_flight=self._in_flight,
                             pace_per_s=self._pace,
                             paused_for_s=max(0.0, self._paused_until - time.monotonic()),
                             successes=self.successes, overloads=self.overloads, failures=self.failures,
                             decreases=self.decreases)

    async def _admit(self, deadline: float) -> None:
        async with self._changed:
            while True:
                now = time.monotonic()
                wait = self._paused_until - now
                if wait <= 0 and self._in_flight < self.limit:
                    self._in_flight += 1
                    return
                if now >= deadline or (wait > 0 and self._paused_until >= deadline):
                    raise EndpointBusy(self._busy_reason(wait), limited=wait > 0)
                try:  # woken by a finished call or a new pause; a pause's end is a timeout
                    await asyncio.wait_for(self._changed.wait(), timeout=min(wait if wait > 0 else deadline - now,
                                                                             deadline - now))
                except TimeoutError:
                    pass

    def _busy_reason(self, wait: float) -> str:
        if wait > 0:
            return f"the endpoint asked to wait {wait:.0f} s more (Retry-After), longer than this call can"
        return f"no free place among the {self.limit} calls in flight in time"

    @asynccontextmanager
    async def slot(self, tokens: int = 0, wait_s: float = float("inf")) -> AsyncIterator[Slot]:
        """Wait for a place (pause over, under the limit, within the rate limits), then call;
        EndpointBusy when there is none within `wait_s` seconds."""
        deadline = time.monotonic() + wait_s
        await self._admit(deadline)
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic()) if wait_s != float("inf") else None):
                while self._pace is not None:  # the next start is taken when it comes, at the pace then
                    now = time.monotonic()
                    if now >= self._next_start:
                        self._next_start = now + 1.0 / self._pace
                        break
                    await asyncio.sleep(self._next_start - now)
                if self._requests is not None:
                    await self._requests.acquire()
                if self._tokens is not None and tokens:
                    await self._tokens.acquire(min(float(tokens), self._tokens.max_rate))
        except TimeoutError:
            await self._release(None)
            raise EndpointBusy("the endpoint's rate limit leaves no room in time", limited=True) from None
        except BaseException:
            await self._release(None)
            raise
        slot = Slot()
        try:
            yield slot
        except asyncio.CancelledError:
            await self._release(None)
            raise
        except BaseException:
            if slot.outcome == "success":  # an exception nobody classified
                slot.failed()
            await self._release(slot)
            raise
        await self._release(slot)

    async def _release(self, slot: Slot | None) -> None:
        async with self._changed:
            self._in_flight -= 1
            if slot is not None:
                self._record(slot)
            self._changed.notify_all()

    def _record(self, slot: Slot) -> None:
        now = time.monotonic()
        if slot.outcome == "success":
            self.successes += 1
            if self._refused_since is not None and now - self._refused_since >= self.outage_s:
                self._recover(now - self._refused_since)
            self._refused_since = None
            step = 1.0 if self._slow_start else 1.0 / max(1.0, self._limit)
            self._limit = min(float(self.maximum), self._limit + step)
            if self._limit_ceiling is not None and self._limit >= self._limit_ceiling:
                self._slow_start, self._limit_ceiling = False, None
            self._recent.append(now)
            while self._recent and self._recent[0] < now - RECENT_S:
                self._recent.popleft()
            if self._pace is not None:
                self._pace += 1.0 if self._pace_slow_start else 1.0 / self._pace
                if self._pace_ceiling is not None and self._pace >= self._pace_ceiling:
                    self._pace_slow_start, self._pace_ceiling = False, None
        elif slot.outcome == "overload":
            self.overloads += 1
            if self._refused_since is None:
                self._refused_since = now
                self._before_refusals = (self._limit, self._slow_start, self._pace, self._pace_slow_start)
            if slot.rate_limited:  # the request rate is too high: the pace moves, the concurrency stays
                if self._pace is None:
                    span = now - self._recent[0] if len(self._recent) >= 2 else 0.0
                    succeeding = (len(self._recent) - 1) / span if span > 0 else 0.0
                    self._pace = max(MIN_PACE, PACE_START * (succeeding or self._limit))
                    self._last_pace_cut = now
                    self.decreases += 1
                    log.warning("endpoint %s: rate limited (429); paced at %.2f calls a second", self.name,
                                self._pace, extra={"endpoint": self.name, "event": "pace_cut", "pace": self._pace})
                elif now - self._last_pace_cut >= self.cooldown_s:
                    self._pace = max(MIN_PACE, self._pace * PACE_CUT)
                    self._pace_slow_start = False
                    self._last_pace_cut = now
                    self.decreases += 1
                    log.warning("endpoint %s: rate limited again; pace cut to %.2f calls a second", self.name,
                                self._pace, extra={"endpoint": self.name, "event": "pace_cut", "pace": self._pace})
                self._pause(now, slot.retry_after)
                return
            self._slow_start = False
            if now - self._last_decrease >= self.cooldown_s:
                self._limit = max(1.0, self._limit * self.decrease)
                self._last_decrease = now
                self.decreases += 1
                log.warning("endpoint %s: overloaded (429, 503 or a timeout); concurrency cut to %d", self.name,
                            self.limit, extra={"endpoint": self.name, "event": "concurrency_cut", "limit": self.limit})
            self._pause(now, slot.retry_after)
        else:
            self.failures += 1

    def _recover(self, refused_for: float) -> None:
        """The endpoint answers again after an outage: a slow start of the concurrency and the pace
        back to one cut below what they were before it (never below where they are now), or, where
        one was still in its first slow start (nothing known of the endpoint yet), that slow start
        again; a pace first asked for during the outage is dropped (a later 429 sets one from the
        rate then succeeding)."""
        limit, slow_start, pace, pace_slow_start = self._before_refusals
        if slow_start:
            self._slow_start, self._limit_ceiling = True, None
        elif self._limit < limit * self.decrease:
            self._slow_start, self._limit_ceiling = True, limit * self.decrease
        if pace is None:
            self._pace, self._pace_slow_start, self._pace_ceiling = None, True, None
        elif pace_slow_start:
            self._pace_slow_start, self._pace_ceiling = True, None
        elif self._pace is not None and self._pace < pace * PACE_CUT:
            self._pace_slow_start, self._pace_ceiling = True, pace * PACE_CUT
        log.warning("endpoint %s: answering again after %.0f s of refusals; the concurrency%s doubles each round trip "
                    "back to where it was", self.name, refused_for, " and the pace" if self._pace is not None else "",
                    extra={"endpoint": self.name, "event": "recovering", "refused_s": refused_for})

    def _pause(self, now: float, retry_after: float | None) -> None:
        """Hold new calls for a Retry-After (logged when a pause begins, not when a burst extends it)."""
        if retry_after and now + retry_after > self._paused_until:
            begins = self._paused_until <= now
            self._paused_until = now + retry_after
            if begins:
                log.warning("endpoint %s: asked to wait %.0f s (Retry-After); new calls wait", self.name,
                            retry_after, extra={"endpoint": self.name, "event": "paused", "seconds": retry_after})

    def paused(self) -> bool:
        """Whether a Retry-After is holding new calls now (a retry then waits in `slot`, not in its own
        back-off)."""
        return self._paused_until > time.monotonic()


class Gate(Protocol):
    """What a judge that calls a server needs of the runner: a slot per attempt, and whether the
    endpoint is paused."""

    name: str

    def slot(self, tokens: int = 0, wait_s: float = ...) -> AbstractAsyncContextManager[Slot]: ...

    def paused(self) -> bool: ...


class UnlimitedGate:
    """The gate of a judge used outside a runner: no limit, no pause; each call waits out its own
    Retry-After."""

    name = "unlimited"

    @asynccontextmanager
    async def slot(self, tokens: int = 0, wait_s: float = float("inf")) -> AsyncIterator[Slot]:
        yield Slot()  # reports are kept by nobody

    def paused(self) -> bool:
        return False
