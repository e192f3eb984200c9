"""What a rerun into an existing verdicts file may keep.

A verdict in the file stands for a turn of this run only when it was graded the same way:
the same rubric (by content hash), judge and model, options (frames, swap, samples, blind
control, image quality, where the judge uses them) and the same turn content. Anything else
is a conflict: the run refuses and names what differs, or with `regrade` grades those turns
again and moves the old records to a file of their own (`<out>.superseded.jsonl`), so the
output holds one standing record per turn and no reader has to sort them out.

Judge errors are never kept as results: a failed turn is graded again, and its old error
lines are dropped when the rerun starts, so retries do not pile up duplicates.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FramejudgeError
from ..judge.base import wants_frames
from ..judge.pipeline import Grader
from ..records import Record, read_records, turn_hash
from ..schema import GradeOptions, Item, JudgeError, Provenance, Verdict, VideoInput

EXAMPLES = 3  # turns named per kind of difference


class ResumeConflict(FramejudgeError, ValueError):
    """An output file holding verdicts graded differently from this run."""

    code = "resume_conflict"


def superseded_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".superseded.jsonl")


def _options_differences(old: GradeOptions, now: GradeOptions, grader: Grader, frames: bool) -> list[str]:
    found = []
    if frames and old.sampler != now.sampler:
        found.append(f"frames: {_sampler_text(old)} in the file, {_sampler_text(now)} now")
    for name, label in (("swap", "swap"), ("samples", "samples"), ("blind", "blind control")):
        if getattr(old, name) != getattr(now, name):
            found.append(f"{label}: {getattr(old, name)} in the file, {getattr(now, name)} now")
    if now.samples > 1 and old.samples == now.samples and old.sample_temperature != now.sample_temperature:
        found.append(f"sample temperature: {old.sample_temperature:g} in the file, {now.sample_temperature:g} now")
    shown_old, shown_now = (o.video_input or VideoInput.frames for o in (old, now))
    if frames and shown_old != shown_now:
        found.append(f"video input: {shown_old.value} in the file, {shown_now.value} now")
    elif frames and shown_now is VideoInput.clip and old.clip_fps != now.clip_fps:
        found.append(f"clip fps: {old.clip_fps:g} in the file, {now.clip_fps:g} now")
    if grader.judge.sees_images and old.jpeg_quality != now.jpeg_quality:
        found.append(f"jpeg quality: {old.jpeg_quality} in the file, {now.jpeg_quality} now")
    return found


def _sampler_text(options: GradeOptions) -> str:
    s = options.sampler.model_dump(exclude_defaults=True, mode="json")
    return ", ".join(f"{k}={v}" for k, v in sorted(s.items())) or "defaults"


def differences(p: Provenance | None, grader: Grader, item: Item, turn: int) -> list[str]:
    """How the verdict with provenance `p` was graded differently from this run's (item, turn);
    empty when it stands."""
    if p is None:
        return ["no provenance"]
    found = []
    if p.rubric_hash != grader.rubric_hash:
        found.append(f"rubric: {p.rubric_id}@{p.rubric_version} ({p.rubric_hash[:12]}) in the file, "
                     f"{grader.rubric.id}@{grader.rubric.version} ({grader.rubric_hash[:12]}) now")
    if (p.judge_backend, p.model_id) != (grader.judge.backend, grader.judge.model_id):
        found.append(f"judge: {p.judge_backend} {p.model_id} in the file, "
                     f"{grader.judge.backend} {grader.judge.model_id} now")
    if p.options is None or p.turn_hash is None:
        found.append("graded by a framejudge that did not record its options and the turn's content")
        return found
    reads = (not grader.judge.needs_frames and wants_frames(grader.judge, item, turn)
             and not grader.decided_by_rules(item, turn))  # a judge that reads this turn's frames
    found += _options_differences(p.options, grader.effective_options, grader, grader.judge.needs_frames or reads)
    if reads and p.read_text is None:
        found.append("on-screen text: not read in the file, read now")
    if p.turn_hash != turn_hash(item, turn):
        found.append("content: the item's video, question, golden response or responses up to this turn changed")
    return found


@dataclass
class ResumePlan:
    """Which turns this run grades, and what happens to the file's records first."""

    work: list[tuple[Item, set[int]]]  # unfinished items, each with the turns it keeps
    kept: int = 0  # turns whose verdicts stand
    superseded: list[Verdict] = field(default_factory=list)  # graded differently; moved apart
    stale_errors: int = 0  # error lines of turns graded again (or already graded since)
    rewrite: list[Record] | None = None  # the file's records after the move, when it changes

    @property
    def turns(self) -> int:
        return sum(len(it.turns) - len(skip) for it, skip in self.work)


def _conflict_message(out: Path, conflicts: dict[str, list[str]], total: int) -> str:
    lines = [f"{out} holds verdicts graded differently from this run ({total} turn(s)):"]
    for what, turns in conflicts.items():
        more = f" and {len(turns) - EXAMPLES} more" if len(turns) > EXAMPLES else ""
        lines.append(f"  {what} ({', '.join(turns[:EXAMPLES])}{more})")
    lines.append(f"  use a new --out, or --regrade to grade these turns again "
                 f"(the old records are moved to {superseded_path(out)})")
    return "\n".join(lines)


def plan_resume(grader: Grader, items: list[Item], out: Path, regrade: bool = False) -> ResumePlan:
    """The turns to grade into `out`; raises ResumeConflict where the file's verdicts for this
    run's turns were graded differently, unless `regrade`."""
    records = read_records(out, repair=True)
    by_key = {(it.id, t): (it, t) for it in items for t in range(len(it.turns))}
    last: dict[tuple[str, int], int] = {}  # the index of each turn's last verdict
    for i, r in enumerate(records):
        if isinstance(r, Verdict):
            last[(r.item_id, r.turn)] = i
    standing: set[tuple[str, int]] = set()
    conflicts: dict[str, list[str]] = {}
    moved: list[int] = []  # verdicts leaving the file for the superseded one
    stale: list[int] = []  # error lines leaving it
    for i, r in enumerate(records):
        key = (r.item_id, r.turn)
        if isinstance(r, JudgeError):
            if key in by_key or key in last:  # graded again now, or graded since: the failure is history
                stale.append(i)
        elif last[key] != i:
            moved.append(i)  # the same turn graded again later in the file: the later one stands
        elif key in by_key:
            found = differences(r.provenance, grader, *by_key[key])
            for what in found:
                conflicts.setdefault(what, []).append(f"{r.item_id} turn {r.turn}")
            if found:
                moved.append(i)
            else:
                standing.add(key)
    if conflicts and not regrade:
        total = len({t for turns in conflicts.values() for t in turns})
        raise ResumeConflict(_conflict_message(out, conflicts, total))
    work = [(it, {t for t in range(len(it.turns)) if (it.id, t) in standing}) for it in items]
    plan = ResumePlan(work=[(it, skip) for it, skip in work if len(skip) < len(it.turns)], kept=len(standing),
                      superseded=[records[i] for i in moved], stale_errors=len(stale))  # type: ignore[misc]
    if moved or stale:
        leaving = set(moved) | set(stale)
        plan.rewrite = [r for i, r in enumerate(records) if i not in leaving]
    return plan


def mark_kept(plan: ResumePlan, out: Path, items: list[Item], mark: Callable[[Record], Record]) -> int:
    """Mark the verdicts of this run's turns that stay in `out` (by a thresholds file), so that
    `apply_plan` rewrites the file with them and every standing verdict carries this run's mark;
    the number whose mark changed."""
    records = plan.rewrite if plan.rewrite is not None else read_records(out)
    keys = {(it.id, t) for it in items for t in range(len(it.turns))}
    changed, marked = 0, []
    for r in records:
        if isinstance(r, Verdict) and (r.item_id, r.turn) in keys:
            now = mark(r)
            changed += isinstance(now, Verdict) and now.triage != r.triage
            r = now
        marked.append(r)
    if changed:
        plan.rewrite = marked
    return changed


def apply_plan(plan: ResumePlan, out: Path) -> None:
    """Move superseded verdicts apart and rewrite `out` without them and without stale errors.
    The moved records are written (and synced) first, then `out` is replaced in one rename: a
    kill at any moment loses no verdict (at worst one is in both files)."""
    if plan.rewrite is None:
        return
    if plan.superseded:
        _append(superseded_path(out), plan.superseded)
    tmp = out.with_name(out.name + ".rewrite")
    _write(tmp, plan.rewrite, "w")
    os.replace(tmp, out)


def _append(path: Path, records: Iterable[Record]) -> None:
    _write(path, records, "a")


def _write(path: Path, records: Iterable[Record], mode: str) -> None:
    with open(path, mode, encoding="utf-8") as f:
        for r in records:
            f.write(r.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
