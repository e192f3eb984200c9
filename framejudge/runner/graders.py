"""Graders a long-running process keeps loaded: one per (judge, rubric, options), shared by the
API's request handlers and the queue worker, so a judge (a local model, perhaps) loads once per
process and every model judge paces its calls through its endpoint's one gate."""

from __future__ import annotations

import threading

from ..judge import Grader
from ..frame_sampler import cut_clip
from ..judge.pipeline import CutFn, SampleFn
from ..rubrics.model import Rubric
from ..schema import GradeOptions
from .judges import Judges


class GraderCache:
    def __init__(self, sample: SampleFn, judges: Judges | None = None, size: int = 32,
                 cut: CutFn = cut_clip) -> None:
        self.sample = sample
        self.cut = cut
        self.judges = judges or Judges()
        self.size = size
        self._graders: dict[tuple[str, str, str], Grader] = {}
        self._lock = threading.Lock()  # request handlers and the worker may ask from threads

    def get(self, spec: str, rubric: Rubric, options: GradeOptions) -> Grader:
        """The grader for these; raises JudgeSpecError when the judge cannot be made."""
        key = (spec, f"{rubric.id}@{rubric.version}", options.model_dump_json())  # no content hash: not free
        with self._lock:
            grader = self._graders.get(key)
            if grader is None:
                grader = Grader(self.judges.make(spec), rubric, options, sample=self.sample, cut=self.cut)
                if len(self._graders) >= self.size:
                    self._graders.pop(next(iter(self._graders)))
                self._graders[key] = grader
            return grader
