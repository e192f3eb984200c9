"""Aligning the judge from a review queue's corrections, on the server: `framejudge align` over the
calibration's items, verdicts and the labels as they stand after review, with the same judge;
each result (and the rubric it wrote) is kept with the calibration."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import DateTime, String, Text, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ...backends import backends
from ...calibration.adjudication import label_rows_jsonl
from ...db import Base
from ...judge import JudgeSpecError
from ...judge.base import JudgeStopped
from ...rubrics import RubricError, rubric_by_id
from ...runner.queue import Job
from ...schema import (
    GradeOptions,
    HumanLabel,
    Item,
    JudgeError,
    JudgeErrorKind,
    Number,
    Verdict,
    Whole,
)
from ...workflows.align import AlignError, AlignResult, align, rubric_yaml
from ..jobs import JobStatus, create_job, job_status
from ..problems import ProblemError
from ..store import ApiKey
from .frames import queue_video

MAX_ALIGN_UNITS = 5000  # labelled units one request may align on (each held-apart one is graded twice)


class AlignRequest(BaseModel):
    """How to align (the page's form and POST /v1/calibrate/{id}/alignments alike)."""

    model_config = ConfigDict(extra="forbid")

    judge: str | None = Field(None, max_length=500, description="default: the judge of the calibration's verdicts")
    holdout: Number = Field(0.5, gt=0, lt=1, description="share of items held apart to measure on")
    seed: Whole = Field(0, ge=0, le=2**32 - 1)
    budget_tokens: Whole = Field(1500, ge=1, le=100_000, description="the corrected examples' share of the prompt")
    replicates: Whole = Field(1000, ge=1, le=5000)


class Alignment(BaseModel):
    id: str
    created_at: datetime
    key_id: str
    result: AlignResult
    warnings: list[str]


class AlignmentRow(Base):
    __tablename__ = "review_alignments"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    calibration_id: Mapped[str] = mapped_column(String(32), index=True)
    key_id: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    alignment_json: Mapped[str] = mapped_column(Text)
    rubric_yaml: Mapped[str] = mapped_column(Text)


def alignments(engine: Engine, calibration_id: str) -> list[Alignment]:
    """This calibration's alignments, newest first."""
    with Session(engine) as s:
        rows = s.scalars(select(AlignmentRow.alignment_json).where(AlignmentRow.calibration_id == calibration_id)
                         .order_by(AlignmentRow.created_at.desc()))
        return [Alignment.model_validate_json(r) for r in rows]


def aligned_rubric_file(engine: Engine, calibration_id: str, alignment_id: str) -> str | None:
    with Session(engine) as s:
        row = s.get(AlignmentRow, alignment_id) if alignment_id.isalnum() and len(alignment_id) <= 32 else None
        return row.rubric_yaml if row is not None and row.calibration_id == calibration_id else None


def calibration_judge(records: list[Any]) -> str | None:
    """The judge spec of the verdicts, where it can be named from their provenance: a backend's bare
    name, or a server's model (a local model's identity is a fingerprint, not the path it was loaded from)."""
    for r in records:
        if isinstance(r, Verdict):
            found = backends().get(r.provenance.judge_backend)
            if found is None:
                return None
            if found.target is None:
                return found.name
            return f"{found.name}:{r.provenance.model_id}" if found.capabilities.calls_server else None
    return None


class AlignTask(BaseModel):
    """An alignment job's one item: what it aligns on, fixed when it was asked for (the labels as
    they stood then, the items with their videos as server paths)."""

    calibration_id: str
    judge: str
    rubric_id: str
    request: AlignRequest
    options: GradeOptions | None
    items: list[Item]
    gold: list[HumanLabel]
    verdicts: list[Verdict]
    video_names: dict[str, str] = Field(default_factory=dict, description="each item's video (a server path) as "
                                        "clients name it: what a message about it says")


async def submit_alignment(svc: Any, queue: Any, key: ApiKey, request: AlignRequest) -> JobStatus:
    """Queue the alignment of the queue's labels as they stand as a job of `key` (which holds the
    grade scope: aligning grades the held-apart items twice with the judge); 4xx problems for what
    cannot be aligned, before anything is queued."""
    inputs = queue.inputs
    verdicts = [r for r in inputs.records if isinstance(r, Verdict)]
    if not verdicts:
        raise ProblemError(422, "Nothing to align", "the calibration has no verdicts")
    if len(queue.units) > MAX_ALIGN_UNITS:
        raise ProblemError(422, "Alignment too large", f"{len(queue.units)} labelled units; this server aligns at most "
                           f"{MAX_ALIGN_UNITS} per request: export the labels and run framejudge align")
    spec = request.judge or calibration_judge(verdicts)
    if spec is None:
        raise ProblemError(400, "Judge not allowed", f"name the judge to align; this server allows: "
                           f"{', '.join(svc.allowed_judges)}")
    first = verdicts[0].provenance
    base = svc.judge_and_rubric(spec, first.rubric_id)  # a judge this server allows, as for grading
    items = list(inputs.items)
    if not items:
        raise ProblemError(422, "Nothing to align", "the calibration was not given its items (send `items` with "
                           "`verdicts`, or calibrate a job)")
    if not inputs.resolved:  # a client's references, resolved as the calibration's own key may (queue_video)
        owner = queue.run.key_id or key.id
        items = [it.model_copy(update={"video": str(await queue_video(svc, it.video, owner))}) if it.video else it
                 for it in items]
    names = {it.video: svc.media.name_of(Path(it.video)) for it in items if it.video}
    task = AlignTask(calibration_id=queue.run.id, judge=spec, rubric_id=base.id, request=request,
                     options=first.options, items=items, gold=queue.gold(), verdicts=verdicts, video_names=names)
    job_id, _ = await asyncio.to_thread(create_job, svc.engine, key.id, [task], spec, base.id,
                                        first.options or GradeOptions(), None, kind="align",
                                        judge_endpoint=svc.judges.endpoint_of(spec))
    status = job_status(svc.engine, job_id)
    if status is None:  # the job just made is gone already
        raise ProblemError(404, "No such job", f"no job with id {job_id!r}")
    return status


def unpathed(text: str, video_names: dict[str, str], folder: str) -> str:
    """`text` with each server path in it as clients name the thing: a video as they named it
    (an upload id, a path inside the media root), the labels' temporary file by its name alone."""
    for path, name in sorted(video_names.items(), key=lambda pair: -len(pair[0])):  # longest first
        text = text.replace(path, name)
    return text.replace(folder + os.sep, "").replace(folder, "") if folder else text


class _StopWhenCancelled:
    """The judge, refusing calls once its job is cancelled (asked at most once a second): a
    cancelled alignment spends nothing more."""

    def __init__(self, judge: Any, cancelled: Callable[[], bool]) -> None:
        self._judge, self._cancelled, self._asked, self._answer = judge, cancelled, 0.0, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._judge, name)

    def stopped(self) -> bool:
        if not self._answer and time.monotonic() - self._asked >= 1.0:
            self._asked, self._answer = time.monotonic(), self._cancelled()
        return self._answer

    async def judge(self, request: Any) -> Any:
        if self.stopped():
            raise JudgeStopped("the alignment job was cancelled")
        return await self._judge.judge(request)


def align_job(engine: Engine, graders: Any, job_id: str, key_id: str, task_json: str) -> tuple[list[Any], list[Any]]:
    """Run an alignment job's task (in a worker, in a thread): its records (none, or one judge
    error saying why nothing was aligned) and the alignment's row, whose id is the job's."""
    task = AlignTask.model_validate_json(task_json)
    where = f"calibration {task.calibration_id}"
    labels_name = f"the labels of {where} (as reviewed)"
    folder = ""  # the temporary folder the labels are written to: never shown

    def failed(why: str) -> tuple[list[Any], list[Any]]:
        return [JudgeError(item_id=task.calibration_id, kind=JudgeErrorKind.backend_error,
                           message=f"not aligned: {unpathed(why, task.video_names, folder)}"[:2000])], []

    def cancelled() -> bool:
        with Session(engine) as s:
            return bool(s.scalar(select(Job.cancelled).where(Job.id == job_id)))

    try:
        base = rubric_by_id(task.rubric_id)
        judge = _StopWhenCancelled(graders.judges.make(task.judge), cancelled)
        with tempfile.TemporaryDirectory(prefix="framejudge-align-") as folder:
            labels_path = Path(folder) / f"calibration-{task.calibration_id}-gold.jsonl"  # its name: the changelog's
            labels_path.write_text(label_rows_jsonl(task.gold), encoding="utf-8")
            r = task.request
            aligned = align(base, labels_path, task.gold, task.items, judge, task.judge, items_where=where,
                            verdicts=task.verdicts, verdicts_where=where, options=task.options, holdout=r.holdout,
                            seed=r.seed, budget_tokens=r.budget_tokens, replicates=r.replicates,
                            sample=graders.sample, labels_name=labels_name)
    except JudgeStopped:
        return failed("the job was cancelled before it finished (no rubric written)")
    except (AlignError, RubricError, JudgeSpecError) as exc:
        return failed(str(exc))
    if judge.stopped():
        return failed("the job was cancelled before it finished (no rubric written)")
    done = Alignment(id=job_id, created_at=datetime.now(timezone.utc), key_id=key_id, result=aligned.result,
                     warnings=[unpathed(w, task.video_names, folder) for w in aligned.warnings])
    return [], [AlignmentRow(id=done.id, calibration_id=task.calibration_id, key_id=key_id,
                             created_at=done.created_at, alignment_json=done.model_dump_json(),
                             rubric_yaml=rubric_yaml(aligned.rubric))]
