"""Request bodies read as strict JSON: the same rules as the CLI's files (framejudge.files), so a key
given twice or NaN is a 422 naming what is wrong, never the last key or a float that is not a number."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from ..files import NotJSON, strict_loads
from .problems import ProblemError


def json_type(request: Request) -> bool:
    """Whether the request says its body is JSON (application/json or a +json type)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def strict_body(raw: str | bytes, where: str = "body") -> Any:
    """`raw` as strict JSON; a key given twice, NaN or Infinity is a 422 naming `where`. A syntax
    error stays a json.JSONDecodeError (its reason and place are said where it is caught)."""
    try:
        return strict_loads(raw)
    except NotJSON as exc:
        raise ProblemError(422, "Invalid request", f"{where}: {exc}", code=exc.code) from None
    except RecursionError:
        raise ProblemError(422, "Invalid request", f"{where}: nested too deeply to read") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # an integer of thousands of digits
        raise ProblemError(422, "Invalid request", f"{where}: a number has more than "
                                                   f"{sys.get_int_max_str_digits()} digits") from None


async def form_fields(request: Request) -> dict[str, str]:
    """A form's fields, each given once: a field given twice is a 422 naming it (as a query
    parameter given twice is), never the last value silently."""
    form = await request.form()
    names = [name for name, _ in form.multi_items()]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise ProblemError(422, "Invalid request", f"form.{twice[:100]}: given {names.count(twice)} times; give it once")
    return {name: str(value) for name, value in form.items()}


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is read by `strict_body` before FastAPI reads it (FastAPI's reader
    is Python's json.loads, which keeps the last of two keys and reads NaN)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:  # the route reads its body itself (and checks it there)
            return handler

        async def strict(request: Request) -> Response:
            if json_type(request):
                raw = await request.body()
                if raw:
                    try:
                        request._json = strict_body(raw)  # what request.json() answers from now on
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        pass  # FastAPI reads it again and says why, with the place
            return await handler(request)

        return strict
