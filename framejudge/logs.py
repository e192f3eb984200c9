"""Logging for operators of `framejudge serve` and `framejudge worker`: one line per notable event
(a model endpoint's concurrency or pace cut, a Retry-After pause, a lease lost, a job taken up and
finished), as text or as JSON lines (python-json-logger), on standard error.

The events are logged under the `framejudge` logger with their figures as extra fields (`endpoint`,
`limit`, `job`, ...), which JSON lines carry as keys."""

from __future__ import annotations

import logging
import sys
from typing import Literal

LEVELS = ("debug", "info", "warning", "error")
Level = Literal["debug", "info", "warning", "error"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "info", json_lines: bool = False) -> logging.Handler:
    """Send the `framejudge` loggers' records at `level` and above to standard error (replacing what an
    earlier call set up); returns the handler."""
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r}: use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                                           rename_fields={"asctime": "time", "levelname": "level", "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger("framejudge")
    for old in [h for h in root.handlers if getattr(h, "_framejudge", False)]:
        root.removeHandler(old)
    handler._framejudge = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
