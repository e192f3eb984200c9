"""A calibration, as every door computes it: `framejudge calibrate`, `framejudge.calibrate()` and
the service's `POST /v1/calibrate` build the result here, from the same labels and records to the
same object (agreement per field with its bootstrap intervals, the swap consistency, the
reliability of the judge's confidence, and, where asked, the gold shift and slices)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..schema import JudgeError, Verdict
from .audit import AuditResult, FieldSpec, LabelRow, audit, audit_slices, gold_shift
from .inputs import LabelsError, judge_rows, swap_consistency, unjudged_turns, video_qa_fields
from .reliability import reliability


def check_judged(humans: Sequence[LabelRow], records: Sequence[Verdict | JudgeError],
                 where: str = "the verdicts") -> tuple[list[tuple[str, int]], int]:
    """The labelled (item, turn)s with no record and how many are labelled; refuses (LabelsError) a
    calibration that would measure nothing: no labelled turn has a record in `where`."""
    unjudged, labelled = unjudged_turns(humans, records)  # records: verdicts and judge errors
    if unjudged and len(unjudged) == labelled:
        item, turn = unjudged[0]
        raise LabelsError(f"none of the {labelled} labelled turn(s) has a verdict in {where} (the labels name items "
                          f"such as {item!r} turn {turn}): are these the labels of these verdicts?")
    return unjudged, labelled


def calibration(humans: Sequence[LabelRow], records: Sequence[Verdict | JudgeError], *, replicates: int, seed: int,
                where: str = "the verdicts", fields: Sequence[FieldSpec] | None = None,
                gold: Sequence[LabelRow] | None = None, by: Sequence[str] = (),
                progress: Callable[[str, int], None] | None = None) -> AuditResult:
    """The judge's `records` against the human label rows `humans`, beside the humans' agreement
    with each other (refused as `check_judged` says where no labelled turn has a record in `where`)."""
    check_judged(humans, records, where)
    fields = list(fields) if fields is not None else video_qa_fields()
    rows_j, errors = judge_rows(list(records))
    result = audit(humans, rows_j, fields, judge_errors=errors, replicates=replicates, seed=seed, progress=progress)
    if gold is not None:
        result.gold = gold_shift(humans, rows_j, gold, fields, replicates, seed, progress=progress)
    result.swap_consistency = swap_consistency(list(records))
    result.reliability = reliability(humans, records)
    for key in by:
        result.slices[key] = audit_slices(humans, rows_j, fields, key, replicates=replicates, seed=seed)
    return result
