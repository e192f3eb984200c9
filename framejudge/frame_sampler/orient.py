"""Display orientation and output size.

PyAV returns frames as stored; phones store landscape pixels plus a display
matrix. The transform below follows FFmpeg's own autorotate rules (fftools),
so a frame comes out the way ffmpeg, browsers and players show it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import av
from av.sidedata.sidedata import SideData
import numpy as np

Transform = Callable[[np.ndarray], np.ndarray]


def _identity(a: np.ndarray) -> np.ndarray:
    return a


def display_matrix(frame: av.VideoFrame) -> np.ndarray | None:
    # a SideDataContainer of SideData buffers, which PyAV 18.1.0 iterates as its buffers and 18.1.1 as a
    # mapping's keys (their types)
    side: Any = frame.side_data
    for entry in side:
        sd: SideData = entry if hasattr(entry, "type") else side[entry]
        if str(sd.type).endswith("DISPLAYMATRIX"):
            raw = bytes(sd)
            if len(raw) >= 36:
                return np.frombuffer(raw[:36], dtype="<i4").astype(np.float64)
    return None


def _rotation_get(m: np.ndarray) -> float:
    """av_display_rotation_get: counter-clockwise degrees the matrix rotates by."""
    a, b, c, d = m[0] / 65536, m[1] / 65536, m[3] / 65536, m[4] / 65536
    s0, s1 = math.hypot(a, c), math.hypot(b, d)
    if s0 == 0 or s1 == 0:
        return math.nan
    return -math.degrees(math.atan2(b / s1, a / s0))


def orientation(frame: av.VideoFrame) -> tuple[int, Transform, bool]:
    """(rotation in CCW degrees for reporting, array transform, whether width/height swap)."""
    m = display_matrix(frame)
    if m is None:
        return 0, _identity, False
    rot = _rotation_get(m)
    if math.isnan(rot):
        return 0, _identity, False
    theta = -round(rot)
    theta -= 360 * math.floor(theta / 360 + 0.9 / 360)
    ccw = int(round(rot)) % 360
    if abs(theta - 90) < 1:
        if m[3] > 0:  # transpose=cclock_flip: a plain transpose
            return ccw, lambda a: np.ascontiguousarray(a.transpose(1, 0, 2)), True
        return ccw, lambda a: np.ascontiguousarray(np.rot90(a, -1)), True
    if abs(theta - 270) < 1:
        if m[3] < 0:  # transpose=clock_flip
            return ccw, lambda a: np.ascontiguousarray(np.rot90(a, -1)[::-1]), True
        return ccw, lambda a: np.ascontiguousarray(np.rot90(a, 1)), True
    if abs(theta - 180) < 1:
        hflip, vflip = m[0] < 0, m[4] < 0
        def flip(a: np.ndarray) -> np.ndarray:
            if hflip:
                a = a[:, ::-1]
            if vflip:
                a = a[::-1]
            return np.ascontiguousarray(a)
        return ccw, flip, False
    if abs(theta) < 1 and m[4] < 0:
        return ccw, lambda a: np.ascontiguousarray(a[::-1]), False
    return 0, _identity, False  # arbitrary angles are not applied


def output_size(width: int, height: int, sar: Fraction | None, max_side: int) -> tuple[int, int]:
    """Size to scale the *stored* picture to: longest side at most max_side, square pixels,
    display aspect ratio kept. Rotation only swaps the axes afterwards."""
    disp_w = width * float(sar) if sar and sar > 0 else float(width)
    disp_h = float(height)
    scale = min(1.0, max_side / max(disp_w, disp_h))
    out_w = max(1, round(disp_w * scale))
    out_h = max(1, round(disp_h * scale))
    return out_w, out_h


def display_size(width: int, height: int, sar: Fraction | None, swap: bool) -> tuple[int, int]:
    disp_w = round(width * float(sar)) if sar and sar > 0 else width
    return (height, disp_w) if swap else (disp_w, height)
