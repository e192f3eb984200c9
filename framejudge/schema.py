"""The framejudge domain, shared by the library, the CLI and the HTTP API.

One set of pydantic models: anything that crosses a boundary (a file, the
terminal, the network, a verdict's provenance) is defined here once.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Strict, Tag, ValidationInfo,
                      field_validator, model_validator)

from .backends import check_spec

# Numbers (and switches) as JSON has them: the string "3" is not read as 3, nor true as 1, in a
# file, a request body or an options part (the CLI's own options are typed before they get here).
Number = Annotated[float, Strict()]
Whole = Annotated[int, Strict()]
Flag = Annotated[bool, Strict()]
Share = Annotated[float, Strict(), Field(ge=0, le=1)]  # a confidence, a coverage, an agreement
Count = Annotated[int, Strict(), Field(ge=0)]


class Strategy(str, Enum):
    """How frames are chosen inside the sampling window."""

    uniform = "uniform"
    fps = "fps"
    keyframes = "keyframes"
    scene = "scene"


MAX_BUDGET = 1024
MIN_SIDE, MAX_SIDE = 16, 4096


class SamplerParams(BaseModel):
    """Everything that decides which frames come out of a video, and how big they are.

    These parameters (with the file's content hash) key the frame cache and are
    recorded in every verdict's provenance.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = Strategy.uniform
    n: Whole = Field(16, description="frame budget: the most frames returned")
    fps: Number | None = Field(None, description="frames per second for the fps strategy")
    start: Number | None = Field(None, description="window start, seconds from the first frame")
    end: Number | None = Field(None, description="window end, seconds from the first frame")
    end_at: Number | None = Field(
        None, description="time (s) the question was asked; the window ends here and looks back"
    )
    lookback: Number = Field(30.0, description="seconds before end_at that the window covers")
    max_side: Whole = Field(768, description="longest side of returned images, in pixels")
    stream: Whole | None = Field(
        None, description="index of the video stream among the file's video streams"
    )
    scene_threshold: Number = Field(
        0.12, description="mean absolute luma change (0-1) between frames that counts as a cut"
    )

    @model_validator(mode="after")
    def _check(self) -> SamplerParams:
        # Plain ValueErrors: the frame sampler turns them into InvalidRequest.
        if self.n <= 0:
            raise ValueError(f"frame budget must be at least 1, got {self.n}")
        if self.n > MAX_BUDGET:
            raise ValueError(f"frame budget {self.n} is above the limit of {MAX_BUDGET}")
        if not MIN_SIDE <= self.max_side <= MAX_SIDE:
            raise ValueError(
                f"max_side must be between {MIN_SIDE} and {MAX_SIDE} pixels, got {self.max_side}"
            )
        if self.strategy is Strategy.fps:
            if self.fps is None:
                raise ValueError("the fps strategy needs fps (frames per second)")
            if not 0 < self.fps <= 240:
                raise ValueError(f"fps must be in (0, 240], got {self.fps}")
        elif self.fps is not None:
            raise ValueError("fps is only used by the fps strategy")
        if self.end_at is not None and (self.start is not None or self.end is not None):
            raise ValueError("give either end_at (with lookback) or start/end, not both")
        for name in ("start", "end", "end_at"):
            value = getattr(self, name)
            if value is not None and (value != value or value < 0 or value == float("inf")):
                raise ValueError(f"{name} must be a finite time >= 0 seconds, got {value}")
        if not 0 < self.lookback < float("inf"):
            raise ValueError(f"lookback must be a positive number of seconds, got {self.lookback}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"window end {self.end} s must be after its start {self.start} s")
        if not 0 < self.scene_threshold < 1:
            raise ValueError(f"scene_threshold must be in (0, 1), got {self.scene_threshold}")
        if self.stream is not None and self.stream < 0:
            raise ValueError(f"stream index must be >= 0, got {self.stream}")
        return self


class FrameInfo(BaseModel):
    """One sampled frame, without its pixels."""

    model_config = ConfigDict(extra="forbid")

    timestamp: float = Field(description="presentation time in seconds from the first frame")
    pts: int = Field(description="raw presentation timestamp in the stream's time base")
    index: int | None = Field(
        None, description="position of the frame in presentation order, where known"
    )
    keyframe: bool
    width: int
    height: int
    reason: str = Field(description="why the frame was picked: uniform, fps, keyframe, scene, end_at")


class VideoInfo(BaseModel):
    """What the sampler learnt about a video from its container and a demux scan."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str | None = Field(
        None, description="SHA-256 of the file; computed when the frame cache is on (its key)"
    )
    container: str
    codec: str
    stream_index: int = Field(description="index among the file's video streams")
    width: int = Field(description="stored width in pixels")
    height: int = Field(description="stored height in pixels")
    display_width: int = Field(description="width after rotation and pixel aspect")
    display_height: int
    rotation: int = Field(description="display rotation in degrees counter-clockwise")
    duration: float = Field(description="seconds from the first frame to the end of the last")
    frame_count: int = Field(description="frames found by the demux scan")
    keyframe_count: int
    average_fps: float | None
    start_pts: int
    time_base: str


# --------------------------------------------------------------------------- grading

class Category(str, Enum):
    """The five per-response categories of the video-QA guideline."""

    successful = "Successful"
    not_successful = "Not Successful"
    irrelevant = "Irrelevant"
    missing = "Missing"
    error_message = "Error message"


class Preference(str, Enum):
    A = "A"
    B = "B"
    both = "Both"
    neither = "Neither"


class TaskType(str, Enum):
    single_turn = "single_turn"
    multi_turn = "multi_turn"


MAX_TEXT = 20_000
MAX_TURNS = 200

MAX_METADATA_DEPTH = 32  # levels of objects and lists, the metadata object itself included
MAX_METADATA_BYTES = 64 * 1024  # as JSON


def _check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata travels with every record: refuse what could not be written back out."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # no recursion: the depth is what is being checked
        node, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise ValueError(f"nested more than {MAX_METADATA_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    size = len(json.dumps(value, ensure_ascii=False, default=str).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"{size} bytes as JSON, above the limit of {MAX_METADATA_BYTES}")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]


class Turn(BaseModel):
    """One question and its answers. `time` is when it was asked (multi-turn items)."""

    model_config = ConfigDict(extra="forbid")

    time: Number | None = Field(None, ge=0, description="seconds into the video the question was asked")
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    golden: str | None = Field(None, max_length=MAX_TEXT)
    response_a: str = Field(max_length=MAX_TEXT)
    response_b: str | None = Field(None, max_length=MAX_TEXT)


class Item(BaseModel):
    """A grading item: a video and either one turn or a conversation of turns."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    video: str | None = Field(None, max_length=4096, description="path (or URL where allowed)")
    task_type: TaskType = TaskType.single_turn
    turns: list[Turn] = Field(min_length=1, max_length=MAX_TURNS)
    domain: str | None = Field(None, max_length=200)
    expression: Literal["none", "meme_or_caption", "other"] = Field(
        "none", description="creative (expression) task: memes/captions keep conciseness, others skip it"
    )
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("video")
    @classmethod
    def _named(cls, video: str | None) -> str | None:
        if video is not None and not video.strip():
            raise ValueError("video is empty: name the video file, or leave video out (or null) for an item without one")
        if video is not None and "\x00" in video:
            raise ValueError("holds a NUL character, which no file name can")
        return video

    @model_validator(mode="after")
    def _shape(self) -> Item:
        if self.task_type is TaskType.single_turn and len(self.turns) != 1:
            raise ValueError(f"a single_turn item has exactly one turn, got {len(self.turns)}")
        if self.task_type is TaskType.multi_turn:
            times = [t.time for t in self.turns]
            if any(t is None for t in times):
                raise ValueError("every turn of a multi_turn item needs the time it was asked")
            if times != sorted(times):
                raise ValueError("multi_turn turns must be in the order they were asked")
        paired = {t.response_b is not None for t in self.turns}
        if len(paired) > 1:
            raise ValueError("either every turn has a response_b or none does")
        return self

    @property
    def pairwise(self) -> bool:
        return self.turns[0].response_b is not None


def _model_name(name: str) -> str:
    if name != name.strip() or any(c in name for c in "\x00\n\r\t"):
        raise ValueError(f"model name {name!r}: no spaces at either end, no tabs or line breaks")
    return name


ModelName = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_model_name)]


class ModelTurn(BaseModel):
    """One question answered by several models: `responses` maps each model's name to its answer
    (a model left out, or given null, did not answer this turn)."""

    model_config = ConfigDict(extra="forbid")

    time: Number | None = Field(None, ge=0, description="seconds into the video the question was asked")
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    golden: str | None = Field(None, max_length=MAX_TEXT)
    responses: dict[ModelName, Annotated[str, Field(max_length=MAX_TEXT)] | None] = Field(
        min_length=1, description="model name -> its answer")


class ModelItem(BaseModel):
    """An item whose turns carry the answers of several models (a leaderboard's input): the same
    fields as Item, with `responses` in each turn in place of response_a and response_b."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    video: str | None = Field(None, max_length=4096, description="path (or URL where allowed)")
    task_type: TaskType = TaskType.single_turn
    turns: list[ModelTurn] = Field(min_length=1, max_length=MAX_TURNS)
    domain: str | None = Field(None, max_length=200)
    expression: Literal["none", "meme_or_caption", "other"] = "none"
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape(self) -> ModelItem:
        from pydantic import ValidationError

        try:  # the rules of an item's shape (turn count, times, video) are Item's own
            self.item({t: "" for t in range(len(self.turns))}, None, self.id)
        except ValidationError as exc:
            e = exc.errors()[0]
            where = ".".join(str(x) for x in e["loc"])
            raise ValueError((f"{where}: " if where else "") + e["msg"].removeprefix("Value error, ")) from None
        return self

    def models(self) -> list[str]:
        """The models answering any of its turns, in the order they first appear."""
        return list(dict.fromkeys(m for t in self.turns for m, answer in t.responses.items() if answer is not None))

    def answer(self, model: str, turn: int) -> str | None:
        return self.turns[turn].responses.get(model)

    def item(self, answers_a: dict[int, str], answers_b: dict[int, str] | None, item_id: str,
             metadata: dict[str, Any] | None = None) -> Item:
        """An ordinary item of the turns in `answers_a` (turn -> response A; `answers_b` the same
        turns' responses B, or None for one response), in their order."""
        turns = [Turn(time=self.turns[t].time, question=self.turns[t].question, golden=self.turns[t].golden,
                      response_a=a, response_b=None if answers_b is None else answers_b[t])
                 for t, a in sorted(answers_a.items())]
        return Item.model_validate({"id": item_id, "video": self.video, "task_type": self.task_type, "turns": turns,
                                    "domain": self.domain, "expression": self.expression,
                                    "metadata": self.metadata if metadata is None else metadata})


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
        from .rubrics.rules import check_judgement

        problems = check_judgement(self, info.context or {})
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    attempts: int = 1


class TriageFigures(BaseModel):
    """How one field's threshold splits one part of the labelled units (calibration or test)."""

    model_config = ConfigDict(extra="forbid")

    units: Count = Field(description="labelled units the judge gave this field (the coverage's denominator)")
    covered: Count = Field(description="of those, the units whose confidence reaches the threshold (auto)")
    coverage: Share = Field(description="covered / units; 0 with no threshold or no units")
    scored_above: Count = Field(description="covered units with a human majority (agreement is measured on them)")
    scored_below: Count
    agreement_above: Share | None = Field(None, description="share of scored_above equal to the human majority")
    agreement_below: Share | None = None
    no_majority: Count = Field(0, description="units left out of agreement: the humans tie")
    no_confidence: Count = Field(0, description="units with no informative confidence for this field (never auto)")


class FieldThreshold(BaseModel):
    """One field's confidence threshold, chosen by fixed-sequence testing, and what it gives."""

    model_config = ConfigDict(extra="forbid")

    threshold: Share | None = Field(description="confidence (0 to 1) at or above which the field stands; null: none "
                                                "passed, the field always goes to review")
    guaranteed: Share | None = Field(None, description="the agreement with the human majority guaranteed above "
                                                       "the threshold with probability 1 - delta (the target)")
    lower_bound: Share | None = Field(None, description="the exact one-sided binomial lower bound at level delta "
                                                        "of the agreement above the threshold, on the calibration "
                                                        "part")
    tested: Count = Field(0, description="thresholds tested before the first that failed")
    human_agreement: Share | None = Field(None, description="humans' pairwise agreement on this field: the "
                                                            "human-human ceiling")
    calibration: TriageFigures
    test: TriageFigures | None = Field(None, description="the same on the held-out test part (null: no test part)")


class Thresholds(BaseModel):
    """A thresholds file (`framejudge triage`): per field the confidence a judge's label needs to
    stand without review, for the judge, model and rubric its verdicts were calibrated on."""

    model_config = ConfigDict(extra="forbid")

    record: Literal["triage_thresholds"] = "triage_thresholds"
    target: Number = Field(gt=0, lt=1, description="agreement with the human majority to guarantee")
    delta: Number = Field(gt=0, lt=1, description="the guarantee holds with probability at least 1 - delta")
    seed: Whole = Field(0, ge=0, description="seed of the split of items into calibration and test parts")
    split: Number = Field(0.5, gt=0, le=1, description="share of the labelled items in the calibration part")
    min_units: Whole = Field(30, ge=1, description="a threshold is tested only with at least this many scored "
                                                 "calibration units at or above it")
    judge_backend: str
    model_id: str
    rubric_id: str
    rubric_hash: str
    fields: dict[str, FieldThreshold] = Field(min_length=1, description="label field -> its threshold and figures")

    @field_validator("fields")
    @classmethod
    def _label_fields(cls, fields: dict[str, FieldThreshold]) -> dict[str, FieldThreshold]:
        unknown = next((f for f in fields if f not in LABEL_FIELDS), None)
        if unknown is not None:
            raise ValueError(f"{unknown!r} is not a label field (they are: {', '.join(LABEL_FIELDS)})")
        return fields


class GradeOptions(BaseModel):
    """How items are graded, beyond the judge and the rubric: the same for `framejudge grade`,
    `POST /v1/grade`, jobs and workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sampler: SamplerParams = Field(default_factory=lambda: SamplerParams(n=8),
                                   description="which frames the judge sees (multi-turn windows end at each question)")
    swap: Flag | None = Field(None, description="also grade B/A; null: on for judges that are not deterministic")
    samples: Whole = Field(1, ge=1, le=32, description="k samples with a majority vote")
    sample_temperature: Number = Field(
        0.7, gt=0, le=2, allow_inf_nan=False,
        description="the temperature of each of k > 1 samples, sample i drawn with seed i (one sample is "
                    "drawn at temperature 0)")
    blind: Flag = Field(False, description="blind control: grade again without frames")
    cache: Flag = Field(True, description="use the verdict cache of model judges")
    jpeg_quality: Whole = Field(85, ge=1, le=100, description="quality of the frames sent to a model")
    triage: Thresholds | None = Field(None, description="a thresholds file (`framejudge triage`), or \"default\": the "
                                                        "thresholds shipped for the reference judge (refused for "
                                                        "other judges); every verdict is marked auto or to_review "
                                                        "by it; it changes the marks, not the grading")

    @field_validator("triage", mode="before")
    @classmethod
    def _default_thresholds(cls, value: Any) -> Any:
        """"default": the reference judge's packaged thresholds (framejudge/judge/data)."""
        if value == "default":
            from .judge.rule_confidence import THRESHOLDS_FILE, shipped_thresholds

            found = shipped_thresholds()
            if found is None:
                raise ValueError(f"this installation has no default thresholds ({THRESHOLDS_FILE} is absent)")
            return found
        return value

    def swap_for(self, judge: Any) -> bool:
        """Whether pairs are graded in both orders by this judge."""
        return (not judge.deterministic) if self.swap is None else self.swap


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


class TriageMark(BaseModel):
    """Whether a verdict may stand as it is (auto) or goes to people (to_review), by a thresholds file."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["auto", "to_review"]
    below: list[str] = Field(default_factory=list,
                             description="the fields whose confidence is below their threshold (or has none)")
    thresholds: str = Field(description="sha256 of the thresholds file applied (of its compact JSON, as "
                                        "`framejudge.calibration.triage.thresholds_hash` computes it)")


class Verdict(Judgement):
    """A judgement about one turn of one item, with its provenance."""

    record: Literal["verdict"] = "verdict"
    item_id: str
    turn: Whole = Field(0, ge=0, description="index of the turn within the item")
    task_type: TaskType | None = None
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


class LabelValues(BaseModel):
    """The labelled fields of one turn (those of a verdict). A field left out (or null) is not
    rated; the category "Missing" is a label."""

    model_config = ConfigDict(extra="forbid")

    category_a: Category | None = None
    category_b: Category | None = None
    preference: Preference | None = None
    integrity_a: Flag | None = None
    integrity_b: Flag | None = None
    transcription_error: Flag | None = None
    multiturn: Flag | None = None


LABEL_FIELDS = tuple(LabelValues.model_fields)
FLAG_FIELDS = ("integrity_a", "integrity_b", "transcription_error", "multiturn")  # the label fields that are switches


def text_switch(text: str) -> bool | str:
    """A switch written as text (a CSV cell, a form's select: true/True, false/False) as a boolean;
    any other text as it is, for validation to refuse by name."""
    return text.lower() == "true" if text.lower() in ("true", "false") else text


def judge_values(judgement: Judgement) -> LabelValues:
    """A judgement's (a verdict's) labels in the fields annotators label."""
    a, b = judgement.response_a, judgement.response_b
    return LabelValues(category_a=a.category, category_b=b.category if b else None,
                       preference=judgement.preference, integrity_a=a.integrity_violation,
                       integrity_b=b.integrity_violation if b else None,
                       transcription_error=judgement.transcription_error, multiturn=judgement.multiturn)


class HumanLabel(LabelValues):
    """One annotator's labels for one turn of one item."""

    item_id: str = Field(min_length=1, max_length=200)
    turn: Whole = Field(0, ge=0)
    annotator: str = Field(min_length=1, max_length=200)
    metadata: Metadata = Field(default_factory=dict)


LABEL_ROW_FIELDS = ("item_id", "turn", "annotator", *LABEL_FIELDS, "metadata")


def _dotted(path: str) -> str:
    if not path or any(not part.strip() or part != part.strip() for part in path.split(".")):
        raise ValueError(f"{path!r} is not a dotted path such as data.item_id")
    return path


DottedPath = Annotated[str, Field(max_length=500), AfterValidator(_dotted)]


def _label_choices(field: str) -> list[Any]:
    """The values a label field takes: categories, preferences or booleans."""
    annotation = LabelValues.model_fields[field].annotation
    for kind in (Category, Preference):
        if kind in getattr(annotation, "__args__", ()):
            return [c.value for c in kind]
    return [False, True]


def mapping_value_problem(field: str, value: Any) -> str | None:
    """Why `value` cannot be the framejudge value of label field `field`, if it cannot."""
    choices = _label_choices(field)
    if isinstance(value, bool) != isinstance(choices[0], bool) or value not in choices:
        takes = ", ".join(str(c).lower() if isinstance(c, bool) else c for c in choices)
        return f"{field} does not take {json.dumps(value) if isinstance(value, bool) else repr(value)} (it takes: {takes})"
    return None


class FieldMapping(BaseModel):
    """Where one framejudge label field comes from in a labelling tool's export: the tool's control
    (Label Studio's from_name) or annotation scheme (Potato), and what each of its options means."""

    model_config = ConfigDict(extra="forbid")

    control: str = Field(min_length=1, max_length=200, description="the tool's control or scheme name")
    values: dict[str | int, Any] = Field(
        min_length=1, description="the tool's option -> the framejudge value (a category, A/B/Both/Neither, or "
                                  "true/false for a flag)")
    absent: Any = Field(None, description="the value when an annotation chose none of the mapped options "
                                          "(e.g. false for an unticked check box); left out: not rated")

    @field_validator("values", mode="before")
    @classmethod
    def _keys(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key in values:
                if isinstance(key, bool):
                    raise ValueError(f"option {key!r} was read as a boolean (YAML reads yes, no, on, off, true "
                                     "and false so): quote the tool's option, e.g. 'yes': true")
                if not isinstance(key, (str, int)):
                    raise ValueError(f"option {key!r}: the tool's options are text or whole numbers")
            shown = [str(k) for k in values]
            twice = next((k for k in shown if shown.count(k) > 1), None)
            if twice is not None:
                raise ValueError(f"option {twice!r} is given twice")
        return values


class LabelMapping(BaseModel):
    """How the records of a labelling tool's export become framejudge label rows. Paths are dotted
    (`data.item_id`, `completed_by.email`); a path part that is a number indexes a list."""

    model_config = ConfigDict(extra="forbid")

    item_id: DottedPath = Field(description="path of the item id")
    turn: DottedPath | None = Field(None, description="path of the turn index; left out: every label is turn 0")
    annotator: DottedPath | None = Field(
        None, description="path of the annotator; left out: Label Studio's completed_by (its email where the export "
                    "has one, else its id), Potato's user folder")
    metadata: dict[str, DottedPath] = Field(
        default_factory=dict, description="metadata name -> path, copied into each label's metadata (when present)")
    labels: dict[str, FieldMapping] = Field(min_length=1, description="framejudge label field -> where it comes from")

    @field_validator("labels")
    @classmethod
    def _fields(cls, labels: dict[str, FieldMapping]) -> dict[str, FieldMapping]:
        for field, spec in labels.items():
            if field not in LABEL_FIELDS:
                raise ValueError(f"{field!r} is not a label field (they are: {', '.join(LABEL_FIELDS)})")
            problem = next(mapping_problems(field, spec), None)
            if problem is not None:
                raise ValueError(f"{field}.{problem[0]}: {problem[1]}")
        return labels

    @field_validator("metadata")
    @classmethod
    def _names(cls, metadata: dict[str, str]) -> dict[str, str]:
        taken = next((name for name in metadata if name in LABEL_ROW_FIELDS), None)
        if taken is not None:
            raise ValueError(f"{taken!r} is a column of the label rows; name the metadata otherwise")
        return metadata


def mapping_problems(field: str, spec: FieldMapping) -> Any:
    """(where under the field, why) for each value of `spec` that label field `field` does not take."""
    for key, value in spec.values.items():
        problem = mapping_value_problem(field, value)
        if problem is not None:
            yield f"values.{key}", f"option {key!r}: {problem}"
    if spec.absent is not None:
        problem = mapping_value_problem(field, spec.absent)
        if problem is not None:
            yield "absent", problem


class Cause(str, Enum):
    """Why a reviewed unit's labels were wrong (a reviewer's tag)."""

    judge_wrong = "judge_wrong"
    humans_wrong = "humans_wrong"
    guideline_ambiguous = "guideline_ambiguous"
    needs_more_video = "needs_more_video"
    other = "other"


class Standing(str, Enum):
    """How a unit's gold labels came about: every annotator agreed, a reviewer decided, or
    neither (annotators split with no decision, or reviewers who disagree)."""

    unanimous = "unanimous"
    adjudicated = "adjudicated"
    unresolved = "unresolved"


class ReviewDecision(BaseModel):
    """One reviewer's decision on one unit (an item's turn) of a review queue. Decisions are
    never overwritten: a reviewer's later decision on the same unit stands in front of theirs."""

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1, max_length=200)
    turn: Whole = Field(0, ge=0)
    reviewer: str = Field(min_length=1, max_length=200, description="the reviewer's API key id")
    decided_at: datetime
    action: Literal["adopt_judge", "adopt_annotator", "manual", "skip"]
    source: str | None = Field(None, max_length=200, description="the annotator adopted (adopt_annotator)")
    labels: LabelValues = Field(default_factory=LabelValues, description="the labels decided (empty for skip)")
    replaced: LabelValues = Field(default_factory=LabelValues,
                                  description="the unit's standing labels before this decision")
    cause: Cause | None = None
    note: str = Field("", max_length=MAX_TEXT)
    flag_rubric: bool = Field(False, description="flagged for a change to the rubric")


def http_base(value: str | None) -> str | None:
    """An OpenAI-compatible server's address: http:// or https://, a host, an optional port and path
    (a judges file's `api_base`, FRAMEJUDGE_API_BASE, --api-base)."""
    if value is None:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValueError(f"{shown!r} is not a server's address: give http:// or https://, a host and an optional "
                         "port and path (like http://localhost:8000/v1)")
    return value


class TokenPrice(BaseModel):
    """What a model costs, in place of litellm's price list (0 and 0 for a self-hosted model)."""

    model_config = ConfigDict(extra="forbid")

    prompt_usd_per_token: Number = Field(0.0, ge=0, allow_inf_nan=False)
    completion_usd_per_token: Number = Field(0.0, ge=0, allow_inf_nan=False)


class JudgeConfig(BaseModel):
    """One judge that may be used, and how to reach and pace its model endpoint (an entry of a
    judges file; a judge with no entry gets these defaults)."""

    model_config = ConfigDict(extra="forbid")

    spec: str = Field(min_length=1, max_length=500, description="a judge spec from the table of backends "
                                                                "(framejudge.backends)")
    api_base: Annotated[str | None, AfterValidator(http_base)] = Field(
        None, max_length=2000, description="a self-hosted OpenAI-compatible server (http:// or https://)")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200,
                                    description="name of the environment variable holding the endpoint's key")
    concurrency: Whole = Field(8, ge=1, le=4096, description="calls in flight at the start (then adapted)")
    max_concurrency: Whole = Field(32, ge=1, le=4096, description="calls in flight never above this")
    requests_per_minute: Number | None = Field(None, ge=0.1, le=1e7, allow_inf_nan=False,
                                              description="the provider's request rate limit")
    tokens_per_minute: Number | None = Field(None, ge=100, le=1e10, allow_inf_nan=False,
                                            description="the provider's token rate limit")
    timeout_s: Number = Field(120.0, gt=0, le=3600, allow_inf_nan=False, description="per call")
    overload_budget_s: Number = Field(600.0, ge=0, le=86400, allow_inf_nan=False,
                                     description="how long 429s, 503s and timeouts are retried before a judge error")
    price: TokenPrice | None = Field(None, description="cost per token instead of litellm's price list")
    logprobs: Flag | None = Field(None, description="ask for the reply's token log-probabilities (label "
                                                    "confidence); null: where litellm says the provider takes them")

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        check_spec(self.spec)
        if self.concurrency > self.max_concurrency:
            raise ValueError(f"concurrency ({self.concurrency}) is above max_concurrency ({self.max_concurrency})")
        return self


class JudgesFile(BaseModel):
    """A judges file: the judges a CLI run or a service may use, each with its endpoint's settings."""

    model_config = ConfigDict(extra="forbid")

    judges: list[JudgeConfig] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _unique(self) -> JudgesFile:
        seen: set[str] = set()
        for judge in self.judges:
            if judge.spec in seen:
                raise ValueError(f"judge {judge.spec!r} is listed twice")
            seen.add(judge.spec)
        return self


RECORD_KINDS = ("verdict", "judge_error")


def _record_kind(value: Any) -> str:
    kind = value.get("record") if isinstance(value, dict) else getattr(value, "record", None)
    return "judge_error" if kind == "judge_error" else "verdict"


# A verdict or a judge error read back (a file, a request), told apart by its `record` field as
# `read_records` does (a verdict when it has none), so that a problem is reported for that kind.
RecordIn = Annotated[Union[Annotated[Verdict, Tag("verdict")], Annotated[JudgeError, Tag("judge_error")]],
                     Discriminator(_record_kind)]
