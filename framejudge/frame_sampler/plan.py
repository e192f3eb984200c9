"""Which frames to return: windows and strategies, worked out on the index alone.

Everything here is in timestamps, never in frame numbers times an average rate:
"the frame at t" is the last frame whose presentation time is <= t, so a
window that ends when a question was asked never shows what came after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema import SamplerParams, Strategy
from .errors import WindowOutOfRange
from .index import FrameIndex

# A question asked this long after the last frame still counts as asked "at the end".
END_TOLERANCE = 1.0
# Rounds of re-spreading a budget that collapsed onto held frames before filling by position.
SPREAD_ROUNDS = 16


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    end_at: float | None  # the question time when the window was given by end_at


@dataclass
class Plan:
    picks: list[int]  # index positions, ascending
    reasons: dict[int, str]
    window: Window
    warnings: list[str]
    span: tuple[int, int]  # first and last index positions on screen in the window


def resolve_window(params: SamplerParams, index: FrameIndex, path: str) -> tuple[Window, list[str]]:
    duration = index.duration
    warnings: list[str] = []
    if params.end_at is not None:
        t = params.end_at
        if t > duration + END_TOLERANCE:
            raise WindowOutOfRange(
                f"question time end_at={t:g} s is after the end of the clip ({duration:.3f} s)",
                path,
            )
        if t > duration:
            warnings.append(f"end_at={t:g} s is just past the clip end ({duration:.3f} s); using the end")
            t = duration
        return Window(max(0.0, t - params.lookback), t, t), warnings
    start = params.start if params.start is not None else 0.0
    end = params.end if params.end is not None else duration
    if start >= duration:
        raise WindowOutOfRange(
            f"window starts at {start:g} s but the clip ends at {duration:.3f} s", path
        )
    if end > duration + END_TOLERANCE:
        warnings.append(f"window end {end:g} s clipped to the clip end ({duration:.3f} s)")
    return Window(start, min(end, duration), None), warnings


def _in_window(index: FrameIndex, window: Window) -> np.ndarray:
    """Positions of frames on screen at some moment of the window (never after its end)."""
    first = index.frame_at(window.start)
    if window.end_at is not None:
        last = index.frame_at(window.end)
    else:
        # Frames starting strictly before the end, plus the one on screen at the start.
        tick = window.end / float(index.time_base)
        last = int(np.searchsorted(index.ticks, tick, side="left")) - 1
        last = max(last, first)
    return np.arange(first, last + 1)


def _thin(candidates: np.ndarray, n: int) -> np.ndarray:
    """n evenly spaced members of candidates (all of them if there are no more than n)."""
    if len(candidates) <= n:
        return candidates
    pos = np.round(np.linspace(0, len(candidates) - 1, n)).astype(int)
    return candidates[np.unique(pos)]


def _targets(window: Window, n: int) -> np.ndarray:
    """n target times: centres of n equal bins, or evenly up to and including end_at."""
    if window.end_at is not None:
        if n == 1 or window.end <= window.start:
            return np.array([window.end])
        return np.linspace(window.start, window.end, n)
    width = (window.end - window.start) / n
    return window.start + width * (np.arange(n) + 0.5)


def _picks_for_times(index: FrameIndex, times: np.ndarray) -> list[int]:
    return sorted({index.frame_at(float(t)) for t in times})


def _on_screen_ticks(index: FrameIndex, in_window: np.ndarray, window: Window) -> np.ndarray:
    """How long each frame of the window is on screen inside it, in ticks (exact integers)."""
    tb = float(index.time_base)
    lo = int(np.floor(window.start / tb + 1e-6))
    hi = int(np.floor(window.end / tb + 1e-6))
    starts = index.ticks[in_window]
    ends = np.append(index.ticks[1:], index.end_ticks)[in_window]
    return np.maximum(np.minimum(ends, hi) - np.maximum(starts, lo), 0)


def _spend_budget(index: FrameIndex, in_window: np.ndarray, window: Window, n: int) -> list[int]:
    """n distinct frames spread over the window's time (the window holds more than n).

    The first targets are the usual ones: bin centres, or evenly up to end_at. A frame
    held on screen for long (a freeze, sparse timestamps) takes several of them; it is
    kept once, and the rest of the budget is spread again, the same way, over the time
    the other frames are on screen, until no two targets share a frame. A freeze costs
    one frame of the budget, not the budget.
    """
    hits, counts = np.unique(
        [index.frame_at(float(t)) for t in _targets(window, n)], return_counts=True
    )
    if len(hits) >= n:
        return [int(i) for i in hits]
    held = set(int(i) for i in hits[counts > 1])
    if window.end_at is not None:
        held.add(index.frame_at(window.end))
    shown = _on_screen_ticks(index, in_window, window)
    picks = held | set(int(i) for i in hits)
    for _ in range(SPREAD_ROUNDS):
        k = n - len(held)
        taken = np.isin(in_window, list(held))
        free = np.where(taken, 0, shown)
        total = int(free.sum())
        if k <= 0 or total <= 0:
            picks = held
            break
        # Targets over the free time, in exact integers: bin centres total * (2j + 1) / 2k,
        # or for end_at the left edges total * j / k (end_at itself is held). Each lands on
        # the free frame whose share of the free time holds it; ties go to the later frame.
        j = np.arange(k)
        if window.end_at is not None:
            where = np.searchsorted(np.cumsum(free) * k, total * j, side="right")
        else:
            where = np.searchsorted(np.cumsum(free) * (2 * k), total * (2 * j + 1), side="right")
        hits, counts = np.unique(in_window[where], return_counts=True)
        picks = held | set(int(i) for i in hits)
        if len(hits) == k:
            break
        held |= set(int(i) for i in hits[counts > 1])
    if len(picks) < n:
        rest = in_window[~np.isin(in_window, list(picks))]
        picks |= set(int(i) for i in _thin(rest, n - len(picks)))
    return sorted(picks)


def plan(params: SamplerParams, index: FrameIndex, path: str) -> Plan:
    window, warnings = resolve_window(params, index, path)
    in_window = _in_window(index, window)
    n = params.n
    reasons: dict[int, str] = {}
    strategy = params.strategy

    if strategy is Strategy.uniform or strategy is Strategy.scene:
        # Scene picks are found while decoding; uniform picks are its fallback and filler.
        if len(in_window) <= n:
            picks = [int(i) for i in in_window]
        else:
            picks = _spend_budget(index, in_window, window, n)
        label = "uniform"
    elif strategy is Strategy.fps:
        assert params.fps is not None
        step = 1.0 / params.fps
        if window.end_at is not None:
            times = window.end - step * np.arange(int((window.end - window.start) / step) + 1)
        else:
            times = window.start + step * np.arange(max(1, int(np.ceil((window.end - window.start) / step))))
        picks_all = np.array(_picks_for_times(index, times))
        picks = [int(i) for i in _thin(picks_all, n)]
        if len(picks_all) > n:
            warnings.append(
                f"{params.fps:g} fps over {window.end - window.start:.1f} s wants "
                f"{len(picks_all)} frames; thinned to the budget of {n}"
            )
        label = "fps"
    else:  # keyframes
        keys = in_window[index.key[in_window]]
        budget = n - 1 if window.end_at is not None else n
        picks = [int(i) for i in _thin(keys, max(budget, 0))] if budget > 0 else []
        label = "keyframe"
        if not picks and window.end_at is None:
            # No key frame inside the window: the frame on screen at its start is the best proxy.
            picks = [int(in_window[0])]
            warnings.append("no key frame in the window; returned the frame at its start")

    for i in picks:
        reasons[i] = label
    if window.end_at is not None:
        last = index.frame_at(window.end)
        if last not in reasons:
            if len(picks) >= n:
                reasons.pop(picks[-1], None)
                picks = picks[:-1]
            picks.append(last)
        reasons[last] = "end_at"
        picks = sorted(set(picks))
    span = (int(in_window[0]), int(in_window[-1]))
    return Plan(picks=picks, reasons=reasons, window=window, warnings=warnings, span=span)
