"""Reading user files (items, labels, predictions) with errors that name the file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError


def read_text(path: str | os.PathLike[str], what: str, error: type[ValueError]) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{p}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{p}: cannot read ({exc})") from None


def jsonl_objects(path: str | os.PathLike[str], text: str, error: type[ValueError]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; anything but a JSON object is an error."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise error(f"{path}:{n}: each line must be a JSON object")
        rows.append((n, row))
    return rows


def first_problem(exc: ValidationError, default: str = "row") -> str:
    """'field.path: message' for the first validation error, in plain words."""
    e = exc.errors()[0]
    where = ".".join(str(x) for x in e["loc"]) or default
    return f"{where}: {e['msg'].removeprefix('Value error, ')}"
