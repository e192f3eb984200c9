"""Judge-vs-human calibration and its HTML report."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, Response
from pydantic import TypeAdapter

from ...calibration.audit import AuditResult
from ...calibration.calibrate import calibration, check_judged
from ...calibration.inputs import LabelsError, human_rows
from ...schema import JudgeError, RecordIn, Verdict
from ..bodies import StrictJsonRoute, collector_paused, json_in_pieces
from ..context import PageDep, ServiceDep, authorized
from ..headers import REPORT_HEADERS
from ..jobs import aware, job_items, job_records
from ..models import CalibrateRequest, CalibrateResponse, CalibrationPage, CalibrationSummary
from ..problems import ProblemError, problems
from ..review.sessions import reviewers_problem
from ..review.store import ReviewInputs
from ..store import ApiKey, CalibrationRun, load_calibration, owned_page, save_calibration

router = APIRouter(route_class=StrictJsonRoute)
CalibrateKey = Annotated[ApiKey, Depends(authorized("calibrate"))]
RECORD: TypeAdapter[Verdict | JudgeError] = TypeAdapter(RecordIn)


@router.post("/v1/calibrate", tags=["calibration"], response_model=CalibrateResponse, responses=problems(404))
def calibrate(body: CalibrateRequest, svc: ServiceDep, key: CalibrateKey) -> Response:
    """Human labels against verdicts (given, or a job's records): the agreement, with bootstrap
    intervals, stored. Computed in a worker thread, as its body was read, and written as JSON there
    too (a large result's serialisation would otherwise run on the event loop): a large calibration
    holds no other request."""
    with collector_paused():
        result = _calibrate(body, svc, key)
        return Response(result.model_dump_json(by_alias=True), media_type="application/json")


def _calibrate(body: CalibrateRequest, svc: ServiceDep, key: CalibrateKey) -> CalibrateResponse:
    if body.job_id is not None:
        status = svc.graded_job(body.job_id, key)
        if status.done == 0:
            raise ProblemError(422, "Job has no verdicts yet", f"job {body.job_id} has graded no item so far")
        records: list[Verdict | JudgeError] = [RECORD.validate_json(r)
                                               for r in job_records(svc.engine, body.job_id, 0, None)]
    else:
        records = body.verdicts or []
    humans = human_rows(body.labels)
    where = f"job {body.job_id}" if body.job_id is not None else "the verdicts"
    try:  # a calibration that would measure nothing, refused as every door refuses it
        _, labelled = check_judged(humans, records, where)
    except LabelsError as exc:
        raise ProblemError(422, "Labels match no verdict", f"labels: {exc}") from None
    draws, limit = labelled * body.replicates, svc.settings.max_calibration_draws
    if draws > limit:  # the bootstrap's time grows with turns x replicates: bounded before it starts
        fewer = limit // labelled
        raise ProblemError(422, "Calibration too large",
                           f"{labelled} labelled turn(s) x {body.replicates} replicates is {draws:,} bootstrap draws; "
                           f"this server computes at most {limit:,} per request (FRAMEJUDGE_MAX_CALIBRATION_DRAWS): "
                           + (f"ask for at most {fewer} replicates, " if fewer else "")
                           + "or run framejudge calibrate")
    refused = reviewers_problem(svc.engine, body.reviewers)
    if refused:
        raise ProblemError(422, "Invalid reviewer", refused)
    result = calibration(humans, records, replicates=body.replicates, seed=body.seed, where=where)
    if body.job_id is not None:  # kept with the result: the review queue shows them
        inputs = ReviewInputs(labels=body.labels, records=records, items=job_items(svc.engine, body.job_id),
                              resolved=True, job_id=body.job_id)
    else:
        inputs = ReviewInputs(labels=body.labels, records=records, items=body.items or [])
    run_id = save_calibration(svc.engine, key.id, result.model_dump_json(), json_in_pieces(inputs), body.reviewers)
    return CalibrateResponse(id=run_id, result=result)


@router.get("/v1/calibrate", tags=["calibration"], response_model=CalibrationPage)
def list_calibrations(svc: ServiceDep, key: CalibrateKey, page: PageDep) -> CalibrationPage:
    """This key's calibrations (and review queues), newest first, a page at a time."""
    rows = owned_page(svc.engine, CalibrationRun, key.id, page.offset, page.limit)
    return CalibrationPage(offset=page.offset, limit=page.limit, calibrations=[
        CalibrationSummary(id=r.id, created_at=aware(r.created_at), reviewers=(r.reviewers or "").split(",")
                           if r.reviewers else []) for r in rows])


@router.get("/v1/calibrate/{run_id}/report", tags=["calibration"], operation_id="get_calibration_report",
            response_class=HTMLResponse, responses=problems(404))
def calibration_report(run_id: str, svc: ServiceDep, key: CalibrateKey) -> HTMLResponse:
    from ...calibration.report import render_html

    stored = load_calibration(svc.engine, run_id, key)
    if stored is None:
        raise ProblemError(404, "No such calibration", f"no calibration with id {run_id!r}")
    return HTMLResponse(render_html(AuditResult.model_validate_json(stored), title=f"framejudge calibration {run_id}"),
                        headers=REPORT_HEADERS)
