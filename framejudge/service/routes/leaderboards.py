"""Leaderboards from a job's records: the job's items are battle items (`framejudge leaderboard
--items-out`), its verdicts the battles' outcomes; the board is kept for the key that built it."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from sqlalchemy import DateTime, String, Text
from sqlalchemy.orm import Mapped, Session, mapped_column

from ...db import Base
from ...leaderboard.board import Board
from ...rubrics import RubricError, rubric_by_id
from ...rubrics.model import Rubric
from ...schema import JudgeError, RecordIn, Verdict, Whole
from ..bodies import StrictJsonRoute
from ..context import PageDep, ServiceDep, authorized
from ..headers import REPORT_HEADERS
from ..jobs import aware, job_items, job_records
from ..models import LeaderboardPage, LeaderboardSummary
from ..problems import ProblemError, problems
from ..store import ApiKey, generated_id, owned_page

router = APIRouter(route_class=StrictJsonRoute)
GradeKey = Annotated[ApiKey, Depends(authorized("grade"))]
RECORD: TypeAdapter[Verdict | JudgeError] = TypeAdapter(RecordIn)


class LeaderboardRow(Base):
    __tablename__ = "leaderboards"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(16), index=True)
    job_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    board_json: Mapped[str] = mapped_column(Text)


class LeaderboardRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(max_length=32, description="a job whose items are battle items (framejudge leaderboard --items-out)")
    baseline: str | None = Field(None, max_length=200, description="default: the model in the most battles")
    replicates: Whole = Field(1000, ge=1, le=5000)
    seed: Whole = Field(0, ge=0, le=2**32 - 1)
    by: list[str] = Field(default_factory=list, max_length=8, description="also a table per value of these "
                                                                          "(domain, task_type, a metadata field)")


class LeaderboardResponse(BaseModel):
    id: str
    job_id: str
    board: Board


@router.post("/v1/leaderboards", tags=["leaderboards"], operation_id="build_leaderboard",
             response_model=LeaderboardResponse, status_code=201, responses=problems(404))
def build(body: LeaderboardRequest, svc: ServiceDep, key: GradeKey) -> LeaderboardResponse:
    """The leaderboard of a job's battles: win rates against the baseline (bootstrap over videos),
    Bradley-Terry strengths and ranks, length-controlled win rates, slices, the judge's biases.
    Built in a worker thread (a job's records are read and the board computed there), never in
    the event loop."""
    from ...leaderboard.plan import PlanError, battles_from_items, outcomes
    from ...leaderboard.stats import build_board

    status = svc.graded_job(body.job_id, key)
    if status.done == 0:
        raise ProblemError(422, "Job has no verdicts yet", f"job {body.job_id} has graded no item so far")
    try:
        battles = battles_from_items(job_items(svc.engine, body.job_id))
    except PlanError as exc:
        raise ProblemError(422, "Not a battle job", f"job {body.job_id}: {exc} (write battle items with "
                           "framejudge leaderboard --items-out and submit them as the job)", code=exc.code) from None
    records = [RECORD.validate_json(r) for r in job_records(svc.engine, body.job_id, 0, None)]
    found = outcomes(records, battles)
    try:
        board = build_board(found, baseline=body.baseline, replicates=body.replicates, seed=body.seed, by=body.by,
                            rubric=_rubric_of(status.rubric))
    except ValueError as exc:
        raise ProblemError(422, "Cannot build the leaderboard", str(exc)) from None
    board_id = secrets.token_hex(8)
    with Session(svc.engine) as s, s.begin():
        s.add(LeaderboardRow(id=board_id, key_id=key.id, job_id=body.job_id, created_at=datetime.now(timezone.utc),
                             board_json=board.model_dump_json()))
    return LeaderboardResponse(id=board_id, job_id=body.job_id, board=board)


def _rubric_of(rubric_id: str) -> Rubric | None:
    """The rubric a job was graded under (the board's tie columns are named in its words)."""
    try:
        return rubric_by_id(rubric_id)
    except RubricError:
        return None


def _own(svc: object, board_id: str, key: ApiKey) -> LeaderboardRow:
    with Session(svc.engine) as s:  # type: ignore[attr-defined]
        row = s.get(LeaderboardRow, board_id) if generated_id(board_id) else None
        if row is None or (row.key_id != key.id and "admin" not in key.scopes.split(",")):
            raise ProblemError(404, "No such leaderboard", f"no leaderboard with id {board_id!r}")
        s.expunge(row)
        return row


@router.get("/v1/leaderboards", tags=["leaderboards"], operation_id="list_leaderboards",
            response_model=LeaderboardPage)
def list_boards(svc: ServiceDep, key: GradeKey, page: PageDep) -> LeaderboardPage:
    """This key's leaderboards (without their boards: GET /v1/leaderboards/{id}), newest first."""
    rows = owned_page(svc.engine, LeaderboardRow, key.id, page.offset, page.limit)
    return LeaderboardPage(offset=page.offset, limit=page.limit, leaderboards=[
        LeaderboardSummary(id=r.id, job_id=r.job_id, created_at=aware(r.created_at)) for r in rows])


@router.get("/v1/leaderboards/{board_id}", tags=["leaderboards"], operation_id="get_leaderboard",
            response_model=LeaderboardResponse, responses=problems(404))
def get(board_id: str, svc: ServiceDep, key: GradeKey) -> LeaderboardResponse:
    row = _own(svc, board_id, key)
    return LeaderboardResponse(id=row.id, job_id=row.job_id, board=Board.model_validate_json(row.board_json))


@router.get("/v1/leaderboards/{board_id}/page", tags=["leaderboards"], operation_id="get_leaderboard_page",
            response_class=HTMLResponse, responses=problems(404))
def page(board_id: str, svc: ServiceDep, key: GradeKey) -> HTMLResponse:
    """The board as a self-contained HTML page (forest plot, win-rate bars, per-slice heatmaps)."""
    from ...leaderboard.page import render_board_html

    row = _own(svc, board_id, key)
    return HTMLResponse(render_board_html(Board.model_validate_json(row.board_json),
                                          title=f"framejudge leaderboard {row.id}"), headers=REPORT_HEADERS)
