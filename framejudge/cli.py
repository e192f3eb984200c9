"""The framejudge command line: parse arguments, call the library, print."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from .schema import Strategy

app = typer.Typer(
    name="framejudge",
    help="LLM-as-judge grading for video question answering.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
examples_app = typer.Typer(help="The bundled example clips.", no_args_is_help=True)
app.add_typer(examples_app, name="examples")
rubrics_app = typer.Typer(help="Grading rubrics: built-in and your own files.", no_args_is_help=True)
app.add_typer(rubrics_app, name="rubrics")
mcq_app = typer.Typer(help="Multiple-choice answer scoring.", no_args_is_help=True)
app.add_typer(mcq_app, name="mcq")

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
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
    from .frame_sampler import FrameSamplerError, SamplingWarning, sample_frames
    from .frame_sampler import contact_sheet as make_sheet
    from .frame_sampler import to_jpeg

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
            out_dir.mkdir(parents=True, exist_ok=True)
            for f, data in zip(result.frames, jpegs):
                (out_dir / f"{f.info.timestamp:010.3f}s.jpg").write_bytes(data)
        if contact_sheet is not None:
            contact_sheet.parent.mkdir(parents=True, exist_ok=True)
            make_sheet([f.image for f in result.frames], result.timestamps).save(contact_sheet)
    except FrameSamplerError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write output: {exc}")

    for w in result.warnings:
        err.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
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


@examples_app.command("make")
def examples_make(
    directory: Annotated[Path, typer.Argument(help="where to write the clips")] = Path("examples/videos"),
    overwrite: Annotated[bool, typer.Option(help="rewrite clips that already exist")] = False,
) -> None:
    """Generate the bundled example clips (moving shapes, text, a scene cut, a countdown)."""
    from .examples.clips import make_examples

    try:
        paths = make_examples(directory, overwrite=overwrite)
    except OSError as exc:
        fail(f"cannot write examples: {exc}")
    for p in paths:
        out.print(str(p))


RubricDirs = Annotated[
    Optional[list[Path]], typer.Option("--dir", help="also load rubric files (*.yaml) from here")
]


@rubrics_app.command("list")
def rubrics_list(dirs: RubricDirs = None) -> None:
    """List the rubrics available (built in, FRAMEJUDGE_RUBRICS folders, --dir)."""
    from .rubrics import RubricError, all_rubrics

    try:
        found = all_rubrics(dirs or [])
    except RubricError as exc:
        fail(str(exc))
    table = Table()
    for col in ("id", "kind", "version", "hash", "title"):
        table.add_column(col)
    for r in found.values():
        table.add_row(r.id, r.kind, r.version, r.content_hash, r.title)
    out.print(table)


@rubrics_app.command("show")
def rubrics_show(
    ref: Annotated[str, typer.Argument(help="rubric id, or a path to a rubric file")],
    dirs: RubricDirs = None,
    as_json: Annotated[bool, typer.Option("--json", help="the validated data as JSON")] = False,
) -> None:
    """Print a rubric as the text a judge receives (or as JSON)."""
    from .rubrics import RubricError, get_rubric
    from .rubrics.prompt import rubric_text

    try:
        rubric = get_rubric(ref, dirs or [])
    except RubricError as exc:
        fail(str(exc))
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
    from .rubrics.mcq import MCQScoreError, score_files

    try:
        report = score_files(predictions, gold, key, prediction_field, gold_field, options_field)
    except MCQScoreError as exc:
        fail(str(exc))
    if details is not None:
        with open(details, "w", encoding="utf-8") as f:
            for row in report.rows:
                f.write(row.model_dump_json() + "\n")
    out.print_json(report.model_dump_json(exclude={"rows"}))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
