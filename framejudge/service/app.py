"""The HTTP API: the library's own schemas behind FastAPI, with API keys and problem+json errors."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from ..errors import FramejudgeError
from ..files import not_utf8, text_line
from ..schema import RECORD_KINDS
from .bodies import json_type
from .context import MAX_BODY, Service
from .limits import BodyLimit, BodyTimedOut, BodyTimeout
from .openapi import unique_names
from .problems import ProblemError, document_problems, error_problem, problem
from .review.routes import install as install_review  # before the database opens: its tables
from .routes import calibration, grading, info, jobs, keys, leaderboards
from .settings import Settings

log = logging.getLogger("framejudge.service")
DOCS_ASSETS = "/docs/assets"
REVIEW_PAGES = "/review"


def known_query(request: Request) -> None:
    """A query parameter the operation does not take is an error (as an unknown option is for the
    CLI), not silently the default: the operation's parameters are those its OpenAPI schema lists.
    So is one given twice (no parameter takes a list)."""
    names = [name for name, _ in request.query_params.multi_items()]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:  # no parameter is a list, here or on the review pages: the last would silently win
        raise ProblemError(422, "Invalid request", f"query.{twice}: given {names.count(twice)} times; give it once")
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    operation = request.app.openapi().get("paths", {}).get(path, {}).get(request.method.lower())
    if operation is None:
        return
    known = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        takes = f"takes {', '.join(known)}" if known else "takes no query parameters"
        raise ProblemError(422, "Invalid request", f"query.{unknown[0]}: unknown parameter (this operation {takes})")


def operation_id(route: APIRoute) -> str:
    """An operation is named after what it does (its function's name, or the operation_id its
    route gives): the method names of generated clients."""
    return route.name


def route_of(app: FastAPI, scope: Scope) -> str:
    """The route a request is for, as /metrics labels it: its path template, whether its answer
    came from the route, a mount (the review pages' and the docs' static files, /openapi.json) or
    a refusal before routing (a body over its limit); "unmatched" only for a path no route has."""
    partial = None
    for context in iter_route_contexts(app.routes):  # the routes of included routers too
        match, _ = context.route.matches(scope)
        if match is Match.FULL:
            return getattr(context.route, "path", "unmatched")
        if match is Match.PARTIAL and partial is None:  # the path, but not the method (405)
            partial = getattr(context.route, "path", None)
    return partial or "unmatched"


def validation_detail(errors: Sequence[Any]) -> str:
    """'where: why' for the first of a request's validation errors, in the request's own terms:
    the field path without pydantic's internal steps (validator functions, union tags), and a
    JSON syntax error with its reason and place."""
    first: Mapping[str, Any] = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    loc = list(first.get("loc", []))
    if first.get("type") == "json_invalid":
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        return f"body: not JSON ({(first.get('ctx') or {}).get('error', 'invalid JSON')}{at})"
    parts: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, str) and (part.startswith("function-") or
                                      (part in RECORD_KINDS and i and isinstance(loc[i - 1], int))):
            continue
        if part == "body" and i == 0:
            continue
        parts.append(str(part))
    msg = str(first.get("msg", "")).removeprefix("Value error, ")
    return f"{'.'.join(parts) or 'body'}: {msg}"


def serve_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from the files the swagger-ui-bundle package ships (no CDN: the page
    works offline and loads nothing from elsewhere)."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:  # a dependency; without it the API works and /docs says what is missing
        swagger_ui_path = None
    else:
        app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def _docs() -> HTMLResponse:
        if swagger_ui_path is None:
            raise ProblemError(503, "Docs unavailable", "Swagger UI's files are not installed "
                                                        "(pip install swagger-ui-bundle-v2); /openapi.json is served")
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png")


def create_app(settings: Settings | None = None) -> FastAPI:
    service = Service(settings or Settings.from_env())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.start()
        yield
        await service.close()

    app = FastAPI(title="framejudge", version="0.1.0", lifespan=lifespan,
                  description="LLM-as-judge grading for video question answering.",
                  dependencies=[Depends(known_query)], docs_url=None, redoc_url=None,
                  generate_unique_id_function=operation_id, separate_input_output_schemas=False)
    app.state.service = service
    for module in (info, grading, jobs, calibration, leaderboards, keys):
        app.include_router(module.router)
    install_review(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes, separate_input_output_schemas=app.separate_input_output_schemas)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(jobs.SCHEMAS)  # bodies read by hand
            app.openapi_schema = unique_names(document_problems(schema))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    serve_docs(app)
    app.add_middleware(BodyLimit, limit=MAX_BODY, own_limits=("/v1/videos", "/v1/jobs"))
    app.add_middleware(BodyTimeout, seconds=service.settings.body_timeout_s)  # around BodyLimit: it reads bodies too
    if service.settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=service.settings.cors_origins,
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key"])

    @app.middleware("http")
    async def _measure(request: Request, call_next):
        start = time.perf_counter()
        path = route_of(app, request.scope)  # before routing changes the scope
        response = await call_next(request)
        service.metrics.requests.labels(method=request.method, route=path, status=str(response.status_code)).inc()
        service.metrics.latency.labels(route=path).observe(time.perf_counter() - start)
        return response

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> Any:
        if request.url.path.startswith(REVIEW_PAGES):  # a person at a browser reads a page, not JSON
            from .review.routes import problem_page

            return problem_page(request, exc)
        return problem(exc.status, exc.title, exc.detail, exc.headers, exc.code)

    @app.exception_handler(FramejudgeError)
    async def _framejudge_error(request: Request, exc: FramejudgeError) -> Any:
        """An error the request caused that its route did not answer itself: a problem with the
        error's code, never a 500."""
        return await _problem(request, error_problem(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Any:
        if request.url.path.startswith(REVIEW_PAGES):  # an unknown review page, or a method it does not take
            titles = {404: "No such page", 405: "Not here"}
            return await _problem(request, ProblemError(exc.status_code, titles.get(exc.status_code, "Error"),
                                                        f"{request.method} {request.url.path}: {exc.detail}"))
        if isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's "error parsing the body"
            bad = exc.__cause__  # named by line and column, as /v1/jobs and the CLI's files name it
            return problem(422, "Invalid request", f"line {text_line(bad.object, bad.start)}: {not_utf8(bad)}")
        if isinstance(exc.__cause__, BodyTimedOut):  # FastAPI's "error parsing the body", for a body that stalled
            return await _problem(request, exc.__cause__)
        if isinstance(exc.__cause__, RecursionError):
            return problem(422, "Invalid request", "body: nested too deeply to read")
        titles = {404: "Not found", 405: "Method not allowed"}
        return problem(exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if (errors and tuple(errors[0].get("loc", ())) == ("body",) and errors[0].get("type") != "missing"
                and not json_type(request)):  # a body FastAPI did not read as JSON
            given = request.headers.get("content-type") or "no Content-Type"
            return problem(415, "JSON expected", f"body: send it as application/json (got {given[:100]})")
        if request.url.path.startswith(REVIEW_PAGES):
            return await _problem(request, ProblemError(422, "Invalid request", validation_detail(errors)))
        return problem(422, "Invalid request", validation_detail(errors))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem(500, "Internal error", f"the server could not complete the request ({type(exc).__name__})")

    return app
