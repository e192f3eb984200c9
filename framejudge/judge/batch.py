"""Resumable batches: items in (JSONL), verdicts out (JSONL, appended as they finish)."""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..files import first_problem, jsonl_objects, read_text
from ..frame_sampler.objects import StorageUnavailable, UnsupportedURL, check_url, is_url, object_cache_bytes
from ..records import ItemsError, Record, latest, swap_consistency
from ..records import read_records as read_records  # read here by framejudge.judge's users
from ..schema import Item, JudgeError, Preference, Verdict


def load_items(path: str | os.PathLike[str]) -> list[Item]:
    p = Path(path)
    rows = [(f"{p}:{n}", row) for n, row in jsonl_objects(p, read_text(p, "items", ItemsError), ItemsError)]
    items = checked_items(rows, ItemsError)
    check_video_urls(zip((where for where, _ in rows), items), ItemsError)
    if not items:
        raise ItemsError(f"{p}: no items")
    return items


def checked_items(rows: Iterable[tuple[str, Any]], error: type[ValueError]) -> list[Item]:
    """Items from (where, row) pairs, each validated and every id once; a problem is
    'where: reason'. The CLI and the API both read items through here."""
    items: list[Item] = []
    seen: set[str] = set()
    for where, row in rows:
        try:
            item = Item.model_validate(row)
        except ValidationError as exc:
            raise error(f"{where}: {first_problem(exc, 'item')}") from None
        if item.id in seen:
            raise error(f"{where}: duplicate item id {item.id!r}")
        seen.add(item.id)
        items.append(item)
    return items


def check_video_urls(named: Iterable[tuple[str, Item]], error: type[ValueError]) -> None:
    """That every video named by a URL is one `grade` reads (s3://, gs:// or file://, no credentials in
    it), with pyarrow installed for object storage (StorageUnavailable otherwise); a problem is
    'where: video URL: reason'. Nothing is contacted: an object is looked at when its turns are graded.
    (The service's items follow its own rules: uploads, media-root paths, allowed http(s) URLs.)"""
    for where, item in named:
        if not (item.video and is_url(item.video)):
            continue
        try:
            check_url(item.video)
            object_cache_bytes()
        except UnsupportedURL as exc:
            raise error(f"{where}: video {exc}") from None
        except StorageUnavailable as exc:
            raise StorageUnavailable(f"{where}: {exc}") from None
        except ValueError as exc:  # the object cache's size, set wrong
            raise error(str(exc)) from None


def check_question_times(grader: Any, items: Iterable[Item], error: type[ValueError] = ItemsError,
                         duration: Callable[[Path], float] | None = None) -> None:
    """That no turn was asked after the end of its item's video, where that video is a local file
    whose duration can be read (for the items whose turns carry a time); a problem names the item, the
    turn, its time and the video's duration. The durations are read by `duration` (an
    IsolatedSampler's, already running), else by capped decoding processes of this call's own: a demux
    scan of an untrusted file never runs in the calling process. A video that cannot be read, or one in
    object storage, is left to the grade (where such a turn is a bad_input judge error)."""
    from concurrent.futures import ThreadPoolExecutor

    from ..frame_sampler import FrameSamplerError, IsolatedSampler
    from ..schema import DecodeLimits
    from .pipeline import late_question

    timed = [(it, grader._video_path(it)) for it in items if any(t.time is not None for t in it.turns)]
    timed = [(it, path) for it, path in timed if isinstance(path, Path)]
    paths = list(dict.fromkeys(path for _, path in timed))
    if not paths:
        return

    def read(probe: Callable[[Path], float]) -> dict[Path, float | None]:
        def one(path: Path) -> float | None:
            try:
                return probe(path)
            except FrameSamplerError:
                return None

        with ThreadPoolExecutor(max_workers=min(4, len(paths))) as pool:
            return dict(zip(paths, pool.map(one, paths)))

    if duration is not None:
        durations = read(duration)
    else:
        limits = DecodeLimits()
        with IsolatedSampler(workers=min(2, len(paths)), timeout_s=limits.timeout_s, max_memory_mb=limits.memory_mb,
                             cache_dir=None) as probe:
            probe.start()  # from the main thread: deaf to the terminal's Ctrl-C, as the run's decoders are
            durations = read(probe.duration)
    for it, path in timed:
        known = durations[path]
        late = late_question(it, known) if known is not None else None
        if late is not None:
            raise error(late)


class Interval(BaseModel):
    estimate: float | None
    low: float | None
    high: float | None
    n: int


class TriageCounts(BaseModel):
    """The verdicts a thresholds file marked auto and to_review, and what the judge cost for each."""

    auto: int
    to_review: int
    cost_usd_auto: float | None  # None: no cost known for these verdicts
    cost_usd_to_review: float | None
    thresholds: list[str]  # sha256 of the thresholds files the marks came from


class GradeSummary(BaseModel):
    """What a batch produced. Judge errors are counted apart and never become labels."""

    items: int
    turns_graded: int
    decided_by_rules: int
    used_screen_text: int = 0  # verdicts with a grade decided by on-screen text the judge read
    categories_a: dict[str, int]
    categories_b: dict[str, int]
    preferences: dict[str, int]
    win_rate_a: Interval  # A wins / (A wins + B wins); Both and Neither excluded
    swap_checked: int
    swap_consistency: float | None
    blind_checked: int
    blind_unchanged: int
    errors: dict[str, int]
    error_examples: dict[str, str] = {}  # each kind of error's first message (item, turn and what happened)
    prompt_tokens: int  # of the turns whose token counts are known
    completion_tokens: int
    cost_usd: float | None  # of the turns whose token counts are known; None: no cost known
    usage_unknown: int = 0  # records whose token counts the model server misreported: tokens and cost unknown
    triage: TriageCounts | None = None  # where verdicts carry auto / to_review marks


def wilson(successes: int, n: int, z: float = 1.959964) -> Interval:
    if n == 0:
        return Interval(estimate=None, low=None, high=None, n=0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(estimate=p, low=max(0.0, centre - half), high=min(1.0, centre + half), n=n)


def summarize(records: list[Record], items: int) -> GradeSummary:
    verdicts, errors = latest(records)
    vs = list(verdicts.values())
    prefs = Counter(v.preference.value for v in vs if v.preference)
    wins_a, wins_b = prefs.get(Preference.A.value, 0), prefs.get(Preference.B.value, 0)
    swapped = [v for v in vs if v.swap is not None]
    blind = [v for v in vs if v.blind_unchanged is not None]
    every_usage = [u for u in (r.provenance.usage for r in records if r.provenance) if u]
    usages = [u for u in every_usage if u.known]
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    by_kind, examples = errors_by_kind(list(errors.values()))
    return GradeSummary(
        items=items,
        turns_graded=len(vs),
        decided_by_rules=sum(v.decided_by == "rules" for v in vs),
        used_screen_text=sum(any(r.used for r in v.provenance.read_text or ()) for v in vs if v.provenance),
        categories_a=dict(Counter(v.response_a.category.value for v in vs)),
        categories_b=dict(Counter(v.response_b.category.value for v in vs if v.response_b)),
        preferences=dict(prefs),
        win_rate_a=wilson(wins_a, wins_a + wins_b),
        swap_checked=len(swapped),
        swap_consistency=swap_consistency(vs),
        blind_checked=len(blind),
        blind_unchanged=sum(bool(v.blind_unchanged) for v in blind),
        errors=by_kind,
        error_examples=examples,
        prompt_tokens=sum(u.prompt_tokens or 0 for u in usages),
        completion_tokens=sum(u.completion_tokens or 0 for u in usages),
        cost_usd=sum(costs) if costs else None,
        usage_unknown=len(every_usage) - len(usages),
        triage=triage_counts(vs),
    )


def errors_by_kind(errors: Sequence[JudgeError]) -> tuple[dict[str, int], dict[str, str]]:
    """How many judge errors of each kind, and each kind's first message with the turn it was about."""
    examples: dict[str, str] = {}
    for e in errors:
        examples.setdefault(e.kind.value, error_example(e.item_id, e.turn, e.message))
    return dict(Counter(e.kind.value for e in errors)), examples


def error_example(item_id: object, turn: object, message: object) -> str:
    """A judge error as its kind's first message is shown: the turn it was about, and what happened."""
    return f"item {item_id} turn {turn}: {message}"


def triage_counts(verdicts: list[Verdict]) -> TriageCounts | None:
    marked = [(v, v.triage) for v in verdicts if v.triage is not None]
    if not marked:
        return None

    def cost(decision: str) -> float | None:
        known = [v.provenance.usage.cost_usd for v, mark in marked if mark.decision == decision
                 and v.provenance.usage is not None and v.provenance.usage.cost_usd is not None]
        return sum(known) if known else None

    auto = sum(mark.decision == "auto" for _, mark in marked)
    return TriageCounts(auto=auto, to_review=len(marked) - auto, cost_usd_auto=cost("auto"),
                        cost_usd_to_review=cost("to_review"), thresholds=sorted({mark.thresholds for _, mark in marked}))
