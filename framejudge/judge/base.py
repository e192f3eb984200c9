"""The judge interface every backend implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..rubrics.model import Rubric
from ..rubrics.prompt import PromptFrame
from ..backends import JudgeSpecError, backends, clip_refusal
from ..schema import Confidence, Item, JudgeConfig, Judgement, JudgeErrorKind, ReadText, Usage, VideoInput


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
    # video_input clip: the turn's window as an MP4 (frame_sampler.Clip), in place of frames
    clip: Any = None


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
    """What the pipeline needs of every judge. The optional members below (ChoosesFrames,
    CallsServer, RulesConfidence, Stoppable) are separate protocols: a judge has them or not, and
    the pipeline asks with isinstance. JudgeBase gives a backend's judge class the defaults and the
    constructor from a spec that the table of backends (framejudge.backends) uses."""

    backend: str  # the backend's name in the table: "reference", "litellm", "transformers"
    model_id: str  # pinned model identity recorded in provenance
    needs_frames: bool  # False: the pipeline skips frame decoding entirely (or asks per turn: ChoosesFrames)
    sees_images: bool  # False: frames reach the model as timestamps only
    deterministic: bool  # True: k samples and swaps of the same input cannot differ (no temperature)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        """Grade one turn; raise JudgeFailure when no valid judgement can be had."""
        ...


@runtime_checkable
class ChoosesFrames(Protocol):
    """A judge with needs_frames False that uses the frames of some turns (the reference judge: questions
    about on-screen text); the pipeline decodes those turns' frames only."""

    def wants_frames(self, item: Item, turn: int) -> bool:
        """True for the turns whose frames it uses."""
        ...

    def reads_no_frames(self) -> str | None:
        """Why it would read no turn's frames in this process (None: it reads some)."""
        ...


@runtime_checkable
class CallsServer(Protocol):
    """A judge that calls a model server; the service's /readyz asks whether it answers."""

    async def ready(self) -> str | None:
        """None when the server can be called, else why not."""
        ...


@runtime_checkable
class RulesConfidence(Protocol):
    """A judge with its own confidence in a verdict the rubric's error-string rules decided before it
    was asked (the reference judge: the calibrated accuracy of the same rule)."""

    def ruled_confidence(self, judgement: Judgement) -> Confidence:
        ...


@runtime_checkable
class Stoppable(Protocol):
    """A judge whose calls run in threads of this process (a local model): `stop()` makes calls in
    flight end soon (a model between two tokens) and raise JudgeStopped, as do later calls.
    Cancelling the awaiting task cannot stop a thread."""

    def stop(self) -> None:
        ...


class JudgeBase:
    """The base of the shipped backends' judge classes, and of a plugin's: the members every judge
    has, with defaults, and `from_spec`, how the table of backends makes one."""

    backend: str = ""
    model_id: str  # set by each judge (a class attribute where it is fixed, as the reference judge's version)
    needs_frames: bool = True
    sees_images: bool = False
    deterministic: bool = False
    spends: bool = False  # its calls cost money: the CLI asks before a run (--yes)
    # priced at zero for every token by its operator (a self-hosted server: `price` in its judges-file
    # entry): it spends nothing, whatever `spends` or its backend's capabilities say
    free: bool = False
    # it reads the request's decoded pixels (`sampled`), not only the frames' JPEG data URLs: frames
    # carried between machines (the Ray engine) then travel as pixels, not as JPEG
    reads_pixels: bool = False

    @classmethod
    def from_spec(cls, target: str, config: JudgeConfig | None = None, api_base: str | None = None) -> Judge:
        """The judge a spec `<backend>:<target>` names (`target` empty for a bare-name backend);
        `config` is the judges file's entry for the spec (API base, key variable, timeouts, price),
        `api_base` the run's own. Raise framejudge.backends.JudgeSpecError when it cannot be made
        as asked. This default passes the target alone (or nothing)."""
        return cls(target) if target else cls()  # type: ignore[call-arg]

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        raise NotImplementedError


async def preflight(judge: Judge, spec: str) -> None:
    """Before any call or estimate: a judge that calls a model server can be called now (a hosted provider's
    credentials are set; a self-hosted server answers), the check the service's /readyz makes.
    JudgeSpecError saying what to set or start where it cannot: a run that could grade nothing is refused
    before it starts, not recorded as one failure a turn."""
    if not isinstance(judge, CallsServer):
        return
    why = await judge.ready()
    if why:
        hint = (" (set it in the environment, or name the variable that holds the key as the judge's api_key_env "
                "in the judges file)" if why.startswith("missing ") else "")
        raise JudgeSpecError(f"the judge {spec} cannot be called: {why}{hint}")


def spends(judge: Judge) -> bool:
    """Whether a judge's calls cost money: the judge says so, or its backend's capabilities in the table of
    backends do (a plugin may say it in either place; a judge that says nothing anywhere: no). A `free`
    judge (priced at zero for every token by its operator) spends nothing."""
    if getattr(judge, "free", False):
        return False
    if getattr(judge, "spends", False):
        return True
    backend = backends().get(getattr(judge, "backend", "") or "")
    return bool(backend is not None and backend.capabilities.spends)


def wants_frames(judge: Judge, item: Item, turn: int) -> bool:
    """Whether grading this turn decodes its frames: always for judges that need frames, per turn
    for a judge that says so (`wants_frames`), and never without a video."""
    if not item.video:
        return False
    if judge.needs_frames:
        return True
    return isinstance(judge, ChoosesFrames) and bool(judge.wants_frames(item, turn))


def unused_options(judge: Judge | type[Judge], spec: str, samples: int, blind: bool, flag: str = "--",
                   video_input: VideoInput | None = None) -> str | None:
    """Why options would do nothing, or cannot be done, with this judge or judge class (samples of a
    deterministic judge, a blind control for a judge that never sees frames, or that asks for frames per turn
    and can read none here, a video clip for a judge that takes no video), named with `flag` ('--' for the
    CLI, 'options.' for the API); None when they all mean something."""
    if video_input is VideoInput.clip:
        why = clip_refusal(spec)
        if why:
            name = "video-input" if flag == "--" else "video_input"
            return f"{flag}{name} clip: {why}; send frames"
    if samples > 1 and judge.deterministic:
        return (f"{flag}samples {samples}: the {spec} judge is deterministic, so every sample would be the same; "
                f"leave {flag}samples at 1")
    if blind and not judge.needs_frames:
        if not (isinstance(judge, ChoosesFrames) or (isinstance(judge, type) and issubclass(judge, ChoosesFrames))):
            return f"{flag}blind: the {spec} judge never sees frames, so grading without them changes nothing"
        why = None if isinstance(judge, type) else judge.reads_no_frames()
        if why:
            return f"{flag}blind: the {spec} judge reads no frames here ({why}), so grading without them changes nothing"
    return None
