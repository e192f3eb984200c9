"""On-screen text read from sampled frames, offline: RapidOCR with the PP-OCR detection and
recognition models that ship inside its wheel (ONNX, no network).

The engine loads lazily, once per process. Frames are read as the sampler returns them (RGB,
at most `max_side` pixels a side); what a frame shows is kept by the frame's content (in this
process, and on disk beside the frame cache, unless FRAMEJUDGE_NO_CACHE is set), so a frame is
read once; a frame that differs from the one before it only by compression noise is not read
again. Without the optional `eyes` dependencies `unavailable()` says why and nothing is read.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from .. import progress
from ..schema import ReadText

OCR_MODULE = "rapidocr_onnxruntime"
INSTALL = "pip install '.[eyes]' && pip install --no-deps rapidocr-onnxruntime==1.4.4"
MIN_SCORE = 0.5  # lines the recogniser is less sure of are dropped
DETECT_SIDE = 768  # the detector's input: longest side at most this (the sampler's default max_side)
_MEMO_SIZE = 4096
READER = f"rapidocr-onnxruntime-1.4.4:PP-OCRv4:side{DETECT_SIDE}:min{MIN_SCORE}"  # what a stored read depends on

_lock = threading.Lock()
_reading = threading.Lock()  # one read at a time: the engine's sessions already use every core
_engine: Any = None
_missing: str | None = None
_checked = False
_memo: OrderedDict[bytes, list[tuple[str, float, list[int]]]] = OrderedDict()
_stores: dict[str, Any] = {}


class Frame(Protocol):
    """What is read: a sampled frame (frame_sampler.SampledFrame)."""

    image: np.ndarray  # RGB, uint8, (height, width, 3)

    @property
    def timestamp(self) -> float: ...


def unavailable() -> str | None:
    """Why on-screen text cannot be read in this process (None: it can). Imports the OCR
    package once to find out; loads no model."""
    global _checked, _missing
    with _lock:
        if not _checked:
            try:
                import rapidocr_onnxruntime  # noqa: F401
            except ImportError as exc:  # the package, or one of its own dependencies (cv2, onnxruntime)
                _missing = f"the OCR package is not installed ({exc.name or OCR_MODULE} missing): {INSTALL}"
            _checked = True
        return _missing


def _load() -> Any:
    global _engine
    with _lock:
        if _engine is None:
            with progress.loading("the OCR models (RapidOCR)"):  # a run says what it waits for
                from rapidocr_onnxruntime import RapidOCR

                _engine = RapidOCR(det_limit_type="max", det_limit_side_len=DETECT_SIDE, print_verbose=False)
        return _engine


def _store() -> Any:
    """The on-disk store of reads (diskcache), beside the frame cache; None with FRAMEJUDGE_NO_CACHE."""
    from ..env import cache_off
    from ..frame_sampler.cache import default_cache_dir

    if cache_off():
        return None
    import diskcache

    folder = str(default_cache_dir().parent / "text")
    with _lock:
        if folder not in _stores:
            _stores[folder] = diskcache.Cache(folder, size_limit=256 * 1024**2)
        return _stores[folder]


def normalise(text: str) -> str:
    """Unicode compatibility forms folded (full-width digits, ligatures), whitespace collapsed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def _box(points: Any) -> list[int]:
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    x0, y0 = pts.min(axis=0)
    x1, y1 = pts.max(axis=0)
    return [int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1))]


def _read_image(image: np.ndarray, check: Callable[[], None] | None = None) -> list[tuple[str, float, list[int]]]:
    digest = hashlib.blake2b(str(image.shape).encode(), digest_size=16)
    digest.update(np.ascontiguousarray(image).data)
    key = digest.digest()
    with _lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
            return hit
    store = _store()
    stored_key = f"read:{READER}:{key.hex()}"
    hit = store.get(stored_key) if store is not None else None
    if hit is not None:
        lines = [(str(t), float(sc), [int(v) for v in b]) for t, sc, b in hit]
    else:
        lines = _recognise(image, check)
        if store is not None:
            store.set(stored_key, lines)
    with _lock:
        _memo[key] = lines
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return lines


def _recognise(image: np.ndarray, check: Callable[[], None] | None = None) -> list[tuple[str, float, list[int]]]:
    engine = _load()
    bgr = np.ascontiguousarray(image[:, :, ::-1])  # the engine takes OpenCV's channel order
    with _reading:
        if check is not None:  # (a read stopped while it waited for its turn ends here)
            check()
        result, _ = engine(bgr)
    lines = []
    for points, text, score in result or []:
        text = normalise(str(text))
        if text and float(score) >= MIN_SCORE:
            lines.append((text[:500], round(float(score), 3), _box(points)))
    return lines


def read_frames(frames: Sequence[Frame], check: Callable[[], None] | None = None) -> list[ReadText]:
    """Every line of text read on each frame, in frame order. Raises RuntimeError when the OCR
    package is not installed (check `unavailable()` first). `check` is called before each frame is
    read: what it raises (a judge told to stop) ends the reading there."""
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(reason)
    out: list[ReadText] = []
    previous: tuple[np.ndarray, list[tuple[str, float, list[int]]]] | None = None
    for frame in frames:
        if previous is not None and same_picture(previous[0], frame.image):
            lines = previous[1]  # a still scene: what the last frame showed
        else:
            if check is not None:
                check()
            lines = _read_image(frame.image, check)
            previous = (frame.image, lines)
        for text, score, box in lines:
            out.append(ReadText(timestamp=float(frame.timestamp), text=text, score=min(1.0, score), box=box))
    return out


def same_picture(a: np.ndarray, b: np.ndarray, block: int = 16, tolerance: float = 3.0) -> bool:
    """Two frames that differ by no more than compression noise: every 16x16 block's mean
    absolute difference under `tolerance` (of 255), so one changed digit on a clock differs."""
    if a.shape != b.shape:
        return False
    h, w = (a.shape[0] // block) * block, (a.shape[1] // block) * block
    if h == 0 or w == 0:
        return bool(np.array_equal(a, b))
    diff = np.abs(a[:h, :w].astype(np.int16) - b[:h, :w].astype(np.int16)).mean(axis=2)
    blocks = diff.reshape(h // block, block, w // block, block).mean(axis=(1, 3))
    return bool(blocks.max() < tolerance)


def distinct(reads: Sequence[ReadText], limit: int = 64) -> list[ReadText]:
    """Each distinct line once (case and spacing aside), as read with the best score; a line a
    grade used stays marked used. At most `limit`, the used ones first."""
    best: dict[str, ReadText] = {}
    used: set[str] = set()
    for r in reads:
        key = re.sub(r"\W+", "", r.text.lower())
        if r.used:
            used.add(key)
        if key not in best or r.score > best[key].score:
            best[key] = r
    lines = [r.model_copy(update={"used": k in used}) for k, r in best.items()]
    lines.sort(key=lambda r: (not r.used, r.timestamp))
    return lines[:limit]
