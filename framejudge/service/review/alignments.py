"""Aligning the judge from a review queue's corrections, on the server: `framejudge align` over the
calibration's items, verdicts and the labels as they stand after review, with the same judge;
each result (and the rubric it wrote) is kept with the calibration."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import DateTime, String, Text, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ...calibration.adjudication import label_rows_jsonl
from ...db import Base
from ...judge import JudgeSpecError
from ...rubrics import RubricError, get_rubric
from ...rubrics.align import AlignError, AlignResult, align, rubric_yaml
from ...runner.decode import SharedDecodes
from ...schema import Verdict
from ..problems import ProblemError

MAX_ALIGN_UNITS = 5000  # labelled units one request may align on (each held-apart one is graded twice)


class AlignRequest(BaseModel):
    """How to align (the page's form and POST /v1/calibrate/{id}/alignments alike)."""

    model_config = ConfigDict(extra="forbid")

    judge: str | None = Field(None, max_length=500, description="default: the judge of the calibration's verdicts")
    holdout: float = Field(0.5, gt=0, lt=1, description="share of items held apart to measure on")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    budget_tokens: int = Field(1500, ge=1, le=100_000, description="the corrected examples' share of the prompt")
    replicates: int = Field(1000, ge=1, le=5000)


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
    """The judge spec of the verdicts, where it can be named from their provenance."""
    for r in records:
        if isinstance(r, Verdict):
            backend, model = r.provenance.judge_backend, r.provenance.model_id
            return "reference" if backend == "reference" else f"{backend}:{model}" if backend == "litellm" else None
    return None


async def run_alignment(svc: Any, queue: Any, key_id: str, request: AlignRequest) -> Alignment:
    """Align on the queue's labels as they stand; 4xx problems for what cannot be aligned."""
    inputs = queue.inputs
    verdicts = [r for r in inputs.records if isinstance(r, Verdict)]
    if not verdicts:
        raise ProblemError(422, "Nothing to align", "the calibration has no verdicts")
    if len(queue.units) > MAX_ALIGN_UNITS:
        raise ProblemError(422, "Alignment too large", f"{len(queue.units)} labelled units; this server aligns at most "
                           f"{MAX_ALIGN_UNITS} per request: export the labels and run framejudge align")
    spec = request.judge or calibration_judge(verdicts)
    if spec is None or spec not in svc.allowed_judges:
        raise ProblemError(400, "Judge not allowed", (f"judge {spec!r} is not offered here; " if spec else
                                                      "name the judge to align; ") + f"this server allows: "
                           f"{', '.join(svc.allowed_judges)}")
    first = verdicts[0].provenance
    try:
        base = get_rubric(first.rubric_id)
    except RubricError as exc:
        raise ProblemError(400, "Unknown rubric", f"the verdicts were graded with rubric {first.rubric_id!r}, which "
                           f"this server does not have: {exc}") from None
    items = list(inputs.items)
    if not items:
        raise ProblemError(422, "Nothing to align", "the calibration was not given its items (send `items` with "
                           "`verdicts`, or calibrate a job)")
    if not inputs.resolved:  # a client's references, resolved for the calibration's own key
        owner = queue.run.key_id or key_id
        items = [it.model_copy(update={"video": str(await svc.media.resolve(it.video, owner))}) if it.video else it
                 for it in items]
    try:
        judge = await asyncio.to_thread(svc.judges.make, spec)
    except (JudgeSpecError, ValueError, OSError) as exc:
        raise ProblemError(400, "Judge not available", str(exc)) from None
    gold = queue.gold()
    with tempfile.TemporaryDirectory(prefix="framejudge-align-") as folder:
        labels_path = Path(folder) / f"calibration-{queue.run.id}-gold.jsonl"
        labels_path.write_text(label_rows_jsonl(gold), encoding="utf-8")
        try:
            aligned = await asyncio.to_thread(
                align, base, labels_path, gold, items, judge, spec, items_where=f"calibration {queue.run.id}",
                verdicts=verdicts, verdicts_where=f"calibration {queue.run.id}", options=first.options,
                holdout=request.holdout, seed=request.seed, budget_tokens=request.budget_tokens,
                replicates=request.replicates, sample=SharedDecodes(svc.decoder.sample))
        except AlignError as exc:
            raise ProblemError(422, "Cannot align", str(exc)) from None
    done = Alignment(id=secrets.token_hex(8), created_at=datetime.now(timezone.utc), key_id=key_id,
                     result=aligned.result, warnings=aligned.warnings)
    with Session(svc.engine) as s, s.begin():
        s.add(AlignmentRow(id=done.id, calibration_id=queue.run.id, key_id=key_id, created_at=done.created_at,
                           alignment_json=done.model_dump_json(), rubric_yaml=rubric_yaml(aligned.rubric)))
    return done
