"""Health, readiness, metrics and rubrics."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ...endpoint import Endpoint
from ...judge import CallsServer, JudgeSpecError
from ...rubrics import all_rubrics
from ...rubrics.model import Rubric
from ..bodies import StrictJsonRoute
from ..context import KeyWith, ServiceDep, authorized
from ..models import RubricSummary
from ..problems import ProblemError, problem, problems
from ..store import ApiKey, ping

router = APIRouter(route_class=StrictJsonRoute)


@router.get("/healthz", tags=["health"])
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses=problems(503),
            openapi_extra={"security": [{}]})  # the key is optional: without one, readiness alone
async def readyz(svc: ServiceDep, key: Annotated[ApiKey | None, Depends(KeyWith("metrics", optional=True))]) -> Any:
    """Whether the database answers and every allowed judge can be called. Without a key, just
    that (and how many judges cannot be called): which judges, their endpoints and why are for a
    key with the metrics scope, as /metrics is."""
    shown = key is not None
    if not await asyncio.to_thread(ping, svc.engine):
        return problem(503, "Not ready", "the database is not reachable")
    problems = []
    judges = []
    for spec in svc.allowed_judges:
        try:
            judge = await asyncio.to_thread(svc.judges.make, spec)
        except (JudgeSpecError, ValueError, OSError) as exc:
            problems.append(f"{spec}: {exc}")
            continue
        why = await judge.ready() if isinstance(judge, CallsServer) else None  # a model server: does it answer
        if why:
            problems.append(f"{spec}: {why}")
        gate = getattr(judge, "gate", None)
        config = svc.judges.config(spec)
        judges.append({"spec": spec, "api_base": config.api_base if gate is not None else None,
                       "endpoint": gate.state().model_dump() if isinstance(gate, Endpoint) else None})
    if problems and not shown:
        return problem(503, "Not ready", f"{len(problems)} of {len(svc.allowed_judges)} judge(s) cannot be called "
                                         "(a key with the metrics scope sees which and why)")
    if problems:
        return problem(503, "Not ready", "; ".join(problems))
    return {"status": "ready", "judges": judges} if shown else {"status": "ready"}


@router.get("/metrics", tags=["health"], operation_id="metrics", response_class=PlainTextResponse)
def prometheus(svc: ServiceDep, _: Annotated[ApiKey, Depends(authorized("metrics"))]) -> PlainTextResponse:
    """Prometheus text format; scrape with a key of scope 'metrics' (bearer_token in the scrape config)."""
    return PlainTextResponse(svc.metrics.render(svc.engine).decode(), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/rubrics", tags=["rubrics"], response_model=list[RubricSummary])
def list_rubrics(_: Annotated[ApiKey, Depends(authorized("grade"))]) -> list[RubricSummary]:
    return [RubricSummary(id=r.id, kind=r.kind, version=r.version, hash=r.content_hash, title=r.title)
            for r in all_rubrics().values()]


@router.get("/v1/rubrics/{rubric_id}", tags=["rubrics"], operation_id="get_rubric", response_model=Rubric,
            responses=problems(404))
def show_rubric(rubric_id: str, _: Annotated[ApiKey, Depends(authorized("grade"))]) -> Rubric:
    known = all_rubrics()
    if rubric_id not in known:
        raise ProblemError(404, "No such rubric", f"no rubric with id {rubric_id!r}")
    return known[rubric_id]
