"""The judge interface every backend implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..rubrics.model import Rubric
from ..rubrics.prompt import PromptFrame
from ..schema import Confidence, Item, Judgement, JudgeErrorKind, ReadText, Usage


@dataclass(frozen=True)
class JudgeRequest:
    """One turn of one item to grade (responses possibly swapped by the pipeline)."""

    item: Item
    turn: int
    rubric: Rubric
    frames: list[PromptFrame] = field(default_factory=list)
    sample: int = 0  # index among k samples
    temperature: float | None = None  # None: the judge's own (0 for the model judges)
    seed: int | None = None  # None: the judge's own
    # the same frames with their pixels (frame_sampler.SampledFrame: RGB arrays), for judges that
    # look at them themselves (the reference judge reads on-screen text)
    sampled: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class PlannedTurn:
    """One turn a run will grade: its judge calls, and how many of them send the turn's frames
    (none without a video, or where the judge does not look; never the blind control's call)."""

    item: Item
    turn: int
    calls: int
    with_frames: int


@dataclass
class JudgeResult:
    judgement: Judgement
    usage: Usage | None = None
    prompt_hash: str | None = None
    raw_output: str | None = None
    notes: list[str] = field(default_factory=list)
    # label field -> option -> probability, from the label tokens' probabilities (None: the
    # backend gave none); options are named as confidence.option_key names them
    label_probs: dict[str, dict[str, float]] | None = None
    read_text: list[ReadText] | None = None  # on-screen text the judge read (None: it read no frames)
    # the judge's own per-field confidence, by its own methods (the reference judge: `rules`, from the
    # calibrated accuracy of the path that decided each field); None: it has none. The pipeline takes
    # the lowest of it and what it measures itself (swap, samples, blind).
    confidence: Confidence | None = None


class JudgeFailure(Exception):
    """A backend could not produce a valid judgement; becomes a JudgeError record."""

    def __init__(self, kind: JudgeErrorKind, message: str, raw_output: str | None = None,
                 usage: Usage | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.raw_output = raw_output
        self.usage = usage


class JudgeStopped(Exception):
    """The judge was told to stop (`stop()`) while a call was in flight or before it began: the
    turn has no result and no record; a later run grades it."""


@runtime_checkable
class Judge(Protocol):
    backend: str  # "reference", "litellm", "transformers"
    model_id: str  # pinned model identity recorded in provenance
    needs_frames: bool  # False: the pipeline skips frame decoding entirely
    sees_images: bool  # False: frames reach the model as timestamps only
    deterministic: bool  # True: k samples and swaps of the same input cannot differ (no temperature)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        """Grade one turn; raise JudgeFailure when no valid judgement can be had."""
        ...

    # Optional: a judge with needs_frames False may define `def wants_frames(self, item, turn) -> bool`:
    # True for the turns whose frames it does use (the reference judge: questions about on-screen
    # text); the pipeline decodes those turns' frames only.
    # Optional: judges that call a server also define `async def ready(self) -> str | None`
    # (None when they can be called, else why not); the service's /readyz asks it.
    # Optional: a judge with its own confidence defines `def ruled_confidence(self, judgement) -> Confidence`:
    # its confidence in a verdict the error-string rules decided before it was asked (the reference
    # judge: the calibrated accuracy of the same rule).
    # Optional: judges whose calls run in threads of this process (a local model) define
    # `def stop(self) -> None`: calls in flight end soon (a model between two tokens) and raise
    # JudgeStopped, as do later calls. Cancelling the awaiting task cannot stop a thread.


def wants_frames(judge: Judge, item: Item, turn: int) -> bool:
    """Whether grading this turn decodes its frames: always for judges that need frames, per turn
    for a judge that says so (`wants_frames`), and never without a video."""
    if not item.video:
        return False
    if judge.needs_frames:
        return True
    asks = getattr(judge, "wants_frames", None)
    return bool(asks(item, turn)) if asks is not None else False


def unused_options(judge: Judge | type, spec: str, samples: int, blind: bool, flag: str = "--") -> str | None:
    """Why options would do nothing with this judge or judge class (samples of a deterministic judge, a blind
    control for a judge that never sees frames, or that asks for frames per turn and can read none here),
    named with `flag` ('--' for the CLI, 'options.' for the API); None when they all mean something."""
    if samples > 1 and judge.deterministic:
        return (f"{flag}samples {samples}: the {spec} judge is deterministic, so every sample would be the same; "
                f"leave {flag}samples at 1")
    if blind and not judge.needs_frames:
        if getattr(judge, "wants_frames", None) is None:
            return f"{flag}blind: the {spec} judge never sees frames, so grading without them changes nothing"
        why = None if isinstance(judge, type) else judge.reads_no_frames()  # type: ignore[union-attr]
        if why:
            return f"{flag}blind: the {spec} judge reads no frames here ({why}), so grading without them changes nothing"
    return None
