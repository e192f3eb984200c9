"""framejudge frames: sample frames from one video and show (or write) what was sampled."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..env import cache_off
from ..schema import Strategy
from .console import err, fail, flagged, out
from .options import Fps, StrategyOption
from .outputs import check_cache_folder, check_image_name


def frames(
    video: Annotated[Path, typer.Argument(help="video file")],
    strategy: StrategyOption = Strategy.uniform,
    n: Annotated[int, typer.Option("-n", "--n", help="frame budget (most frames returned)")] = 16,
    fps: Fps = None,
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
    try:
        if out_dir is not None:
            target, writing = out_dir, "frames"
            for f, data in zip(result.frames, jpegs):
                (out_dir / f"{f.info.timestamp:010.3f}s.jpg").write_bytes(data)
        if contact_sheet is not None:
            target, writing = contact_sheet, "contact sheet"
            make_sheet([f.image for f in result.frames], result.timestamps).save(contact_sheet)
    except OSError as exc:  # a write that failed after the work (a full disk, a file size limit)
        fail(write_problem(target, writing, exc))

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
