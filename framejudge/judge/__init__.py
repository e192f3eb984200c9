"""Judges that apply a rubric to a video and its responses and return validated verdicts."""

from __future__ import annotations

import os

# litellm fetches its model price list from the internet when imported unless told not to;
# framejudge downloads nothing at run time (litellm's bundled copy is used).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from ..errors import FramejudgeError
from ..schema import JudgeConfig
from .base import Judge, JudgeFailure, JudgeRequest, JudgeResult, JudgeStopped
from .batch import GradeSummary, ItemsError, load_items, read_records, summarize
from .pipeline import GradeOptions, Grader
from .reference import ReferenceJudge


class JudgeSpecError(FramejudgeError, ValueError):
    """A --judge value that names no available backend."""

    code = "judge_unavailable"


def judge_class(spec: str) -> type | None:
    """The class a spec's judge would be, without making it (no model loaded, no key read):
    what its class attributes (deterministic, needs_frames) say about options; None for a spec
    that names no backend."""
    kind, _, target = spec.partition(":")
    if kind == "reference" and not target:
        return ReferenceJudge
    if kind == "litellm" and target:
        from .litellm_backend import LiteLLMJudge

        return LiteLLMJudge
    if kind == "transformers" and target:
        from .transformers_backend import TransformersJudge

        return TransformersJudge
    return None


def make_judge(spec: str = "reference", api_base: str | None = None, config: JudgeConfig | None = None) -> Judge:
    """`reference`, `litellm:<model>` or `transformers:<path>`; `config` (a judges file's entry for
    `spec`) gives a model judge its API base, key, timeout, retry budget and price."""
    kind, _, target = spec.partition(":")
    if kind == "reference" and not target:
        return ReferenceJudge()
    if kind == "litellm" and target:
        try:
            import litellm  # noqa: F401
            import tenacity  # noqa: F401
        except ImportError as exc:
            raise JudgeSpecError(f"the litellm judge needs {exc.name}: pip install 'framejudge[api]'") from None
        from .litellm_backend import LiteLLMJudge

        if config is None:
            return LiteLLMJudge(target, api_base=api_base)
        api_key = None
        if config.api_key_env:
            api_key = os.environ.get(config.api_key_env)
            if not api_key:
                raise JudgeSpecError(f"judge {spec!r} takes its API key from ${config.api_key_env}, which is not set")
        price = (config.price.prompt_usd_per_token, config.price.completion_usd_per_token) if config.price else None
        return LiteLLMJudge(target, api_base=config.api_base or api_base, api_key=api_key, timeout=config.timeout_s,
                            overload_budget_s=config.overload_budget_s, price=price, logprobs=config.logprobs)
    if kind == "transformers" and target:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
            import xgrammar  # noqa: F401
        except ImportError as exc:
            raise JudgeSpecError(f"the transformers judge needs {exc.name}: pip install 'framejudge[models]'") from None
        from .transformers_backend import TransformersJudge

        try:
            return TransformersJudge(target)
        except (ValueError, OSError) as exc:
            raise JudgeSpecError(f"cannot use model {target!r}: {exc}") from None
    raise JudgeSpecError(
        f"unknown judge {spec!r}: use 'reference', 'litellm:<model>' or 'transformers:<path>'"
    )


__all__ = [
    "GradeOptions", "GradeSummary", "Grader", "ItemsError", "Judge", "JudgeFailure", "JudgeRequest",
    "JudgeResult", "JudgeSpecError", "JudgeStopped", "ReferenceJudge", "load_items", "make_judge", "read_records",
    "summarize",
]
