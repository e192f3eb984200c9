"""Gold labels: one row per labelled unit, from the annotators' labels and the reviewers'
decisions, marked unanimous, adjudicated or unresolved; and the label-row files (JSONL, CSV)
that `framejudge calibrate --human` and `--gold` read back."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..files import csv_cell
from ..schema import LABEL_FIELDS, HumanLabel, LabelValues, ReviewDecision, Standing
from .audit import majority

Unit = tuple[str, int]

# The columns of a label-row CSV before any other metadata key.
STANDING_COLUMNS = ("standing", "reviewer", "decided_at", "cause", "note", "flag_rubric")
CSV_COLUMNS = ("item_id", "turn", "annotator", *LABEL_FIELDS, *STANDING_COLUMNS)


def majority_values(labels: Sequence[LabelValues]) -> LabelValues:
    """The human majority of one unit, per field; a field nobody rated, or where the
    annotators tie, is left empty (no gold)."""
    units = {(x.item_id, x.turn) for x in labels if isinstance(x, HumanLabel)}
    if len(units) > 1:
        raise ValueError(f"labels of {len(units)} units given; the majority is taken per unit")
    values = {}
    for name in LABEL_FIELDS:
        rated = [getattr(x, name) for x in labels if getattr(x, name) is not None]
        values[name] = majority(rated)
    return LabelValues(**values)


def _unanimous(labels: Sequence[LabelValues]) -> bool:
    """Every annotator gave the same value on every field anyone rated."""
    for name in LABEL_FIELDS:
        given = [getattr(x, name) for x in labels]
        if any(v is not None for v in given) and len(set(given)) > 1:
            return False
    return True


def _latest(decisions: Sequence[ReviewDecision]) -> dict[Unit, dict[str, ReviewDecision]]:
    """unit -> reviewer -> that reviewer's latest decision other than a skip (a later one in
    the sequence wins a tie in time)."""
    out: dict[Unit, dict[str, ReviewDecision]] = {}
    order = sorted(range(len(decisions)), key=lambda i: (decisions[i].decided_at, i))
    for i in order:
        d = decisions[i]
        if d.action != "skip":
            out.setdefault((d.item_id, d.turn), {})[d.reviewer] = d
    return out


def standing_labels(humans: Sequence[HumanLabel], decisions: Sequence[ReviewDecision],
                    annotator: str = "gold", unlabelled: Iterable[Unit] = (),
                    withdrawn: Sequence[ReviewDecision] = ()) -> list[HumanLabel]:
    """One row per labelled unit (item, turn), sorted, as `annotator`, with
    `metadata["standing"]` and `metadata["annotators"]` (how many annotators labelled it):

    - adjudicated: the unit's reviewers (each by their latest decision; skips do not count)
      all decided the same labels; the values are those labels, with the reviewer (the
      latest decider's key id; `reviewers` when several agree), decided_at (ISO 8601),
      action, cause, note and flag_rubric;
    - unresolved with `conflict: true` and the `reviewers`: reviewers decided differently;
      the values are the human majority;
    - unanimous: no decision, and every annotator gave the same value on every field anyone
      rated (one annotator alone is unanimous);
    - unresolved: no decision and the annotators differ; the values are the human majority
      per field (a field where they tie is left empty).

    An adjudicated row also carries the decision's `unit_version` (the version of the unit its
    reviewer saw) where it was recorded, and `blind: true` for a decision made in blind mode.
    `withdrawn` are decisions that no longer count (by reviewers since removed from the review):
    they decide nothing, and a unit on which any of them is its reviewer's latest names those
    reviewers in `metadata["withdrawn"]`, whatever its standing.

    The other metadata is the annotators' (the first annotator's value of a key wins).
    `unlabelled` names units no annotator labelled that are under review all the same (a
    triage's to_review turns): adjudicated when decided, else unresolved with no labels. A
    decision on any other unit nobody labelled is an error."""
    units: dict[Unit, list[HumanLabel]] = {unit: [] for unit in unlabelled}
    for h in humans:
        units.setdefault((h.item_id, h.turn), []).append(h)
    latest = _latest(decisions)
    set_aside = _latest(withdrawn)
    stray = sorted(set(latest) - set(units))
    if stray:
        raise ValueError(f"a decision on item {stray[0][0]!r} turn {stray[0][1]}, which no annotator labelled")
    out = []
    for unit in sorted(units):
        labels = sorted(units[unit], key=lambda h: h.annotator)
        context: dict[str, Any] = {}
        for h in labels:
            for k, v in h.metadata.items():
                context.setdefault(k, v)
        meta: dict[str, Any] = {}
        values = majority_values(labels)
        by_reviewer = latest.get(unit, {})
        if by_reviewer:
            decided = sorted(by_reviewer.values(), key=lambda d: d.decided_at)
            last = decided[-1]
            reviewers = sorted(by_reviewer)
            if all(d.labels == last.labels for d in decided):
                values = last.labels
                meta = {"standing": Standing.adjudicated.value, "reviewer": last.reviewer,
                        "decided_at": last.decided_at.isoformat(), "action": last.action,
                        **({"source": last.source} if last.source else {}),
                        **({"cause": last.cause.value} if last.cause else {}),
                        **({"note": last.note} if last.note else {}), "flag_rubric": last.flag_rubric,
                        **({"unit_version": last.unit_version} if last.unit_version else {}),
                        **({"blind": True} if last.blind else {})}
                if len(reviewers) > 1:
                    meta["reviewers"] = reviewers
            else:
                meta = {"standing": Standing.unresolved.value, "conflict": True, "reviewers": reviewers}
        else:
            meta = {"standing": (Standing.unanimous if labels and _unanimous(labels) else Standing.unresolved).value}
        if set_aside.get(unit):
            meta["withdrawn"] = sorted(set_aside[unit])
        meta["annotators"] = len({h.annotator for h in labels})
        out.append(HumanLabel(item_id=unit[0], turn=unit[1], annotator=annotator, **values.model_dump(),
                              metadata={**context, **meta}))
    return out


def label_rows_jsonl(rows: Sequence[HumanLabel]) -> str:
    """Label rows as JSONL, one object a line; a field not rated is left out."""
    return "".join(row.model_dump_json(exclude_none=True) + "\n" for row in rows)


def csv_text(value: Any) -> str:
    """A value as a CSV cell: text as it is, true/false, numbers, lists and objects as JSON,
    nothing for null. Read back, a metadata cell is this text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if hasattr(value, "value"):  # an enum
        return str(value.value)
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def label_rows_csv(rows: Sequence[HumanLabel]) -> str:
    """Label rows as CSV: item_id, turn, annotator, the labelled fields, the standing columns,
    then every other metadata key as a column (in order of first use). A field not rated, or a
    metadata key a row does not have, is an empty cell. Metadata reads back as text. A cell that
    starts like a formula (=, +, -, @, a tab or a return) gets a leading apostrophe, which the
    labels reader drops again (framejudge.files.csv_cell)."""
    reserved = set(HumanLabel.model_fields)
    extra: list[str] = []
    for row in rows:
        for key in row.metadata:
            if key in reserved:
                raise ValueError(f"item {row.item_id!r} turn {row.turn}: metadata key {key!r} is a label "
                                 "row's column; it cannot be written as CSV")
            if key not in CSV_COLUMNS and key not in extra:
                extra.append(key)
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\r\n")  # RFC 4180 (so a cell holding a lone CR is quoted too)
    writer.writerow([csv_cell(c) for c in (*CSV_COLUMNS, *extra)])
    for row in rows:
        cells = [row.item_id, str(row.turn), row.annotator, *(csv_text(getattr(row, f)) for f in LABEL_FIELDS)]
        cells += [csv_text(row.metadata.get(k)) for k in (*STANDING_COLUMNS, *extra)]
        writer.writerow([csv_cell(c) for c in cells])  # no cell runs as a spreadsheet formula
    return buf.getvalue()
