"""The `framejudge` command: the Typer app with every command and command group attached (in the
order `--help` lists them), and `main`, which runs it for the console script and `python -m
framejudge.cli`."""

from __future__ import annotations

import errno
import os
import sys

import typer

from ..env import cache_off
from ..progress import every_seconds
from . import align, calibrate, examples, frames, grade, keys, labels, leaderboard, mcq, rubrics, serve, triage
from . import uploads, worker
from .console import Commands, err, fail, flagged, plain_warnings

app = typer.Typer(
    name="framejudge",
    help="LLM-as-judge grading for video question answering.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=Commands,  # an error a user caused, in any command: an `error:` line and exit 2
)

for command in (frames.frames, grade.grade, calibrate.calibrate, serve.serve, worker.worker, align.align,
                leaderboard.leaderboard, leaderboard.compare, triage.triage):
    app.command()(command)
for name, group in (("examples", examples.examples_app), ("rubrics", rubrics.rubrics_app), ("mcq", mcq.mcq_app),
                    ("keys", keys.keys_app), ("uploads", uploads.uploads_app), ("labels", labels.labels_app)):
    app.add_typer(group, name=name)


@app.callback()
def _environment() -> None:
    """LLM-as-judge grading for video question answering."""
    try:  # a switch that is neither on nor off, or an interval that is no number, is an error before any command starts
        cache_off()
        every_seconds()
    except ValueError as exc:
        fail(str(exc))


def main() -> None:
    """Run the app: Ctrl-C, a reader of stdout gone and a full disk end it with a line, not a traceback."""
    plain_warnings()
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more can go there
        err.print(flagged("error:", "bold red", f"cannot write the output: {exc.strerror}"), highlight=False)
        sys.exit(2)
