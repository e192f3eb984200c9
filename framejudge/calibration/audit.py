"""How far a judge can be trusted: judge vs humans beside humans vs humans, per field.

Inputs are label rows: (unit, annotator, field -> label). A unit is an (item, turn)
pair, never a bare index; units of one item form a cluster for the bootstrap. The judge
is one more annotator whose rows come from verdicts; judge errors are counted and left
out, never turned into labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from .bootstrap import DrawsStatistic, Interval, bootstrap, draw_counts, groups_of, replicate_values
from .cohen import Weights, cohen_kappa
from .krippendorff_alpha import Level, alpha_of_draws, krippendorff_alpha
from .multirater import fleiss_kappa, gwet_ac1, pabak, percent_agreement
from .ratings import Ratings
from .reliability import FieldReliability
from .result import Coefficient

JUDGE = "judge"
MAJORITY = "majority"


class FieldSpec(BaseModel):
    """A labelled field and its declared codebook (order matters for ordinal levels)."""

    name: str
    categories: list[Any]
    level: Level = "nominal"


class LabelRow(BaseModel):
    item_id: str
    turn: int = 0
    annotator: str
    values: dict[str, Any] = Field(default_factory=dict)  # field -> label; absent = not rated
    metadata: dict[str, Any] = Field(default_factory=dict)  # slicing keys (domain, task type, model, ...)
    video: str | None = None  # for review: what the judge looked at
    turn_time: float | None = None
    frame_timestamps: list[float] = Field(default_factory=list)


class PerClass(BaseModel):
    label: Any
    precision: float | None
    recall: float | None
    f1: float | None
    support: int  # units whose majority label is this


class PairAgreement(BaseModel):
    annotator: str
    units: int
    kappa: Coefficient
    alpha: Coefficient


class Disagreement(BaseModel):
    item_id: str
    turn: int
    field: str
    judge: Any | None
    majority: Any | None
    human_labels: dict[str, Any]
    kind: Literal["judge_vs_majority", "humans_split"]
    human_agreement: float  # share of human pairs that agree on this unit
    video: str | None = None
    turn_time: float | None = None
    frame_timestamps: list[float] = Field(default_factory=list)


class FieldAudit(BaseModel):
    field: str
    level: Level
    categories: list[Any]
    units: int  # units with at least one human label
    human_alpha: Interval  # the human-vs-human ceiling
    judge_alpha: Interval  # judge vs the human majority (units with a clear majority)
    judge_vs_humans_alpha: Interval  # humans plus the judge, minus humans alone, shows the judge's effect
    human_percent: Coefficient
    human_fleiss: Coefficient
    human_ac1: Coefficient
    judge_percent: Coefficient
    judge_ac1: Coefficient
    judge_pabak: Coefficient
    judge_kappa: Coefficient
    majority_ties: int  # units where humans tie: no gold, left out of judge-vs-majority
    judge_vs_each: list[PairAgreement]
    confusion: list[list[int]]  # rows: human majority, columns: judge; order = categories
    per_class: list[PerClass]


class GoldShift(BaseModel):
    """The judge against the human majority (before) and against adjudicated gold labels
    (after), per field, and the paired difference (after minus before) with a bootstrap
    interval over the same resampled items."""

    field: str
    before: Interval  # judge alpha vs the human majority
    after: Interval  # judge alpha vs the gold
    before_percent: Coefficient
    after_percent: Coefficient
    difference: float | None
    low: float | None
    high: float | None
    replicates: int
    undefined_replicates: int
    units_before: int  # units with both a human majority and a judge label
    units_after: int  # units with both a gold label and a judge label
    changed: int  # units whose gold differs from the human majority


class AuditResult(BaseModel):
    fields: list[FieldAudit]
    annotators: list[str]
    judge_errors: int
    judge_units_missing: int
    replicates: int
    seed: int
    disagreements: list[Disagreement]
    swap_consistency: float | None = None  # carried over from the verdicts
    slices: dict[str, dict[str, AuditResult]] = Field(default_factory=dict)  # slice key -> value -> audit
    gold: list[GoldShift] = Field(default_factory=list)  # against adjudicated gold labels, when given
    # the judge's confidence against agreement with the majority (ECE, Brier, reliability diagram), per field,
    # when the verdicts carry confidence
    reliability: list[FieldReliability] | None = None


AuditResult.model_rebuild()


class RunComparison(BaseModel):
    """Two judge runs on the same human labels: each against the human majority, and the
    difference (second minus first) with a paired bootstrap interval over the same items."""

    field: str
    first: Interval
    second: Interval
    difference: float | None
    low: float | None
    high: float | None
    replicates: int
    undefined_replicates: int


def majority(labels: Sequence[Any]) -> Any | None:
    """The most frequent label; None on a tie (no gold)."""
    if not labels:
        return None
    top = Counter(labels).most_common()
    if len(top) > 1 and top[0][1] == top[1][1]:
        return None
    return top[0][0]


def _pair_agreement(labels: Sequence[Any]) -> float:
    c = Counter(labels)
    n = len(labels)
    if n < 2:
        return 1.0
    return sum(k * (k - 1) for k in c.values()) / (n * (n - 1))


def _human_units(humans: Sequence[LabelRow]) -> dict[tuple[str, int], dict[str, dict[str, Any]]]:
    """(item, turn) -> annotator -> field -> label."""
    units: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for row in humans:
        if row.annotator == JUDGE:
            raise ValueError(f"annotator name {JUDGE!r} is reserved for the judge")
        units.setdefault((row.item_id, row.turn), {}).setdefault(row.annotator, {}).update(row.values)
    return units


def audit(
    humans: Sequence[LabelRow],
    judge: Sequence[LabelRow],
    fields: Sequence[FieldSpec],
    judge_errors: int = 0,
    replicates: int = 1000,
    seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> AuditResult:
    units = _human_units(humans)
    judged: dict[tuple[str, int], dict[str, Any]] = {}
    context: dict[tuple[str, int], dict[str, Any]] = {}
    for row in judge:
        judged[(row.item_id, row.turn)] = row.values
        context[(row.item_id, row.turn)] = {"video": row.video, "turn_time": row.turn_time,
                                            "frame_timestamps": row.frame_timestamps}
    annotators = sorted({r.annotator for r in humans})
    keys = sorted(units)
    clusters = [k[0] for k in keys]
    draws = _draws(keys, clusters, replicates, seed)
    missing = sum(1 for k in keys if k not in judged)
    out: list[FieldAudit] = []
    disagreements: list[Disagreement] = []
    for spec in fields:
        rows_h: list[dict[str, Any]] = []
        rows_jm: list[dict[str, Any]] = []
        rows_all: list[dict[str, Any]] = []
        ties = 0
        for key in keys:
            human_labels = {a: v[spec.name] for a, v in units[key].items() if v.get(spec.name) is not None}
            j = judged.get(key, {}).get(spec.name)
            rows_h.append(human_labels)
            rows_all.append({**human_labels, **({JUDGE: j} if j is not None else {})})
            maj = majority(list(human_labels.values()))
            if human_labels and maj is None:
                ties += 1
            pair = {}
            if maj is not None:
                pair[MAJORITY] = maj
            if j is not None and maj is not None:
                pair[JUDGE] = j
            rows_jm.append(pair)
            if human_labels:
                agree = _pair_agreement(list(human_labels.values()))
                if j is not None and maj is not None and j != maj:
                    disagreements.append(Disagreement(item_id=key[0], turn=key[1], field=spec.name, judge=j, majority=maj,
                                                      human_labels=human_labels, kind="judge_vs_majority",
                                                      human_agreement=agree, **context.get(key, {})))
                elif len(human_labels) >= 2 and agree < 0.5:
                    disagreements.append(Disagreement(item_id=key[0], turn=key[1], field=spec.name, judge=j, majority=maj,
                                                      human_labels=human_labels, kind="humans_split",
                                                      human_agreement=agree, **context.get(key, {})))
        cats = list(spec.categories)
        # Kappa's weights follow the field's level: none for nominal, linear for ordinal,
        # quadratic for interval and ratio scales (over the declared category order).
        weights: Weights = "none" if spec.level == "nominal" else "linear" if spec.level == "ordinal" else "quadratic"
        r_h = Ratings(rows_h, cats, [str(k) for k in keys])
        r_jm = Ratings(rows_jm, cats, [str(k) for k in keys])
        r_all = Ratings(rows_all, cats, [str(k) for k in keys])
        alpha = lambda r: krippendorff_alpha(r, spec.level)  # noqa: E731
        of_draws = lambda r, d: alpha_of_draws(r, d, spec.level)  # noqa: E731  (every replicate at once)
        tick = (lambda b: progress(spec.name, b)) if progress else None
        human_alpha = bootstrap(r_h, alpha, replicates, seed, clusters=clusters, progress=tick, of_draws=of_draws,
                                draws=draws)
        judge_alpha = bootstrap(r_jm, alpha, replicates, seed, clusters=clusters, progress=tick, of_draws=of_draws,
                                draws=draws)
        with_judge = bootstrap(r_all, alpha, replicates, seed, clusters=clusters, progress=tick, of_draws=of_draws,
                               draws=draws)
        each = []
        for a in annotators:
            both = [{JUDGE: row_a[JUDGE], a: row_a[a]} for row_a in rows_all if JUDGE in row_a and a in row_a]
            r_pair = Ratings(both, cats)
            each.append(PairAgreement(annotator=a, units=len(both), kappa=cohen_kappa(r_pair, JUDGE, a, weights),
                                      alpha=krippendorff_alpha(r_pair, spec.level)))
        index = {c: i for i, c in enumerate(cats)}
        conf = np.zeros((len(cats), len(cats)), dtype=int)
        for unit in rows_jm:
            if JUDGE in unit:
                conf[index[unit[MAJORITY]], index[unit[JUDGE]]] += 1
        per_class = []
        for i, c in enumerate(cats):
            tp = conf[i, i]
            pred, true = conf[:, i].sum(), conf[i, :].sum()
            p = tp / pred if pred else None
            rc = tp / true if true else None
            f1 = 2 * p * rc / (p + rc) if p is not None and rc is not None and (p + rc) > 0 else (0.0 if p is not None and rc is not None else None)
            per_class.append(PerClass(label=c, precision=None if p is None else float(p), recall=None if rc is None else float(rc),
                                      f1=None if f1 is None else float(f1), support=int(true)))
        out.append(FieldAudit(
            field=spec.name, level=spec.level, categories=cats, units=sum(1 for r in rows_h if r),
            human_alpha=human_alpha, judge_alpha=judge_alpha, judge_vs_humans_alpha=with_judge,
            human_percent=percent_agreement(r_h), human_fleiss=fleiss_kappa(r_h), human_ac1=gwet_ac1(r_h),
            judge_percent=percent_agreement(r_jm),
            judge_ac1=gwet_ac1(r_jm), judge_pabak=pabak(r_jm), judge_kappa=cohen_kappa(r_jm, JUDGE, MAJORITY, weights),
            majority_ties=ties, judge_vs_each=each, confusion=conf.tolist(), per_class=per_class,
        ))
    disagreements.sort(key=lambda d: (d.kind != "judge_vs_majority", -d.human_agreement if d.kind == "judge_vs_majority" else d.human_agreement))
    return AuditResult(fields=out, annotators=annotators, judge_errors=judge_errors, judge_units_missing=missing,
                       replicates=replicates, seed=seed, disagreements=disagreements)



def slice_key(row: LabelRow, key: str) -> str | None:
    if key == "turn":
        return str(row.turn)
    value = row.metadata.get(key)
    return None if value is None else str(value)


def audit_slices(
    humans: Sequence[LabelRow], judge: Sequence[LabelRow], fields: Sequence[FieldSpec], by: str,
    replicates: int = 1000, seed: int = 0,
) -> dict[str, AuditResult]:
    """The audit per value of `by`: "turn", a labelled field (slices by the human majority's
    label, e.g. category_a), or a metadata key of the labels or verdicts (domain, task_type, ...)."""
    value_of: dict[tuple[str, int], str] = {}
    if any(f.name == by for f in fields):
        labels: dict[tuple[str, int], list[Any]] = {}
        for h in humans:
            if h.values.get(by) is not None:
                labels.setdefault((h.item_id, h.turn), []).append(h.values[by])
        for k, v in labels.items():
            m = majority(v)
            value_of[k] = "(humans tie)" if m is None else str(m)
    else:
        for row in list(judge) + list(humans):
            value = slice_key(row, by)
            if value is not None:
                value_of.setdefault((row.item_id, row.turn), value)
    groups = sorted(set(value_of.values()))
    out: dict[str, AuditResult] = {}
    for g in groups:
        keep = {k for k, v in value_of.items() if v == g}
        out[g] = audit([h for h in humans if (h.item_id, h.turn) in keep],
                       [j for j in judge if (j.item_id, j.turn) in keep], fields, replicates=replicates, seed=seed)
    return out


def compare_runs(
    humans: Sequence[LabelRow], first: Sequence[LabelRow], second: Sequence[LabelRow], fields: Sequence[FieldSpec],
    replicates: int = 1000, seed: int = 0,
) -> list[RunComparison]:
    """Agreement of each run with the human majority and the paired difference."""
    units = _human_units(humans)
    keys = sorted(units)
    clusters = [k[0] for k in keys]
    groups = groups_of(len(keys), clusters)
    a_of = {(r.item_id, r.turn): r.values for r in first}
    b_of = {(r.item_id, r.turn): r.values for r in second}
    draws = _draws(keys, clusters, replicates, seed)
    out = []
    for spec in fields:
        rows_a: list[dict[str, Any]] = []
        rows_b: list[dict[str, Any]] = []
        for k in keys:
            maj = majority([v[spec.name] for v in units[k].values() if v.get(spec.name) is not None])
            for rows, run in ((rows_a, a_of), (rows_b, b_of)):
                j = run.get(k, {}).get(spec.name)
                rows.append({MAJORITY: maj, JUDGE: j} if maj is not None and j is not None else ({MAJORITY: maj} if maj is not None else {}))
        ra = Ratings(rows_a, list(spec.categories))
        rb = Ratings(rows_b, list(spec.categories))
        stat = lambda r: krippendorff_alpha(r, spec.level)  # noqa: E731
        of_draws = lambda r, d: alpha_of_draws(r, d, spec.level)  # noqa: E731  (every replicate at once)
        ia = bootstrap(ra, stat, replicates, seed, clusters=clusters, of_draws=of_draws, draws=draws)
        ib = bootstrap(rb, stat, replicates, seed, clusters=clusters, of_draws=of_draws, draws=draws)
        low, high, undefined = _paired(ra, rb, stat, groups, replicates, seed, of_draws=of_draws, draws=draws)
        point = None if ia.estimate is None or ib.estimate is None else ib.estimate - ia.estimate
        out.append(RunComparison(field=spec.name, first=ia, second=ib, difference=point, low=low, high=high,
                                 replicates=replicates, undefined_replicates=undefined))
    return out


def _draws(keys: Sequence[Any], clusters: list[str], replicates: int, seed: int) -> np.ndarray | None:
    """The bootstrap's draws (whole items), counted once: every field's replicates draw the same units."""
    return draw_counts(groups_of(len(keys), clusters), len(keys), replicates, seed) if replicates >= 1 else None


def _paired(ra: Ratings, rb: Ratings, stat: Callable[[Ratings], Coefficient], groups: list[list[int]],
            replicates: int, seed: int, tick: Callable[[int], None] | None = None,
            of_draws: DrawsStatistic | None = None, draws: np.ndarray | None = None,
            ) -> tuple[float | None, float | None, int]:
    """The 95% percentile interval of stat(rb) - stat(ra) over the same bootstrap draws of
    both (paired), and the replicates where either is undefined."""
    diffs: list[float] = []
    undefined = 0 if groups else replicates
    pairs = zip(replicate_values(ra, stat, groups, replicates, seed, of_draws, draws),
                replicate_values(rb, stat, groups, replicates, seed, of_draws, draws))
    for b, (x, y) in enumerate(pairs):
        if x is None or y is None:
            undefined += 1
        else:
            diffs.append(y - x)
        if tick is not None:
            tick(b + 1)
    if not diffs:
        return None, None, undefined
    return float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975)), undefined


def gold_units(gold: Sequence[LabelRow]) -> dict[tuple[str, int], dict[str, Any]]:
    """(item, turn) -> field -> gold label; a second gold row for a unit is an error naming both."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    by: dict[tuple[str, int], str] = {}
    for row in gold:
        key = (row.item_id, row.turn)
        if key in by:
            raise ValueError(f"gold labels item {row.item_id} turn {row.turn} twice (rows of {by[key]!r} and "
                             f"{row.annotator!r}); gold has one row per unit")
        by[key] = row.annotator
        out[key] = dict(row.values)
    return out


def gold_shift(
    humans: Sequence[LabelRow], judge: Sequence[LabelRow], gold: Sequence[LabelRow], fields: Sequence[FieldSpec],
    replicates: int = 1000, seed: int = 0, progress: Callable[[str, int], None] | None = None,
) -> list[GoldShift]:
    """The judge against the human majority and against the gold, per field. A gold row's value
    for a field replaces the human majority of that unit (a value of None there: the unit has no
    gold for that field); units and fields the gold does not cover keep the majority. Gold for a
    unit without human labels is an error."""
    units = _human_units(humans)
    golden = gold_units(gold)
    stray = sorted(set(golden) - set(units))
    if stray:
        raise ValueError(f"gold labels item {stray[0][0]} turn {stray[0][1]}, which has no human labels")
    keys = sorted(units)
    clusters = [k[0] for k in keys]
    groups = groups_of(len(keys), clusters)
    judged = {(r.item_id, r.turn): r.values for r in judge}
    draws = _draws(keys, clusters, replicates, seed)
    out = []
    for spec in fields:
        before: list[dict[str, Any]] = []
        after: list[dict[str, Any]] = []
        changed = 0
        for k in keys:
            maj = majority([v[spec.name] for v in units[k].values() if v.get(spec.name) is not None])
            g = golden.get(k, {})
            ref = g[spec.name] if spec.name in g else maj  # a gold value of None withholds the label
            changed += ref != maj
            j = judged.get(k, {}).get(spec.name)
            for rows, r in ((before, maj), (after, ref)):
                rows.append({} if r is None else ({MAJORITY: r, JUDGE: j} if j is not None else {MAJORITY: r}))
        cats = list(spec.categories)
        rb, ra = Ratings(before, cats), Ratings(after, cats)
        stat = lambda r: krippendorff_alpha(r, spec.level)  # noqa: E731
        of_draws = lambda r, draws: alpha_of_draws(r, draws, spec.level)  # noqa: E731  (every replicate at once)
        tick = (lambda b: progress(spec.name, b)) if progress else None
        ib = bootstrap(rb, stat, replicates, seed, clusters=clusters, progress=tick, of_draws=of_draws, draws=draws)
        ia = bootstrap(ra, stat, replicates, seed, clusters=clusters, progress=tick, of_draws=of_draws, draws=draws)
        low, high, undefined = _paired(rb, ra, stat, groups, replicates, seed, tick, of_draws, draws)
        point = None if ia.estimate is None or ib.estimate is None else ia.estimate - ib.estimate
        out.append(GoldShift(
            field=spec.name, before=ib, after=ia, before_percent=percent_agreement(rb),
            after_percent=percent_agreement(ra), difference=point, low=low, high=high, replicates=replicates,
            undefined_replicates=undefined, units_before=sum(len(r) == 2 for r in before),
            units_after=sum(len(r) == 2 for r in after), changed=changed))
    return out
