"""GOP-aware decoding of planned frames, and the scene-change pass.

Targets are grouped by the key frame they need. The decoder seeks only when
the next target's key frame is further ahead than a few packets of decoding,
otherwise it keeps decoding forward, so N frames cost at most the GOP prefixes
that hold them (never the whole file, never the same GOP twice). Each pick is
converted to the output size in one swscale pass as soon as it is final, so
memory is the picks at output size plus the decoder's own GOP buffers.
Packet-level damage is caught and reported with the time it happened.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator
from dataclasses import dataclass, field
from fractions import Fraction

import av
import av.container
import numpy as np

from .index import FrameIndex, Timeline
from .orient import orientation, output_size

# Decoding this many packets forward is cheaper than a seek (flush + lost frame threads).
SEEK_COST_PACKETS = 24
# Give up on a stream after this many consecutive undecodable packets.
MAX_CONSECUTIVE_ERRORS = 64


@dataclass
class Picked:
    tick: int
    pts: int
    keyframe: bool
    image: np.ndarray
    rotation: int


@dataclass
class DecodeReport:
    errors: int = 0
    first_error_at: float | None = None
    stopped_at: float | None = None  # where decoding had to stop early
    messages: list[str] = field(default_factory=list)
    packets_decoded: int = 0
    seeks: int = 0
    skipped: int = 0  # decoded pictures not used: damaged, or depending on damaged data


class Converter:
    """Frame -> RGB array at output size, display orientation applied."""

    def __init__(self, sar: Fraction | None, max_side: int):
        self.sar = sar if sar and sar > 0 and sar != 1 else None
        self.max_side = max_side

    def __call__(self, frame: av.VideoFrame) -> tuple[np.ndarray, int]:
        rotation, transform, _ = orientation(frame)
        w, h = output_size(frame.width, frame.height, self.sar, self.max_side)
        rgb = frame.reformat(width=w, height=h, format="rgb24", interpolation="AREA").to_ndarray()
        return transform(rgb), rotation


class Collector:
    """Resolves sorted target times to 'the last decoded frame at or before the target'."""

    def __init__(self, targets: list[tuple[int, int]], convert: Converter):
        self.targets = targets  # (tick, expected pts), ascending ticks
        self.next = 0
        self.candidate: tuple[int, av.VideoFrame] | None = None
        self.convert = convert
        self.results: dict[int, Picked | None] = {}  # target position -> frame

    @property
    def done(self) -> bool:
        return self.next >= len(self.targets)

    def _finalize(self) -> None:
        if self.candidate is None:
            self.results[self.next] = None
        else:
            tick, frame = self.candidate
            image, rotation = self.convert(frame)
            pts = int(frame.pts) if frame.pts is not None else -1
            self.results[self.next] = Picked(tick, pts, bool(frame.key_frame), image, rotation)
        self.next += 1

    def offer(self, tick: int, frame: av.VideoFrame) -> None:
        while not self.done and tick > self.targets[self.next][0]:
            self._finalize()
        if self.done:
            return
        if self.candidate is not None and tick < self.candidate[0]:
            return  # out of order beyond the reorder buffer: keep the later frame
        self.candidate = (tick, frame)
        if tick == self.targets[self.next][0]:
            self._finalize()

    def finish(self) -> None:
        while not self.done:
            self._finalize()


def _frames(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    timeline: Timeline | None,
    index: FrameIndex,
    report: DecodeReport,
) -> Generator[tuple[int, av.VideoFrame], None, None]:
    """Decoded frames from the current position in presentation order, with per-packet
    error handling. Some streams under-declare their reorder delay and the decoder emits
    frames out of order; a buffer as deep as the index's worst reordering puts them back."""
    tb = index.time_base
    consecutive = 0
    last_time = 0.0
    # has_b_frames is set for streams that may reorder even when the file's timestamps
    # do not show it (pts written equal to dts): allow a few frames of slack there.
    depth = index.reorder_depth or (4 if stream.codec_context.has_b_frames else 0)
    buffer: list[tuple[int, int, av.VideoFrame]] = []
    seq = 0
    tainted = False  # after undecodable data, frames refer to damaged pictures until a key frame
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            break
        except av.error.FFmpegError as exc:
            report.stopped_at = last_time
            report.messages.append(
                f"reading stopped at {last_time:.3f} s: {(exc.strerror or str(exc)).strip()}"
            )
            break
        if packet.pts is not None:
            last_time = float((packet.pts - index.start_pts) * tb)
        try:
            frames = packet.decode()
            consecutive = 0
        except av.error.FFmpegError as exc:
            report.errors += 1
            consecutive += 1
            tainted = True
            if report.first_error_at is None:
                report.first_error_at = last_time
                report.messages.append(
                    f"undecodable data at {last_time:.3f} s ({(exc.strerror or str(exc)).strip()}); "
                    "pictures after it are not used until the next key frame"
                )
            if consecutive >= MAX_CONSECUTIVE_ERRORS:
                report.stopped_at = last_time
                report.messages.append(
                    f"decoding stopped at {last_time:.3f} s after {consecutive} bad packets in a row"
                )
                break
            continue
        if packet.size:
            report.packets_decoded += 1
        for frame in frames:
            if frame.key_frame:
                tainted = False
            if frame.pts is None or tainted or getattr(frame, "is_corrupt", False):
                report.skipped += 1
                continue
            pts = int(frame.pts)
            tick = timeline.ticks(pts) if timeline is not None else pts - index.start_pts
            if not depth:
                yield tick, frame
                continue
            heapq.heappush(buffer, (tick, seq, frame))
            seq += 1
            if len(buffer) > depth:
                tick, _, frame = heapq.heappop(buffer)
                yield tick, frame
    while buffer:
        tick, _, frame = heapq.heappop(buffer)
        yield tick, frame


def _segments(index: FrameIndex, picks: list[int], keyframes_only: bool) -> list[tuple[int, list[int]]]:
    """Group picks into runs decodable without a seek: (first pick position, pick positions).

    Exact frames: keep decoding forward when the next pick's key frame is within
    SEEK_COST_PACKETS of where the run already reaches. Key frames only (non-key
    packets are skipped by the decoder): keep going only when no other key frame
    lies between two picks, since each skipped-over key frame is a full decode.
    """
    segments: list[tuple[int, list[int]]] = []
    reach = -1  # furthest decode position the current segment will reach
    prev = -1
    for p in picks:
        seek_pos = int(index.seek_pos[p])
        if keyframes_only:
            between = int(index.key[prev + 1 : p].sum()) if segments else 0
            contiguous = bool(segments) and between == 0
        else:
            contiguous = bool(segments) and seek_pos <= reach + SEEK_COST_PACKETS
        if contiguous:
            segments[-1][1].append(p)
        else:
            segments.append((p, [p]))
        reach = max(reach, int(index.decode_pos[p]))
        prev = p
    return segments


def decode_picks(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    index: FrameIndex,
    picks: list[int],
    convert: Converter,
    report: DecodeReport,
    keyframes_only: bool = False,
) -> dict[int, Picked | None]:
    """Decode the frames at the given index positions. Returns position -> frame (None if lost)."""
    if not picks:
        return {}
    sequential = index.resets > 0
    segments = [(picks[0], list(picks))] if sequential else _segments(index, picks, keyframes_only)
    ctx = stream.codec_context
    ctx.skip_frame = "NONKEY" if keyframes_only else "DEFAULT"
    # Frame threads pay off on long runs; their pipeline is refilled after every seek.
    _set_threads(ctx, frame_threads=len(segments) == 1 and not keyframes_only)
    targets = [(int(index.ticks[p]), int(index.pts[p])) for p in picks]
    collector = Collector(targets, convert)
    offsets = {p: i for i, p in enumerate(picks)}
    timeline = Timeline(index.time_base, index.start_pts, index.step) if sequential else None

    for first, members in segments:
        last_target = offsets[members[-1]]
        if collector.next > last_target:
            continue
        first_tick = targets[offsets[members[0]]][0]
        attempt = 0 if not sequential and int(index.seek_pos[first]) > 0 else len(SEEK_LADDER)
        _position(container, stream, index, first, attempt)
        report.seeks += 1
        got_any = False
        frames = _frames(container, stream, timeline, index, report)
        while True:
            try:
                tick, frame = next(frames)
            except StopIteration:
                if not got_any and attempt < len(SEEK_LADDER):
                    # The demuxer could not seek there (some MPEG-TS): try further back.
                    attempt += 1
                    _position(container, stream, index, first, attempt)
                    report.seeks += 1
                    frames = _frames(container, stream, timeline, index, report)
                    continue
                break
            if not got_any:
                got_any = True
                if tick > first_tick and attempt < len(SEEK_LADDER):
                    # Landed after the target (a key frame whose index time is early): back off.
                    frames.close()
                    got_any = False
                    attempt += 1
                    _position(container, stream, index, first, attempt)
                    report.seeks += 1
                    frames = _frames(container, stream, timeline, index, report)
                    continue
            collector.offer(tick, frame)
            if collector.next > last_target:
                break
        frames.close()
        if report.stopped_at is not None:
            break
    collector.finish()
    return {p: collector.results.get(offsets[p]) for p in picks}


def _set_threads(ctx: av.codec.context.CodecContext, frame_threads: bool) -> None:
    """Frame threads speed up long forward runs but their pipeline is thrown away at every
    seek; the setting can only change before the first decode."""
    if ctx.is_open:
        return
    ctx.thread_type = "AUTO" if frame_threads else "SLICE"
    ctx.thread_count = 0


# How to get to a frame's key frame, in order of preference; past the end: rewind.
SEEK_LADDER = ("just before the next frame", "just before the key frame")


def _position(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    index: FrameIndex,
    pick: int,
    attempt: int,
) -> None:
    """Seek so that decoding starts at the key frame the pick needs.

    Demuxers compare the target with their own index times, which for MP4 sit a
    little after the key frame's pts (edit lists, B-frame delay): seeking to the
    key frame's own pts can land a whole GOP early. The latest time at which the
    pick is still on screen (just before the next frame) lands on its key frame;
    if a demuxer lands after it instead, back off to before the key frame, then
    to the start of the file.
    """
    if attempt >= len(SEEK_LADDER):
        _rewind(container, stream, index)
        return
    if attempt == 0:
        target = int(index.pts[pick + 1]) - 1 if pick + 1 < len(index) else int(index.pts[pick]) + index.step
    else:
        target = int(index.seek_pts[pick]) - 1
    try:
        container.seek(target, stream=stream, backward=True, any_frame=False)
    except av.error.FFmpegError:
        _rewind(container, stream, index)


def _rewind(container: av.container.InputContainer, stream: av.video.stream.VideoStream, index: FrameIndex) -> None:
    """Back to the first packet (the scan left the demuxer at the end of the file)."""
    try:
        container.seek(0, backward=True, any_frame=False)
    except av.error.FFmpegError:
        container.seek(int(index.start_pts), stream=stream, backward=True, any_frame=False)


@dataclass(order=True)
class _Cut:
    score: float
    tick: int
    picked: Picked = field(compare=False)


def scene_pass(
    container: av.container.InputContainer,
    stream: av.video.stream.VideoStream,
    index: FrameIndex,
    first: int,
    last: int,
    budget: int,
    threshold: float,
    fallback: list[int],
    convert: Converter,
    report: DecodeReport,
) -> tuple[list[Picked], dict[int, Picked | None]]:
    """One forward pass over [first, last]: the `budget` strongest cuts above `threshold`
    (frames right after a change, by mean absolute luma difference on 64x36 thumbnails),
    and the fallback frames, resolved in the same pass."""
    sequential = index.resets > 0
    timeline = Timeline(index.time_base, index.start_pts, index.step) if sequential else None
    _position(container, stream, index, first, 0 if not sequential and int(index.seek_pos[first]) > 0 else len(SEEK_LADDER))
    report.seeks += 1
    stream.codec_context.skip_frame = "DEFAULT"
    _set_threads(stream.codec_context, frame_threads=True)
    start_tick, end_tick = int(index.ticks[first]), int(index.ticks[last])
    targets = [(int(index.ticks[p]), int(index.pts[p])) for p in fallback]
    collector = Collector(targets, convert)
    heap: list[_Cut] = []
    prev_thumb: np.ndarray | None = None
    prev_score = 0.0
    pending: tuple[float, int, av.VideoFrame] | None = None  # a rising score awaiting its peak test
    for tick, frame in _frames(container, stream, timeline, index, report):
        collector.offer(tick, frame)
        if tick < start_tick:
            continue
        if tick > end_tick:
            break
        thumb = frame.reformat(width=64, height=36, format="gray").to_ndarray().astype(np.int16)
        score = 0.0 if prev_thumb is None else float(np.abs(thumb - prev_thumb).mean()) / 255.0
        prev_thumb = thumb
        if pending is not None:
            p_score, p_tick, p_frame = pending
            if p_score >= score:  # local peak: a cut, not the middle of a fade
                _keep(heap, p_score, p_tick, p_frame, budget, convert)
            pending = None
        if score >= threshold and score > prev_score:
            pending = (score, tick, frame)
        prev_score = score
    if pending is not None:
        _keep(heap, pending[0], pending[1], pending[2], budget, convert)
    collector.finish()
    cuts = [c.picked for c in sorted(heap, key=lambda c: c.tick)]
    return cuts, {p: collector.results.get(i) for i, p in enumerate(fallback)}


def _keep(heap: list[_Cut], score: float, tick: int, frame: av.VideoFrame, budget: int, convert: Converter) -> None:
    if budget <= 0:
        return
    if len(heap) >= budget and score <= heap[0].score:
        return
    image, rotation = convert(frame)
    pts = int(frame.pts) if frame.pts is not None else -1
    cut = _Cut(score, tick, Picked(tick, pts, bool(frame.key_frame), image, rotation))
    if len(heap) >= budget:
        heapq.heapreplace(heap, cut)
    else:
        heapq.heappush(heap, cut)
