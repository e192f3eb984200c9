"""RFC 9457 problem details: the one error body every endpoint returns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ..errors import FramejudgeError
from ..frame_sampler.errors import FrameSamplerError

PROBLEM = "application/problem+json"


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    code: str | None = Field(None, description="the error's stable machine-readable name (an extension member), "
                                               "where the request was refused for a framejudge error: invalid_items, "
                                               "invalid_rubric, not_a_video, ...")


class ProblemError(Exception):
    """Raised anywhere in a request; answered as problem+json with this status, title and detail
    (and `code`, the FramejudgeError's, where one is why)."""

    def __init__(self, status: int, title: str, detail: str, headers: dict[str, str] | None = None,
                 code: str | None = None) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status, self.title, self.detail, self.headers, self.code = status, title, detail, headers, code


def problem(status: int, title: str, detail: str, headers: Mapping[str, str] | None = None,
            code: str | None = None) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail, code=code).model_dump(exclude_none=True)
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


# A FramejudgeError that no route answered itself: the status and title of its class's code (or of
# the nearest base's), as the routes answer the same errors; any other is the request's fault: 422
ERROR_STATUS = {
    "video_not_found": (404, "No such video"),
    "not_a_regular_file": (404, "No such video"),
    "not_a_video": (415, "Not a video"),
    "no_video_stream": (415, "Not a video"),
    "invalid_request": (422, "Invalid request"),
    "frame_sampler_error": (422, "Unusable video"),
    "invalid_rubric": (400, "Unknown rubric"),
    "judge_unavailable": (400, "Judge not available"),
    "idempotency_key_reused": (422, "Idempotency-Key reused"),
    "invalid_decision": (422, "Invalid decision"),
}


def error_problem(exc: FramejudgeError) -> ProblemError:
    """The problem a FramejudgeError is answered with: its class's status and title, its message
    (a video's without the server's path to it) and its code."""
    status, title = next((ERROR_STATUS[code] for code in (vars(cls).get("code") for cls in type(exc).__mro__)
                          if code in ERROR_STATUS), (422, "Invalid request"))
    detail = exc.message if isinstance(exc, FrameSamplerError) else str(exc)
    return ProblemError(status, title, detail, code=exc.code)


def not_json(exc: json.JSONDecodeError) -> str:
    return f"not JSON ({exc.msg} at character {exc.pos})"


ERRORS = {
    "400": "Bad request (a bad path, URL or multipart body; a judge or rubric this server does not offer)",
    "401": "No API key, or an unknown, revoked or expired one",
    "403": "The key lacks the scope, or the video lies outside what this server reads",
    "404": "No such resource (or not this key's)",
    "408": "The request body stopped arriving",
    "409": "In use: an upload a job still to grade names, or a cancelled job whose items are still being graded",
    "413": "Body, upload or fetched video over its limit",
    "415": "Not a video, or not the expected media type",
    "422": "The request is well formed but invalid",
    "429": "Rate limit reached; see Retry-After",
    "500": "Internal error (details are logged, never returned)",
    "503": "The database or a judge backend is not reachable",
}
PROBLEM_BODY = {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}
MEDIA = (400, 403, 404, 413, 415)  # what naming a video can be answered with (a path, an upload or a URL)


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """An operation's own error statuses (a route's `responses=`), besides those document_problems
    gives every operation of its kind."""
    return {status: {"description": ERRORS[str(status)], "content": PROBLEM_BODY} for status in statuses}


def document_problems(schema: dict[str, Any]) -> dict[str, Any]:
    """Errors are answered as problem+json: say so in the OpenAPI schema (in place of FastAPI's
    default 422 body, which this API never sends), with the statuses each operation can answer:
    its own (`problems`), 422 and 500 for any (an unknown query parameter is a 422), 401, 403
    and 429 where it takes a key, 408, 413 and 415 where it takes a body."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    components["Problem"] = Problem.model_json_schema()
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            codes = {"422", "500"} | {code for code in responses if code in ERRORS}
            if any(operation.get("security", [])):
                codes |= {"401", "403", "429"}
            if "requestBody" in operation:
                codes |= {"408", "413", "415"}
            for code in codes:
                responses[code] = {"description": ERRORS[code], "content": PROBLEM_BODY}
            operation["responses"] = dict(sorted(responses.items()))
    return schema
