"""`framejudge align`: a new rubric version carrying the judge's corrected mistakes, measured on
held-apart units."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from .. import config
from ..progress import Progress

from .console import err, fail, flagged, out
from .options import Frames, JudgeSpec, JudgesPath, MediaRoot, Yes, check_media_root
from .outputs import check_cache_folder, check_outputs, exit_for_errors, report_problems, write_output

if TYPE_CHECKING:
    from ..judge.base import Judge


@contextlib.contextmanager
def stopping(judge: Judge) -> Iterator[None]:
    """Ctrl-C while align grades: the judge's work in threads is stopped (a local model at its next
    token, on-screen text reading at its next frame), so that the run unwinds within moments (align
    writes nothing before its end: nothing is lost) and the command ends with 130; a second Ctrl-C
    exits at once."""
    from ..judge.base import Stoppable
    from ..runner.local import INTERRUPTED_EXIT

    hits = 0

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal hits
        hits += 1
        if hits > 1:
            err.print("interrupted again: exiting now", highlight=False)
            sys.stderr.flush()
            os._exit(INTERRUPTED_EXIT)
        err.print("interrupted: stopping (align writes its rubric only once it has measured it: nothing is lost); "
                  "press Ctrl-C again to exit at once", highlight=False)
        if isinstance(judge, Stoppable):
            judge.stop()
        signal.default_int_handler(signum, frame)  # KeyboardInterrupt: the grading unwinds, the command ends (130)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        if not hits:
            signal.signal(signal.SIGINT, previous)


def align(
    labels_path: Annotated[Path, typer.Option("--labels", help="gold labels (adjudicated, JSONL or CSV), or human "
                                                               "labels (the majority is the gold)")],
    items: Annotated[Path, typer.Option("--items", help="items JSONL the labels are of")],
    out_path: Annotated[Path, typer.Option("--out", help="the new rubric file (YAML); must not exist")],
    rubric: Annotated[str, typer.Option(help="base rubric id or file", envvar=config.name("FRAMEJUDGE_RUBRIC"))] = "video-qa",
    verdicts: Annotated[Optional[Path], typer.Option(
        help="the judge's verdicts with the base rubric (default: grade the example items now)")] = None,
    judge: JudgeSpec = "reference",
    judges_file: JudgesPath = None,
    holdout: Annotated[float, typer.Option(help="share of the labelled items held apart to measure on")] = 0.5,
    seed: Annotated[int, typer.Option(help="seed of the split and the bootstrap", min=0, max=2**32 - 1)] = 0,
    budget_tokens: Annotated[int, typer.Option(help="most tokens the corrected examples may add to the prompt")] = 1500,
    replicates: Annotated[int, typer.Option(help="bootstrap replicates")] = 1000,
    rubric_id: Annotated[Optional[str], typer.Option(
        "--id", help="id of the new rubric (default: the base's; give its own to keep it in a rubrics folder)")] = None,
    n: Frames = 8,
    media_root: MediaRoot = None,
    yes: Yes = False,
    report: Annotated[Optional[Path], typer.Option(help="write the result (split, corrections, comparison) as JSON")] = None,
) -> None:
    """Write a new version of the rubric whose prompt carries the judge's corrected mistakes on some
    of the labelled items, and compare base and new rubric on the items held apart.

    Exit status: 0 every turn it graded has a verdict (or --verdicts were given); 1 some turns could not
    be graded (left out of the corrections and the comparison; the rubric is still written, and each kind
    of error is named on stderr with its first message); 2 refused (bad input, a judge that cannot be
    called, or no correction to make)."""
    import re

    from pydantic import ValidationError

    from ..calibration.inputs import LabelsError, load_human_labels
    from ..files import OutputError, first_problem
    from ..frame_sampler import make_params
    from ..judge import load_items
    from ..judge.base import preflight, spends
    from ..records import read_records
    from ..rubrics import get_rubric, require_kind
    from ..workflows.align import align as run_align
    from ..workflows.align import rubric_yaml
    from ..runner.judges import Judges
    from ..schema import GradeOptions

    try:
        if out_path.exists() or out_path.is_symlink():
            raise OutputError(f"--out {out_path}: the file exists; align writes a new rubric file, so name "
                              "another (or remove this one)")
        if out_path.suffix.lower() not in (".yaml", ".yml"):
            raise OutputError(f"--out {out_path}: a rubric file name ends in .yaml or .yml (so --rubric loads it)")
        check_outputs({"rubric": out_path, "report": report}, inputs=[labels_path, items, verdicts])
        if rubric_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", rubric_id):
            raise OutputError(f"--id {rubric_id}: a rubric id is lower-case letters, digits, '.', '_' and '-', "
                              "beginning with a letter or digit")
        base = require_kind(get_rubric(rubric), "video_qa")
        labels = load_human_labels(labels_path)
        the_items = load_items(items)
        records = None
        if verdicts is not None:
            if not verdicts.is_file():
                raise LabelsError(f"{verdicts}: " + ("not a regular file" if verdicts.exists() else "no such verdicts file"))
            records = read_records(verdicts)
        check_media_root(media_root)
        judges = Judges.from_env(judges_file)
        the_judge = judges.make(judge)
        asyncio.run(preflight(the_judge, judge))
        options = GradeOptions(sampler=make_params(n=n), cache=True)
    except ValidationError as exc:
        fail(first_problem(exc, "option"))
    if spends(the_judge) and not yes:
        fail("this judge spends tokens: pass --yes to run without a prompt")
    if the_judge.backend != "reference":
        check_cache_folder()
    def line(what: str, now: Progress) -> None:  # align has no live bar: plain lines, on a terminal too
        err.print(f"progress ({what}): {now.line()}", highlight=False, soft_wrap=True)

    with contextlib.redirect_stdout(sys.stderr), stopping(the_judge):  # stdout holds the results alone
        done = run_align(base, labels_path, labels, the_items, the_judge, judge, items_where=str(items),
                         verdicts=records, verdicts_where=str(verdicts), options=options,
                         media_root=media_root or items.resolve().parent, holdout=holdout, seed=seed,
                         budget_tokens=budget_tokens, replicates=replicates, rubric_id=rubric_id, on_line=line)
    for w in done.warnings:
        err.print(flagged("warning:", "yellow", w), highlight=False, soft_wrap=True)
    problems = [write_output(out_path, "rubric", rubric_yaml(done.rubric))]
    if report is not None:
        problems.append(write_output(report, "report", done.result.model_dump_json(indent=1)))
    r = done.result
    out.print(f"wrote {out_path}: rubric {r.rubric_id} {r.rubric_version} (hash {r.rubric_hash}), from "
              f"{r.base_rubric_id} {r.base_rubric_version} ({r.base_rubric_hash}) with {len(r.corrections)} corrected "
              f"example(s), about {r.correction_tokens} tokens, of {r.judge_mistakes} mistake(s) on the example units")
    out.print(f"examples: {len(r.example_units)} unit(s) of {len(r.example_items)} item(s); held apart: "
              f"{len(r.held_apart_units)} unit(s) of {len(r.held_apart_items)} item(s), none of them a corrected "
              "example")

    def fmt(iv) -> str:
        if iv.estimate is None:
            return "undefined"
        return f"{iv.estimate:.3f}" + ("" if iv.low is None else f" [{iv.low:.3f}, {iv.high:.3f}]")

    agreement = {a.field: a for a in r.agreement}
    share = lambda x: "" if x is None else f"{x:.1%}"  # noqa: E731
    table = Table(title=f"held-apart units: the {r.judge} judge against the gold, base vs aligned rubric")
    for col in ("field", "units", "alpha before", "alpha after", "difference [95% CI]", "agree before", "agree after"):
        table.add_column(col, no_wrap=col == "field")
    for c in r.comparison:
        a = agreement[c.field]
        if not a.units:
            continue
        diff = "undefined" if c.difference is None else (
            f"{c.difference:+.3f}" + ("" if c.low is None else f" [{c.low:+.3f}, {c.high:+.3f}]"))
        table.add_row(c.field, str(a.units), fmt(c.first), fmt(c.second), diff, share(a.before), share(a.after))
    out.print(table)
    unlabelled = [a.field for a in r.agreement if not a.units]
    if unlabelled:
        out.print(f"not measured (no held-apart unit has gold and verdicts for them): {', '.join(unlabelled)}")
    report_problems(problems)
    exit_for_errors(r.judge_errors, r.judge_error_examples, "left out of the corrections and the comparison; a rerun "
                                                           "grades them again")
