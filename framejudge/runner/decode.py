"""Decoding for a grading run: killable, memory-capped decoding processes (started for every door
alike: the CLI's commands, the Python API's `grade`), and one decode per (video, sampling) in flight."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path

from ..frame_sampler import IsolatedSampler, SampleResult
from ..judge.base import wants_frames
from ..judge.pipeline import Grader, SampleFn
from ..schema import DecodeLimits, Item, SamplerParams


class SharedDecodes:
    """Wraps a sample function (in this process, or an IsolatedSampler's pool) so that items and
    turns asking for the same video and parameters at the same time wait for one decode instead
    of each starting its own; later requests are served by the frame cache."""

    def __init__(self, sample: SampleFn) -> None:
        self.sample = sample
        self._lock = threading.Lock()
        self._running: dict[tuple[str, SamplerParams], Future[SampleResult]] = {}
        self.decodes = 0  # calls that reached `sample`

    def __call__(self, path: str | Path, params: SamplerParams) -> SampleResult:
        key = (os.fspath(path), params)
        with self._lock:
            running = self._running.get(key)
            if running is None:
                mine: Future[SampleResult] = Future()
                self._running[key] = mine
                self.decodes += 1
        if running is not None:
            return running.result()
        try:
            result = self.sample(path, params)  # a str is an object's URL, kept as given
            mine.set_result(result)
            return result
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._running.pop(key, None)


def start_decoders(grader: Grader, items: list[Item], todo: int, decoding: DecodeLimits) -> IsolatedSampler | None:
    """The decoding processes of a grading run where some turn wants frames (None where none
    does, or `todo` is 0): `decoding`'s number of processes (default: one per core), each video's
    time limit and each process's memory cap. The grader samples frames and cuts clips through
    them (CPU work overlapping the model calls): a video that hangs its decoder or exhausts its
    memory is a DecodeTimedOut or DecoderDied, the turn's bad_input judge error, and the calling
    process goes on. Started now: from the main thread they are born deaf to the terminal's
    Ctrl-C, which the calling process handles (IsolatedSampler.start); from another thread they
    are started as they are. The caller closes them when the run ends or is stopped (a decode in
    flight then ends at once instead of after its time limit)."""
    if not (todo and any(wants_frames(grader.judge, it, t) for it in items for t in range(len(it.turns)))):
        return None
    decoder = IsolatedSampler(workers=decoding.processes(os.cpu_count()), timeout_s=decoding.timeout_s,
                              max_memory_mb=decoding.memory_mb)
    decoder.start()
    grader.sample = SharedDecodes(decoder.sample)
    grader.cut = decoder.cut
    return decoder
