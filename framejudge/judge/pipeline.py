"""Grading one item: rules first, frames per turn, the judge, swaps, samples, blind control."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import diskcache

from ..frame_sampler import (MAX_CLIP_BYTES, Clip, FrameSamplerError, SampleResult, WindowOutOfRange, check_file, cut_clip,
                             sample_frames)
from ..frame_sampler.plan import END_TOLERANCE
from ..frame_sampler.cache import default_cache_dir
from ..frame_sampler.clip import clip_bytes
from ..frame_sampler.objects import check_object, is_url, local_path_of
from ..frame_sampler.probe import ffmpeg_version
from .. import progress
from ..records import Record, turn_hash
from ..rubrics.loader import require_kind
from ..rubrics.model import Rubric
from ..rubrics.prompt import PromptFrame
from ..rubrics.rules import error_message_match, tie_choice
from ..schema import (
    Category,
    Confidence,
    GradeOptions,
    Item,
    Judgement,
    JudgeError,
    JudgeErrorKind,
    Preference,
    Provenance,
    ReadText,
    ResponseGrade,
    SamplerParams,
    SwapCheck,
    TaskType,
    Usage,
    Verdict,
    VideoInput,
)
from .base import Judge, JudgeFailure, JudgeRequest, JudgeResult, RulesConfidence, wants_frames
from .confidence import (LabelProbs, blind_confidence, combine, logprob_confidence, not_informative,
                         sample_confidence, swap_confidence)
from .reference import rank_pair

# a video is a Path, or an s3:// or gs:// URL as a str (decoded where the frames are made: objects.py)
SampleFn = Callable[[str | Path, SamplerParams], SampleResult]
CutFn = Callable[[str | Path, SamplerParams, float, int], Clip]  # (video, params, fps, max_bytes)


def _swapped(item: Item) -> Item:
    turns = [t.model_copy(update={"response_a": t.response_b, "response_b": t.response_a}) for t in item.turns]
    return item.model_copy(update={"turns": turns})


def _map_back(j: Judgement) -> Judgement:
    """A judgement of the swapped pair, expressed for the original order."""
    flip = {Preference.A: Preference.B, Preference.B: Preference.A}
    if j.response_b is None:
        raise ValueError("only a judgement of two responses has an order to map back")
    return Judgement.model_construct(
        response_a=j.response_b,
        response_b=j.response_a,
        preference=flip.get(j.preference, j.preference) if j.preference else None,
        deciding_criterion=j.deciding_criterion,
        transcription_error=j.transcription_error,
        multiturn=j.multiturn,
    )


def _same(a: Judgement, b: Judgement) -> bool:
    cats = lambda j: (j.response_a.category, j.response_b.category if j.response_b else None)  # noqa: E731
    return cats(a) == cats(b) and a.preference == b.preference


def _reconcile(rubric: Rubric, item: Item, turn: int, first: Judgement, swapped: Judgement) -> tuple[Judgement, SwapCheck]:
    if _same(first, swapped):
        return first, SwapCheck(consistent=True, swapped=swapped)
    cat_a, cat_b = first.response_a.category, first.response_b.category  # type: ignore[union-attr]
    if cat_a == cat_b:
        pref, crit = tie_choice(rubric, cat_a, cat_b), None
        how = f"orders disagreed; categories tie, so the rubric's tie: {pref.value}"
    else:
        pref, crit = rank_pair(rubric, item, turn, cat_a, cat_b)
        how = "orders disagreed; settled by the categories under the rubric's criteria"
    resolved = first.model_copy(update={"preference": pref, "deciding_criterion": crit or ("category" if pref in (Preference.A, Preference.B) else None)})
    return resolved, SwapCheck(consistent=False, swapped=swapped, original=first, resolution=how)


def _majority(results: list[Judgement]) -> tuple[Judgement, float]:
    keys = [(j.response_a.category, j.response_b.category if j.response_b else None, j.preference) for j in results]
    top, count = Counter(keys).most_common(1)[0]
    chosen = next(j for j, k in zip(results, keys) if k == top)
    return chosen, count / len(results)


def _add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    if more is None:
        return total
    if total is None:
        return more.model_copy()
    video = None if total.video_tokens is None and more.video_tokens is None else \
        (total.video_tokens or 0) + (more.video_tokens or 0)
    attempts = total.attempts + more.attempts
    if total.prompt_tokens is None or total.completion_tokens is None or more.prompt_tokens is None \
            or more.completion_tokens is None:  # a count unknown: the sum's counts and cost are unknown
        return Usage(prompt_tokens=None, completion_tokens=None, cost_usd=None, attempts=attempts, video_tokens=video)
    cost = None if total.cost_usd is None and more.cost_usd is None else (total.cost_usd or 0) + (more.cost_usd or 0)
    return Usage(prompt_tokens=total.prompt_tokens + more.prompt_tokens,
                 completion_tokens=total.completion_tokens + more.completion_tokens,
                 cost_usd=cost, attempts=attempts, video_tokens=video)


class _Frames:
    """A turn's sampled frames, or the clip of its window (video_input clip); JPEG/data-URL encoding
    happens once, and only if a model call needs it (verdict-cache hits never pay for it)."""

    def __init__(self, sampled: list[Any], images: bool, quality: int, clip: Clip | None = None) -> None:
        self.sampled = sampled
        self.images = images
        self.quality = quality
        self.clip = clip
        self.timestamps = [f.info.timestamp for f in sampled]
        self._encoded: list[PromptFrame] | None = None

    def __bool__(self) -> bool:
        return bool(self.sampled) or self.clip is not None

    def _encode(self) -> list[PromptFrame]:
        return [PromptFrame(f.info.timestamp, f.data_url(self.quality) if self.images else None)
                for f in self.sampled]

    async def prompt_frames(self) -> list[PromptFrame]:
        if self._encoded is None:
            self._encoded = await asyncio.to_thread(self._encode) if self.sampled else []
        return self._encoded



def late_question(item: Item, duration: float, turns: range | None = None) -> str | None:
    """Where a turn of `item` (of `turns`; all by default) was asked after the end of its video
    (`duration` seconds, as sampling reads it; up to END_TOLERANCE past it is the end): which, and
    the video's duration; else None."""
    for k in turns if turns is not None else range(len(item.turns)):
        time = item.turns[k].time
        if time is not None and time > duration + END_TOLERANCE:
            return (f"item {item.id!r} turn {k}: question time {time:g} s is after the end of its video "
                    f"({duration:.3f} s)")
    return None


def turn_sampler(base: SamplerParams, item: Item, turn: int) -> SamplerParams:
    """The sampler for one turn: a multi-turn item's window ends when the turn's question was asked."""
    t = item.turns[turn].time
    if item.task_type is TaskType.multi_turn and t is not None:
        return base.model_copy(update={"end_at": t, "start": None, "end": None})
    return base

class Grader:
    """Grades items with one judge and one rubric. Shared by the CLI, batches and the API."""

    def __init__(self, judge: Judge, rubric: Rubric, options: GradeOptions | None = None,
                 media_root: Path | None = None, cache_dir: Path | None = None,
                 sample: SampleFn = sample_frames, cut: CutFn = cut_clip) -> None:
        """`sample` turns (video path, params) into frames: `sample_frames` in this process, or an
        `IsolatedSampler`'s `sample` to decode in killable worker processes; `cut` (video path,
        params, fps, max_bytes) into a clip of the window, for judges shown clips (`cut_clip`, or an
        IsolatedSampler's `cut`)."""
        self.judge = judge
        self.sample = sample
        self.cut = cut
        self.rubric = require_kind(rubric, "video_qa")  # an MCQ rubric has no categories to grade by
        self.rubric_hash = rubric.content_hash  # once: hashing the whole rubric per verdict is not free
        self.options = options or GradeOptions()
        self.media_root = media_root
        self.video_input = self.options.video_input_for(judge)
        # the largest clip the judge's provider takes inline (its request size, less base64 and the prompt)
        request = getattr(judge, "clip_request_bytes", None)
        self.clip_max_bytes = clip_bytes(request) if request else MAX_CLIP_BYTES
        if self.video_input is VideoInput.clip and not getattr(judge, "takes_video", False):
            from ..backends import JudgeSpecError

            raise JudgeSpecError(f"video_input clip: the {judge.backend} judge {judge.model_id} takes no video")
        self.effective_options = self.options.model_copy(update={
            "swap": self.options.swap_for(judge), "samples": 1 if judge.deterministic else self.options.samples,
            "video_input": self.video_input})
        self._cache = None
        if self.options.cache and judge.backend != "reference":
            folder = cache_dir or default_cache_dir().parent / "verdicts"
            self._cache = diskcache.Cache(str(folder), size_limit=1024**3)

    # ---------------------------------------------------------------- frames
    def _video_path(self, item: Item) -> str | Path | None:
        """The item's video: a path (a relative one under the media root), or an object's URL as given
        (never joined to the media root; a file:// URL is its path)."""
        if not item.video:
            return None
        if is_url(item.video):
            return local_path_of(item.video) or item.video
        p = Path(item.video)
        if not p.is_absolute() and self.media_root is not None:
            p = self.media_root / p
        return p

    def _params(self, item: Item, turn: int) -> SamplerParams:
        return turn_sampler(self.options.sampler, item, turn)

    def _frames(self, item: Item, turn: int) -> tuple[_Frames, str | None, SamplerParams | None]:
        """Frames for one turn (none for judges that do not use them), and the video's hash."""
        path = self._video_path(item)
        if path is None or not wants_frames(self.judge, item, turn):
            return _Frames([], False, 0), None, None
        params = self._params(item, turn)
        if self.video_input is VideoInput.clip:
            clip = self.cut(path, params, self.options.clip_fps, self.clip_max_bytes)
            return _Frames([], False, 0, clip), clip.sha256, params
        result = self.sample(path, params)
        late = late_question(item, result.video.duration, range(turn, turn + 1))
        if late is not None:  # a single-turn item's time, which its window does not end at
            raise WindowOutOfRange(late, str(path))
        return _Frames(result.frames, self.judge.sees_images, self.options.jpeg_quality), result.video.sha256, params

    # ---------------------------------------------------------------- judge calls
    def _cache_key(self, item: Item, turn: int, video_hash: str | None, params: SamplerParams | None,
                   sample: int, blind: bool, temperature: float | None = None, seed: int | None = None) -> str | None:
        if self._cache is None:
            return None  # no verdict cache: no key to compute
        payload = {
            "video": video_hash, "sampler": params.model_dump(mode="json") if params else None,
            "rubric": self.rubric_hash, "backend": self.judge.backend, "model": self.judge.model_id,
            # two servers may serve different models under one name: the endpoint is part of the key
            "endpoint": getattr(self.judge, "api_base", None),
            "turns": [t.model_dump(mode="json") for t in item.turns[: turn + 1]],
            "task": item.task_type.value, "expression": item.expression, "domain": item.domain,
            "sample": sample, "blind": blind, "temperature": temperature, "seed": seed,
        }
        if self.video_input is VideoInput.clip:  # `video` is then the clip's own hash
            payload.update(video_input="clip", clip_fps=self.options.clip_fps)
        # how the reply is held to JSON (a litellm judge's schema or JSON mode) changes what the model
        # can answer; the service tier does not (the same model on the same prompt): it is not in the key
        output = getattr(self.judge, "output_mode", None)
        if output is not None:
            payload["output"] = output
        return "verdict:" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    async def _call(self, item: Item, turn: int, frames: _Frames, sample: int, key: str | None,
                    temperature: float | None = None, seed: int | None = None) -> JudgeResult:
        if self._cache is not None and key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                data = json.loads(hit)
                own = data.get("confidence")
                return JudgeResult(Judgement.model_validate(data["judgement"]), None, data.get("prompt_hash"),
                                   notes=["from the verdict cache"], label_probs=data.get("label_probs"),
                                   confidence=Confidence.model_validate(own) if own else None)
        shown = await frames.prompt_frames()  # encoded only when a model is actually asked
        result = await self.judge.judge(JudgeRequest(item, turn, self.rubric, shown, sample, temperature, seed,
                                                     sampled=frames.sampled, clip=frames.clip))
        if item.turns[turn].response_b is None and result.judgement.response_b is not None:
            # a one-response turn has no B and no preference, whatever a model says
            result.judgement = result.judgement.model_copy(
                update={"response_b": None, "preference": None, "deciding_criterion": None})
            result.notes = [*result.notes, "the judge graded a response B this turn does not have; dropped"]
        if self._cache is not None and key is not None:
            self._cache.set(key, json.dumps({"judgement": result.judgement.model_dump(mode="json"),
                                             "prompt_hash": result.prompt_hash, "label_probs": result.label_probs,
                                             "confidence": result.confidence.model_dump(mode="json")
                                             if result.confidence is not None else None}))
        return result

    # ---------------------------------------------------------------- one item
    async def grade(self, item: Item, skip_turns: set[int] | None = None) -> list[Record]:
        out: list[Record] = []
        for turn in range(len(item.turns)):
            if skip_turns and turn in skip_turns:
                continue
            out.append(await self.grade_turn(item, turn))
        return out

    async def grade_turn(self, item: Item, turn: int) -> Record:
        record = await self._grade_turn(item, turn)
        record.metadata = dict(item.metadata)
        if isinstance(record, Verdict):
            record.task_type = item.task_type
            record.domain = item.domain
        if record.provenance is not None:
            record.provenance.video = item.video
            record.provenance.options = self.effective_options
            record.provenance.turn_hash = turn_hash(item, turn)
        return record

    async def _grade_turn(self, item: Item, turn: int) -> Record:
        t = item.turns[turn]
        started = datetime.now(timezone.utc)
        # A named video must exist and be readable for every judge, including those that never
        # decode it and turns the error-string rules decide: a stat, nothing opened; for an object
        # in storage its metadata, nothing read (the decoding process reads it).
        try:
            path = self._video_path(item)
            if isinstance(path, str):
                await asyncio.to_thread(check_object, path)
            elif path is not None:
                await asyncio.to_thread(check_file, path)
        except FrameSamplerError as exc:
            return JudgeError(item_id=item.id, turn=turn, kind=JudgeErrorKind.bad_input, message=str(exc),
                              provenance=self._provenance(started, None, [], None, None, []))
        ruled = self._by_rules(item, turn)
        if ruled is not None:
            return Verdict(**ruled.model_dump(), item_id=item.id, turn=turn, decided_by="rules",
                           confidence=self.judge.ruled_confidence(ruled) if isinstance(self.judge, RulesConfidence) else
                           not_informative("decided by the rubric's error-string rules, not by a judge"),
                           provenance=self._provenance(started, None, [], None, None, ["decided by the error-string rules"]))
        try:
            if wants_frames(self.judge, item, turn):
                with progress.decoding():  # a run tells how many of its turns wait for their frames
                    frames, video_hash, params = await asyncio.to_thread(self._frames, item, turn)
            else:
                frames, video_hash, params = _Frames([], False, 0), None, None
        except FrameSamplerError as exc:
            return JudgeError(item_id=item.id, turn=turn, kind=JudgeErrorKind.bad_input, message=str(exc),
                              provenance=self._provenance(started, None, [], None, None, []))
        usage: Usage | None = None
        notes: list[str] = []
        if frames and self.judge.needs_frames and not self.judge.sees_images:
            notes.append("text-only judge: frames given as timestamps, no images")
        k_samples = 1 if self.judge.deterministic else max(1, self.options.samples)
        # k samples must be able to differ: each is drawn above temperature 0, with its index as seed
        temperature = self.options.sample_temperature if k_samples > 1 else None
        try:
            results: list[Judgement] = []
            probs: list[LabelProbs | None] = []
            own: Confidence | None = None  # the judge's own confidence in the verdict it gave (first sample)
            prompt_hash = None
            read_text: list[ReadText] | None = None
            for k in range(k_samples):
                seed = k if k_samples > 1 else None
                key = self._cache_key(item, turn, video_hash, params, k, False, temperature, seed)
                r = await self._call(item, turn, frames, k, key, temperature, seed)
                usage = _add_usage(usage, r.usage)
                prompt_hash = prompt_hash or r.prompt_hash
                read_text = read_text if read_text is not None else r.read_text
                notes += [n for n in r.notes if n not in notes]
                results.append(r.judgement)
                probs.append(r.label_probs)
                own = own if own is not None else r.confidence
            if k_samples > 1:
                notes.append(f"{k_samples} samples at temperature {temperature:g}, seeds 0 to {k_samples - 1}")
            judgement, agreement = _majority(results)
            first, swapped_back = judgement, None
            swap_check = None
            if t.response_b is not None and self.options.swap_for(self.judge):
                swapped_item = _swapped(item)
                key = self._cache_key(swapped_item, turn, video_hash, params, 0, False)
                r = await self._call(swapped_item, turn, frames, 0, key)
                usage = _add_usage(usage, r.usage)
                swapped_back = _map_back(r.judgement)
                judgement, swap_check = _reconcile(self.rubric, item, turn, judgement, swapped_back)
            blind_unchanged, blind_judgement = None, None
            if self.options.blind and frames:
                key = self._cache_key(item, turn, video_hash, params, 0, True)
                r = await self._call(item, turn, _Frames([], False, 0), 0, key)
                usage = _add_usage(usage, r.usage)
                blind_judgement = r.judgement
                blind_unchanged = _same(judgement, r.judgement)
        except JudgeFailure as exc:
            return JudgeError(item_id=item.id, turn=turn, kind=exc.kind, message=exc.message,
                              raw_output=exc.raw_output,
                              provenance=self._provenance(started, None, frames.timestamps, params,
                                                          _add_usage(usage, exc.usage), notes, clip=frames.clip))
        if self.judge.deterministic and self.options.samples > 1:
            notes.append(f"deterministic judge: {self.options.samples} samples would be identical; one taken")
        data = judgement.model_dump()
        data["multiturn"] = data["multiturn"] or turn > 0
        confidence = self._confidence(turn, judgement, results, probs, first, swapped_back, blind_judgement,
                                      own if len(results) == 1 else None)
        return Verdict(
            **data, item_id=item.id, turn=turn, swap=swap_check,
            sample_agreement=agreement if len(results) > 1 else None, blind_unchanged=blind_unchanged,
            confidence=confidence,
            provenance=self._provenance(started, prompt_hash, frames.timestamps, params, usage, notes, read_text,
                                        frames.clip),
        )

    def _confidence(self, turn: int, verdict: Judgement, samples: list[Judgement], probs: list[LabelProbs | None],
                    first: Judgement, swapped_back: Judgement | None, blind: Judgement | None,
                    own: Confidence | None = None) -> Confidence:
        """Per-field confidence from the judge's own (its methods, such as the reference judge's
        `rules`), the swap, the samples, the label tokens' probabilities and the blind control, as
        far as each was done (confidence.py): the lowest wins."""
        given = [p for p in probs if p]
        mine = own if own is not None and own.informative else None
        if own is not None and not own.informative and not given and self.judge.deterministic:
            return own  # the judge says why it has none
        if self.judge.deterministic and not given and mine is None:
            return not_informative(f"the {self.judge.backend} judge is deterministic: it gives the same verdict "
                                   "however sure it is, so no confidence is measured")
        methods: dict[str, dict[str, float]] = {}
        if mine is not None:
            methods.update({m: dict(by) for m, by in mine.methods.items()})
        if swapped_back is not None:
            methods["swap"] = swap_confidence(first, swapped_back)
        if len(samples) > 1:
            methods["samples"] = sample_confidence(samples, verdict)
        if given:
            methods["logprobs"] = logprob_confidence(given, verdict)
        if blind is not None:
            methods["blind"] = blind_confidence(blind, verdict)
        if turn > 0:  # a later turn of a conversation is multi-turn by construction, not by the judge
            for by in methods.values():
                by.pop("multiturn", None)
        return combine(methods, mine.note if mine is not None else None if methods else (
            "no confidence measured: one sample, no swap, no blind control, and the backend gave no "
            "token probabilities"))

    def decided_by_rules(self, item: Item, turn: int) -> bool:
        """Error strings decide without a model when they decide every response of the turn."""
        t = item.turns[turn]
        texts = [t.response_a] + ([t.response_b] if t.response_b is not None else [])
        return all(error_message_match(x, self.rubric) for x in texts)

    def _by_rules(self, item: Item, turn: int) -> Judgement | None:
        t = item.turns[turn]
        if not self.decided_by_rules(item, turn):
            return None
        grade = ResponseGrade(category=Category.error_message, rationale="the response is one of the fixed error strings")
        data: dict[str, Any] = {"response_a": grade.model_dump(), "multiturn": turn > 0}
        if t.response_b is not None:
            data.update(response_b=grade.model_dump(),
                        preference=tie_choice(self.rubric, Category.error_message, Category.error_message))
        return Judgement.model_validate(data, context={"rubric": self.rubric, "responses": {"a": t.response_a, "b": t.response_b}})

    def _provenance(self, started: datetime, prompt_hash: str | None, timestamps: list[float],
                    params: SamplerParams | None, usage: Usage | None, notes: list[str],
                    read_text: list[ReadText] | None = None, clip: Clip | None = None) -> Provenance:
        return Provenance(
            rubric_id=self.rubric.id, rubric_version=self.rubric.version, rubric_hash=self.rubric_hash,
            judge_backend=self.judge.backend, model_id=self.judge.model_id, prompt_hash=prompt_hash,
            frame_timestamps=timestamps, sampler=params, created_at=started, usage=usage, notes=notes,
            read_text=read_text, clip=clip.info() if clip is not None else None,
            ffmpeg=ffmpeg_version() if params is not None or clip is not None else None,
        )
