"""Human labels (JSONL or CSV) and judge verdicts, turned into label rows for the audit."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import FramejudgeError
from ..files import cell_text, first_problem, jsonl_objects, read_text
from ..records import latest, swap_consistency as batch_swap_consistency
from ..schema import FLAG_FIELDS, Category, HumanLabel, JudgeError, Preference, Verdict, text_switch
from .audit import JUDGE, FieldSpec, LabelRow

BOOL = [False, True]


class LabelsError(FramejudgeError, ValueError):
    """A labels file that cannot be used; the message names the file and line."""

    code = "invalid_labels"


def video_qa_fields() -> list[FieldSpec]:
    cats = [c.value for c in Category]
    return [
        FieldSpec(name="category_a", categories=cats),
        FieldSpec(name="category_b", categories=cats),
        FieldSpec(name="preference", categories=[p.value for p in Preference]),
        FieldSpec(name="preference_decided", categories=["A", "B"]),  # without ties (Both, Neither)
        FieldSpec(name="integrity_a", categories=BOOL),
        FieldSpec(name="integrity_b", categories=BOOL),
        FieldSpec(name="transcription_error", categories=BOOL),
        FieldSpec(name="multiturn", categories=BOOL),
    ]


def _values(category_a: Any, category_b: Any, preference: Any, integrity_a: Any, integrity_b: Any,
            transcription_error: Any, multiturn: Any) -> dict[str, Any]:
    pref = preference.value if preference is not None else None
    values = {
        "category_a": category_a.value if category_a is not None else None,
        "category_b": category_b.value if category_b is not None else None,
        "preference": pref,
        "preference_decided": pref if pref in ("A", "B") else None,
        "integrity_a": integrity_a,
        "integrity_b": integrity_b,
        "transcription_error": transcription_error,
        "multiturn": multiturn,
    }
    return {k: v for k, v in values.items() if v is not None}


def human_rows(labels: list[HumanLabel]) -> list[LabelRow]:
    return [LabelRow(item_id=h.item_id, turn=h.turn, annotator=h.annotator, metadata=h.metadata,
                     values=_values(h.category_a, h.category_b, h.preference, h.integrity_a, h.integrity_b,
                                    h.transcription_error, h.multiturn)) for h in labels]


def gold_rows(labels: list[HumanLabel]) -> list[LabelRow]:
    """Label rows of gold labels for `gold_shift`. A gold preference of Both or Neither also
    decides preference_decided: the unit has no gold there (rather than the humans' A or B)."""
    rows = human_rows(labels)
    for row in rows:
        if "preference" in row.values and "preference_decided" not in row.values:
            row.values["preference_decided"] = None
    return rows


def unjudged_turns(labels: Iterable[LabelRow | HumanLabel],
                   records: Iterable[Verdict | JudgeError]) -> tuple[list[tuple[str, int]], int]:
    """The labelled (item, turn)s that have no record (verdict or judge error), in order, and how
    many (item, turn)s are labelled."""
    graded = {(r.item_id, r.turn) for r in records}
    labelled = sorted({(h.item_id, h.turn) for h in labels})
    return [u for u in labelled if u not in graded], len(labelled)


def swap_consistency(records: list[Verdict | JudgeError]) -> float | None:
    return batch_swap_consistency(list(latest(records)[0].values()))


def verdict_values(v: Verdict) -> dict[str, Any]:
    """The labelled fields of a verdict (those it has), as label rows hold them."""
    return _values(v.response_a.category, v.response_b.category if v.response_b else None, v.preference,
                   v.response_a.integrity_violation, v.response_b.integrity_violation if v.response_b else None,
                   v.transcription_error, v.multiturn)


def judge_rows(records: list[Verdict | JudgeError]) -> tuple[list[LabelRow], int]:
    """Label rows from verdicts; judge errors are counted, never labels. A later verdict for
    the same (item, turn) replaces an earlier one (a resumed run)."""
    standing, errors = latest(records)
    rows = [LabelRow(item_id=v.item_id, turn=v.turn, annotator=JUDGE,
                     metadata={**({"task_type": v.task_type.value} if v.task_type else {}),
                               **({"domain": v.domain} if v.domain else {}), **v.metadata},
                     video=v.provenance.video,
                     turn_time=v.provenance.sampler.end_at if v.provenance.sampler else None,
                     frame_timestamps=v.provenance.frame_timestamps, values=verdict_values(v))
            for v in standing.values()]
    return rows, len(errors)


def _blank_to_none(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k is None:
            continue
        if isinstance(v, str):
            v = v.strip()
            if v == "":
                continue
            if k in FLAG_FIELDS:
                v = text_switch(v)
            if k == "turn" and v.isascii() and v.isdigit():  # a cell is text; a label's turn is a number
                v = int(v)
        out[k] = v
    return out


def _csv_rows(p: Path, text: str) -> list[tuple[int, dict[str, str]]]:
    """(line, row by column name) for every non-blank row; a row with more or fewer fields than
    the header, a column named twice, or text that is not CSV (an open quote, a field beyond the
    csv module's limit) is an error naming the line."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader, None)
        if header is None:
            return rows
        header = [cell_text(h) for h in header]  # as csv_cell wrote them (a guarded formula)
        named = [h for h in header if h.strip()]
        twice = next((h for h in named if named.count(h) > 1), None)
        if twice is not None:
            raise LabelsError(f"{p}:1: column {twice!r} is named twice")
        for r in reader:
            if not any(cell.strip() for cell in r):
                continue
            if len(r) != len(header):
                raise LabelsError(f"{p}:{reader.line_num}: {len(r)} field(s), but the header (line 1) has "
                                  f"{len(header)}")
            rows.append((reader.line_num, dict(zip(header, map(cell_text, r)))))
    except csv.Error as exc:
        raise LabelsError(f"{p}:{reader.line_num}: not CSV ({exc})") from None
    return rows


def load_human_labels(path: str | os.PathLike[str]) -> list[HumanLabel]:
    return unique_labels(_read_labels(path), LabelsError)


def load_gold_labels(path: str | os.PathLike[str], labelled: set[tuple[str, int]] | None = None) -> list[HumanLabel]:
    """Gold label rows (as `standing_labels` writes them): a labels file with one row per unit,
    whoever the annotator. A second row for a unit is an error naming both lines; so is a unit
    not in `labelled` (the units of the human labels) when it is given."""
    out: list[HumanLabel] = []
    first: dict[tuple[str, int], str] = {}
    for where, label in _read_labels(path):
        unit = (label.item_id, label.turn)
        if unit in first:
            raise LabelsError(f"{where}: a second gold row for item {label.item_id} turn {label.turn} (the first "
                              f"is {first[unit]}); gold has one row per unit")
        if labelled is not None and unit not in labelled:
            raise LabelsError(f"{where}: item {label.item_id} turn {label.turn} has no human label; gold replaces "
                              "the human majority of labelled units only")
        first[unit] = where
        out.append(label)
    return out


def _read_labels(path: str | os.PathLike[str]) -> list[tuple[str, HumanLabel]]:
    """(where: 'FILE:LINE', label) for every row of a labels file."""
    p = Path(path)
    text = read_text(p, "labels", LabelsError)
    rows: list[tuple[int, dict[str, Any]]] = []
    if p.suffix.lower() == ".csv":
        known = set(HumanLabel.model_fields)
        for n, r in _csv_rows(p, text):
            row = _blank_to_none(r)
            extra = {k: row.pop(k) for k in list(row) if k not in known}
            if extra:  # other columns (domain, model, ...) are metadata for slicing
                row["metadata"] = {**row.get("metadata", {}), **extra}
            rows.append((n, row))
    else:
        rows = jsonl_objects(p, text, LabelsError)
    labels: list[tuple[str, HumanLabel]] = []
    for n, row in rows:
        try:
            labels.append((f"{p}:{n}", HumanLabel.model_validate(row)))
        except ValidationError as exc:
            raise LabelsError(f"{p}:{n}: {first_problem(exc)}") from None
    if not labels:
        raise LabelsError(f"{p}: no labels")
    return labels


def unique_labels(labels: Iterable[tuple[str, HumanLabel]], error: type[ValueError]) -> list[HumanLabel]:
    """The labels of (where, label) pairs, refusing a second label by one annotator for one turn
    of one item (whatever its values): 'where: h1 labelled item x turn 0 twice'. The CLI and the
    API both check labels here."""
    out: list[HumanLabel] = []
    seen: set[tuple[str, int, str]] = set()
    for where, label in labels:
        key = (label.item_id, label.turn, label.annotator)
        if key in seen:
            raise error(f"{where}: {label.annotator} labelled item {label.item_id} turn {label.turn} twice")
        seen.add(key)
        out.append(label)
    return out


def relabel_rows(disagreements: list[Any], reviewer: str = "reviewer") -> list[HumanLabel]:
    """Disagreements as label rows to fill in: each names the unit and the field to relabel
    (left empty), with the review context in metadata. Filled in, the file loads as human labels."""
    rows = []
    for d in disagreements:
        context = {"review_field": d.field, "judge": d.judge, "majority": d.majority, "human_labels": d.human_labels,
                   "kind": d.kind, "video": d.video, "turn_time": d.turn_time, "frame_timestamps": d.frame_timestamps}
        rows.append(HumanLabel(item_id=d.item_id, turn=d.turn, annotator=reviewer, metadata=context))
    return rows
