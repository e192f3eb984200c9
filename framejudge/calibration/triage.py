"""Selective judging: per field, the judge's confidence threshold above which its labels agree
with the human majority at a guaranteed level, and marking verdicts auto or to_review by it.

The threshold is chosen as in Trust or Escalate (Jung, Brahman and Choi, "Trust or Escalate:
LLM Judges with Provable Guarantees for Human Agreement", ICLR 2025): fixed-sequence testing
over candidate thresholds, from the strictest down. At each threshold t the null hypothesis is
"agreement with the human majority among units with confidence >= t is below the target"; it
is rejected when the exact one-sided binomial (Clopper-Pearson) lower bound of that agreement,
at level delta, is at least the target. Testing stops at the first threshold not rejected; the
lowest rejected one is chosen. The family-wise error of the sequence is at most delta, so with
probability at least 1 - delta the agreement above the chosen threshold is at least the target.
A field where the first test already fails gets no threshold: everything goes to review.

The candidates are the distinct confidences of the scored calibration units that have at least
`min_units` scored units at or above them (fewer could not reach a high target; the authors'
code uses 30). The sequence depends on the confidences only, never on who was right, so the
guarantee holds conditionally on them. Labelled items are split (seeded, whole items, so turns
of one conversation never straddle the parts) into a calibration part, where thresholds are
chosen, and a test part, where coverage and agreement are measured to check the guarantee.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from ..schema import LABEL_FIELDS, FieldThreshold, JudgeError, Thresholds, TriageFigures, TriageMark, Verdict
from .reliability import FieldReliability

if TYPE_CHECKING:
    from .audit import LabelRow
    from .scored import Scored

MIN_UNITS = 30


class CurvePoint(BaseModel):
    threshold: float
    coverage: float
    agreement: float | None


class FieldCurve(BaseModel):
    """Coverage against agreement above each candidate threshold, on both parts, for the report."""

    field: str
    calibration: list[CurvePoint]
    test: list[CurvePoint]


class TriageResult(BaseModel):
    thresholds: Thresholds
    curves: list[FieldCurve]
    reliability: list[FieldReliability]


def lower_bound(right: int, n: int, delta: float) -> float:
    """The exact one-sided (Clopper-Pearson) lower confidence bound, at level 1 - delta, of a
    binomial proportion with `right` successes in `n` trials."""
    from scipy.stats import beta

    if n == 0 or right == 0:
        return 0.0
    return float(beta.ppf(delta, right, n - right + 1))


def choose_threshold(confidence: Sequence[float], right: Sequence[bool], target: float, delta: float,
                     min_units: int = MIN_UNITS) -> tuple[float | None, float | None, int]:
    """(threshold, its lower bound, thresholds rejected) by fixed-sequence testing from the
    strictest candidate down; (None, None, 0) when the first test fails or none can be tested."""
    conf = np.asarray(confidence, dtype=float)
    hit = np.asarray(right, dtype=bool)
    order = np.argsort(-conf, kind="stable")
    conf, hit = conf[order], hit[order]
    hits = np.cumsum(hit)
    chosen: tuple[float | None, float | None] = (None, None)
    rejected = 0
    for value in np.unique(conf)[::-1]:
        n = int(np.searchsorted(-conf, -value, side="right"))  # units with confidence >= value
        if n < min_units:
            continue
        bound = lower_bound(int(hits[n - 1]), n, delta)
        if bound < target:
            break
        chosen, rejected = (float(value), bound), rejected + 1
    return chosen[0], chosen[1], rejected


def figures(units: Sequence[Scored], threshold: float | None) -> TriageFigures:
    """What `threshold` does on these units: coverage (units at or above it, of all the judge
    labelled) and agreement with the majority above and below it (every unit with a confidence is
    below when there is no threshold). Units with no informative confidence are in neither part
    (they always go to review; `no_confidence` counts them)."""
    scored = [u for u in units if u.confidence is not None]
    above = [u for u in scored if threshold is not None and u.confidence >= threshold]  # type: ignore[operator]
    below = [u for u in scored if not (threshold is not None and u.confidence >= threshold)]  # type: ignore[operator]

    def agreement(part: list[Scored]) -> tuple[int, float | None]:
        scored = [u.correct for u in part if u.correct is not None]
        return len(scored), (sum(scored) / len(scored) if scored else None)

    n_above, agree_above = agreement(above)
    n_below, agree_below = agreement(below)
    return TriageFigures(units=len(units), covered=len(above), coverage=len(above) / len(units) if units else 0.0,
                         scored_above=n_above, scored_below=n_below, agreement_above=agree_above,
                         agreement_below=agree_below, no_majority=sum(u.correct is None for u in units),
                         no_confidence=sum(u.confidence is None for u in units))


def no_threshold_reason(field: FieldThreshold, thresholds: Thresholds) -> str | None:
    """Why a field got no threshold, in words (None when it has one), from its calibration figures."""
    if field.threshold is not None:
        return None
    cal = field.calibration
    if cal.units == 0:
        return "no calibration unit has this field from the judge"
    if cal.no_confidence == cal.units:
        return ("no verdict has an informative confidence for this field (the judge's confidence says nothing), "
                "so no threshold can be tested")
    scored = cal.scored_above + cal.scored_below
    if scored < thresholds.min_units:
        return (f"only {scored} calibration unit(s) have both a confidence and a human majority; a threshold is "
                f"tested with at least {thresholds.min_units} (--min-units)")
    return (f"even at the strictest threshold tested, the agreement's lower bound (at delta {thresholds.delta:g}) "
            f"is below the target {thresholds.target:.0%}")


def curve(units: Sequence[Scored]) -> list[CurvePoint]:
    """(threshold, coverage, agreement above) at each distinct confidence, strictest first."""
    values = sorted({u.confidence for u in units if u.confidence is not None}, reverse=True)
    points = []
    for t in values:
        f = figures(units, t)
        points.append(CurvePoint(threshold=t, coverage=f.coverage, agreement=f.agreement_above))
    return points


def split_items(items: Sequence[str], split: float, seed: int) -> set[str]:
    """The items of the calibration part: a seeded shuffle of the distinct items, the first
    round(split * items) of them (at least one)."""
    distinct = sorted(set(items))
    if not distinct:
        return set()
    rng = np.random.default_rng(seed)
    shuffled = [distinct[i] for i in rng.permutation(len(distinct))]
    return set(shuffled[:max(1, round(split * len(distinct)))])


def human_agreement(humans: Sequence[LabelRow], field: str) -> float | None:
    """Pairwise agreement among the humans on `field` (units with two labels or more)."""
    from .multirater import percent_agreement
    from .ratings import Ratings

    units: dict[tuple[str, int], dict[str, Any]] = {}
    for row in humans:
        if row.values.get(field) is not None:
            units.setdefault((row.item_id, row.turn), {})[row.annotator] = row.values[field]
    labels = sorted({v for u in units.values() for v in u.values()}, key=repr)
    if not labels:
        return None
    return percent_agreement(Ratings(list(units.values()), labels)).value


def calibrate_triage(humans: Sequence[LabelRow], records: Sequence[Verdict | JudgeError], target: float,
                     delta: float, fields: Sequence[str] | None = None, split: float = 0.5, seed: int = 0,
                     min_units: int = MIN_UNITS) -> TriageResult:
    """Thresholds per field (default: the label fields humans rated and the verdicts have) from
    the calibration part, with figures on both parts. The verdicts must come from one judge,
    model and rubric (ValueError otherwise, and for a field that is not a label field)."""
    from ..records import latest
    from .reliability import field_reliability
    from .scored import rated_fields, scored_units

    verdicts = list(latest(list(records))[0].values())
    if not verdicts:
        raise ValueError("no verdicts to calibrate on")
    graded_by = sorted({(v.provenance.judge_backend, v.provenance.model_id, v.provenance.rubric_hash)
                        for v in verdicts})
    if len(graded_by) > 1:
        shown = "; ".join(f"{b} {m}, rubric {h[:12]}" for b, m, h in graded_by[:3])
        raise ValueError(f"the verdicts were graded by more than one judge, model or rubric ({shown}): thresholds "
                         "hold for one; calibrate each on its own verdicts")
    for f in fields or []:
        if f not in LABEL_FIELDS:
            raise ValueError(f"--field {f}: not a label field (they are: {', '.join(LABEL_FIELDS)})")
    names = list(fields) if fields else rated_fields(humans, verdicts)
    if not names:
        raise ValueError("no label field is both rated by the humans and given by the verdicts")
    labelled = {(h.item_id, h.turn) for h in humans}
    cal_items = split_items([v.item_id for v in verdicts if (v.item_id, v.turn) in labelled], split, seed)
    out: dict[str, FieldThreshold] = {}
    curves, reliability = [], []
    for name in names:
        units = scored_units(humans, verdicts, name)
        cal = [u for u in units if u.item_id in cal_items]
        test = [u for u in units if u.item_id not in cal_items]
        scored = [u for u in cal if u.correct is not None and u.confidence is not None]
        threshold, bound, tested = choose_threshold([u.confidence for u in scored],  # type: ignore[misc]
                                                    [bool(u.correct) for u in scored], target, delta, min_units)
        out[name] = FieldThreshold(threshold=threshold, guaranteed=target if threshold is not None else None,
                                   lower_bound=bound, tested=tested, human_agreement=human_agreement(humans, name),
                                   calibration=figures(cal, threshold),
                                   test=figures(test, threshold) if split < 1 else None)
        curves.append(FieldCurve(field=name, calibration=curve(cal), test=curve(test)))
        reliability.append(field_reliability(name, units))
    backend, model, rubric_hash = graded_by[0]
    thresholds = Thresholds(target=target, delta=delta, seed=seed, split=split, min_units=min_units,
                            judge_backend=backend, model_id=model, rubric_id=verdicts[0].provenance.rubric_id,
                            rubric_hash=rubric_hash, fields=out)
    return TriageResult(thresholds=thresholds, curves=curves, reliability=reliability)


# ---------------------------------------------------------------------------- applying thresholds

def thresholds_hash(thresholds: Thresholds) -> str:
    """sha256 of the thresholds' compact JSON: the same for a file and for the API's object."""
    return hashlib.sha256(thresholds.model_dump_json().encode()).hexdigest()


def mismatch(thresholds: Thresholds, backend: str, model_id: str | None, rubric_hash: str | None) -> str | None:
    """Why these thresholds do not hold for this judge, model and rubric (None: they do; a model
    id or rubric hash of None is not checked). The reference judge's packaged thresholds (`--triage
    default`) say so in their own words."""
    from ..judge.rule_confidence import default_thresholds_problem, shipped_thresholds

    if thresholds == shipped_thresholds():
        problem = default_thresholds_problem(backend, model_id)
        if problem is not None:
            return problem
    if thresholds.judge_backend != backend or (model_id is not None and thresholds.model_id != model_id):
        return (f"the thresholds were calibrated for judge {thresholds.judge_backend} {thresholds.model_id}, not "
                f"{backend}{'' if model_id is None else ' ' + model_id}: calibrate this judge with framejudge triage")
    if rubric_hash is not None and thresholds.rubric_hash != rubric_hash:
        return (f"the thresholds were calibrated for rubric {thresholds.rubric_id} ({thresholds.rubric_hash[:12]}), "
                f"not this one ({rubric_hash[:12]}): a changed rubric needs new thresholds")
    return None


def mark(verdict: Verdict, thresholds: Thresholds, digest: str | None = None) -> TriageMark:
    """auto when every field of the thresholds that the verdict has reaches its threshold;
    to_review when any is below it or has none, when the verdict has no informative confidence,
    or when it has none of the fields."""
    from .inputs import verdict_values
    from .scored import confidence_of

    has = verdict_values(verdict)
    fields = [f for f in thresholds.fields if f in has]
    below = []
    for f in fields:
        threshold, conf = thresholds.fields[f].threshold, confidence_of(verdict, f)
        if threshold is None or conf is None or conf < threshold:
            below.append(f)
    decision = "auto" if fields and not below else "to_review"
    return TriageMark(decision=decision, below=below, thresholds=digest or thresholds_hash(thresholds))


def marker(thresholds: Thresholds, problem: str | None = None) -> Callable[[Any], Any]:
    """Marks a record (a verdict; a judge error passes as it is). With `problem` (the thresholds
    do not hold for the judge that graded) every verdict goes to review."""
    digest = thresholds_hash(thresholds)

    def apply(record: Any) -> Any:
        if not isinstance(record, Verdict):
            return record
        if problem is not None:
            found = TriageMark(decision="to_review", below=list(thresholds.fields), thresholds=digest)
        else:
            found = mark(record, thresholds, digest)
        return record.model_copy(update={"triage": found})

    return apply


def mark_graded(records: list[Any], thresholds: Thresholds, grader: Any) -> list[Any]:
    """The records a grader made, marked by thresholds; thresholds that do not hold for the
    grader's judge, model or rubric send every verdict to review."""
    problem = mismatch(thresholds, grader.judge.backend, grader.judge.model_id, grader.rubric_hash)
    return [marker(thresholds, problem)(r) for r in records]


def review_rows(verdicts: Sequence[Verdict], reviewer: str = "reviewer") -> list[Any]:
    """The to_review verdicts as label rows to fill in (as `relabel_rows` writes disagreements):
    each names the unit, the fields below their threshold and the judge's labels and confidence
    in metadata; filled in, the file loads as human labels."""
    from ..schema import HumanLabel
    from .inputs import verdict_values
    from .scored import confidence_of

    rows = []
    for v in verdicts:
        if v.triage is None or v.triage.decision != "to_review":
            continue
        has = verdict_values(v)
        context = {"review_fields": v.triage.below, "judge": has,
                   "confidence": {f: confidence_of(v, f) for f in has},
                   "video": v.provenance.video,
                   "turn_time": v.provenance.sampler.end_at if v.provenance.sampler else None,
                   "frame_timestamps": v.provenance.frame_timestamps}
        rows.append(HumanLabel(item_id=v.item_id, turn=v.turn, annotator=reviewer, metadata=context))
    return rows
