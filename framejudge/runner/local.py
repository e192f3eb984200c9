"""Grading a list of items in this process (`framejudge grade`): a window of items in flight
sized by the judge's endpoint, records appended as they finish, resumable.

The window is the endpoint's current concurrency limit plus `prefetch` items: while the
limit's worth of model calls wait, the next items' frames are being decoded (in the decoding
processes) and encoded, so a call never waits for a decode that could have run earlier.
Judges without an endpoint (the reference judge, a local model) run `concurrency` items at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from ..endpoint import Endpoint
from ..judge.base import JudgeStopped, PlannedTurn, wants_frames
from ..judge.batch import GradeSummary, summarize
from ..judge.pipeline import Grader
from ..records import Record, read_records
from ..schema import Item, JudgeError
from .resume import ResumePlan, apply_plan, plan_resume


@dataclass
class RunProgress:
    """Where a run stands: turns finished, items in flight, the endpoint's limit, errors."""

    done: int = 0
    in_flight: int = 0  # items
    limit: int | None = None  # the endpoint's concurrency limit now (None: no endpoint)
    calls: int | None = None  # the endpoint's calls in flight now
    pace: float | None = None  # calls started per second, once a 429 asked for a pace
    errors: int = 0


class Counts(Protocol):
    """A run's progress as far as writing records goes (RunProgress, the Ray engine's RayProgress)."""

    done: int
    errors: int


def write_record(f: IO[str] | None, r: Record, mark: Callable[[Record], Record] | None, progress: Counts) -> Record:
    """One turn's record, marked, written as a line and flushed as it finishes (an interrupted run
    keeps it; one writer: no other writes in the middle of a line), and counted. With no file
    (`f` None) the record is only marked and counted: its caller keeps it."""
    if mark is not None:
        r = mark(r)
    if f is not None:
        f.write(r.model_dump_json() + "\n")
        f.flush()
    progress.done += 1
    progress.errors += isinstance(r, JudgeError)
    return r


def planned_turns(grader: Grader, work: list[tuple[Item, set[int]]]) -> list[PlannedTurn]:
    """The turns grading `work` asks the judge about, each with its calls: none for a turn the
    error-string rules decide; per other turn its samples, a swapped call where it has a response
    B, a blind one where frames are shown. Frames go with the sampled and swapped calls of turns
    that have them (a text-only item's calls carry none)."""
    o = grader.effective_options
    planned = []
    for item, skip in work:
        for t, turn in enumerate(item.turns):
            if t in skip or grader.decided_by_rules(item, t):
                continue
            framed = wants_frames(grader.judge, item, t)
            seen = o.samples + (1 if o.swap and turn.response_b is not None else 0)
            planned.append(PlannedTurn(item, t, seen + (1 if o.blind and framed else 0), seen if framed else 0))
    return planned


def planned_calls(grader: Grader, work: list[tuple[Item, set[int]]]) -> int:
    """The judge calls grading `work` takes (planned_turns)."""
    return sum(p.calls for p in planned_turns(grader, work))


def window(grader: Grader, concurrency: int, prefetch: int) -> Callable[[], int]:
    """How many items may be in flight now: the gate's limit (an Endpoint's, or the share of a
    cluster-wide one a Ray grading actor keeps busy) plus `prefetch`."""
    gate: Any = getattr(grader.judge, "gate", None)
    if isinstance(getattr(gate, "limit", None), int):  # an Endpoint, or a Ray grading actor's share of one
        return lambda: gate.limit + prefetch
    return lambda: max(1, concurrency)


async def run_batch(
    grader: Grader,
    items: list[Item],
    out: Path | None,
    concurrency: int = 4,
    on_done: Callable[[Item, list[Record]], None] | None = None,
    prefetch: int = 2,
    on_progress: Callable[[RunProgress], None] | None = None,
    plan: ResumePlan | None = None,
    mark: Callable[[Record], Record] | None = None,
) -> GradeSummary:
    """Grade every unfinished (item, turn) and append each record as soon as it exists.

    A rerun with the same `out` skips turns that already have a verdict graded the same way
    and retries the ones that failed (see `resume`: verdicts graded differently are a
    conflict, unless the `plan` was made to regrade them). Each record is one write of one line, flushed: a run killed at any moment
    leaves every finished verdict in place (a torn last line is dropped on the next run). `mark`
    (a thresholds file's marker) marks each record auto or to_review before it is written.

    With `out` None nothing is written: the records go to `on_done` only (the Ray engine's grading
    actors, whose driver writes the run's output), the `plan` says what to grade, and the summary is
    of the records graded.
    """
    if out is None:
        if plan is None:
            raise ValueError("run_batch without an output file needs the plan of what to grade")
        graded: list[Record] = []
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        plan = plan or plan_resume(grader, items, out)
        apply_plan(plan, out)
    todo = plan.work
    room = window(grader, concurrency, prefetch)
    gate = getattr(grader.judge, "gate", None)
    progress = RunProgress(limit=gate.limit if isinstance(gate, Endpoint) else None)

    def report() -> None:
        if isinstance(gate, Endpoint):
            progress.limit, progress.calls, progress.pace = gate.limit, gate.in_flight, gate.pace
        if on_progress is not None:
            on_progress(progress)

    with open(out, "a", encoding="utf-8") if out is not None else contextlib.nullcontext() as f:

        async def one(item: Item, skip: set[int]) -> None:
            records: list[Record] = []
            for turn in range(len(item.turns)):
                if turn in skip:
                    continue
                # each turn's line as it finishes (an interrupted conversation keeps its graded turns)
                records.append(write_record(f, await grader.grade_turn(item, turn), mark, progress))
            if out is None:
                graded.extend(records)
            if on_done:
                on_done(item, records)

        running: set[asyncio.Task[None]] = set()

        async def settle(timeout: float | None) -> None:
            finished, _ = await asyncio.wait(running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                running.discard(task)
                task.result()  # a failure the pipeline did not turn into a record stops the run
            progress.in_flight = len(running)
            report()

        try:
            for item, skip in todo:
                while len(running) >= room():
                    await settle(0.25)  # also wakes to see a limit that grew
                running.add(asyncio.create_task(one(item, skip)))
                progress.in_flight = len(running)
            while running:
                await settle(None)
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
    return summary_of(items, out) if out is not None else summarize(graded, len(items))


def summary_of(items: list[Item], out: Path) -> GradeSummary:
    """The summary of `items` as `out` records them now (other items' records in it left out)."""
    keys = {(it.id, t) for it in items for t in range(len(it.turns))}
    return summarize([r for r in read_records(out) if (r.item_id, r.turn) in keys], len(items))


T = TypeVar("T")
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as shells report a command ended by Ctrl-C


class Interrupted(Exception):
    """A run stopped by Ctrl-C (SIGINT): the records finished before it are written."""


async def interruptible(work: Coroutine[Any, Any, T], on_interrupt: Callable[[], None],
                        on_second: Callable[[], None], on_stopped: Callable[[], None] | None = None) -> T:
    """Await `work` (run_batch) so that Ctrl-C stops it within moments and loses nothing.

    The first SIGINT calls `on_interrupt` (say what is being stopped; stop judges and decoders
    whose work runs in threads or processes, which cancelling cannot reach) and cancels the work:
    items in hand are dropped (their finished turns are already written, the rest is graded by
    the next run) and Interrupted is raised. A second SIGINT calls `on_second` and ends the
    process at once: every finished record was flushed when it was written, and a torn last line
    is dropped by the next run. Once interrupted, the second Ctrl-C is handled so until the process
    ends, in the loop or after it closes (while the process waits for its threads, its decoders or
    its cluster to shut down). The handler is the process's own (signal.signal), not the loop's:
    handing over from the loop's to a process-wide one would pass through Python's default, and a
    Ctrl-C in that moment would end the process with a KeyboardInterrupt. For commands: the
    process is ended.

    `on_stopped` is called in the loop once the interrupted work has unwound (its finished records
    written, its output closed), before Interrupted is raised: a command ends the process there
    (os._exit), since leaving the loop waits for every thread the work handed a blocking step to (a
    model loading, a frame being read, a decode), which cancelling cannot stop: tens of seconds
    on a cold start.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    hits = 0

    def first() -> None:
        task.cancel()  # no item in hand writes anything after this
        on_interrupt()

    def on_sigint(*_: object) -> None:  # runs in the main thread, between two bytecodes
        nonlocal hits
        hits += 1
        if hits > 1:
            on_second()
            os._exit(INTERRUPTED_EXIT)
        with contextlib.suppress(RuntimeError):  # the loop has closed: the run has ended already
            loop.call_soon_threadsafe(first)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return await task
    except (asyncio.CancelledError, JudgeStopped):
        if hits:
            if on_stopped is not None:
                on_stopped()
            raise Interrupted from None
        raise
    finally:
        if not hits:  # never interrupted: Ctrl-C is what it was before
            signal.signal(signal.SIGINT, previous)
