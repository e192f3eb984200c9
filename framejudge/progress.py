"""How far a run is, told while it runs: the phase it is in (loading the judge, decoding, grading),
turns done of the total, the rate, errors so far, items in hand.

A run that grades (the CLI's `grade`, `leaderboard` and `align`, the Python API's `grade`) keeps a
`Reporter` and awaits its work through `Reporter.watch`. It then tells:

- `on_change`, at every change (a turn finished, a phase begun or ended), in the event loop's thread:
  the CLI's live bar on a terminal, the Python API's `progress=` callback;
- `on_line` and the `framejudge.progress` logger (INFO), at most every `every_s` seconds
  (FRAMEJUDGE_PROGRESS_SECONDS, default 5) and only when something changed (a new phase at once):
  the CLI's plain lines on a standard error that is not a terminal (a file, a CI log), a Python
  program's log. A last line says where the run ended.

What the run's code does deep down reaches the run's reporter through a context variable, which
the run's tasks and the threads they hand work to (asyncio.to_thread) inherit: `loading(what)`
around a model's load (the reference judge's sentence-embedding and OCR models, a local model, a
plugin judge's own), `decoding()` around a turn's wait for its frames. Outside a run both do nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from . import config

log = logging.getLogger("framejudge.progress")

PROGRESS_ENV = "FRAMEJUDGE_PROGRESS_SECONDS"
DEFAULT_EVERY_S = 5.0
PHASE_CHECK_S = 0.5  # how soon a new phase is told (a run's first moments coalesced into one line)

T = TypeVar("T")


class Phase(str, Enum):
    """What a run is doing now."""

    loading = "loading the judge"  # a model the judge needs is loading (its calls wait for it)
    decoding = "decoding"  # nothing finished yet, and every item in hand waits for its video's frames
    grading = "grading"
    done = "done"
    stopped = "stopped"  # interrupted, or ended by an error: what finished is kept


class Progress(BaseModel):
    """Where a run stands, as a run's progress callback and lines tell it."""

    model_config = ConfigDict(frozen=True)

    phase: Phase
    done: int  # turns this run finished (verdicts and judge errors)
    total: int  # turns this run grades
    errors: int  # of those done, the turns that could not be graded (judge_error records)
    rate: float | None  # turns finished per second since the run began (None before the first)
    elapsed_s: float
    remaining_s: float | None  # at this rate (None without one)
    in_flight: int  # items in hand (shards on a Ray cluster)
    decoding: int  # turns of those waiting for their video's frames
    loading: str | None = None  # what is loading (phase `loading the judge`)
    calls: int | None = None  # model calls in flight (a judge with an endpoint)
    limit: int | None = None  # the endpoint's concurrency limit now

    def line(self, unit: str = "turn(s)", in_hand: str = "item(s)") -> str:
        """The plain line the CLI prints and the log carries: `grading: 5/13 turn(s) (38%), 1.2/s, ...`."""
        head = f"{self.phase.value}" + (f" ({self.loading})" if self.loading else "")
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        parts = [f"{self.done}/{self.total} {unit}{share}"]
        if self.rate is not None:
            parts.append(f"{self.rate:.2g}/s" if self.rate < 10 else f"{self.rate:.0f}/s")
        parts.append(f"{self.errors} error(s)")
        if self.phase not in (Phase.done, Phase.stopped):
            hand = f"{self.in_flight} {in_hand} in hand"
            if self.decoding:
                hand += f" ({self.decoding} decoding)"
            parts.append(hand)
            if self.limit is not None:
                parts.append(f"calls {self.calls}/{self.limit}")
        parts.append(f"{_duration(self.elapsed_s)} elapsed")
        if self.remaining_s is not None and self.phase not in (Phase.done, Phase.stopped):
            parts.append(f"about {_duration(self.remaining_s)} left")
        return f"{head}: {', '.join(parts)}"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s" if s < 3600 else f"{s // 3600} h {s // 60 % 60:02d} min"


def every_seconds() -> float:
    """How often a run's progress lines may be told (FRAMEJUDGE_PROGRESS_SECONDS; 0: none).
    ValueError naming the variable for a value that is not a number of seconds."""
    raw = config.get(PROGRESS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_EVERY_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{PROGRESS_ENV}={raw!r}: not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{PROGRESS_ENV}={raw!r}: a number of seconds, 0 or more (0: no progress lines)")
    return value


class Counts:
    """What a runner keeps up to date (runner.local.RunProgress): done, errors, in_flight, and an
    endpoint's limit and calls where the judge has one."""

    done: int = 0
    errors: int = 0
    in_flight: int = 0
    limit: int | None = None
    calls: int | None = None


_current: ContextVar[Reporter | None] = ContextVar("framejudge_progress", default=None)


class Reporter:
    """One run's progress: see the module's docstring. Thread-safe: `loading` is entered in the
    threads a model loads in."""

    def __init__(self, total: int, *, on_change: Callable[[Progress], None] | None = None,
                 on_line: Callable[[Progress], None] | None = None, every_s: float | None = None,
                 unit: str = "turn(s)", in_hand: str = "item(s)") -> None:
        self.total = total
        self.unit = unit
        self.in_hand = in_hand
        self.on_change = on_change
        self.on_line = on_line
        self.every_s = every_seconds() if every_s is None else every_s
        self.counts: Any = Counts()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._loading: list[str] = []
        self._decoding = 0
        self._end: Phase | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._told: tuple[Any, ...] | None = None  # what the last line said (its phase first)
        self._told_at = 0.0

    # ------------------------------------------------------------------ what the run says

    def update(self, counts: Any) -> None:
        """The runner's counts (its on_progress callback): kept, and read again at each snapshot."""
        self.counts = counts
        self._changed()

    @contextlib.contextmanager
    def loading_of(self, what: str) -> Iterator[None]:
        with self._lock:
            self._loading.append(what)
        self._changed()
        try:
            yield
        finally:
            with self._lock:
                self._loading.remove(what)
            self._changed()

    @contextlib.contextmanager
    def decoding_of(self) -> Iterator[None]:
        with self._lock:
            self._decoding += 1
        self._changed()
        try:
            yield
        finally:
            with self._lock:
                self._decoding -= 1
            self._changed()

    def snapshot(self) -> Progress:
        c = self.counts
        with self._lock:
            loading = self._loading[0] if self._loading else None
            decoding = self._decoding
            end = self._end
        done, in_flight = int(c.done), int(c.in_flight)
        elapsed = time.monotonic() - self.started
        if end is not None:
            phase = end
        elif loading is not None:
            phase = Phase.loading
        elif not done and in_flight and decoding >= in_flight:
            phase = Phase.decoding
        else:
            phase = Phase.grading
        rate = done / elapsed if done and elapsed > 0 else None
        return Progress(phase=phase, done=done, total=self.total, errors=int(c.errors), rate=rate,
                        elapsed_s=round(elapsed, 3),
                        remaining_s=round(max(0, self.total - done) / rate, 1) if rate else None,
                        in_flight=in_flight, decoding=decoding, loading=loading if end is None else None,
                        calls=getattr(c, "calls", None), limit=getattr(c, "limit", None))

    # ------------------------------------------------------------------ telling it

    def _changed(self) -> None:
        loop = self._loop
        if loop is None or self.on_change is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.on_change(self.snapshot())
        else:  # a thread a model loads in: told in the loop's thread
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run has ended
                loop.call_soon_threadsafe(self._tell_change)

    def _tell_change(self) -> None:
        if self.on_change is not None:
            self.on_change(self.snapshot())

    def _line(self, now: Progress, force: bool = False) -> None:
        """Tell `now` as a line where the interval allows it and something changed (at once for a
        new phase; always when `force`, for the last line, which `on_line` is told only for a run
        that is done: a stopped run's caller says itself what was kept)."""
        key = (now.phase, now.loading, now.done, now.errors, now.in_flight, now.decoding)
        if not force:
            if key == self._told or not self.every_s:
                return
            new_phase = self._told is None or key[:2] != self._told[:2]
            if not new_phase and time.monotonic() - self._told_at < self.every_s:
                return
        self._told, self._told_at = key, time.monotonic()
        text = now.line(self.unit, self.in_hand)
        log.info(text, extra={"progress": now.model_dump(mode="json")})
        if self.on_line is not None and not (force and now.phase is Phase.stopped):
            self.on_line(now)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(PHASE_CHECK_S, self.every_s) if self.every_s else 3600)
            self._line(self.snapshot())

    async def watch(self, work: Awaitable[T]) -> T:
        """Await the run's `work`, telling its progress; a last line and change say how it ended
        (`done`, or `stopped` for an interruption or an error)."""
        self._loop = asyncio.get_running_loop()
        self.started = time.monotonic()
        token = _current.set(self)  # the run's tasks and their threads find this reporter
        ticker = asyncio.ensure_future(self._tick())
        end = Phase.stopped
        try:
            result = await work
            end = Phase.done
            return result
        finally:
            _current.reset(token)
            ticker.cancel()
            with self._lock:
                self._end = end
            last = self.snapshot()
            if self.on_change is not None:
                self.on_change(last)
            if self.every_s:
                self._line(last, force=True)


@contextlib.contextmanager
def loading(what: str) -> Iterator[None]:
    """Around a model's load, in any thread of a run: the run tells `loading the judge (what)` while
    it lasts. Outside a run it does nothing."""
    reporter = _current.get()
    if reporter is None:
        yield
        return
    with reporter.loading_of(what):
        yield


@contextlib.contextmanager
def decoding() -> Iterator[None]:
    """Around a turn's wait for its video's frames, in a run's task."""
    reporter = _current.get()
    if reporter is None:
        yield
        return
    with reporter.decoding_of():
        yield
