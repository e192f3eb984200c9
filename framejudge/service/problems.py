"""RFC 9457 problem details: the one error body every endpoint returns."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from pydantic import BaseModel

PROBLEM = "application/problem+json"


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str


class ProblemError(Exception):
    """Raised anywhere in a request; answered as problem+json with this status, title and detail."""

    def __init__(self, status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status, self.title, self.detail, self.headers = status, title, detail, headers


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail).model_dump()
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)
