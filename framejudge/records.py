"""Verdict records: the lines of a verdicts file (a verdict or a judge error per graded turn), read
back and reduced to the record that stands for each turn.

Below the judge pipeline, the runner, calibration and the leaderboard, which all read these files:
reading them needs neither a judge nor a video library.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from .errors import FramejudgeError
from .files import NotJSON, strict_json
from .schema import Item, JudgeError, Verdict

Record = Verdict | JudgeError


class ItemsError(FramejudgeError, ValueError):
    """An items file that cannot be graded; the message names the file and line."""

    code = "invalid_items"


def turn_hash(item: Item, turn: int) -> str:
    """What grading one turn reads from its item: the video as given, the task and the
    conversation up to this turn (an edited response or question gives another hash)."""
    payload = {"video": item.video, "task": item.task_type.value, "expression": item.expression,
               "domain": item.domain, "turns": [t.model_dump(mode="json") for t in item.turns[: turn + 1]]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def read_records(path: Path, repair: bool = False) -> list[Record]:
    """Records of an output file; a torn last line (a run killed mid-write, or one being written
    now) is left out, and cut from the file only with `repair` (by the run about to append to it;
    a reader must not cut the line a running grade is writing)."""
    if not path.exists():
        return []
    out: list[Record] = []
    data = path.read_bytes()
    keep = len(data)
    lines = data.split(b"\n")
    offset = 0
    for i, raw in enumerate(lines):
        end = offset + len(raw) + 1
        if raw.strip():
            try:
                obj = strict_json(raw)
                if not isinstance(obj, dict):
                    raise NotJSON("not an object")
                out.append(JudgeError.model_validate(obj) if obj.get("record") == "judge_error" else Verdict.model_validate(obj))
            except (NotJSON, ValidationError):
                if i == len(lines) - 1:  # no newline after it: torn by a kill, drop it
                    keep = offset
                    break
                raise ItemsError(f"{path}:{i + 1}: not a verdict or judge error record") from None
        offset = end
    if repair and keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
    return out


def latest(records: list[Record]) -> tuple[dict[tuple[str, int], Verdict], dict[tuple[str, int], JudgeError]]:
    """The standing record of each (item, turn) in an output file: the last verdict; an error
    only where no verdict exists (a rerun that succeeded supersedes the failure)."""
    verdicts: dict[tuple[str, int], Verdict] = {}
    errors: dict[tuple[str, int], JudgeError] = {}
    for r in records:
        key = (r.item_id, r.turn)
        if isinstance(r, Verdict):
            verdicts[key] = r
            errors.pop(key, None)
        elif key not in verdicts:
            errors[key] = r
    return verdicts, errors


def swap_consistency(verdicts: list[Verdict]) -> float | None:
    checked = [v.swap for v in verdicts if v.swap is not None]
    return sum(s.consistent for s in checked) / len(checked) if checked else None
