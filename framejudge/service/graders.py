"""Graders the service keeps loaded: one per (judge, rubric, sampling), shared by the request
handlers and the job worker, so a judge (a local model, perhaps) loads once per process."""

from __future__ import annotations

import threading

from ..judge import GradeOptions, Grader, make_judge
from ..judge.pipeline import SampleFn
from ..rubrics.model import Rubric
from ..schema import SamplerParams


class GraderCache:
    def __init__(self, sample: SampleFn, size: int = 32) -> None:
        self.sample = sample
        self.size = size
        self._graders: dict[tuple[str, str, str], Grader] = {}
        self._lock = threading.Lock()  # the event loop and the worker thread both ask

    def get(self, spec: str, rubric: Rubric, sampler: SamplerParams) -> Grader:
        """The grader for these; raises JudgeSpecError when the judge cannot be made."""
        key = (spec, f"{rubric.id}@{rubric.version}", sampler.model_dump_json())
        with self._lock:
            grader = self._graders.get(key)
            if grader is None:
                grader = Grader(make_judge(spec), rubric, GradeOptions(sampler=sampler), sample=self.sample)
                if len(self._graders) >= self.size:
                    self._graders.pop(next(iter(self._graders)))
                self._graders[key] = grader
            return grader
