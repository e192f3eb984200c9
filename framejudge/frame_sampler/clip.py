"""A turn's window cut out of a video as an MP4 clip, for judges that take video itself.

The window is the one the frame sampler uses for the turn (the question time `end_at` and its
`lookback`, a `start`/`end`, or the whole video), resolved on the same demux index. Two ways out:

- stream copy (remux): the packets from the key frame at or before the window's start to the last
  frame on screen in the window, unchanged, with their times moved so the clip starts at 0. Taken
  for H.264 (what every provider that takes video decodes from MP4) when the key frame is at most
  MAX_KEYFRAME_LEAD_S before the window, the packets of those frames are contiguous in decode order
  (no frame after the window is needed to decode one inside it, so none is shown), and the clip fits
  (the stream's display rotation goes with its parameters);
- re-encode (H.264, at `fps` and at most `max_side` pixels a side): otherwise. Frame i of the clip
  is the frame on screen at window start + i / fps, as the sampler picks frames, so the clip holds
  exactly the frames a judge sampling at `fps` sees.

A clip above `max_bytes` (what the judge's provider takes inline; MAX_CLIP_BYTES by default) is
refused (ClipTooLarge), never cut down silently.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import av.container
import numpy as np

from ..schema import MAX_CLIP_FPS, ClipInfo, SamplerParams
from .decode import Converter, DecodeReport, decode_picks
from .errors import DecodeFailed, FrameSamplerError, InvalidRequest, NoFrames
from .index import FrameIndex, build_index, scan
from .objects import is_url, local_copy, local_path_of, named
from .plan import Window, resolve_window
from .probe import Limits, candidate_streams, check_path, check_stream, open_container

# A clip travels inline, base64-encoded (4 bytes for 3), beside the rubric and the turn's text, in a
# request whose size the provider bounds. INLINE_REQUEST_BYTES is the bound where nothing better is
# known (Vertex AI's 20 MB request; a self-hosted vLLM server's default is taken to be no larger);
# a judge with a larger one (the Gemini API's 100 MB) passes its own `max_bytes` (clip_bytes).
INLINE_REQUEST_BYTES = 20 * 1000 * 1000
PROMPT_ALLOWANCE = 1000 * 1000  # the rubric, the turn and the JSON around them


def clip_bytes(request_bytes: int) -> int:
    """The largest clip whose base64 text and the prompt fit in a request of `request_bytes`."""
    return (request_bytes - PROMPT_ALLOWANCE) * 3 // 4


def request_bytes(max_bytes: int) -> int:
    """The request size a clip limit was made for (clip_bytes' inverse, rounded to the MB)."""
    return round((max_bytes * 4 / 3 + PROMPT_ALLOWANCE) / 1e6) * 1000 * 1000


MAX_CLIP_BYTES = clip_bytes(INLINE_REQUEST_BYTES)
MAX_KEYFRAME_LEAD_S = 2.0  # a stream copy may start this much before the window (the key frame's time)
REMUX_CODECS = frozenset({"h264"})
ENCODE_CRF = 28
ENCODE_PRESET = "veryfast"
ENCODE_CHUNK = 64  # frames decoded at a time while re-encoding (memory: that many images at max_side)


class ClipTooLarge(FrameSamplerError):
    """The clip of a turn's window is above what a provider takes inline."""

    code = "clip_too_large"


@dataclass(frozen=True)
class Clip:
    """An MP4 clip of a turn's window, and what it shows."""

    data: bytes
    start: float  # seconds of the video at the clip's time 0
    end: float  # seconds of the video where the clip ends
    fps: float  # the rate a judge is asked to sample it at (the clip's own rate when re-encoded)
    method: Literal["remux", "encode"]
    window: tuple[float, float]  # the sampler's window for the turn
    width: int
    height: int

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def data_url(self) -> str:
        return "data:video/mp4;base64," + base64.b64encode(self.data).decode("ascii")

    def info(self) -> ClipInfo:
        return ClipInfo(sha256=self.sha256, start=round(self.start, 6), end=round(self.end, 6), fps=self.fps,
                        bytes=len(self.data), method=self.method)


def cut_clip(path: str | Path, params: SamplerParams, fps: float = 1.0, max_bytes: int = MAX_CLIP_BYTES, *,
             limits: Limits = Limits()) -> Clip:
    """The MP4 clip of the window `params` give (as sample_frames resolves it). Raises a
    FrameSamplerError for bad input, ClipTooLarge above `max_bytes`."""
    if not 0 < fps <= MAX_CLIP_FPS:
        raise InvalidRequest(f"clip fps must be in (0, {MAX_CLIP_FPS:g}], got {fps:g}")
    if is_url(path):
        url = str(path)
        local = local_path_of(url)
        if local is None:
            with named(url), local_copy(url, limits.max_file_bytes) as (copy, _):
                return _cut_file(copy, params, fps, limits, max_bytes)
        path = local
    return _cut_file(check_path(path, limits), params, fps, limits, max_bytes)


def _cut_file(p: Path, params: SamplerParams, fps: float, limits: Limits, max_bytes: int) -> Clip:
    container = open_container(p)
    try:
        candidates = candidate_streams(container, p, params.stream)
        main, packets, damage = scan(container, candidates)
        position = params.stream if params.stream is not None else [s.index for s in candidates].index(main.index)
        index = build_index(main, packets, damage, position)
        if len(index) == 0:
            raise NoFrames("the video stream holds no frames", str(p))
        check_stream(main, p, limits)
        window, _ = resolve_window(params, index, str(p))
        clip = _remux(container, main, index, window, fps, max_bytes)
        if clip is None:
            clip = _encode(container, main, index, window, fps, params.max_side, max_bytes, str(p))
    finally:
        container.close()
    return clip


def _too_large(size: int, window: Window, fps: float, max_bytes: int, path: str) -> ClipTooLarge:
    return ClipTooLarge(f"the clip of {window.start:.2f}-{window.end:.2f} s at {fps:g} fps is over "
                        f"{_size(max_bytes)} ({_size(size)} so far), above what the judge's provider takes inline "
                        f"({request_bytes(max_bytes) / 1e6:g} MB a request); shorten the window (lookback), lower the "
                        "clip fps or max_side, or send frames", path)


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _span(index: FrameIndex, window: Window) -> tuple[int, int]:
    """First and last index positions on screen in the window (as the sampler's plan has them)."""
    from .plan import _in_window

    shown = _in_window(index, window)
    return int(shown[0]), int(shown[-1])


def _remux(container: av.container.InputContainer, stream: av.video.stream.VideoStream, index: FrameIndex,
           window: Window, fps: float, max_bytes: int) -> Clip | None:
    """The window's packets copied into an MP4, or None where a copy would not do (see the module)."""
    if stream.codec_context.name not in REMUX_CODECS or index.resets:
        return None
    first, last = _span(index, window)
    keys = np.flatnonzero(index.key[: first + 1])
    if not len(keys):
        return None
    k = int(keys[-1])
    times = index.times
    if window.start - times[k] > MAX_KEYFRAME_LEAD_S:
        return None
    order = index.decode_pos[k : last + 1]
    if int(order.max() - order.min()) + 1 != len(order) or int(order.min()) != int(index.decode_pos[k]):
        return None  # a frame of the window needs one outside it (or the key frame is not decoded first)
    wanted = {int(x) for x in index.pts[k : last + 1]}
    if len(wanted) != last + 1 - k:
        return None
    origin = int(index.pts[k])
    buf = io.BytesIO()
    out = av.open(buf, "w", format="mp4")
    ok = False
    try:
        ost = out.add_stream_from_template(stream)
        container.seek(int(index.seek_pts[k]), stream=stream, backward=True, any_frame=False)
        started = False
        for packet in container.demux(stream):
            if packet.size == 0 or packet.pts is None:
                continue
            pts = int(packet.pts)
            if not started:
                if pts != origin:
                    continue
                started = True
            if pts not in wanted:
                return None
            wanted.discard(pts)
            packet.pts = pts - origin
            packet.dts = int(packet.dts) - origin if packet.dts is not None else None
            packet.stream = ost
            out.mux(packet)
            if buf.tell() > max_bytes:
                return None  # a re-encode at the clip's fps and size may fit
            if not wanted:
                break
        ok = not wanted
    finally:
        out.close()
    if not ok:
        return None
    data = buf.getvalue()
    if len(data) > max_bytes:
        return None
    end = float(min(window.end, index.times[last] + _duration(index, last)))
    ctx = stream.codec_context
    return Clip(data, float(times[k]), end, fps, "remux", (window.start, window.end), ctx.width, ctx.height)


def _duration(index: FrameIndex, i: int) -> float:
    ticks = np.append(index.ticks[1:], index.end_ticks)
    return float((ticks[i] - index.ticks[i]) * index.time_base)


def _encode(container: av.container.InputContainer, stream: av.video.stream.VideoStream, index: FrameIndex,
            window: Window, fps: float, max_side: int, max_bytes: int, path: str) -> Clip:
    """The window re-encoded as H.264 at `fps`: frame i is the frame on screen at start + i / fps."""
    count = max(1, math.ceil((window.end - window.start) * fps - 1e-9))
    targets = [index.frame_at(window.start + i / fps) for i in range(count)]
    sar = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio
    convert = Converter(Fraction(sar) if sar else None, max_side)
    report = DecodeReport()
    tb = Fraction(1, 1000)
    buf = io.BytesIO()
    out = av.open(buf, "w", format="mp4")
    ost = None
    size = (0, 0)
    previous: np.ndarray | None = None
    try:
        for at in range(0, count, ENCODE_CHUNK):
            chunk = targets[at : at + ENCODE_CHUNK]
            got = decode_picks(container, stream, index, sorted(set(chunk)), convert, report)
            for i, pick in enumerate(chunk, start=at):
                found = got.get(pick)
                image = found.image if found is not None else previous
                if image is None:
                    continue
                previous = image
                if ost is None:
                    h, w = image.shape[:2]
                    size = (max(2, w - w % 2), max(2, h - h % 2))  # 4:2:0 wants even sides
                    ost = out.add_stream("libx264", rate=Fraction(fps).limit_denominator(1000))
                    ost.width, ost.height = size
                    ost.pix_fmt = "yuv420p"
                    ost.codec_context.time_base = tb
                    ost.codec_context.options = {"crf": str(ENCODE_CRF), "preset": ENCODE_PRESET}
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image[: size[1], : size[0]]), format="rgb24")
                frame.pts = round(i / fps / tb)
                frame.time_base = tb
                out.mux(ost.encode(frame))
                if buf.tell() > max_bytes:
                    raise _too_large(buf.tell(), window, fps, max_bytes, path)
            if report.stopped_at is not None:
                break
        if ost is None:
            detail = "; ".join(report.messages) or "the decoder returned no pictures"
            raise DecodeFailed(f"no frame of the window could be decoded ({detail})", path)
        out.mux(ost.encode(None))
    finally:
        out.close()
    data = buf.getvalue()
    if len(data) > max_bytes:
        raise _too_large(len(data), window, fps, max_bytes, path)
    end = min(window.end, window.start + count / fps)
    return Clip(data, window.start, end, fps, "encode", (window.start, window.end), size[0], size[1])
