"""sample_frames: the one entry point. Validate, scan, plan, decode, cache."""

from __future__ import annotations

import base64
import io
import os
import warnings as pywarnings
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av
import numpy as np
from PIL import Image
from pydantic import ValidationError

from ..env import cache_off
from ..schema import FrameInfo, SamplerParams, Strategy, VideoInfo
from .cache import FrameCache, default_cache_dir
from .decode import Converter, DecodeReport, Picked, decode_picks, scene_pass
from .encode import to_data_url, to_jpeg
from .errors import DecodeFailed, InvalidRequest, NoFrames
from .index import build_index, scan
from .objects import is_url, local_copy, local_path_of, named
from .orient import display_size
from .plan import Plan, plan
from .probe import Limits, candidate_streams, check_path, check_stream, open_container


class SamplingWarning(UserWarning):
    """Raised through `warnings` when frames came back but something was wrong with the input."""


@dataclass
class SampledFrame:
    info: FrameInfo
    image: np.ndarray  # RGB, uint8, (height, width, 3), display orientation

    @property
    def timestamp(self) -> float:
        return self.info.timestamp

    def to_pil(self) -> Image.Image:
        return Image.fromarray(self.image)

    def data_url(self, quality: int) -> str:
        """The frame as a JPEG data URL, as a model call sends it."""
        return to_data_url(self.image, quality)


@dataclass
class EncodedFrame:
    """A sampled frame as the JPEG a model call sends (`quality`), made where it was decoded: a
    tenth of the pixels' size or less to carry between processes or machines (the Ray engine's
    decoding and grading actors). `data_url` at the same quality is the data URL `SampledFrame`
    gives, byte for byte; `image` decodes the JPEG (not the pixels it was made of)."""

    info: FrameInfo
    jpeg: bytes
    quality: int

    @property
    def timestamp(self) -> float:
        return self.info.timestamp

    @property
    def image(self) -> np.ndarray:
        with Image.open(io.BytesIO(self.jpeg)) as im:
            return np.asarray(im.convert("RGB"))

    def to_pil(self) -> Image.Image:
        return Image.fromarray(self.image)

    def data_url(self, quality: int) -> str:
        if quality != self.quality:
            return to_data_url(self.image, quality)
        return "data:image/jpeg;base64," + base64.b64encode(self.jpeg).decode("ascii")


@dataclass
class SampleResult:
    frames: list[SampledFrame | EncodedFrame]  # EncodedFrame: carried elsewhere as JPEG (encoded)
    video: VideoInfo
    params: SamplerParams
    window: tuple[float, float]
    warnings: list[str] = field(default_factory=list)
    from_cache: bool = False
    packets_decoded: int = 0  # decoder work this result cost (0 when it came from the cache)
    seeks: int = 0

    @property
    def timestamps(self) -> list[float]:
        return [f.info.timestamp for f in self.frames]

    def encoded(self, quality: int) -> SampleResult:
        """The same result with its frames as JPEG (EncodedFrame), to carry elsewhere."""
        frames: list[SampledFrame | EncodedFrame] = [EncodedFrame(f.info, to_jpeg(f.image, quality), quality) if isinstance(f, SampledFrame)
                             else f for f in self.frames]
        return replace(self, frames=frames)


_DEFAULT_CACHE: dict[str, FrameCache] = {}


def _resolve_cache(cache: FrameCache | Literal["default"] | None) -> FrameCache | None:
    if cache != "default":
        return cache
    if cache_off():
        return None
    key = str(default_cache_dir())
    if key not in _DEFAULT_CACHE:
        _DEFAULT_CACHE[key] = FrameCache(key)
    return _DEFAULT_CACHE[key]


def make_params(params: SamplerParams | None = None, **overrides: Any) -> SamplerParams:
    """Build sampler parameters, turning validation failures into InvalidRequest."""
    try:
        if params is None:
            return SamplerParams(**overrides)
        return SamplerParams(**{**params.model_dump(), **overrides}) if overrides else params
    except ValidationError as exc:
        reasons = "; ".join(
            (e["msg"].removeprefix("Value error, ") + (f" ({'.'.join(map(str, e['loc']))})" if e["loc"] else ""))
            for e in exc.errors()
        )
        raise InvalidRequest(reasons) from None


def sample_frames(
    path: str | os.PathLike[str],
    params: SamplerParams | None = None,
    *,
    cache: FrameCache | Literal["default"] | None = "default",
    limits: Limits = Limits(),
    **overrides: Any,
) -> SampleResult:
    """Sample frames from a video.

    `params` (or keyword overrides such as ``strategy="uniform", n=8, end_at=42.5``)
    decide which frames; `cache` is a FrameCache, "default" (the user cache
    directory, or FRAMEJUDGE_CACHE_DIR) or None. `path` may also be an
    s3:// or gs:// URL (read into a node-local copy first: `objects`) or a
    file:// URL. Raises a FrameSamplerError
    subclass with a plain message for any bad input; recoverable damage comes
    back as `warnings` on the result (and as SamplingWarning).
    """
    params = make_params(params, **overrides)
    store = _resolve_cache(cache)
    if is_url(path):
        url = str(path)
        local = local_path_of(url)
        if local is None:
            with named(url), local_copy(url, limits.max_file_bytes) as (copy, sha):
                if store is not None:
                    store.remember_hash(copy, sha)
                result = _sample_file(copy, params, store, limits)
            result.video.path = url
            return _warned(result, url)
        path = local
    p = check_path(path, limits)
    return _warned(_sample_file(p, params, store, limits), str(p))


def video_duration(path: str | os.PathLike[str], limits: Limits = Limits()) -> float:
    """A local video's duration as sampling reads it (seconds from the first frame to the end of the
    last: a demux scan, nothing decoded). Raises a FrameSamplerError where the file cannot be read."""
    p = check_path(path, limits)
    container = open_container(p)
    try:
        candidates = candidate_streams(container, p, None)
        main, packets, damage = scan(container, candidates)
        index = build_index(main, packets, damage, [s.index for s in candidates].index(main.index))
        if len(index) == 0:
            raise NoFrames("the video stream holds no frames", str(p))
        return index.duration
    finally:
        container.close()


def _warned(result: SampleResult, name: str) -> SampleResult:
    for w in result.warnings:
        pywarnings.warn(f"{name}: {w}", SamplingWarning, stacklevel=3)
    return result


def _sample_file(p: Path, params: SamplerParams, store: FrameCache | None, limits: Limits) -> SampleResult:
    """Sample the checked file `p`, through the frame cache `store` (None: none)."""
    sha = store.file_hash(p) if store is not None else None
    key = FrameCache.key(sha, params, limits) if store is not None and sha else None
    if store is not None and key:
        hit = store.get(key)
        if hit is not None:
            hit.video.path = str(p)
            hit.from_cache = True
            hit.packets_decoded = hit.seeks = 0
            return hit
    result = _sample(p, params, limits, sha)
    if store is not None and key:
        store.put(key, result)
    return result


def _sample(p: Path, params: SamplerParams, limits: Limits, sha: str | None) -> SampleResult:
    container = open_container(p)
    try:
        candidates = candidate_streams(container, p, params.stream)
        main, packets, damage = scan(container, candidates)
        position = [s.index for s in candidates].index(main.index)
        if params.stream is not None:
            position = params.stream
        index = build_index(main, packets, damage, position)
        if len(index) == 0:
            if damage:
                raise NoFrames(f"no readable frames: the container is damaged ({damage})", str(p))
            raise NoFrames("the video stream holds no frames", str(p))
        check_stream(main, p, limits)
        the_plan = plan(params, index, str(p))
        sar = main.sample_aspect_ratio or main.codec_context.sample_aspect_ratio
        convert = Converter(Fraction(sar) if sar else None, params.max_side)
        report = DecodeReport()
        frames, rotation = _decode(container, main, index, the_plan, params, convert, report)
        # what the stream says of itself, read while the container is open (PyAV refuses it after close)
        ctx = main.codec_context
        width, height, codec = ctx.width, ctx.height, ctx.name
        rate = main.average_rate or main.guessed_rate
        container_name = container.format.name
    finally:
        container.close()

    warnings_out = index.warnings + the_plan.warnings + report.messages
    if not frames:
        detail = "; ".join(report.messages) or "the decoder returned no pictures"
        raise DecodeFailed(f"no frame could be decoded ({detail})", str(p))
    if report.errors:
        warnings_out.append(
            f"{report.errors} packet(s) could not be decoded; {report.skipped} picture(s) "
            "depending on them were skipped"
        )

    disp_w, disp_h = display_size(width, height, convert.sar, swap=rotation in (90, 270))
    video = VideoInfo(
        path=str(p),
        sha256=sha,
        container=container_name,
        codec=codec,
        stream_index=index.stream_index,
        width=width,
        height=height,
        display_width=disp_w,
        display_height=disp_h,
        rotation=rotation,
        duration=round(index.duration, 6),
        frame_count=len(index),
        keyframe_count=int(index.key.sum()),
        average_fps=float(rate) if rate else None,
        start_pts=index.start_pts,
        time_base=str(index.time_base),
    )
    return SampleResult(
        frames=[*frames],
        video=video,
        params=params,
        window=(the_plan.window.start, the_plan.window.end),
        warnings=list(dict.fromkeys(warnings_out)),
        packets_decoded=report.packets_decoded,
        seeks=report.seeks,
    )


def _decode(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    index: Any,
    the_plan: Plan,
    params: SamplerParams,
    convert: Converter,
    report: DecodeReport,
) -> tuple[list[SampledFrame], int]:
    """Decode the plan; returns the frames in time order and the display rotation applied."""
    picked: dict[int, tuple[Picked, str]] = {}  # tick -> (frame, reason)

    def add(p: Picked | None, reason: str) -> None:
        if p is None:
            return
        if p.tick in picked:
            old_reason = picked[p.tick][1]
            if reason not in old_reason.split("+"):
                picked[p.tick] = (picked[p.tick][0], f"{old_reason}+{reason}")
        else:
            picked[p.tick] = (p, reason)

    if params.strategy is Strategy.scene:
        window_frames = list(the_plan.picks)
        first, last = the_plan.span
        end_pick = [i for i in window_frames if the_plan.reasons[i] == "end_at"]
        budget = params.n - len(end_pick)
        cuts, fallback = scene_pass(
            container, stream, index, first, last, budget, params.scene_threshold,
            window_frames, convert, report,
        )
        for c in cuts:
            add(c, "scene")
        for i in end_pick:
            add(fallback.get(i), "end_at")
        if len(cuts) < budget:
            report.messages.append(
                f"{len(cuts)} scene change(s) found for a budget of {params.n}; "
                "the rest are uniform frames"
            )
            fill = [i for i in window_frames if i not in end_pick]
            need = budget - len(cuts)
            taken = 0
            for i in _spread(fill, len(fill)):
                f = fallback.get(i)
                if f is None or f.tick in picked:
                    continue
                add(f, "uniform")
                taken += 1
                if taken >= need:
                    break
    elif params.strategy is Strategy.keyframes:
        keys = [i for i in the_plan.picks if the_plan.reasons[i] != "end_at"]
        exact = [i for i in the_plan.picks if the_plan.reasons[i] == "end_at"]
        got = decode_picks(container, stream, index, keys, convert, report, keyframes_only=True)
        for i in keys:
            add(got.get(i), "keyframe")
        if exact:
            got = decode_picks(container, stream, index, exact, convert, report)
            for i in exact:
                add(got.get(i), "end_at")
    else:
        got = decode_picks(container, stream, index, the_plan.picks, convert, report)
        for i in the_plan.picks:
            add(got.get(i), the_plan.reasons[i])
        missing = [i for i in the_plan.picks if (g := got.get(i)) is not None and g.tick != int(index.ticks[i])]
        if missing:
            report.messages.append(
                f"{len(missing)} planned frame(s) could not be decoded; the last good frame before "
                "each was used"
            )

    ticks_sorted = sorted(picked)
    tb = float(index.time_base)
    position = {int(t): i for i, t in enumerate(index.ticks)}
    out: list[SampledFrame] = []
    rotation = 0
    for tick in ticks_sorted:
        p, reason = picked[tick]
        rotation = p.rotation
        h, w = p.image.shape[:2]
        info = FrameInfo(
            timestamp=round(tick * tb, 6),
            pts=p.pts,
            index=position.get(tick),
            keyframe=p.keyframe,
            width=w,
            height=h,
            reason=reason,
        )
        out.append(SampledFrame(info=info, image=p.image))
    # Budget is a hard limit whatever happened above.
    out = out[: params.n] if len(out) <= params.n else [out[i] for i in _spread(list(range(len(out))), params.n)]
    return out, rotation


def _spread(items: list[int], n: int) -> list[int]:
    if len(items) <= n:
        return list(items)
    pos = np.unique(np.round(np.linspace(0, len(items) - 1, n)).astype(int))
    return [items[i] for i in pos]
