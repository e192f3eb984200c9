"""What a review keeps: the inputs of a calibration (labels, records, items), every reviewer's
decisions (append-only: nothing a reviewer did is overwritten), and browser sessions."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import DateTime, Index, Integer, String, Text, delete, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from ...db import Base
from ...schema import HumanLabel, Item, RecordIn, ReviewDecision
from ..store import ApiKey, CalibrationRun, generated_id


class ReviewInputs(BaseModel):
    """A calibration's inputs, kept with it for review. `items` hold the videos as the server reads
    them (a job's resolved paths) or as the client gave them (`resolved` false: resolved again,
    for the calibration's key, when frames are shown)."""

    labels: list[HumanLabel]
    records: list[RecordIn]
    items: list[Item] = Field(default_factory=list)
    resolved: bool = False
    job_id: str | None = None
    to_review: bool = False  # the queue also holds the verdicts a triage sent to review


class DecisionRow(Base):
    __tablename__ = "review_decisions"
    # one decision per place in a unit's sequence: of two decisions made on the same reading of a
    # unit, the second is refused (UnitMoved), whichever server process takes it
    __table_args__ = (Index("review_decisions_unit_seq", "calibration_id", "item_id", "turn", "seq", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    calibration_id: Mapped[str] = mapped_column(String(32), index=True)
    item_id: Mapped[str] = mapped_column(String(200))
    turn: Mapped[int] = mapped_column(Integer)
    reviewer: Mapped[str] = mapped_column(String(16))  # the reviewer's key id
    decided_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decision_json: Mapped[str] = mapped_column(Text)
    # how many decisions the unit had when this one was made on it (none on rows written before it was kept)
    seq: Mapped[int | None] = mapped_column(Integer, nullable=True)


class SessionRow(Base):
    __tablename__ = "review_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the cookie's token
    key_id: Mapped[str] = mapped_column(String(16), index=True)
    csrf: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)  # SQLite drops the zone


# ------------------------------------------------------------------ calibrations under review

def reviewable(run: CalibrationRun, key: ApiKey) -> bool:
    """The calibration's own key, a key it names as a reviewer, or an admin key."""
    return (run.key_id == key.id or key.id in (run.reviewers or "").split(",")
            or "admin" in key.scopes.split(","))


_HEAD = (CalibrationRun.id, CalibrationRun.key_id, CalibrationRun.reviewers, CalibrationRun.created_at,
         CalibrationRun.inputs_json.is_not(None))


def _headed(row: Any) -> CalibrationRun:
    """A calibration without its stored texts (result_json empty; inputs_json empty or None as it has them or not)."""
    run_id, key_id, reviewers, created_at, has_inputs = row
    return CalibrationRun(id=run_id, key_id=key_id, reviewers=reviewers, created_at=created_at,
                          result_json="", inputs_json="" if has_inputs else None)


def review_run(engine: Engine, run_id: str, key: ApiKey) -> CalibrationRun | None:
    """The calibration without its stored texts (`calibration_texts` reads them), for a key that
    may review it; None otherwise (as for an id that does not exist). Every request asks: who may
    review changes, the texts never do."""
    if not generated_id(run_id):
        return None
    with Session(engine) as s:
        row = s.execute(select(*_HEAD).where(CalibrationRun.id == run_id)).first()
    if row is None:
        return None
    run = _headed(row)
    return run if reviewable(run, key) else None


def calibration_texts(engine: Engine, run_id: str) -> tuple[str, str | None]:
    """A calibration's stored result and inputs (JSON), written once with it and never changed."""
    with Session(engine) as s:
        row = s.execute(select(CalibrationRun.result_json, CalibrationRun.inputs_json)
                        .where(CalibrationRun.id == run_id)).one()
    return row[0], row[1]


def review_runs(engine: Engine, key: ApiKey) -> list[CalibrationRun]:
    """The calibrations this key may review, newest first (without their stored texts)."""
    with Session(engine) as s:
        rows = s.execute(select(*_HEAD).order_by(CalibrationRun.created_at.desc())).all()
    return [run for run in map(_headed, rows) if reviewable(run, key)]


def removed_reviewers(engine: Engine, run: CalibrationRun, deciders: set[str]) -> set[str]:
    """Those of `deciders` (key ids that decided on the calibration) who may no longer review it:
    neither its own key, nor named among its reviewers now, nor an admin key. Their decisions are
    kept, shown and listed, but count toward no gold until they are named again."""
    named = {run.key_id, *(run.reviewers or "").split(",")}
    others = deciders - named
    if not others:
        return set()
    with Session(engine) as s:
        scopes = {key_id: given for key_id, given in s.execute(select(ApiKey.id, ApiKey.scopes)
                                                                   .where(ApiKey.id.in_(sorted(others))))}
    return {k for k in others if "admin" not in scopes.get(k, "").split(",")}


def set_reviewers(engine: Engine, run_id: str, reviewers: list[str]) -> None:
    with Session(engine) as s, s.begin():
        run = s.get(CalibrationRun, run_id)
        if run is not None:
            run.reviewers = ",".join(reviewers) or None  # each named once (reviewers_problem)


# ------------------------------------------------------------------ decisions

class UnitMoved(Exception):
    """Another decision was added to the unit after it was read: read it again."""


def add_decision(engine: Engine, calibration_id: str, decision: ReviewDecision, seq: int) -> None:
    """Appended in its own transaction: committed (and on disk) before the reviewer sees the next unit.
    `seq` is how many decisions the unit had when this one was checked against it: UnitMoved when
    another decision took that place meanwhile (nothing is written)."""
    try:
        with Session(engine) as s, s.begin():
            s.add(DecisionRow(calibration_id=calibration_id, item_id=decision.item_id, turn=decision.turn,
                              reviewer=decision.reviewer, decided_at=decision.decided_at,
                              decision_json=decision.model_dump_json(), seq=seq))
    except IntegrityError as exc:
        raise UnitMoved(f"item {decision.item_id!r} turn {decision.turn} was decided meanwhile") from exc


def decisions(engine: Engine, calibration_id: str, known: dict[int, ReviewDecision] | None = None
              ) -> list[ReviewDecision]:
    """Every decision on this calibration's units, in the order they were made. With `known` (row
    id -> decision, filled in here), only the rows not in it are read and parsed: decisions are
    never changed or removed, so a row once read stays as it was."""
    known = {} if known is None else known
    with Session(engine) as s:
        ids = list(s.scalars(select(DecisionRow.id).where(DecisionRow.calibration_id == calibration_id)
                             .order_by(DecisionRow.id)))
        missing = [i for i in ids if i not in known]
        for start in range(0, len(missing), 500):
            chunk = missing[start:start + 500]
            for row_id, text in s.execute(select(DecisionRow.id, DecisionRow.decision_json)
                                          .where(DecisionRow.id.in_(chunk))):
                known[row_id] = ReviewDecision.model_validate_json(text)
    return [known[i] for i in ids]


# ------------------------------------------------------------------ sessions

def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_session(engine: Engine, key_id: str, lifetime: timedelta) -> str:
    """A new session for this key; the token goes in the cookie, only its hash is stored."""
    token = secrets.token_urlsafe(32)
    now = datetime.now(timezone.utc)
    with Session(engine) as s, s.begin():
        s.execute(delete(SessionRow).where(SessionRow.expires_at < now))  # expired ones go on every sign-in
        s.add(SessionRow(id=_digest(token), key_id=key_id, csrf=secrets.token_urlsafe(32), created_at=now,
                         expires_at=now + lifetime))
    return token


def find_session(engine: Engine, token: str) -> SessionRow | None:
    """The session of this cookie token while it has not expired."""
    with Session(engine) as s:
        row = s.get(SessionRow, _digest(token))
        if row is None or _aware(row.expires_at) <= datetime.now(timezone.utc):
            return None
        s.expunge(row)
        return row


def close_session(engine: Engine, token: str) -> None:
    with Session(engine) as s, s.begin():
        s.execute(delete(SessionRow).where(SessionRow.id == _digest(token)))
