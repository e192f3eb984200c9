"""Decoding shared by concurrent work: one decode per (video, sampling) in flight."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path

from ..frame_sampler import SampleResult
from ..judge.pipeline import SampleFn
from ..schema import SamplerParams


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
