"""What a judge decides (a judgement), what a grading run writes (verdicts and judge errors), and
how those records are told apart when read back.

A judgement is validated wherever one is made or read (a judge's reply, a verdict built by the
pipeline, a verdicts file, a request body) against the rules that hold under any rubric: one
response has no preference; of two, a Successful one wins and Both needs equal categories
(`pair_problems`). The rules that need the rubric (its criterion ids, its error strings, its tie
convention) are the rubric's own: they run when a rubric is passed in the validation context
(`context={"rubric": rubric, "responses": {...}}`, the judges and the pipeline do), through its
`judgement_problems`, so the schema imports nothing from the rubrics and a verdict written under an
older rubric still reads back.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, Protocol, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from .grades import Category, Preference
from .items import Metadata, TaskType
from .numbers import Whole
from .options import GradeOptions
from .sampling import ClipInfo, SamplerParams
from .triage import TriageMark


class ResponseGrade(BaseModel):
    """The judge's grade of one response."""

    model_config = ConfigDict(extra="forbid")

    category: Category
    rationale: str = Field(max_length=2000, description="one or two sentences: why this category")
    evidence_timestamps: list[float] = Field(
        default_factory=list, max_length=64, description="seconds of the video the grade relied on"
    )
    integrity_violation: bool = Field(False, description="the response itself contains violating content")

    @model_validator(mode="after")
    def _times(self) -> ResponseGrade:
        if any(t < 0 or t != t for t in self.evidence_timestamps):
            raise ValueError("evidence timestamps are seconds >= 0")
        return self


class RubricRules(Protocol):
    """What the validation context's `rubric` offers (framejudge.rubrics.model.Rubric)."""

    def judgement_problems(self, judgement: Judgement, responses: dict[str, str | None]) -> list[str]:
        ...


def pair_problems(ca: Category, cb: Category, pref: Preference | None) -> list[str]:
    """The rules between two responses' categories and the preference (None: not given)."""
    problems = []
    succ = Category.successful
    if ca == succ and cb != succ and pref != Preference.A:
        problems.append(
            f"response A is Successful and B is {cb.value}: a Successful response always wins, "
            "so the preference must be A"
        )
    if cb == succ and ca != succ and pref != Preference.B:
        problems.append(
            f"response B is Successful and A is {ca.value}: a Successful response always wins, "
            "so the preference must be B"
        )
    if pref == Preference.both and ca != cb:
        problems.append(
            f"Both is only allowed when the two responses share a category (A is {ca.value}, "
            f"B is {cb.value})"
        )
    return problems


def judgement_problems(j: Judgement) -> list[str]:
    """Every way a judgement breaks the rules that hold under any rubric."""
    problems: list[str] = []
    a, b = j.response_a, j.response_b
    if b is None:
        if j.preference is not None or j.deciding_criterion is not None:
            problems.append("there is only one response, so give no preference or deciding criterion")
    else:
        if j.preference is None:
            problems.append("two responses were graded, so a preference (A, B, Both or Neither) is required")
        problems += pair_problems(a.category, b.category, j.preference)
        if j.preference in (Preference.A, Preference.B) and not j.deciding_criterion:
            problems.append("say which criterion decided the preference (a criterion id, or 'category')")
    return problems


class Judgement(BaseModel):
    """What a judge decides for one turn. Validated against the rubric's rules.

    Pass `context={"responses": {"a": text, "b": text}, "rubric": rubric}` when
    validating to also check the error-message rules and criterion ids; the
    error messages are phrased so a model can be re-asked with them.
    """

    model_config = ConfigDict(extra="forbid")

    response_a: ResponseGrade
    response_b: ResponseGrade | None = None
    preference: Preference | None = None
    deciding_criterion: str | None = Field(
        None, description="criterion id that decided the preference, or 'category'"
    )
    transcription_error: bool = False
    multiturn: bool = False

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Judgement:
        context = info.context or {}
        problems = judgement_problems(self)
        rubric: RubricRules | None = context.get("rubric")
        if rubric is not None:
            problems += rubric.judgement_problems(self, context.get("responses") or {})
        if problems:
            raise ValueError("; ".join(problems))
        return self


MAX_TOKENS = 10**9  # no model reads or writes a billion tokens in a call, nor a turn's few calls: above is not a count


def token_count(value: Any) -> int | None:
    """`value` if it is a token count (an integer, not a bool, from 0 to MAX_TOKENS), else None: unknown.
    The one definition, for a model server's reply (judge.usage) and for a record read back (Usage)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


class Usage(BaseModel):
    """The tokens and cost of a turn's calls, every attempt counted. A count the model server did not
    report as a whole number of tokens (0 or more) is null: unknown, never a guess (the verdict's
    notes say what the server sent), and so is the cost of a turn with an unknown count."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int | None = Field(0, description="null: unknown (a reply's count was not a count of tokens)")
    completion_tokens: int | None = Field(0, description="null: unknown (a reply's count was not a count of tokens)")
    cost_usd: float | None = Field(None, description="null: no price known, or the token counts are unknown")
    attempts: int = 1
    video_tokens: int | None = Field(None, description="prompt tokens the provider counted for the video clip "
                                                       "(null: not reported, or no clip sent)")

    @field_validator("prompt_tokens", "completion_tokens", "video_tokens", mode="before")
    @classmethod
    def _counts(cls, value: Any) -> int | None:
        return token_count(value)

    @field_validator("cost_usd", mode="before")
    @classmethod
    def _cost(cls, value: Any) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        return float(value) if ok else None

    @model_validator(mode="after")
    def _cost_of_known_counts(self) -> Usage:
        if not self.known:
            self.cost_usd = None
        return self

    @property
    def known(self) -> bool:
        """Both token counts known."""
        return self.prompt_tokens is not None and self.completion_tokens is not None


class ReadText(BaseModel):
    """A line of on-screen text read from one sampled frame (OCR)."""

    model_config = ConfigDict(extra="forbid")

    timestamp: float = Field(description="seconds of the video: the frame it was read on")
    text: str = Field(max_length=500, description="the line as read, whitespace collapsed")
    score: float = Field(ge=0, le=1, description="the recogniser's confidence")
    box: list[int] = Field(min_length=4, max_length=4, description="x0, y0, x1, y1 in the sampled frame's pixels")
    used: bool = Field(False, description="a response's grade was decided by this text")


class Provenance(BaseModel):
    """Which rubric, judge, prompt and frames produced a verdict."""

    model_config = ConfigDict(extra="forbid")

    rubric_id: str
    rubric_version: str
    rubric_hash: str
    video: str | None = Field(None, description="the item's video as given")
    judge_backend: str
    model_id: str
    prompt_hash: str | None = None
    frame_timestamps: list[float] = Field(default_factory=list)
    sampler: SamplerParams | None = None
    clip: ClipInfo | None = Field(None, description="the clip of the turn's window the judge was shown "
                                                   "(video_input clip); null: frames, or no video")
    ffmpeg: str | None = Field(None, description="the version of the FFmpeg (PyAV's bundled build) that "
                                                 "decodes the videos of the framejudge that made this verdict; "
                                                 "null: the turn has no video")
    created_at: datetime
    usage: Usage | None = None
    notes: list[str] = Field(default_factory=list)
    read_text: list[ReadText] | None = Field(
        None, max_length=64, description="on-screen text the judge read from the frames (each distinct line once, "
                                         "where it was read best); null: the judge read none")
    options: GradeOptions | None = Field(
        None, description="the grading options in effect (swap and samples as this judge applies them)")
    turn_hash: str | None = Field(
        None, description="sha256 of what was graded: the item's video as given, task, expression, domain "
                          "and its turns up to this one")


class SwapCheck(BaseModel):
    """The same pair graded with the responses swapped, mapped back to A/B."""

    model_config = ConfigDict(extra="forbid")

    consistent: bool = Field(description="both orders gave the same categories and preference")
    swapped: Judgement = Field(description="the B/A judgement, mapped back to A/B")
    original: Judgement | None = Field(None, description="the A/B judgement when they disagreed")
    resolution: str | None = Field(None, description="how a disagreement was settled")


ConfidenceMethod = Literal["swap", "samples", "logprobs", "blind", "rules"]


class Confidence(BaseModel):
    """How sure a judge is of each field of its verdict, and how that was obtained."""

    model_config = ConfigDict(extra="forbid")

    informative: bool = Field(description="false where nothing measured a confidence (a deterministic judge "
                                          "without a calibrated one gives the same answer whatever its "
                                          "certainty): fields empty, never 1.0")
    fields: dict[str, float] = Field(default_factory=dict,
                                     description="label field (category_a, preference, integrity_a, ...) -> "
                                                 "confidence in [0, 1] that the verdict's label is right: the "
                                                 "lowest over the methods that measured it")
    methods: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="method (swap, samples, logprobs, blind; rules: the reference judge's "
                                          "calibrated accuracy of the rule that decided the field) -> field -> "
                                          "its confidence")
    note: str | None = None


class Verdict(Judgement):
    """A judgement about one turn of one item, with its provenance."""

    record: Literal["verdict"] = "verdict"
    item_id: str
    turn: Whole = Field(0, ge=0, description="index of the turn within the item")
    task_type: TaskType | None = None
    domain: str | None = Field(None, max_length=200, description="the item's domain, where it names one")
    decided_by: Literal["rules", "judge"] = "judge"
    swap: SwapCheck | None = None
    sample_agreement: float | None = Field(
        None, description="share of k samples that agree with the majority verdict"
    )
    blind_unchanged: bool | None = Field(
        None, description="blind control: the verdict was the same without any frames"
    )
    confidence: Confidence | None = Field(None, description="per-field confidence and how it was obtained")
    triage: TriageMark | None = Field(None, description="auto or to_review, where a thresholds file was applied")
    metadata: Metadata = Field(default_factory=dict, description="the item's metadata, untouched")
    provenance: Provenance


class JudgeErrorKind(str, Enum):
    unparseable = "unparseable"
    refused = "refused"
    timeout = "timeout"
    rate_limited = "rate_limited"
    invalid_after_retries = "invalid_after_retries"
    backend_error = "backend_error"
    bad_input = "bad_input"  # the item's video could not be sampled


class JudgeError(BaseModel):
    """A judge failure. Never a verdict, never a label: counted separately."""

    model_config = ConfigDict(extra="forbid")

    record: Literal["judge_error"] = "judge_error"
    item_id: str
    turn: Whole = 0
    kind: JudgeErrorKind
    message: str
    raw_output: str | None = None
    metadata: Metadata = Field(default_factory=dict, description="the item's metadata, untouched")
    provenance: Provenance | None = None


RECORD_KINDS = ("verdict", "judge_error")


def _record_kind(value: Any) -> str:
    kind = value.get("record") if isinstance(value, dict) else getattr(value, "record", None)
    return "judge_error" if kind == "judge_error" else "verdict"


# A verdict or a judge error read back (a file, a request), told apart by its `record` field as
# `read_records` does (a verdict when it has none), so that a problem is reported for that kind.
RecordIn = Annotated[Union[Annotated[Verdict, Tag("verdict")], Annotated[JudgeError, Tag("judge_error")]],
                     Discriminator(_record_kind)]
