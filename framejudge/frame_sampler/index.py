"""A demux-only scan: every frame's presentation time and key-frame flag, without decoding.

Reading packets costs a few per cent of decoding them, and it is the only
trustworthy source of timing: headers lie about frame counts (MKV says 0,
some AVI headers claim more frames than exist) and durations (patched,
missing, or the audio's), and frame index is not time on variable-rate video.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import av
import av.container
import numpy as np

MAX_PACKETS = 4_000_000


class Timeline:
    """Turns raw pts into seconds from the first frame, across timestamp resets.

    A stream whose timestamps jump back by more than `reset_seconds` (two MPEG-TS
    files concatenated byte-wise) is laid end to end: later frames continue one
    frame step after the latest time seen. The same rule runs over packets (scan)
    and frames (decode), so both agree on every frame's time.
    """

    def __init__(self, time_base: Fraction, start_pts: int, step: int, reset_seconds: float = 1.0):
        self.time_base = time_base
        self.start_pts = start_pts
        self.step = max(1, step)
        self.reset_ticks = max(1, int(reset_seconds / time_base))
        self.offset = 0
        self.latest: int | None = None  # latest adjusted pts
        self.latest_probe: int | None = None  # latest adjusted value the reset test watches
        self.resets = 0

    def ticks(self, pts: int, dts: int | None = None) -> int:
        """Seconds-from-start ticks of a frame. In decode order (packets) pass the dts too:
        pts is not monotonic there (B-frames, a frame held for seconds) but dts is, so the
        reset test uses dts; in presentation order (decoded frames) pts is monotonic."""
        probe = dts if dts is not None else pts
        if (self.latest is not None and self.latest_probe is not None
                and probe + self.offset < self.latest_probe - self.reset_ticks):
            self.offset += self.latest + self.step - (pts + self.offset)
            self.resets += 1
            self.latest_probe = None
        adjusted = pts + self.offset
        probe_adj = probe + self.offset
        if self.latest_probe is None or probe_adj > self.latest_probe:
            self.latest_probe = probe_adj
        if self.latest is None or adjusted > self.latest:
            self.latest = adjusted
        return adjusted - self.start_pts

    def seconds(self, ticks: int) -> float:
        return float(ticks * self.time_base)


@dataclass
class FrameIndex:
    """Frames of one stream in presentation order."""

    stream_index: int  # position among candidate video streams' container indices
    time_base: Fraction
    start_pts: int
    step: int
    pts: np.ndarray  # raw pts, int64
    ticks: np.ndarray  # pts relative to start after reset handling, int64
    key: np.ndarray  # bool
    decode_pos: np.ndarray  # packet ordinal in decode order, int64
    seek_pts: np.ndarray  # raw pts of the key frame to seek to for each frame
    seek_pos: np.ndarray  # decode position of that key frame
    end_ticks: int  # end of the last frame
    resets: int = 0
    reorder_depth: int = 0  # most frames any frame is decoded ahead of its display position
    truncated_at: float | None = None  # seconds where the demuxer hit damage, if it did
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pts)

    @property
    def times(self) -> np.ndarray:
        return self.ticks.astype(np.float64) * float(self.time_base)

    @property
    def duration(self) -> float:
        return float(self.end_ticks * self.time_base)

    def frame_at(self, t: float) -> int:
        """Position of the frame on screen at time t: the last frame starting at or before t."""
        tick = int(np.floor(t / float(self.time_base) + 1e-6))
        i = int(np.searchsorted(self.ticks, tick, side="right")) - 1
        return max(i, 0)


def _packet_pts(packet: av.Packet) -> int | None:
    if packet.pts is not None:
        return int(packet.pts)
    if packet.dts is not None:
        return int(packet.dts)
    return None


def _nominal_step(stream: av.video.stream.VideoStream, time_base: Fraction) -> int:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    if rate and rate > 0:
        return max(1, round(1 / (Fraction(rate) * time_base)))
    return max(1, round(Fraction(1, 30) / time_base))


@dataclass
class _Scan:
    pts: list[int] = field(default_factory=list)
    dts: list[int | None] = field(default_factory=list)
    key: list[bool] = field(default_factory=list)
    dur: list[int] = field(default_factory=list)
    empty: int = 0  # zero-size packets: "repeat the previous frame" entries (AVI)


def scan(
    container: av.container.InputContainer,
    streams: list[av.video.stream.VideoStream],
    max_packets: int = MAX_PACKETS,
) -> tuple[av.video.stream.VideoStream, _Scan, str | None]:
    """Demux every packet of the candidate streams once.

    Returns the main stream (a moving picture over a still one, then the
    default-disposition stream, then most frames, then largest area, as
    av_find_best_stream does), its packets in decode order, and the damage
    message if the demuxer stopped early.
    """
    scans = {s.index: _Scan() for s in streams}
    damage: str | None = None
    count = 0
    try:
        for packet in container.demux(*streams):
            if packet.size == 0:
                if packet.pts is not None or packet.dts is not None:
                    scans[packet.stream.index].empty += 1
                continue
            pts = _packet_pts(packet)
            if pts is None:
                continue
            sc = scans[packet.stream.index]
            sc.pts.append(pts)
            sc.dts.append(int(packet.dts) if packet.dts is not None else None)
            sc.key.append(bool(packet.is_keyframe))
            sc.dur.append(int(packet.duration or 0))
            count += 1
            if count >= max_packets:
                damage = f"stopped after {max_packets} packets"
                break
    except av.error.FFmpegError as exc:
        damage = (exc.strerror or str(exc)).strip()
    except (OSError, MemoryError) as exc:  # pragma: no cover - depends on the OS
        damage = str(exc)

    def rank(s: av.video.stream.VideoStream) -> tuple[bool, bool, int, int, int]:
        ctx = s.codec_context
        count = len(scans[s.index].pts)
        is_default = bool(s.disposition & av.stream.Disposition.default)
        return (count > 1, is_default, count, ctx.width * ctx.height, -s.index)

    main = max(streams, key=rank)
    return main, scans[main.index], damage


def build_index(
    stream: av.video.stream.VideoStream, packets: _Scan, damage: str | None, position: int
) -> FrameIndex:
    """Sort the scanned packets into presentation order and attach seek targets."""
    time_base = Fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
    step = _nominal_step(stream, time_base)
    raw = np.asarray(packets.pts, dtype=np.int64)
    key_dec = np.asarray(packets.key, dtype=bool)
    warnings: list[str] = []
    if len(raw) == 0:
        return FrameIndex(
            position, time_base, 0, step, raw, raw, key_dec, raw, raw, raw, 0, warnings=warnings
        )
    # The first frame's time is the clip's zero (MPEG-TS captures start hours in; edit lists,
    # B-frame delay).
    timeline = Timeline(time_base, 0, step)
    adjusted = np.fromiter(
        (timeline.ticks(int(p), d) for p, d in zip(raw, packets.dts)), dtype=np.int64, count=len(raw)
    )
    start_pts = int(adjusted.min())
    ticks_dec = adjusted - start_pts
    if timeline.resets:
        warnings.append(
            f"timestamps jump backwards {timeline.resets} time(s); segments are laid end to end"
        )
    # A stream without key-frame flags (some raw/intra formats) is all key frames in effect.
    if not key_dec.any():
        key_dec = np.ones_like(key_dec)
    order = np.argsort(ticks_dec, kind="stable")
    ticks = ticks_dec[order]
    # Drop duplicate timestamps (broken muxers): keep the first in decode order.
    keep = np.ones(len(ticks), dtype=bool)
    keep[1:] = ticks[1:] != ticks[:-1]
    if not keep.all():
        warnings.append(f"{int((~keep).sum())} frame(s) with duplicate timestamps ignored")
    order, ticks = order[keep], ticks[keep]
    key = key_dec[order]
    decode_pos = order.astype(np.int64)
    pts = raw[order]
    # Seek target of each frame: the latest key frame (in presentation order) at or before it.
    key_idx = np.flatnonzero(key)
    if len(key_idx) == 0 or key_idx[0] != 0:
        # Frames before the first key frame: decode from the start of the file.
        first_key = np.concatenate([[0], key_idx]) if len(key_idx) else np.array([0])
        key_idx = np.unique(first_key)
    which = np.searchsorted(key_idx, np.arange(len(ticks)), side="right") - 1
    seek_frame = key_idx[np.maximum(which, 0)]
    durations = np.asarray(packets.dur, dtype=np.int64)[order]
    last_dur = int(durations[-1]) if durations[-1] > 0 else _typical_step(ticks, step)
    end_ticks = int(ticks[-1]) + last_dur
    truncated_at = None
    claimed = int(stream.frames or 0)
    readable = len(ticks) + packets.empty
    if not damage and claimed > readable + max(2, readable // 50):
        # Fewer packets than the header lists is damage only if they also end early: AVI
        # files with dropped frames list every slot but still span the whole clip.
        if stream.duration:
            claimed_seconds = float(stream.duration * time_base)
        else:
            rate = stream.average_rate
            claimed_seconds = claimed / float(rate) if rate else float("inf")
        if end_ticks * time_base < 0.95 * claimed_seconds:
            damage = (
                f"the header lists {claimed} frames ({claimed_seconds:.3f} s) but only "
                f"{readable} can be read"
            )
    if damage:
        truncated_at = float(end_ticks * time_base)
        warnings.append(f"container damaged after {truncated_at:.3f} s ({damage}); later frames unreadable")
    return FrameIndex(
        stream_index=position,
        time_base=time_base,
        start_pts=start_pts,
        step=step,
        pts=pts,
        ticks=ticks,
        key=key,
        decode_pos=decode_pos,
        seek_pts=pts[seek_frame],
        seek_pos=decode_pos[seek_frame],
        end_ticks=end_ticks,
        resets=timeline.resets,
        reorder_depth=int(max(0, (decode_pos - np.arange(len(decode_pos))).max())),
        truncated_at=truncated_at,
        warnings=warnings,
    )


def _typical_step(ticks: np.ndarray, fallback: int) -> int:
    if len(ticks) < 2:
        return fallback
    d = np.diff(ticks)
    d = d[d > 0]
    return int(np.median(d)) if len(d) else fallback
