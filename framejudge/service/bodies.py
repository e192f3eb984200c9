"""Request bodies read as strict JSON: the same rules as the CLI's files (framejudge.files), so a key
given twice or NaN is a 422 naming what is wrong, never the last key or a float that is not a number.
A JSON body is read and checked against its route's model in a worker thread, never in the event
loop: a body of tens of megabytes (a calibration's labels and verdicts) holds no other request."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import sys
import threading
import types
import typing
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..files import NotJSON, strict_loads
from .problems import ProblemError


LARGE_BODY = 1024**2  # a body this large is read with the cycle collector paused
_paused = 0  # large bodies being read now
_was_enabled = False  # whether the collector ran before the first of them
_lock = threading.Lock()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a large body is read, checked and stored (in a
    worker thread). Reading one makes millions of objects, and the collector's full passes over
    them (several per body, each holding the interpreter lock for hundreds of milliseconds)
    would stall the event loop's thread however the work is split. What such a body makes is
    freed by reference counting as before; cyclic garbage made meanwhile (by any request) waits
    until the collector runs again, once no large body is being read."""
    global _paused, _was_enabled
    with _lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


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


LIST_CHUNK = 500  # elements of a body's list checked in one call of pydantic's validator


@functools.lru_cache(maxsize=64)
def _list_of(element: Any) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[element])


def _element(annotation: Any) -> Any:
    """X, for a field of type list[X] (or list[X] | None); None for any other field."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        lists = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _element(lists[0]) if len(lists) == 1 else None
    if typing.get_origin(annotation) is list:
        (element,) = typing.get_args(annotation)
        return element
    return None


def checked_lists(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each long list of `model`'s fields checked a chunk of LIST_CHUNK elements at a
    time (the model then takes the checked elements as they are): pydantic's validator holds the
    interpreter lock for all of one call, so a 40 MB body checked in one call would hold every
    other thread for as long. A problem is reported as the whole body's check reports it."""
    out = dict(data)
    for name, info in model.model_fields.items():
        key = info.alias or name
        value = data.get(key)
        element = _element(info.annotation)
        if element is None or not isinstance(value, list) or len(value) <= LIST_CHUNK:
            continue
        adapter, checked = _list_of(element), []
        for start in range(0, len(value), LIST_CHUNK):
            try:
                checked.extend(adapter.validate_python(value[start:start + LIST_CHUNK], from_attributes=True))
            except ValidationError as exc:
                raise RequestValidationError([{**e, "loc": ("body", key, start + int(e["loc"][0]), *e["loc"][1:])}
                                              for e in exc.errors(include_url=False)]) from None
        out[key] = checked
    return out


def json_in_pieces(model: BaseModel) -> str:
    """model.model_dump_json(), the same text, with each long list written a chunk of LIST_CHUNK
    elements at a time (one call for a 40 MB calibration's inputs would hold every other thread
    for as long as it takes)."""
    parts = []
    for name, info in type(model).model_fields.items():
        value, element = getattr(model, name), _element(info.annotation)
        if element is not None and isinstance(value, list) and len(value) > LIST_CHUNK:
            adapter = _list_of(element)
            chunks = (adapter.dump_json(value[i:i + LIST_CHUNK]).decode()[1:-1] for i in range(0, len(value), LIST_CHUNK))
            parts.append(f"{json.dumps(name)}:[{','.join(chunks)}]")
        else:
            one = model.model_dump_json(include={name})[1:-1]
            if one:
                parts.append(one)
    return "{" + ",".join(parts) + "}"


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is read by `strict_body` before FastAPI reads it (FastAPI's reader
    is Python's json.loads, which keeps the last of two keys and reads NaN), in a worker thread,
    and where the route takes the body as one model, checked against it there too: FastAPI is
    handed the checked model, which it takes as it is (pydantic does not check an instance of
    the model again), so neither reading nor checking a large body runs in the event loop."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:  # the route reads its body itself (and checks it there)
            return handler
        whole = len(self.dependant.body_params) == 1 and not self._embed_body_fields  # the body is one model

        def read(raw: bytes) -> Any:
            try:
                data = strict_body(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None  # FastAPI reads it again and says why, with the place
            if not whole or self.body_field is None:
                return data
            model = self.body_field.field_info.annotation
            if isinstance(data, dict) and isinstance(model, type) and issubclass(model, BaseModel):
                data = checked_lists(model, data)
            value, errors = self.body_field.validate(data, {}, loc=("body",))  # as FastAPI checks it
            if errors:
                raise RequestValidationError(errors)
            return value

        async def strict(request: Request) -> Response:
            if not json_type(request):
                return await handler(request)
            raw = await request.body()
            with collector_paused() if len(raw) > LARGE_BODY else nullcontext():
                try:
                    if raw:
                        found = await asyncio.to_thread(read, raw)
                        if found is not None:
                            request._json = found  # what request.json() answers from now on
                        del found
                    return await handler(request)
                finally:  # what the body made is gone before the collector runs again
                    request._json = None

        return strict
