"""The framejudge command line: parse arguments, call the library, print."""

from __future__ import annotations

import errno
import json
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from ..env import cache_off
from ..errors import FramejudgeError
from ..schema import Strategy


class Commands(TyperGroup):
    """framejudge's commands, with the one place where an error a user caused (a bad file, option
    or setting: a FramejudgeError, whichever command or library call raised it) becomes an
    `error: <message>` line on stderr and exit status 2."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FramejudgeError as exc:
            fail(str(exc))


app = typer.Typer(
    name="framejudge",
    help="LLM-as-judge grading for video question answering.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=Commands,
)
examples_app = typer.Typer(help="The bundled example clips.", no_args_is_help=True)
app.add_typer(examples_app, name="examples")
rubrics_app = typer.Typer(help="Grading rubrics: built-in and your own files.", no_args_is_help=True)
app.add_typer(rubrics_app, name="rubrics")
mcq_app = typer.Typer(help="Multiple-choice answer scoring.", no_args_is_help=True)
app.add_typer(mcq_app, name="mcq")

@app.callback()
def _environment() -> None:
    """LLM-as-judge grading for video question answering."""
    try:  # a switch that is neither on nor off is an error before any command starts
        cache_off()
    except ValueError as exc:
        fail(str(exc))


class WholeCells(Console):
    """A console that prints every table cell and message line whole when it writes to a pipe or
    a file: Rich would fit them to 80 columns there, cutting cells (`categ…`) and wrapping
    messages mid-word. A terminal's width, or COLUMNS when set, is kept."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self._width is None and not self.is_terminal:
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


PIPE_WIDTH = 100_000  # columns: wider than any table the CLI prints, so none is cut

# no console markup: file names, ids and messages are printed as they are ("clip[1].mp4", "a[/]b")
out = WholeCells(markup=False)
err = WholeCells(stderr=True, markup=False)


def flagged(word: str, style: str, message: str) -> Text:
    """'error: message' with the word styled and the message as it is."""
    return Text.assemble((word, style), " ", message)


def progress_line(state: Any, speed: Optional[float] = None) -> str:
    """A running batch in a few words: items in hand, calls against their limit, pace, errors, speed."""
    parts = [f"{state.in_flight} items in hand"]
    if state.limit is not None:
        parts.append(f"calls {state.calls}/{state.limit}")
    if state.pace is not None:
        parts.append(f"paced {state.pace:.1f}/s")
    parts.append(f"{state.errors} errors")
    if speed:
        parts.append(f"{speed:.1f} turns/s")
    return ", ".join(parts)


def fail(message: str, code: int = 2) -> None:
    err.print(flagged("error:", "bold red", message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.command()
def frames(
    video: Annotated[Path, typer.Argument(help="video file")],
    strategy: Annotated[Strategy, typer.Option(help="how frames are chosen")] = Strategy.uniform,
    n: Annotated[int, typer.Option("-n", "--n", help="frame budget (most frames returned)")] = 16,
    fps: Annotated[Optional[float], typer.Option(help="frames per second (fps strategy)")] = None,
    start: Annotated[Optional[float], typer.Option(help="window start, seconds")] = None,
    end: Annotated[Optional[float], typer.Option(help="window end, seconds")] = None,
    end_at: Annotated[
        Optional[float], typer.Option(help="question time: the window ends here and looks back")
    ] = None,
    lookback: Annotated[float, typer.Option(help="seconds before --end-at to cover")] = 30.0,
    max_side: Annotated[int, typer.Option(help="longest side of output images")] = 768,
    stream: Annotated[Optional[int], typer.Option(help="video stream to use (0 = first)")] = None,
    scene_threshold: Annotated[float, typer.Option(help="cut threshold for --strategy scene")] = 0.12,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="write JPEGs named by timestamp here")] = None,
    quality: Annotated[int, typer.Option(help="JPEG quality 1-100")] = 85,
    contact_sheet: Annotated[
        Optional[Path], typer.Option(help="also write one grid image with timestamps")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="do not read or write the frame cache")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
) -> None:
    """Sample frames from VIDEO and print what was sampled."""
    from ..files import check_output, check_output_folder, write_problem
    from ..frame_sampler import SamplingWarning, sample_frames
    from ..frame_sampler import contact_sheet as make_sheet
    from ..frame_sampler import to_jpeg

    if out_dir is not None:
        check_output_folder(out_dir, "frames")
    if contact_sheet is not None:
        check_output(contact_sheet, "contact sheet", inputs=[video])
        check_image_name(contact_sheet)
    if not no_cache and not cache_off():
        check_cache_folder("pass --no-cache")
    writing = "frames"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplingWarning)
            result = sample_frames(
                video,
                strategy=strategy,
                n=n,
                fps=fps,
                start=start,
                end=end,
                end_at=end_at,
                lookback=lookback,
                max_side=max_side,
                stream=stream,
                scene_threshold=scene_threshold,
                cache=None if no_cache else "default",
            )
        jpegs = [to_jpeg(f.image, quality) for f in result.frames]
        if out_dir is not None:
            for f, data in zip(result.frames, jpegs):
                (out_dir / f"{f.info.timestamp:010.3f}s.jpg").write_bytes(data)
        if contact_sheet is not None:
            writing = "contact sheet"
            make_sheet([f.image for f in result.frames], result.timestamps).save(contact_sheet)
    except OSError as exc:
        fail(write_problem(out_dir if writing == "frames" else contact_sheet, writing, exc))

    for w in result.warnings:
        err.print(flagged("warning:", "yellow", w), highlight=False, soft_wrap=True)
    if as_json:
        payload = {
            "video": result.video.model_dump(),
            "params": result.params.model_dump(mode="json"),
            "window": list(result.window),
            "frames": [
                {**f.info.model_dump(), "jpeg_bytes": len(b)} for f, b in zip(result.frames, jpegs)
            ],
            "warnings": result.warnings,
            "from_cache": result.from_cache,
        }
        out.print_json(json.dumps(payload))
        return
    v = result.video
    table = Table(
        title=(
            f"{video.name}: {v.codec} {v.display_width}x{v.display_height}, {v.duration:.2f} s, "
            f"{v.frame_count} frames; window {result.window[0]:.2f}-{result.window[1]:.2f} s"
            + (" (cached)" if result.from_cache else "")
        ),
    )
    for col in ("timestamp (s)", "index", "keyframe", "reason", "size", "JPEG"):
        table.add_column(col, justify="right" if col != "reason" else "left")
    for f, data in zip(result.frames, jpegs):
        i = f.info
        table.add_row(
            f"{i.timestamp:.3f}",
            "" if i.index is None else str(i.index),
            "yes" if i.keyframe else "",
            i.reason,
            f"{i.width}x{i.height}",
            f"{len(data) / 1024:.1f} KiB",
        )
    out.print(table)


def check_cache_folder(off: str = "") -> None:
    """The caches' folder (FRAMEJUDGE_CACHE_DIR, else the user cache folder) can be written: checked
    before any work, where a cache is used, instead of failing at the first frame or verdict."""
    from ..files import OutputError, check_output_folder
    from ..frame_sampler.cache import default_cache_dir

    try:
        check_output_folder(default_cache_dir().parent, "cache")
    except OutputError as exc:
        where = "FRAMEJUDGE_CACHE_DIR" if os.environ.get("FRAMEJUDGE_CACHE_DIR") else "the user cache folder"
        fail(f"{exc} ({where}); set FRAMEJUDGE_CACHE_DIR to a folder that can be written" + (f", or {off}" if off else ""))


def check_image_name(path: Path) -> None:
    """An image file name whose extension names a format that can be written (.png, .jpg, ...)."""
    from PIL import Image

    from ..files import OutputError

    Image.init()
    formats = Image.registered_extensions()
    if formats.get(path.suffix.lower()) not in Image.SAVE:
        given = f" (not {path.suffix!r})" if path.suffix else ""
        raise OutputError(f"{path}: an image file name ends in .jpg, .png or .webp{given}")


@examples_app.command("make")
def examples_make(
    directory: Annotated[Path, typer.Argument(help="where to write the clips")] = Path("examples/videos"),
    overwrite: Annotated[bool, typer.Option(help="rewrite clips that already exist")] = False,
) -> None:
    """Generate the bundled example clips (moving shapes, text, a scene cut, a countdown)."""
    from ..examples.clips import make_examples
    from ..files import check_output_folder, write_problem

    try:
        check_output_folder(directory, "examples")
        paths = make_examples(directory, overwrite=overwrite)
    except OSError as exc:
        fail(write_problem(directory, "examples", exc))
    for p in paths:
        out.print(str(p))


@app.command()
def grade(
    items: Annotated[Path, typer.Argument(help="items JSONL (one item per line)")],
    out_path: Annotated[Path, typer.Option("--out", help="verdicts JSONL; a rerun resumes it")] = Path("verdicts.jsonl"),
    judge: Annotated[str, typer.Option(help="reference | litellm:<model> | transformers:<path>",
                                       envvar="FRAMEJUDGE_JUDGE")] = "reference",
    api_base: Annotated[Optional[str], typer.Option(help="OpenAI-compatible server for litellm",
                                                    envvar="FRAMEJUDGE_API_BASE")] = None,
    judges_file: Annotated[Optional[Path], typer.Option(
        "--judges", help="judges file (YAML): API base, key variable, concurrency, rate limits, timeout, price "
                         "per judge", envvar="FRAMEJUDGE_JUDGES_FILE")] = None,
    rubric: Annotated[str, typer.Option(help="rubric id or file", envvar="FRAMEJUDGE_RUBRIC")] = "video-qa",
    n: Annotated[int, typer.Option("-n", "--frames", help="frame budget per turn")] = 8,
    strategy: Annotated[Strategy, typer.Option(help="how frames are chosen")] = Strategy.uniform,
    fps: Annotated[Optional[float], typer.Option(help="frames per second (fps strategy)")] = None,
    lookback: Annotated[float, typer.Option(help="seconds before a multi-turn question to show")] = 30.0,
    max_side: Annotated[int, typer.Option(help="longest side of frames sent to the judge")] = 768,
    swap: Annotated[Optional[bool], typer.Option("--swap/--no-swap", help="also grade B/A (default: on for model judges)")] = None,
    samples: Annotated[int, typer.Option(help="k samples with majority vote")] = 1,
    sample_temperature: Annotated[float, typer.Option(
        help="temperature of each of k > 1 samples (sample i has seed i); one sample is drawn at 0")] = 0.7,
    blind: Annotated[bool, typer.Option(help="blind control: grade again without frames")] = False,
    concurrency: Annotated[Optional[int], typer.Option(
        help="model calls in flight at the start (then adapted to the endpoint); items at once for judges "
             "without an endpoint (default: the judges file's, else 8; 4 items)")] = None,
    max_concurrency: Annotated[Optional[int], typer.Option(
        help="model calls in flight never above this (default: the judges file's, else 32)")] = None,
    media_root: Annotated[Optional[Path], typer.Option(help="relative video paths are under here (default: the items file's folder)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="do not use the verdict cache")] = False,
    regrade: Annotated[bool, typer.Option(
        "--regrade", help="grade again the turns whose verdicts in --out were graded differently (another rubric, "
                          "judge, options or content); the old records move to <out>.superseded.jsonl")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="do not ask before spending tokens")] = False,
    summary_json: Annotated[Optional[Path], typer.Option(help="also write the summary as JSON here")] = None,
    decode_timeout: Annotated[float, typer.Option(
        help="each video's sampling is limited to this many seconds in its decoding process")] = 600.0,
    decode_memory_mb: Annotated[int, typer.Option(help="memory cap per decoding process, MB (at least 256)")] = 4096,
    decode_workers: Annotated[Optional[int], typer.Option(
        help="decoding processes, working while model calls wait (default: the CPU count)")] = None,
    triage_path: Annotated[Optional[Path], typer.Option(
        "--triage", help="a thresholds file from framejudge triage, or 'default': the reference judge's own, "
                         "earned on its development data (refused for other judges): mark every verdict auto or "
                         "to_review")] = None,
    review_out: Annotated[Optional[Path], typer.Option(
        help="with --triage: write the to_review turns as JSONL label rows to fill in (and feed back with --human)")] = None,
) -> None:
    """Grade ITEMS and append verdicts to --out as they finish, then print a summary."""
    from pydantic import ValidationError

    from ..files import check_output, first_problem, write_problem
    from ..frame_sampler import make_params
    from ..service.settings import MAX_DECODE_MEMORY_MB, MAX_DECODE_WORKERS
    from ..judge import Grader, ItemsError, load_items
    from ..judge.base import unused_options
    from ..rubrics import get_rubric
    from ..runner.judges import Judges
    from ..runner.local import planned_turns
    from ..calibration.triage import marker, mismatch, review_rows
    from ..runner.resume import mark_kept, plan_resume, superseded_path
    from ..schema import GradeOptions
    from .triage import load_thresholds

    try:
        the_items = load_items(items)
        check_output(out_path, "verdicts", inputs=[items], read_back=True)
        if summary_json is not None and str(summary_json) != "-":
            check_output(summary_json, "summary", inputs=[items, out_path])
        if review_out is not None:
            if triage_path is None:
                raise ItemsError("--review-out writes the turns --triage sends to review: give --triage too")
            check_outputs({"summary": summary_json if str(summary_json) != "-" else None, "review rows": review_out},
                          inputs=[items, out_path, triage_path])
        thresholds = load_thresholds(triage_path) if triage_path is not None else None
        the_rubric = get_rubric(rubric)
        judges = Judges.from_env(judges_file)
        judges.api_base = api_base or judges.api_base
        if judges.configs and judge not in judges.configs and judge != "reference":
            raise ItemsError(f"judge {judge!r} is not in the judges file (it has: {', '.join(judges.configs)})")
        if (concurrency is not None and concurrency < 1) or (max_concurrency is not None and max_concurrency < 1):
            raise ItemsError("--concurrency and --max-concurrency must be at least 1")
        judges.override(judge, concurrency, max_concurrency)
        the_judge = judges.make(judge)
        params = make_params(n=n, strategy=strategy, fps=fps, lookback=lookback, max_side=max_side)
        if samples < 1:
            raise ItemsError("--samples must be at least 1")
        options = GradeOptions(sampler=params, swap=swap, samples=samples, sample_temperature=sample_temperature,
                               blind=blind, cache=not no_cache)
        unused = unused_options(the_judge, judge, samples, blind)
        if unused:
            raise ItemsError(unused)
        if media_root is not None and not media_root.is_dir():
            raise ItemsError(f"--media-root {media_root}: " + ("not a folder" if media_root.exists() else "no such folder"))
        if not decode_timeout > 0 or decode_timeout == float("inf"):
            raise ItemsError("--decode-timeout must be more than 0 seconds")
        if decode_memory_mb < 256:
            raise ItemsError(f"--decode-memory-mb {decode_memory_mb}: the cap must be at least 256 (there is no "
                             "uncapped decoding)")
        if decode_memory_mb > MAX_DECODE_MEMORY_MB:
            raise ItemsError(f"--decode-memory-mb {decode_memory_mb}: the cap must be at most {MAX_DECODE_MEMORY_MB}")
        if decode_workers is not None and decode_workers < 1:
            raise ItemsError("--decode-workers must be at least 1")
        if decode_workers is not None and decode_workers > MAX_DECODE_WORKERS:
            raise ItemsError(f"--decode-workers {decode_workers}: at most {MAX_DECODE_WORKERS} decoding processes")
        if the_judge.backend != "reference" and not (no_cache and cache_off()):
            # the verdict cache (--no-cache: none), the frame cache of the decodes (FRAMEJUDGE_NO_CACHE: none)
            check_cache_folder("pass --no-cache and set FRAMEJUDGE_NO_CACHE=1 to use neither cache")
        grader = Grader(the_judge, the_rubric, options, media_root=media_root or items.resolve().parent)
        if thresholds is not None:
            problem = mismatch(thresholds, the_judge.backend, the_judge.model_id, grader.rubric_hash)
            if problem:
                raise ItemsError(f"--triage {triage_path}: {problem}")
        plan = plan_resume(grader, the_items, out_path, regrade=regrade)
        mark = marker(thresholds) if thresholds is not None else None
        if mark is not None:
            mark_kept(plan, out_path, the_items, mark)
        if plan.superseded:
            check_output(superseded_path(out_path), "superseded verdicts", inputs=[items], read_back=True)
    except ValidationError as exc:  # an option the shared models refuse, named as the model names it
        fail(first_problem(exc, "option"))
    todo = plan.turns
    planned = planned_turns(grader, plan.work)
    calls = sum(p.calls for p in planned)
    estimate = getattr(the_judge, "estimate", None)
    est_text = estimate(the_rubric, planned, params.n) if estimate else "no tokens, no cost (runs locally)"
    kept = f", {plan.kept} already graded in {out_path}" if plan.kept else ""
    err.print(f"{len(the_items)} items, {todo} turn(s) to grade{kept}, about {calls} judge call(s): {est_text}",
              highlight=False)
    if plan.superseded:
        err.print(f"regrading: {len(plan.superseded)} verdict(s) graded differently move to "
                  f"{superseded_path(out_path)}", highlight=False)
    if getattr(the_judge, "spends", False) and not yes:
        if not sys.stdin.isatty():
            fail("this judge spends tokens: pass --yes to run without a prompt")
        if not typer.confirm("Go ahead?"):
            raise typer.Exit(1)
    from .batch_run import Decoding, run_graded

    summary = run_graded(grader, the_items, out_path, todo=todo, concurrency=concurrency, plan=plan, mark=mark,
                         decoding=Decoding(decode_workers, decode_timeout, decode_memory_mb))
    problems = []
    if review_out is not None:
        from ..judge.batch import latest, read_records

        keys = {(it.id, t) for it in the_items for t in range(len(it.turns))}
        standing = [v for k, v in sorted(latest(read_records(out_path))[0].items()) if k in keys]
        problems.append(write_output(review_out, "review rows", "".join(
            row.model_dump_json(exclude_none=True) + "\n" for row in review_rows(standing))))
    if summary_json is not None and str(summary_json) != "-":
        try:
            summary_json.write_text(summary.model_dump_json(indent=1), encoding="utf-8")
        except OSError as exc:
            out.print_json(summary.model_dump_json())
            fail(write_problem(summary_json, "summary", exc))
    out.print_json(summary.model_dump_json())
    report_problems(problems)


@app.command()
def calibrate(
    human: Annotated[Path, typer.Option("--human", help="human labels, JSONL or CSV")],
    judge_path: Annotated[Path, typer.Option("--judge", help="verdicts JSONL from framejudge grade")],
    replicates: Annotated[int, typer.Option(help="bootstrap replicates (>= 1000 recommended)")] = 1000,
    seed: Annotated[int, typer.Option(help="bootstrap seed", min=0, max=2**32 - 1)] = 0,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="write the full result as JSON")] = None,
    disagreements: Annotated[Optional[Path], typer.Option(help="write disagreements to review (JSONL label rows to fill in and feed back with --human)")] = None,
    by: Annotated[Optional[list[str]], typer.Option("--by", help="also audit per value of: turn, or a metadata field")] = None,
    compare: Annotated[Optional[Path], typer.Option(help="a second verdicts file: compare the two runs")] = None,
    report: Annotated[Optional[Path], typer.Option(help="write a self-contained HTML report here")] = None,
    gold: Annotated[Optional[Path], typer.Option(help="adjudicated gold labels (one row per unit, JSONL or CSV): "
                                                      "the judge against them beside the human majority")] = None,
) -> None:
    """Judge vs human agreement beside the human-vs-human ceiling, with bootstrap intervals."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..calibration.audit import audit, audit_slices, compare_runs, gold_shift
    from ..calibration.reliability import reliability
    from ..calibration.inputs import (LabelsError, gold_rows, human_rows, judge_rows, load_gold_labels,
                                     load_human_labels, swap_consistency, video_qa_fields)
    from ..judge import read_records

    check_outputs({"result": out_path, "report": report, "disagreements": disagreements},
                  inputs=[human, judge_path, compare, gold])
    labels = load_human_labels(human)
    golden = load_gold_labels(gold, {(h.item_id, h.turn) for h in labels}) if gold is not None else None
    for verdicts in (judge_path, compare):
        if verdicts is not None and not verdicts.is_file():
            raise LabelsError(f"{verdicts}: " + ("not a regular file" if verdicts.exists() else "no such verdicts file"))
    records = read_records(judge_path)
    second = read_records(compare) if compare is not None else None
    if replicates < 1:
        raise LabelsError("--replicates must be at least 1")
    rows_j, errors = judge_rows(records)
    fields = video_qa_fields()
    rows_h = human_rows(labels)
    check_calibration_inputs(rows_h, rows_j, records, fields, by or [], judge_path)
    with Progress(TextColumn("bootstrap {task.fields[field]}"), BarColumn(), MofNCompleteColumn(), console=err,
                  transient=True) as progress:
        task = progress.add_task("b", total=replicates * 3 * len(fields) * (2 if golden else 1), field="")

        def tick(field: str, b: int) -> None:
            progress.update(task, advance=1, field=field)

        result = audit(rows_h, rows_j, fields, judge_errors=errors, replicates=replicates, seed=seed,
                       progress=tick)
        if golden is not None:
            result.gold = gold_shift(rows_h, rows_j, gold_rows(golden), fields, replicates, seed, progress=tick)
    result.swap_consistency = swap_consistency(records)
    result.reliability = reliability(rows_h, records)
    for key in by or []:
        result.slices[key] = audit_slices(rows_h, rows_j, fields, key, replicates=replicates, seed=seed)
    comparison = compare_runs(rows_h, rows_j, judge_rows(second)[0], fields, replicates, seed) if second is not None else None
    problems = []  # an output that fails does not lose the others, nor the tables below
    if out_path is not None:
        payload = result.model_dump(mode="json")
        if comparison is not None:
            payload["comparison"] = [c.model_dump(mode="json") for c in comparison]
        problems.append(write_output(out_path, "result", json.dumps(payload, indent=1)))
    if report is not None:
        from ..calibration.report import render_html

        problems.append(write_output(report, "report", render_html(
            result, comparison, title=f"framejudge calibration: {judge_path.name}")))
    if disagreements is not None:
        from ..calibration.inputs import relabel_rows

        problems.append(write_output(disagreements, "disagreements", "".join(
            row.model_dump_json(exclude_none=True) + "\n" for row in relabel_rows(result.disagreements))))

    def fmt(iv) -> str:
        if iv.estimate is None:
            return f"undefined ({iv.undefined})"
        if iv.low is None:
            return f"{iv.estimate:.3f}"
        return f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"

    table = Table(title=f"judge vs humans ({len(result.annotators)} annotators; {result.judge_errors} judge errors left out)")
    for col in ("field", "units", "human alpha (ceiling)", "judge alpha vs majority", "judge AC1", "ties"):
        table.add_column(col)
    for f in result.fields:
        table.add_row(f.field, str(f.units), fmt(f.human_alpha), fmt(f.judge_alpha),
                      "undefined" if f.judge_ac1.value is None else f"{f.judge_ac1.value:.3f}", str(f.majority_ties))
    out.print(table)
    for key, groups in result.slices.items():
        t = Table(title=f"by {key}")
        for col in ("slice", "field", "units", "human alpha", "judge alpha vs majority"):
            t.add_column(col)
        for value, sub in groups.items():
            for f in sub.fields:
                if f.units:
                    t.add_row(value, f.field, str(f.units), fmt(f.human_alpha), fmt(f.judge_alpha))
        out.print(t)
    if comparison is not None:
        t = Table(title=f"{judge_path.name} vs {compare.name} against the human majority")
        for col in ("field", "first", "second", "difference [95% CI]"):
            t.add_column(col)
        for c in comparison:
            diff = "undefined" if c.difference is None else (
                f"{c.difference:+.3f}" + ("" if c.low is None else f" [{c.low:+.3f}, {c.high:+.3f}]"))
            t.add_row(c.field, fmt(c.first), fmt(c.second), diff)
        out.print(t)
    if result.gold:
        t = Table(title=f"against the adjudicated gold ({gold.name}): before (human majority) and after")
        for col in ("field", "before", "after", "difference [95% CI]", "agreement before", "agreement after",
                    "units before", "units after", "units changed"):
            t.add_column(col)
        for g in result.gold:
            diff = "undefined" if g.difference is None else (
                f"{g.difference:+.3f}" + ("" if g.low is None else f" [{g.low:+.3f}, {g.high:+.3f}]"))
            t.add_row(g.field, fmt(g.before), fmt(g.after), diff, percent(g.before_percent.value),
                      percent(g.after_percent.value), str(g.units_before), str(g.units_after), str(g.changed))
        out.print(t)
    if result.reliability:
        t = Table(title="the judge's confidence against agreement with the majority (10 equal-width bins)")
        for col in ("field", "units", "ECE", "Brier", "left out: ties", "left out: no confidence"):
            t.add_column(col)
        for r in result.reliability:
            shown = ("not informative", "") if not r.informative else (
                "undefined" if r.ece is None else f"{r.ece:.3f}", "undefined" if r.brier is None else f"{r.brier:.3f}")
            t.add_row(r.field, str(r.units), *shown, str(r.no_majority), str(r.no_confidence))
        out.print(t)
    if result.swap_consistency is not None:
        out.print(f"swap consistency of the judge: {result.swap_consistency:.3f}")
    report_problems(problems)


def percent(x: Optional[float]) -> str:
    return "undefined" if x is None else f"{100 * x:.1f}%"


def check_calibration_inputs(rows_h: list, rows_j: list, records: list, fields: list, by: list[str],
                             judge_path: Path) -> None:
    """Refuse a calibration that would measure nothing (no labelled turn has a verdict, a --by key
    nobody has), and warn about labelled turns the judge has no verdict for."""
    from ..calibration.audit import slice_key
    from ..calibration.inputs import unjudged_turns

    unjudged, labelled = unjudged_turns(rows_h, records)  # records: verdicts and judge errors
    if unjudged and len(unjudged) == labelled:
        fail(f"none of the {labelled} labelled turn(s) has a verdict in {judge_path} (the labels name items "
             f"such as {unjudged[0][0]!r}): are these the labels of this run?")
    if unjudged:
        examples = ", ".join(f"{i!r} turn {t}" for i, t in unjudged[:3])
        err.print(flagged("warning:", "yellow", f"{len(unjudged)} of {labelled} labelled turn(s) have no verdict "
                          f"in {judge_path} ({examples}{', ...' if len(unjudged) > 3 else ''}); they count toward "
                          "the human ceiling only"), highlight=False, soft_wrap=True)
    names = {f.name for f in fields}
    for key in by:
        if key in names:
            found = any(h.values.get(key) is not None for h in rows_h)
        else:
            found = any(slice_key(r, key) is not None for r in [*rows_h, *rows_j])
        if not found:
            known = sorted({k for r in [*rows_h, *rows_j] for k in r.metadata})
            fail(f"--by {key}: no label or verdict has it (use turn, a label field such as category_a"
                 + (f", or a metadata field: {', '.join(known)})" if known else ")"))


def check_outputs(outputs: dict[str, Optional[Path]], inputs: list[Optional[Path]]) -> None:
    """Each output path (what it holds -> path) writable, none an input or another output."""
    from ..files import OutputError, check_output

    given = [(what, path) for what, path in outputs.items() if path is not None]
    for i, (what, path) in enumerate(given):
        for other_what, other in given[:i]:
            if path.absolute() == other.absolute():
                raise OutputError(f"{path}: given for both the {other_what} and the {what}")
        check_output(path, what, inputs=inputs)


def write_output(path: Path, what: str, text: str) -> Optional[str]:
    """Write one output file; the problem, if it could not be written, for report_problems."""
    from ..files import write_problem

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return write_problem(path, what, exc)
    return None


def report_problems(problems: list[Optional[str]]) -> None:
    """The outputs that could not be written, each an error line; exit 2 if there are any."""
    problems = [p for p in problems if p]
    for p in problems[:-1]:
        err.print(flagged("error:", "bold red", p), highlight=False, soft_wrap=True)
    if problems:
        fail(problems[-1])


def service_settings():  # type: ignore[no-untyped-def]
    """The service's settings from the environment; a bad variable is an error line, exit 2."""
    from ..service.settings import Settings

    return Settings.from_env()


def service_database(url: str):  # type: ignore[no-untyped-def]
    """The service's database, created or brought up to date; one that cannot be opened is an
    error line naming FRAMEJUDGE_SERVICE_DB, exit 2."""
    from ..db import open_problem, shown_url
    from ..service.store import engine_for

    try:
        return engine_for(url)
    except Exception as exc:  # noqa: BLE001 - a database that cannot be opened is a setup error
        fail(f"FRAMEJUDGE_SERVICE_DB: cannot open the database {shown_url(url)}: {open_problem(exc)}")


keys_app = typer.Typer(help="API keys for the HTTP service.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def keys_create(
    scope: Annotated[list[str], typer.Option("--scope", help="grade, calibrate, review, metrics or admin (repeatable)")] = ["grade"],  # noqa: B006
    name: Annotated[str, typer.Option(help="who or what the key is for")] = "",
) -> None:
    """Create an API key; it is printed once (only its hash is stored)."""
    from ..service.store import create_key

    try:
        key = create_key(service_database(service_settings().database_url), scope, name)
    except ValueError as exc:
        fail(str(exc))
    print(key)


@keys_app.command("list")
def keys_list() -> None:
    """List API keys (ids, names, scopes; never secrets)."""
    from ..service.store import list_keys

    engine = service_database(service_settings().database_url)
    table = Table()
    for col in ("id", "name", "scopes", "created", "state"):
        table.add_column(col)
    for k in list_keys(engine):
        table.add_row(k.id, k.name, k.scopes, k.created_at.strftime("%Y-%m-%d %H:%M"),
                      "revoked" if k.revoked else "active")
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the key's id, as `keys list` shows it, or the whole key "
                                                              "(its secret must match)")]) -> None:
    """Revoke an API key: requests with it are refused (401) from then on."""
    from ..service.store import revoke_key

    revoked = revoke_key(service_database(service_settings().database_url), key_id)
    if revoked is None:
        fail(f"no API key with id {key_id.split('_', 2)[1] if key_id.startswith('fj_') else key_id!r}")
    print(f"revoked {revoked}")


uploads_app = typer.Typer(help="Videos uploaded to (or fetched by) the HTTP service.", no_args_is_help=True)
app.add_typer(uploads_app, name="uploads")


@uploads_app.command("prune")
def uploads_prune(
    older_than_days: Annotated[float, typer.Option(min=0, max=36500, help="delete uploads older than this many days "
                                                                          "(at most 36500, a hundred years)")] = 7.0,
) -> None:
    """Delete old uploads that no unfinished job and no stored calibration or review queue names
    (run it from cron)."""
    from datetime import timedelta

    from ..service.maintenance import prune_uploads

    settings = service_settings()
    assert settings.upload_dir is not None
    engine = service_database(settings.database_url)
    pruned = prune_uploads(engine, settings.upload_dir, timedelta(days=older_than_days))
    deleted = pruned.deleted
    print(f"deleted {len(deleted)} upload(s), {sum(u.bytes for u in deleted) / 1024**2:.1f} MiB")
    if pruned.kept:
        print(f"kept {len(pruned.kept)} old upload(s) that an unfinished job or a stored calibration (a review "
              "queue's unit pages show its videos) still names")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8000,
) -> None:
    """Run the HTTP API (settings from FRAMEJUDGE_SERVICE_DB, FRAMEJUDGE_MEDIA_ROOT, ...)."""
    import socket

    import uvicorn

    from ..db import shown_url
    from ..service.app import create_app
    from ..service.store import list_keys

    Serving = _serving()
    if not 0 <= port <= 65535:
        fail(f"--port: {port} is not a TCP port (0 to 65535)")
    settings = service_settings()
    engine = service_database(settings.database_url)
    check_cache_folder()
    app = create_app(settings)
    try:  # bound here, so an address in use or a bad host is an error line before anything starts
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        fail(f"--host/--port: cannot listen on {host} port {port}: {exc.strerror or exc}")
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{f'[{bound_host}]' if ':' in bound_host else bound_host}:{bound_port}"
    active = sum(not k.revoked for k in list_keys(engine))
    err.print(f"framejudge serve: {url} (API docs at {url}/docs)", highlight=False, soft_wrap=True)
    graded_by = ("here and by any `framejudge worker`" if settings.run_worker else
                 "by `framejudge worker` processes only (FRAMEJUDGE_SERVICE_WORKER=0)")
    err.print(f"database: {shown_url(settings.database_url)}; jobs are graded {graded_by}", highlight=False,
              soft_wrap=True)
    if active:
        err.print(f"API keys: {active} active (`framejudge keys list`)", highlight=False, soft_wrap=True)
    else:
        err.print(flagged("note:", "yellow", "no active API key: requests that need one are refused (401); make "
                          "one with `framejudge keys create --scope grade` (same FRAMEJUDGE_SERVICE_DB)"),
                  highlight=False, soft_wrap=True)
    err.print("Ctrl-C or SIGTERM stops it (the items being graded are finished first)", highlight=False)
    # forwarded headers are believed only from FRAMEJUDGE_TRUSTED_PROXIES, by the app itself
    Serving(uvicorn.Config(app, log_level="warning", proxy_headers=False)).run(sockets=[sock])
    err.print(f"framejudge serve: stopped ({url})", highlight=False, soft_wrap=True)


def _serving() -> type:
    import contextlib
    import signal

    import uvicorn

    class Serving(uvicorn.Server):
        """uvicorn's server, stopping gracefully on SIGINT or SIGTERM as it does, then returning
        (uvicorn raises the signal again once stopped, which ends the process before `serve` can
        say that it stopped)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Serving


@app.command()
def worker(
    max_in_flight: Annotated[Optional[int], typer.Option(help="items graded at once, at most (default: "
                                                              "FRAMEJUDGE_WORKER_IN_FLIGHT, else 256)")] = None,
) -> None:
    """Grade queued job items from the service's database, with no HTTP (run any number, on any
    machine that reaches the database and the videos). Same settings as `serve`
    (FRAMEJUDGE_SERVICE_DB, FRAMEJUDGE_JUDGES_FILE, FRAMEJUDGE_LEASE_SECONDS, ...). SIGTERM or
    Ctrl-C: finishes the items in hand, hands back the rest, exits."""
    import asyncio
    import signal


    from ..frame_sampler import IsolatedSampler
    from ..runner.decode import SharedDecodes
    from ..runner.graders import GraderCache
    from ..runner.judges import Judges, load_judges_file
    from ..db import shown_url
    from ..runner.worker import QueueWorker

    settings = service_settings()
    configs = load_judges_file(settings.judges_file) if settings.judges_file else []
    engine = service_database(settings.database_url)
    if max_in_flight is not None and max_in_flight < 1:
        fail("--max-in-flight must be at least 1")
    check_cache_folder()
    decoder = IsolatedSampler(workers=settings.decode_workers, timeout_s=settings.decode_timeout_s,
                              max_memory_mb=settings.decode_memory_mb)
    graders = GraderCache(SharedDecodes(decoder.sample), Judges(configs, api_base=settings.api_base))
    queue_worker = QueueWorker(engine, graders, lease_s=settings.lease_s,
                               max_in_flight=max_in_flight or settings.worker_max_in_flight)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        err.print(f"worker {queue_worker.name} grading from {shown_url(settings.database_url)}", highlight=False)
        await queue_worker.run(stop)

    try:
        asyncio.run(main())
    finally:
        decoder.close()
    err.print(f"worker {queue_worker.name} stopped: {queue_worker.graded} item(s) graded", highlight=False)


RubricDirs = Annotated[
    Optional[list[Path]], typer.Option("--dir", help="also load rubric files (*.yaml) from here")
]


def check_rubric_dirs(dirs: Optional[list[Path]]) -> None:
    for folder in dirs or []:
        if not folder.is_dir():
            fail(f"--dir {folder}: no such folder" if not folder.exists() else f"--dir {folder}: not a folder")


@rubrics_app.command("list")
def rubrics_list(dirs: RubricDirs = None) -> None:
    """List the rubrics available (built in, FRAMEJUDGE_RUBRICS folders, --dir) and the file each
    comes from; files that cannot be used are reported after the list (exit 2)."""
    from ..rubrics import scan_rubrics

    check_rubric_dirs(dirs)
    scan = scan_rubrics(dirs or [])
    table = Table()
    for col in ("id", "kind", "version", "hash", "title", "from"):
        table.add_column(col)
    for r in scan.rubrics.values():
        table.add_row(r.id, r.kind, r.version, r.content_hash, r.title, scan.sources[r.id])
    out.print(table)
    report_problems(scan.problems)


@rubrics_app.command("show")
def rubrics_show(
    ref: Annotated[str, typer.Argument(help="rubric id, or a path to a rubric file")],
    dirs: RubricDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="the validated data as JSON")] = False,
) -> None:
    """Print a rubric as the text a judge receives (or as JSON)."""
    from ..rubrics import get_rubric
    from ..rubrics.prompt import rubric_text

    check_rubric_dirs(dirs)
    rubric = get_rubric(ref, dirs or [])
    if as_json:
        out.print_json(rubric.model_dump_json())
    else:
        print(rubric_text(rubric))


@mcq_app.command("score")
def mcq_score(
    predictions: Annotated[Path, typer.Argument(help="JSONL: one prediction per row")],
    gold: Annotated[Path, typer.Argument(help="JSONL: gold letter and options per row")],
    key: Annotated[str, typer.Option(help="field joining the two files")] = "video_path",
    prediction_field: Annotated[str, typer.Option(help="field holding the reply")] = "mcq_answer",
    gold_field: Annotated[str, typer.Option(help="field holding the gold letter")] = "mcq_answer",
    options_field: Annotated[str, typer.Option(help="field holding the options")] = "mcq_options",
    details: Annotated[Optional[Path], typer.Option(help="write per-row results (JSONL) here")] = None,
) -> None:
    """Accuracy of multiple-choice predictions, with unparseable replies counted apart."""
    from ..rubrics.mcq import score_files

    check_outputs({"details": details}, inputs=[predictions, gold])
    report = score_files(predictions, gold, key, prediction_field, gold_field, options_field)
    out.print_json(report.model_dump_json(exclude={"rows"}))
    if details is not None:
        report_problems([write_output(details, "details", "".join(row.model_dump_json() + "\n"
                                                                    for row in report.rows))])


def plain_warnings() -> None:
    """framejudge's own warnings (a damaged video's, from sampling) as one plain `warning:` line
    each, like the CLI's other notes; Python's own format (file, line, source) stays for others."""
    python_format = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if category.__module__.startswith("framejudge."):
            err.print(flagged("warning:", "yellow", str(message)), highlight=False, soft_wrap=True)
        else:
            python_format(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main() -> None:
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


# the command groups kept in their own modules register themselves on `app`
from . import align, leaderboard, triage  # noqa: E402,F401
from . import labels as labels_commands  # noqa: E402,F401
