"""A batch graded from the command line, for `grade` and `leaderboard` alike: decoding processes
where some turn wants frames, progress on stderr (a live bar on a terminal, else a plain line every
few seconds: framejudge.progress), Ctrl-C once to stop within moments keeping what was written
(twice to exit at once), and a problem writing the output file as an `error:` line that keeps what
was written."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .console import err, fail, progress_line

if TYPE_CHECKING:  # the judge and runner load when a batch runs, not with the CLI
    from ..judge.batch import GradeSummary
    from ..judge.pipeline import Grader
    from ..records import Record
    from ..runner.resume import ResumePlan
    from ..schema import DecodeLimits, Item
    from ..runner.judges import Judges
    from ..runner.ray_engine import RaySettings


@dataclass(frozen=True)
class Words:
    """How the messages name things: the bar's label, what a finished record is, what is held in
    flight, and the output file's kind (for its write errors)."""

    label: str = "grading"
    finished: str = "turn(s)"
    in_hand: str = "item(s)"
    kind: str = "verdicts"


def run_graded(grader: Grader, items: list[Item], out_path: Path, *, todo: int, concurrency: int | None,
               plan: ResumePlan, decoding: DecodeLimits, words: Words = Words(), empty_bar: bool = True,
               mark: Callable[[Record], Record] | None = None) -> GradeSummary:
    """Grade `items` into `out_path` through the batch runner, resuming by `plan`; the run's summary.
    Exits 130 after an interrupt (the finished records stay) and 2 when the file cannot be written."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..judge.base import Stoppable
    from ..progress import Phase, Reporter
    from ..progress import Progress as Now
    from ..runner import RunProgress, run_batch
    from ..runner.decode import start_decoders
    from ..runner.local import INTERRUPTED_EXIT, Interrupted, interruptible
    from ..files import write_problem

    judge = grader.judge
    decoder = start_decoders(grader, items, todo, decoding)
    live = err.is_terminal  # a terminal keeps the live bar; a file or a CI log gets plain lines
    progress = Progress(TextColumn(words.label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[state]}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=False,
                        disable=not live or not (todo or empty_bar))
    run_state = {"now": RunProgress()}  # the run's own RunProgress once it reports: always current

    def interrupted() -> None:
        now = run_state["now"]
        stop = judge.stop if isinstance(judge, Stoppable) else None
        note = getattr(judge, "stop_note", None)
        err.print(f"interrupted: stopping the {now.in_flight} {words.in_hand} in hand"
                  f"{f' ({note})' if stop and note else ''}; the {now.done} record(s) this run "
                  f"finished are in {out_path}; press Ctrl-C again to exit at once", highlight=False)
        if stop is not None:
            stop()
        if decoder is not None:  # decodes in flight end now, not after their time limit
            threading.Thread(target=decoder.close, daemon=True).start()

    def interrupted_again() -> None:
        progress.stop()
        err.print(f"interrupted again: exiting now; finished records are in {out_path}", highlight=False)

    def stopped() -> None:
        """The run has unwound after a Ctrl-C: every finished record is written and the file closed.
        The process ends now, not once the threads still busy for the dropped items are (a model
        loading, a frame being read: nothing can stop them sooner), and the decoding processes go
        with it."""
        progress.stop()
        err.print(f"stopped: {run_state['now'].done} {words.finished} graded by this run are in {out_path}; "
                  "the same command grades the rest", highlight=False)
        if decoder is not None:
            decoder.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(INTERRUPTED_EXIT)

    with progress, contextlib.redirect_stdout(sys.stderr):  # stdout holds the summary alone, whatever a library prints
        task = progress.add_task(words.label, total=todo, state="")

        def show(now: Now) -> None:
            state = run_state["now"]
            text = progress_line(state, progress.tasks[0].speed)
            if now.phase in (Phase.loading, Phase.decoding):
                text = f"{now.phase.value}{f' ({now.loading})' if now.loading else ''}; {text}"
            progress.update(task, completed=now.done, state=text)

        def line(now: Now) -> None:
            err.print(f"progress: {now.line(words.finished, words.in_hand)}", highlight=False, soft_wrap=True)

        reporter = Reporter(todo, on_change=show if live else None, on_line=None if live else line,
                            unit=words.finished, in_hand=words.in_hand)

        def counted(state: RunProgress) -> None:
            run_state["now"] = state
            reporter.update(state)

        try:
            return asyncio.run(interruptible(
                reporter.watch(run_batch(grader, items, out_path, concurrency=concurrency or 4, on_progress=counted,
                                         prefetch=(decoder.workers if decoder else 0) + 2, plan=plan, mark=mark)),
                interrupted, interrupted_again, on_stopped=stopped))
        except Interrupted:  # (stopped() has ended the process already)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except OSError as exc:  # the records written so far stay; a rerun resumes from them
            fail(write_problem(out_path, words.kind, exc) + " (the verdicts written so far are kept)")
        finally:
            if decoder is not None:
                decoder.close()


def run_on_cluster(grader: Grader, items: list[Item], out_path: Path, *, spec: str, judges: Judges, plan: ResumePlan,
                   decoding: DecodeLimits, settings: RaySettings,
                   mark: Callable[[Record], Record] | None = None) -> GradeSummary:
    """`grade --engine ray`: the run on a Ray cluster (runner/ray_engine.py), with a progress bar on
    stderr; Ctrl-C stops it and keeps what was written (exit 130)."""
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..progress import Progress as Now
    from ..progress import Reporter
    from ..runner.local import INTERRUPTED_EXIT, Interrupted, interruptible
    from ..runner.ray_engine import RayProgress, RayUnavailable, run_on_ray, setup_of
    from ..files import write_problem

    live = err.is_terminal  # a terminal keeps the live bar; a file or a CI log gets plain lines
    progress = Progress(TextColumn("grading on ray"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[state]}"), TimeElapsedColumn(), console=err, transient=False,
                        disable=not live)

    def line(now: Now) -> None:
        err.print(f"progress: {now.line(in_hand='shard(s)')}", highlight=False, soft_wrap=True)

    reporter = Reporter(plan.turns, on_line=None if live else line, in_hand="shard(s)")
    now = {"done": 0}

    def interrupted() -> None:
        err.print(f"interrupted: stopping the cluster's actors; the {now['done']} record(s) this run finished are in "
                  f"{out_path}; press Ctrl-C again to exit at once", highlight=False)

    def interrupted_again() -> None:
        progress.stop()
        err.print(f"interrupted again: exiting now; finished records are in {out_path}", highlight=False)

    with progress, contextlib.redirect_stdout(sys.stderr):
        task = progress.add_task("grading", total=plan.turns, state="starting the cluster")

        def show(state: RayProgress) -> None:
            now["done"] = state.done
            calls = f", {state.calls}/{state.limit} calls" if state.limit is not None else ""
            again = f", {state.restarted} actor(s) replaced" if state.restarted else ""
            progress.update(task, completed=state.done,
                            state=f"{state.in_flight} shard(s) in hand{calls}, {state.errors} error(s){again}")
            reporter.update(state)

        try:
            return asyncio.run(interruptible(
                reporter.watch(run_on_ray(grader, items, out_path, spec=spec, setup=setup_of(grader, judges, spec),
                                          plan=plan, settings=settings, decoding=decoding, mark=mark, on_progress=show)),
                interrupted, interrupted_again))
        except Interrupted:
            progress.stop()
            err.print(f"stopped: {now['done']} {Words().finished} graded by this run are in {out_path}; the same "
                      "command grades the rest", highlight=False)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except RayUnavailable as exc:
            fail(str(exc))
        except OSError as exc:
            fail(write_problem(out_path, "verdicts", exc) + " (the verdicts written so far are kept)")


def run_through_batches(grader: Grader, items: list[Item], out_path: Path, *, spec: str, plan: ResumePlan,
                        decoding: DecodeLimits, concurrency: int | None,
                        mark: Callable[[Record], Record] | None = None) -> GradeSummary:
    """`grade --batch`: collect the batches already submitted, grade what has its replies, submit
    the rest (runner/batch_api.py); says on stderr what was collected, written and submitted, and
    what is still waiting. Ctrl-C stops it; what was written and the ledger stay."""
    import asyncio

    from ..runner.batch_api import BatchRun
    from ..runner.decode import start_decoders
    from ..runner.local import INTERRUPTED_EXIT, Interrupted, interruptible, summary_of

    run = BatchRun(grader, spec, out_path)
    decoder = start_decoders(grader, items, plan.turns, decoding)

    def interrupted() -> None:
        err.print(f"interrupted: stopping; the records written so far are in {out_path} and the submitted "
                  "batches in its ledger; press Ctrl-C again to exit at once", highlight=False)

    try:
        with contextlib.redirect_stdout(sys.stderr):
            report = asyncio.run(interruptible(run.run(items, plan, mark=mark, concurrency=concurrency or 4),
                                               interrupted, lambda: None))
    except Interrupted:
        raise typer.Exit(INTERRUPTED_EXIT) from None
    finally:
        if decoder is not None:
            decoder.close()
    from ..runner.batch_api import errors_of, ledger_path, replies_path

    for batch in report.found:
        err.print(f"found batch {batch.id} at the provider, asked for by an earlier run that got no answer (by "
                  f"{batch.found}): taken into the ledger, its {len(batch.keys)} request(s) not sent again",
                  highlight=False)
    if report.unmade:
        err.print(f"{report.unmade} request(s) of batches an earlier run asked for without an answer: the provider "
                  "has no such batch, so they are sent again", highlight=False)
    for batch_id in report.strangers:
        err.print(f"batch {batch_id}, found by its time and size, answered none of its requests: it was another's "
                  "(left as it is); its requests are sent again", highlight=False)
    if report.conflicts:
        named = "; ".join(f"{key} (batches {', '.join(batches)})" for key, batches in list(report.conflicts.items())[:3])
        err.print(f"{len(report.conflicts)} request(s) have different replies from the batch API in "
                  f"{replies_path(out_path)}: {named}{' ...' if len(report.conflicts) > 3 else ''}; their turns are "
                  "recorded as errors: keep the reply to use (delete the other lines with that key) and run again",
                  highlight=False)
    if report.collected:
        err.print(f"collected {len(report.collected)} batch(es): {', '.join(report.collected)}", highlight=False)
    err.print(f"{len(report.written)} turn(s) graded from batch replies ({errors_of(report)} error(s)) into "
              f"{out_path}", highlight=False)
    if report.submitted:
        err.print(f"submitted batch {', '.join(report.submitted)} ({report.waiting} turn(s) waiting"
                  f"{f', {report.resubmitted} request(s) asked again' if report.resubmitted else ''})",
                  highlight=False)
    if report.waiting:
        err.print(f"{report.waiting} turn(s) wait for batch(es) {', '.join(report.open)} (ledger: "
                  f"{ledger_path(out_path)}); run the same command again to collect them (the provider answers "
                  "within 24 hours)", highlight=False)
    return summary_of(items, out_path)
