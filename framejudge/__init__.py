"""framejudge: LLM-as-judge grading for video question answering.

The core job from Python (see framejudge.api):

    from framejudge import calibrate, grade

    records = grade("items.jsonl", judge="reference", out="verdicts.jsonl")
    result = calibrate("labels.jsonl", "verdicts.jsonl")

The names below are imported when first used, so `import framejudge` (or any of its modules) does
not load the judges, the video decoder or the service.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import FramejudgeError

__version__ = "0.1.0"

_LAZY = {
    "grade": "framejudge.api", "agrade": "framejudge.api", "calibrate": "framejudge.api",
    "InvalidOptions": "framejudge.api", "Graded": "framejudge.api", "Progress": "framejudge.progress",
    "Grader": "framejudge.judge", "make_judge": "framejudge.judge", "load_items": "framejudge.judge",
    "read_records": "framejudge.records",
    "GradeOptions": "framejudge.schema", "Item": "framejudge.schema", "Verdict": "framejudge.schema",
    "JudgeError": "framejudge.schema", "HumanLabel": "framejudge.schema", "SamplerParams": "framejudge.schema",
    "sample_frames": "framejudge.frame_sampler",
}

__all__ = [
    "FramejudgeError", "GradeOptions", "Graded", "Grader", "HumanLabel", "InvalidOptions", "Item", "JudgeError", "Progress",
    "SamplerParams",
    "Verdict", "__version__", "agrade", "calibrate", "grade", "load_items", "make_judge", "read_records",
    "sample_frames",
]

if TYPE_CHECKING:
    from .api import Graded, InvalidOptions, agrade, calibrate, grade
    from .frame_sampler import sample_frames
    from .judge import Grader, load_items, make_judge
    from .progress import Progress
    from .records import read_records
    from .schema import GradeOptions, HumanLabel, Item, JudgeError, SamplerParams, Verdict


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'framejudge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
