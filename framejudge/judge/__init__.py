"""Judges that apply a rubric to a video and its responses and return validated verdicts."""

from __future__ import annotations

import os

# litellm fetches its model price list from the internet when imported unless told not to;
# framejudge downloads nothing at run time (litellm's bundled copy is used).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ..backends import Backend, Capabilities, JudgeSpecError, backends, parse
from ..schema import JudgeConfig
from .base import (
    CallsServer,
    ChoosesFrames,
    Judge,
    JudgeBase,
    JudgeFailure,
    JudgeRequest,
    JudgeResult,
    JudgeStopped,
    RulesConfidence,
    Stoppable,
)
from .batch import GradeSummary, ItemsError, load_items, read_records, summarize
from .pipeline import GradeOptions, Grader
from .reference import ReferenceJudge


def judge_class(spec: str) -> type[JudgeBase] | None:
    """The class a spec's judge would be, without making it (no model loaded, no key read):
    what its class attributes (deterministic, needs_frames) say about options; None for a spec
    that names no backend. Raises JudgeSpecError when the backend's libraries are not installed."""
    try:
        backend, _ = parse(spec)
    except JudgeSpecError:
        return None
    return backend.load()


def make_judge(spec: str = "reference", api_base: str | None = None, config: JudgeConfig | None = None) -> Judge:
    """The judge a spec names in the table of backends (`reference`, `litellm:<model>`,
    `transformers:<path>`, or a plugin's); `config` (a judges file's entry for `spec`) gives a model
    judge its API base, key, timeout, retry budget and price. Raises JudgeSpecError."""
    backend, target = parse(spec)
    cls: type[JudgeBase] = backend.load()  # a backend's judge class has JudgeBase's members and from_spec
    return cls.from_spec(target, config=config, api_base=api_base)


__all__ = [
    "Backend", "CallsServer", "Capabilities", "ChoosesFrames", "GradeOptions", "GradeSummary", "Grader", "ItemsError",
    "Judge", "JudgeBase", "JudgeFailure", "JudgeRequest", "JudgeResult", "JudgeSpecError", "JudgeStopped",
    "ReferenceJudge", "RulesConfidence", "Stoppable", "backends", "judge_class", "load_items", "make_judge",
    "read_records", "summarize",
]
