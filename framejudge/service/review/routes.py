"""The review pages (/review, signed in by cookie) and their API twins (/v1/calibrate/{id}/...,
by bearer key): the queue, a unit, decisions, the adjudicated labels."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from ...calibration.adjudication import label_rows_csv, label_rows_jsonl
from ...calibration.audit import AuditResult
from ...schema import (LABEL_FIELDS, Category, Cause, Item, JudgeError, LabelValues, Preference, RecordIn, ReviewDecision,
                       Verdict)
from ..bodies import StrictJsonRoute, form_fields
from ..context import KeyWith, ServiceDep, authorized
from ..forwarded import client_address
from ..headers import PAGE_HEADERS
from ..jobs import JobStatus, job_items, job_records
from ..problems import MEDIA, ProblemError, problems
from ..store import ApiKey, CalibrationRun, KeyRefused, holds, save_calibration, verify_key
from .alignments import AlignRequest, Alignment, aligned_rubric_file, alignments, calibration_judge, submit_alignment
from .decide import (DecisionError, DecisionRequest, StaleDecision, form_turn, from_form, make_decision, rated_fields,
                     standing, unit_version)
from .figures import FigureKeeper, Shown, gold_of
from .frames import unit_frames
from .queue import REASONS, STATES, Filters, State, Unit, build_units, neighbours, slices, state_of
from .sessions import (COOKIE, PATH, SIGN_IN_COOKIE, CsrfRefused, Reviewer, SignInNeeded, check_csrf, may_review,
                       new_sign_in_token, SignedIn, reviewers_problem, safe_next, secure_cookies, set_sign_in_cookie,
                       sign_in_url, start_session)
from .store import (ReviewInputs, UnitMoved, add_decision, calibration_texts, close_session, decisions,
                    removed_reviewers, review_run, review_runs, set_reviewers)

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
pages = APIRouter(include_in_schema=False, route_class=StrictJsonRoute)
api = APIRouter(tags=["review"], route_class=StrictJsonRoute)
ReviewerDep = Annotated[Reviewer, Depends(SignedIn())]
ALIGN_NEEDS_GRADE = ("this API key lacks the 'grade' scope: aligning grades the items held apart again with the "
                     "judge")
HEADERS = PAGE_HEADERS
FIELD_CHOICES: dict[str, list[str]] = {
    "category_a": [c.value for c in Category], "category_b": [c.value for c in Category],
    "preference": [p.value for p in Preference], "integrity_a": ["true", "false"], "integrity_b": ["true", "false"],
    "transcription_error": ["true", "false"], "multiturn": ["true", "false"],
}
CAUSES = {Cause.judge_wrong: ("judge wrong", "w"), Cause.humans_wrong: ("humans wrong", "u"),
          Cause.guideline_ambiguous: ("guideline ambiguous", "g"), Cause.needs_more_video: ("needs more of the video", "v"),
          Cause.other: ("other", "o")}


@dataclass
class Calibration:
    """What a calibration under review holds that never changes (its inputs, result and units),
    read and parsed once (the latest CALIBRATIONS_KEPT kept), and its decisions read so far."""

    inputs: ReviewInputs
    result: AuditResult
    units: list[Unit]
    by_key: dict[tuple[str, int], Unit]
    slices: list[str]
    known: dict[int, ReviewDecision] = field(default_factory=dict)  # decisions by row id

    @property
    def unlabelled(self) -> list[tuple[str, int]]:
        return [u.key for u in self.units if not u.humans]


CALIBRATIONS: OrderedDict[str, Calibration] = OrderedDict()
CALIBRATIONS_KEPT = 4
_calibrations_lock = threading.Lock()


class Queue:
    """A calibration under review, as one request sees it: every decision on it (`decisions`, oldest
    first), and those that count (`counted`: not by a reviewer since `removed` from it)."""

    def __init__(self, run: CalibrationRun, calibration: Calibration, all_decisions: list[ReviewDecision],
                 removed: set[str] | None = None) -> None:
        self.run, self.calibration, self.decisions = run, calibration, all_decisions
        self.removed = removed or set()
        self.counted = [d for d in all_decisions if d.reviewer not in self.removed]
        self.withdrawn = [d for d in all_decisions if d.reviewer in self.removed]
        self.inputs, self.units, self.by_key = calibration.inputs, calibration.units, calibration.by_key
        self.of_unit: dict[tuple[str, int], list[ReviewDecision]] = {}  # every decision, as the unit shows them
        for d in all_decisions:
            self.of_unit.setdefault((d.item_id, d.turn), []).append(d)

    def counted_of(self, key: tuple[str, int]) -> list[ReviewDecision]:
        return [d for d in self.of_unit.get(key, []) if d.reviewer not in self.removed]

    def states(self, reviewer_id: str) -> dict[tuple[str, int], State]:
        return {u.key: state_of(self.counted_of(u.key), reviewer_id) for u in self.units}

    def version(self, unit: Unit) -> str:
        return unit_version(unit, self.of_unit.get(unit.key, []), self.removed)

    def gold(self) -> list[Any]:
        return gold_of(self.inputs, self.counted, self.calibration.unlabelled, self.withdrawn)


def _calibration(engine: Any, run: CalibrationRun) -> Calibration:
    """The calibration's parsed inputs and units: from the kept ones, else read once."""
    if run.inputs_json is None:
        raise ProblemError(409, "Not reviewable", f"calibration {run.id} was stored without its inputs "
                           "(by an earlier version): run POST /v1/calibrate again to review it")
    with _calibrations_lock:
        kept = CALIBRATIONS.get(run.id)
        if kept is not None:
            CALIBRATIONS.move_to_end(run.id)
            return kept
    result_json, inputs_json = calibration_texts(engine, run.id)
    inputs = ReviewInputs.model_validate_json(inputs_json or "")
    units = build_units(inputs.labels, inputs.records, inputs.items, to_review=inputs.to_review)
    made = Calibration(inputs=inputs, result=AuditResult.model_validate_json(result_json), units=units,
                       by_key={u.key: u for u in units}, slices=slices(units))
    with _calibrations_lock:
        kept = CALIBRATIONS.setdefault(run.id, made)  # another request may have read it meanwhile
        CALIBRATIONS.move_to_end(run.id)
        while len(CALIBRATIONS) > CALIBRATIONS_KEPT:
            CALIBRATIONS.popitem(last=False)
    return kept


def load_queue(svc: Any, run_id: str, key: ApiKey) -> Queue:
    run = review_run(svc.engine, run_id, key)
    if run is None:
        raise ProblemError(404, "No such calibration", f"no calibration with id {run_id!r}")
    calibration = _calibration(svc.engine, run)
    made = decisions(svc.engine, run_id, calibration.known)
    return Queue(run, calibration, made, removed_reviewers(svc.engine, run, {d.reviewer for d in made}))


def figures_keeper(svc: Any) -> FigureKeeper:
    return svc.review_figures


async def figures(svc: Any, queue: Queue, wait_s: float = 0.0) -> Shown | None:
    """The figures for the decisions as they stand, when they are ready within `wait_s`; else the
    latest ones, marked stale, while they are refreshed in the background. None without human
    labels (a triage's queue: nothing to measure the judge against)."""
    if not queue.inputs.labels:
        return None
    # the figures of the decisions that count: kept apart for each set of removed reviewers
    slot = queue.run.id + ("|" + ",".join(sorted(queue.removed)) if queue.removed else "")
    return await figures_keeper(svc).current(slot, len(queue.decisions), queue.inputs, queue.counted,
                                             queue.calibration.unlabelled, wait_s)


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status, headers=HEADERS)


def _filters(field: str | None, category: str | None, slice_: str | None, state: str | None, blind: str | None) -> Filters:
    if field and field not in LABEL_FIELDS:
        raise ProblemError(422, "Invalid filter", f"field: {field!r} is not a label field ({', '.join(LABEL_FIELDS)})")
    if category and category not in [c.value for c in Category]:
        raise ProblemError(422, "Invalid filter", f"category: {category!r} is not a category")
    if state and state not in STATES:
        raise ProblemError(422, "Invalid filter", f"state: {state!r} is not one of {', '.join(STATES)}")
    if slice_ and ":" not in slice_:
        raise ProblemError(422, "Invalid filter", "slice: give it as key:value (task_type:multi_turn, domain:food)")
    return Filters(field=field or None, category=category or None, slice=slice_ or None,
                   state=state or None, blind=blind in ("1", "on", "true"))


FilterDep = Annotated[Filters, Depends(lambda field=None, category=None, slice=None, state=None, blind=None:
                                       _filters(field, category, slice, state, blind))]


def unit_url(run_id: str, unit: Unit | None, filters: Filters, **extra: str) -> str | None:
    if unit is None:
        return None
    return f"{PATH}/{run_id}/unit?" + urlencode({"item": unit.item_id, "turn": unit.turn, **filters.query(), **extra})


def queue_url(run_id: str, filters: Filters) -> str:
    q = urlencode(filters.query())
    return f"{PATH}/{run_id}" + (f"?{q}" if q else "")


# ------------------------------------------------------------------------ sign in and out

@pages.get(PATH + "/sign-in")
def sign_in_page(request: Request, next: str | None = None, expired: str | None = None) -> HTMLResponse:
    return _sign_in_form(request, safe_next(next), "Your session has expired: sign in again." if expired else None)


def _sign_in_form(request: Request, next_path: str, error: str | None, status: int = 200) -> HTMLResponse:
    token = new_sign_in_token()
    response = _page(request, "sign_in.html", status, next=next_path, error=error, token=token)
    set_sign_in_cookie(request, response, token)
    return response


@pages.post(PATH + "/sign-in")
async def sign_in(request: Request, svc: ServiceDep) -> Response:
    form = await form_fields(request)
    given, expected = str(form.get("csrf", "")), request.cookies.get(SIGN_IN_COOKIE, "")
    next_path = safe_next(str(form.get("next", "")))
    if not given or not expected or not secrets.compare_digest(given, expected):
        return _sign_in_form(request, next_path, "The sign-in form had expired; sign in again.", 403)
    given_key = str(form.get("api_key", "")).strip()
    key_id = given_key.split("_", 2)[1][:16] if given_key.count("_") >= 2 else ""
    address = client_address(request, svc.trusted_proxies)
    wait = svc.sign_ins.key_blocked(key_id, address) if key_id else None
    if wait is not None:  # this client is guessing this key: it waits; other clients do not
        return _sign_in_form(request, next_path, f"Too many failed sign-ins with this key: wait "
                                                 f"{max(1, round(wait))} s.", 429)
    try:
        key = verify_key(svc.engine, given_key)
    except KeyRefused as exc:
        wait = svc.sign_ins.failed(key_id, address)
        if wait is not None:
            return _sign_in_form(request, next_path, f"Too many failed sign-ins: wait {max(1, round(wait))} s.", 429)
        return _sign_in_form(request, next_path, f"{str(exc)[:1].upper()}{str(exc)[1:]}.", 401)
    if not may_review(key):
        return _sign_in_form(request, next_path, "This API key lacks the 'review' scope.", 403)
    wait = svc.limiter.take(key.id)  # a right key signs in as often as it may make requests
    if wait is not None:
        return _sign_in_form(request, next_path, f"Too many sign-ins: wait {max(1, round(wait))} s.", 429)
    response = RedirectResponse(next_path, status_code=303, headers=HEADERS)
    start_session(request, response, key)
    return response


@pages.post(PATH + "/sign-out")
async def sign_out(request: Request, svc: ServiceDep, who: ReviewerDep) -> Response:
    form = await form_fields(request)
    check_csrf(who, str(form.get("csrf", "")))
    close_session(svc.engine, request.cookies.get(COOKIE, ""))
    response = RedirectResponse(f"{PATH}/sign-in", status_code=303, headers=HEADERS)
    response.delete_cookie(COOKIE, path=PATH, secure=secure_cookies(request), httponly=True, samesite="strict")
    return response


# ------------------------------------------------------------------------ the pages

@pages.get(PATH)
def review_index(request: Request, svc: ServiceDep, who: ReviewerDep) -> HTMLResponse:
    runs = review_runs(svc.engine, who.key)
    return _page(request, "index.html", who=who, runs=runs)


@pages.get(PATH + "/{run_id}")
async def queue_page(request: Request, run_id: str, svc: ServiceDep, who: ReviewerDep, filters: FilterDep,
                     aligning: str | None = None) -> HTMLResponse:
    queue = await asyncio.to_thread(load_queue, svc, run_id, who.key)
    states = queue.states(who.key.id)
    shown = [u for u in queue.units if filters.keeps(u, states[u.key])]
    counts = {s: sum(1 for v in states.values() if v == s) for s in STATES}
    figured = await figures(svc, queue, svc.settings.review_figures_wait_s)
    # a queue of thousands of units is a page of megabytes: rendered in a worker thread, not in the loop
    return await asyncio.to_thread(
        _page, request, "queue.html", who=who, run=queue.run, units=shown, total=len(queue.units), states=states,
        counts=counts, reasons=REASONS, filters=filters, fields=LABEL_FIELDS, categories=[c.value for c in Category],
        slices=queue.calibration.slices, state_names=STATES, result=queue.calibration.result,
        shifts=figured.figures if figured else [], figured=figured,
        start=unit_url(run_id, shown[0], filters) if shown else None,
        unit_url=lambda u: unit_url(run_id, u, filters), export=f"{PATH}/{run_id}/labels",
        alignments=alignments(svc.engine, run_id), judges=svc.allowed_judges,
        judge=calibration_judge(queue.inputs.records), align_error=None,
        may_align=holds(who.key, "grade"), aligning=_aligning(svc, aligning, who.key))


def _aligning(svc: Any, job_id: str | None, key: ApiKey) -> JobStatus | None:
    """The alignment job the page's form just queued (its owner's), to say where it stands."""
    if not job_id:
        return None
    try:
        return svc.own_job(job_id, key)
    except ProblemError:
        return None


@pages.get(PATH + "/{run_id}/unit")
async def unit_page(request: Request, run_id: str, svc: ServiceDep, who: ReviewerDep, filters: FilterDep,
                    item: str, turn: int = 0, error: str | None = None) -> HTMLResponse:
    queue = await asyncio.to_thread(load_queue, svc, run_id, who.key)
    unit = queue.by_key.get((item, turn))
    if unit is None:
        raise ProblemError(404, "No such unit", f"calibration {run_id} has no labelled turn {turn} of item {item!r}")
    return await _unit(request, queue, unit, who, filters, error)


async def _unit(request: Request, queue: Queue, unit: Unit, who: Reviewer, filters: Filters, error: str | None,
                status: int = 200) -> HTMLResponse:
    states = queue.states(who.key.id)
    previous, following, to_decide = neighbours(queue.units, unit.key, filters, states)
    mine = [d for d in queue.of_unit.get(unit.key, []) if d.reviewer == who.key.id and d.action != "skip"]
    others = [d for d in queue.of_unit.get(unit.key, []) if d.action != "skip"]  # the removed reviewers' marked
    hidden = filters.blind and not mine  # blind: nothing that could anchor the reviewer until they decide
    frames = await unit_frames(request.app.state.service, unit, queue.inputs.resolved, queue.run.key_id)
    order = [u.key for u in queue.units]
    shown = [u.key for u in queue.units if filters.keeps(u, states[u.key], with_state=False)]
    chosen = mine[-1].labels if mine else (None if filters.blind else unit.majority)
    prefill = {} if chosen is None else {f: str(v).lower() if isinstance(v, bool) else v
                                         for f, v in chosen.model_dump(mode="json").items() if v is not None}
    run_id = queue.run.id
    return _page(request, "unit.html", status, who=who, run=queue.run, unit=unit, item=unit.item, frames=frames,
                 hidden=hidden, filters=filters, state=states[unit.key], reasons=REASONS, mine=mine, decisions=others,
                 position=(shown.index(unit.key) + 1 if unit.key in shown else None), shown=len(shown),
                 queue_position=order.index(unit.key) + 1, total=len(order), error=error,
                 fields=LABEL_FIELDS, choices=FIELD_CHOICES, causes=CAUSES, prefill=prefill,
                 previous=unit_url(run_id, previous, filters), next=unit_url(run_id, following, filters),
                 to_decide=unit_url(run_id, to_decide, filters), queue=queue_url(run_id, filters),
                 toggle_blind=unit_url(run_id, unit, replace(filters, blind=not filters.blind)),
                 annotators=list(unit.humans), adoptable=rated_fields(unit), version=queue.version(unit),
                 removed=queue.removed, judge_labels=_set(unit.judge, rated_fields(unit)) if unit.judge else None,
                 annotator_labels={a: _set(v, LABEL_FIELDS) for a, v in unit.humans.items()})


def _set(values: Any, fields: Any) -> dict[str, str]:
    """Label values as the form's selects write them (a switch as true or false), those of `fields` only."""
    return {f: str(v).lower() if isinstance(v, bool) else str(getattr(v, "value", v))
            for f in fields if (v := getattr(values, f)) is not None}


DECIDE_TRIES = 3


async def _decide(svc: Any, run_id: str, key: ApiKey, wanted: DecisionRequest, blind: bool = False
                  ) -> tuple[Queue, Unit, ReviewDecision]:
    """Make and keep one decision, on the unit as it stands: refused (StaleDecision) when the unit
    has changed since the version the decision was made on, also by a decision that lands between
    this check and the write (read again and checked again; the database keeps one decision per
    place in a unit's sequence)."""
    for _ in range(DECIDE_TRIES):
        queue = await asyncio.to_thread(load_queue, svc, run_id, key)
        unit = queue.by_key.get((wanted.item_id, wanted.turn))
        if unit is None:
            raise ProblemError(404, "No such unit", f"calibration {run_id} has no labelled turn {wanted.turn} of item "
                               f"{wanted.item_id!r}")
        on_unit = queue.of_unit.get(unit.key, [])
        mine = any(d.reviewer == key.id and d.action != "skip" for d in on_unit)
        decision = make_decision(unit, wanted, key.id, on_unit, queue.inputs.labels, queue.removed,
                                 blind=blind and not mine)
        try:
            await asyncio.to_thread(add_decision, svc.engine, run_id, decision, len(on_unit))
        except UnitMoved:
            continue
        return queue, unit, decision
    raise ProblemError(503, "Busy unit", f"item {wanted.item_id!r} turn {wanted.turn} was decided by others "
                       f"{DECIDE_TRIES} times while this decision was checked: nothing was saved; try again")


@pages.post(PATH + "/{run_id}/decide")
async def decide_form(request: Request, run_id: str, svc: ServiceDep, who: ReviewerDep) -> Response:
    form = await form_fields(request)
    check_csrf(who, form.get("csrf"))
    filters = _filters(form.get("field"), form.get("category"), form.get("slice"), form.get("state"), form.get("blind"))
    try:
        wanted = from_form(form)
        _, unit, decision = await _decide(svc, run_id, who.key, wanted, filters.blind)
    except (DecisionError, ProblemError) as exc:  # the unit again, as it stands, saying why
        queue = await asyncio.to_thread(load_queue, svc, run_id, who.key)
        unit_or_none = queue.by_key.get((form.get("item", ""), form_turn(form)))
        status = exc.status if isinstance(exc, ProblemError) else 409 if isinstance(exc, StaleDecision) else 422
        if unit_or_none is None:
            if isinstance(exc, ProblemError):
                raise
            raise ProblemError(status, "Invalid decision", str(exc), code=exc.code) from None
        return await _unit(request, queue, unit_or_none, who, filters,
                           exc.detail if isinstance(exc, ProblemError) else str(exc), status=status)
    queue = await asyncio.to_thread(load_queue, svc, run_id, who.key)
    await figures(svc, queue)  # the refresh starts now, in the background
    if filters.blind and decision.action != "skip":  # show the reviewer what they were blind to, then go on
        return RedirectResponse(unit_url(run_id, unit, filters) or queue_url(run_id, filters), status_code=303)
    states = queue.states(who.key.id)
    _, _, to_decide = neighbours(queue.units, unit.key, filters, states)
    return RedirectResponse(unit_url(run_id, to_decide, filters) or queue_url(run_id, filters), status_code=303)


@pages.post(PATH + "/{run_id}/align")
async def align_form(request: Request, run_id: str, svc: ServiceDep,
                     who: Annotated[Reviewer, Depends(SignedIn("grade", why=ALIGN_NEEDS_GRADE))]) -> Response:
    form = await form_fields(request)
    check_csrf(who, form.get("csrf"))
    queue = await asyncio.to_thread(load_queue, svc, run_id, who.key)
    from pydantic import ValidationError

    from ...files import first_problem

    try:
        wanted = AlignRequest.model_validate_strings({k: v for k, v in form.items() if k in AlignRequest.model_fields and v})
    except ValidationError as exc:
        raise ProblemError(422, "Invalid alignment", first_problem(exc)) from None
    job = await submit_alignment(svc, queue, who.key, wanted)
    return RedirectResponse(f"{PATH}/{run_id}?aligning={job.id}#alignments", status_code=303)


@pages.get(PATH + "/{run_id}/alignments/{alignment_id}/rubric.yaml")
def aligned_rubric_page(run_id: str, alignment_id: str, svc: ServiceDep, who: ReviewerDep) -> Response:
    load_queue(svc, run_id, who.key)
    return _rubric_file(svc, run_id, alignment_id)


def _rubric_file(svc: Any, run_id: str, alignment_id: str) -> Response:
    text = aligned_rubric_file(svc.engine, run_id, alignment_id)
    if text is None:
        raise ProblemError(404, "No such alignment", f"calibration {run_id} has no alignment {alignment_id!r}")
    return Response(text, media_type="application/yaml",
                    headers={"Content-Disposition": f'attachment; filename="aligned-{alignment_id}.yaml"'})


def export_labels(queue: Queue, form: str) -> Response:
    rows = queue.gold()
    name = f"calibration-{queue.run.id}-gold"
    kept = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}  # labels: in no shared cache
    if form == "csv":
        return Response(label_rows_csv(rows), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"', **kept})
    return Response(label_rows_jsonl(rows), media_type="application/x-ndjson",
                    headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"', **kept})


@pages.get(PATH + "/{run_id}/labels")
def export_page(run_id: str, svc: ServiceDep, who: ReviewerDep, format: Literal["csv", "jsonl"] = "jsonl") -> Response:
    return export_labels(load_queue(svc, run_id, who.key), format)


# ------------------------------------------------------------------------ the API twins

review_key = KeyWith("review", "calibrate")  # a bearer key with the review or the calibrate scope (or admin)


ReviewKey = Annotated[ApiKey, Depends(review_key)]


@api.get("/v1/calibrate/{run_id}/labels", operation_id="export_labels", response_class=Response,
         responses={200: {"description": "label rows", "content": {"application/x-ndjson": {}, "text/csv": {}}},
                    **problems(404, 409)})
def labels_api(run_id: str, svc: ServiceDep, key: ReviewKey,
               format: Annotated[Literal["csv", "jsonl"], Query(description="label rows as JSONL or CSV")] = "jsonl") -> Response:
    """The standing gold label of every labelled unit (unanimous, adjudicated or unresolved, with the
    reviewer and time), as label rows `framejudge calibrate --human/--gold` reads."""
    return export_labels(load_queue(svc, run_id, key), format)


class ListedDecision(ReviewDecision):
    """A decision as listed: with whether its reviewer has since been removed from the review."""

    reviewer_removed: bool = Field(False, description="its reviewer may no longer review this calibration (neither "
                                                      "its own key, nor named among its reviewers, nor admin): the "
                                                      "decision is kept but counts toward no gold until they are "
                                                      "named again")


def _listed(queue: Queue, made: list[ReviewDecision]) -> list[ListedDecision]:
    return [ListedDecision(**d.model_dump(), reviewer_removed=d.reviewer in queue.removed) for d in made]


@api.get("/v1/calibrate/{run_id}/decisions", operation_id="list_decisions", response_model=list[ListedDecision],
         responses=problems(404, 409))
def decisions_api(run_id: str, svc: ServiceDep, key: ReviewKey) -> list[ListedDecision]:
    """Every reviewer's decisions on this calibration's units, oldest first (none is ever
    overwritten), each saying whether its reviewer has since been removed (then it counts toward no gold)."""
    queue = load_queue(svc, run_id, key)
    return _listed(queue, queue.decisions)


class UnitShown(BaseModel):
    """A unit as its page shows it, with the version a decision on it must carry."""

    item_id: str
    turn: int
    version: str = Field(description="give it as `unit_version` in POST .../decisions; it changes whenever what the "
                                     "unit shows changes (a decision on it, a reviewer removed)")
    reasons: list[str] = Field(description="why it is in the queue, most important first")
    annotators: dict[str, LabelValues] = Field(description="each annotator's labels")
    majority: LabelValues
    judge: LabelValues | None = Field(description="the judge's labels (none without a verdict)")
    standing: LabelValues = Field(description="its gold labels as they stand (the decisions that count, else the majority)")
    decisions: list[ListedDecision] = Field(description="the decisions on it, oldest first, skips included")


@api.get("/v1/calibrate/{run_id}/unit", operation_id="get_unit", response_model=UnitShown, responses=problems(404, 409))
def unit_api(run_id: str, svc: ServiceDep, key: ReviewKey, item: str, turn: Annotated[int, Query(ge=0)] = 0) -> UnitShown:
    """One unit of the queue (an item's turn) as its review page shows it, and its version."""
    queue = load_queue(svc, run_id, key)
    unit = queue.by_key.get((item, turn))
    if unit is None:
        raise ProblemError(404, "No such unit", f"calibration {run_id} has no labelled turn {turn} of item {item!r}")
    return UnitShown(item_id=unit.item_id, turn=unit.turn, version=queue.version(unit), reasons=unit.reasons,
                     annotators=unit.humans, majority=unit.majority, judge=unit.judge,
                     standing=standing(unit, queue.counted_of(unit.key), queue.inputs.labels),
                     decisions=_listed(queue, queue.of_unit.get(unit.key, [])))


@api.post("/v1/calibrate/{run_id}/decisions", operation_id="decide", response_model=ReviewDecision, status_code=201,
          responses=problems(404, 409))
async def decide_api(run_id: str, body: DecisionRequest, svc: ServiceDep,
                     key: Annotated[ApiKey, Depends(authorized("review"))]) -> ReviewDecision:
    """A decision on one unit, as the review page makes it (needs the review scope), on the version
    of the unit the reviewer saw (`unit_version`, from GET .../unit): 409, and nothing saved, when
    the unit has changed since."""
    try:
        queue, _, decision = await _decide(svc, run_id, key, body)
    except StaleDecision as exc:
        raise ProblemError(409, "Stale decision", str(exc), code=exc.code) from None
    except DecisionError as exc:
        raise ProblemError(422, "Invalid decision", str(exc), code=exc.code) from None
    await figures(svc, await asyncio.to_thread(load_queue, svc, run_id, key))  # the refresh starts now, in the background
    return decision


@api.post("/v1/calibrate/{run_id}/alignments", operation_id="align", response_model=JobStatus, status_code=202,
          responses=problems(*MEDIA, 409))
async def align_api(run_id: str, body: AlignRequest, svc: ServiceDep,
                    key: Annotated[ApiKey, Depends(authorized("grade"))]) -> JobStatus:
    """Align the judge from this calibration's corrections: a new rubric version carrying the judge's
    corrected mistakes on a seeded share of the items, measured against the labels as they stand on
    the items held apart (framejudge align, on the server). It grades the held-apart items twice with
    the judge, so it needs the grade scope (and a key that may review the calibration), with a judge
    this server allows; it runs as a job of this key (GET /v1/jobs/{id}; DELETE cancels it), and
    the alignment is listed under the job's id once it is done."""
    return await submit_alignment(svc, await asyncio.to_thread(load_queue, svc, run_id, key), key, body)


@api.get("/v1/calibrate/{run_id}/alignments", operation_id="list_alignments", response_model=list[Alignment],
         responses=problems(404, 409))
def alignments_api(run_id: str, svc: ServiceDep, key: ReviewKey) -> list[Alignment]:
    load_queue(svc, run_id, key)
    return alignments(svc.engine, run_id)


@api.get("/v1/calibrate/{run_id}/alignments/{alignment_id}/rubric", operation_id="get_aligned_rubric",
         response_class=Response,
         responses={200: {"description": "the rubric file", "content": {"application/yaml": {}}}, **problems(404, 409)})
def aligned_rubric_api(run_id: str, alignment_id: str, svc: ServiceDep, key: ReviewKey) -> Response:
    """The aligned rubric as a YAML file (`framejudge grade --rubric aligned.yaml`)."""
    load_queue(svc, run_id, key)
    return _rubric_file(svc, run_id, alignment_id)


RECORD: TypeAdapter[Verdict | JudgeError] = TypeAdapter(RecordIn)


class ReviewRequest(BaseModel):
    """The turns a triage sent to review (verdicts marked to_review), as a review queue."""

    model_config = ConfigDict(extra="forbid")

    job_id: str | None = Field(None, max_length=32, description="a job graded with the triage option")
    verdicts: list[RecordIn] | None = Field(None, min_length=1, max_length=100_000,
                                            description="or verdicts marked by `framejudge grade --triage`")
    items: list[Item] | None = Field(None, max_length=100_000, description="with `verdicts`: their items")
    reviewers: list[str] = Field(default_factory=list, max_length=1000,
                                 description="ids of other API keys (with the review scope) that may review it")

    @model_validator(mode="after")
    def _one_source(self) -> ReviewRequest:
        if (self.verdicts is None) == (self.job_id is None):
            raise ValueError("give exactly one of `verdicts` and `job_id`")
        if self.items is not None and self.job_id is not None:
            raise ValueError("give `items` with `verdicts`; a job's own items are used with `job_id`")
        return self


class ReviewCreated(BaseModel):
    id: str = Field(description="the queue's id: /review/{id}, and /v1/calibrate/{id}/labels for its labels")
    units: int


@api.post("/v1/reviews", operation_id="create_review_queue", response_model=ReviewCreated, status_code=201,
          responses=problems(404))
def review_queue_api(body: ReviewRequest, svc: ServiceDep, key: ReviewKey) -> ReviewCreated:
    """A review queue of the turns a triage sent to people: reviewers label them in /review, and
    the labels they decide are exported like a calibration's."""
    if body.job_id is not None:
        svc.graded_job(body.job_id, key)
        records: list[Any] = [RECORD.validate_json(r) for r in job_records(svc.engine, body.job_id, 0, None)]
        items, resolved = job_items(svc.engine, body.job_id), True
    else:
        records, items, resolved = list(body.verdicts or []), list(body.items or []), False
    marked = [r for r in records if getattr(r, "triage", None) is not None]
    waiting = [r for r in marked if r.triage.decision == "to_review"]
    if not waiting:
        where = f"job {body.job_id}" if body.job_id else "the verdicts"
        raise ProblemError(422, "Nothing to review", f"no verdict in {where} was sent to review by a triage" +
                           ("" if marked else " (none carries a triage mark: grade with the triage option, or "
                                              "framejudge grade --triage)"))
    problem = reviewers_problem(svc.engine, body.reviewers)
    if problem:
        raise ProblemError(422, "Unknown reviewer", problem)
    inputs = ReviewInputs(labels=[], records=records, items=items, resolved=resolved, job_id=body.job_id,
                          to_review=True)
    empty = AuditResult(fields=[], annotators=[], judge_errors=0, judge_units_missing=0, replicates=0, seed=0,
                        disagreements=[])
    run_id = save_calibration(svc.engine, key.id, empty.model_dump_json(), inputs.model_dump_json(), body.reviewers)
    return ReviewCreated(id=run_id, units=len(waiting))


class Reviewers(BaseModel):
    reviewers: list[str] = Field(max_length=1000, description="ids of the API keys that may review (as `keys list` shows)")


@api.put("/v1/calibrate/{run_id}/reviewers", operation_id="set_reviewers", response_model=Reviewers,
         responses=problems(404))
def reviewers_api(run_id: str, body: Reviewers, svc: ServiceDep,
                  key: Annotated[ApiKey, Depends(authorized("calibrate"))]) -> Reviewers:
    """Who, besides this calibration's own key, may review it (only its own key, or an admin, says)."""
    run = review_run(svc.engine, run_id, key)
    if run is None or (run.key_id != key.id and "admin" not in key.scopes.split(",")):
        raise ProblemError(404, "No such calibration", f"no calibration with id {run_id!r}")
    refused = reviewers_problem(svc.engine, body.reviewers)
    if refused:
        raise ProblemError(422, "Invalid reviewer", refused)
    set_reviewers(svc.engine, run_id, body.reviewers)
    return body


# ------------------------------------------------------------------------ wiring

def problem_page(request: Request, exc: ProblemError) -> HTMLResponse:
    return _page(request, "refused.html", exc.status, why=f"{exc.title}: {exc.detail}")


def install(app: FastAPI) -> None:
    app.include_router(pages)
    app.include_router(api)
    app.mount(PATH + "/static", StaticFiles(directory=str(HERE / "static")), name="review-static")

    @app.exception_handler(SignInNeeded)
    async def _sign_in(_: Request, exc: SignInNeeded) -> Response:
        return RedirectResponse(sign_in_url(exc.next_path, exc.expired), status_code=303, headers=HEADERS)

    @app.exception_handler(CsrfRefused)
    async def _csrf(request: Request, _: CsrfRefused) -> Response:
        return _page(request, "refused.html", 403, why="This form came without its security token (or with an old "
                                                       "one). Go back, reload the page and try again.")
