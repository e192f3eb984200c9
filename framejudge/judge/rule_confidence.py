"""The reference judge's confidence: how often, on labelled development data, the path that decided
each field (an exact rule, an integrity rule, a golden-response comparison, a meaning decision and
its margin, a fallback) gave the label people gave.

The table is fitted, never written by hand: `./run bench confidence` (bench/confidence.py) grades
the development halves of `bench/judge_eval` with the reference judge, records per label field
the path that decided it and whether the label agreed, and calls `fit`. It writes two package
files beside this module, `data/reference-confidence.json` (this table) and
`data/reference-thresholds.json` (the triage thresholds it earns, for `grade --triage default`).
A test checks that they are what the fit gives on the rules as they are.

The model, per kind of field (categories; preferences), is a Beta-binomial hierarchy, each level's
posterior mean the prior mean of the level below (empirical-Bayes shrinkage):

- pooled: every unit of the kind, under a uniform Beta(1, 1) prior;
- family (the path's prefix: `guideline`, `golden`, `meaning`, `refusal`, `rank` ...): its units,
  under a Beta prior with the pooled mean and `strength` pseudo-units;
- path: its units, under the family's mean (the pooled one for a path without a family) and the
  same strength;
- margin band, for paths decided by similarity (meaning): the units whose margin from the
  nearest threshold is below the family's median margin (`near`) or not (`far`), under the
  path's mean. Where the data do not say that near is less sure than far, both bands take the
  path's value (the margin is then not used).

So a path seen a few times is pulled towards its family and the pool, one seen often speaks for
itself, and a path never seen takes its family's value, or the pooled one, and says so. The
strength is chosen among STRENGTHS by leave-one-item-out log loss on the same data. A preference
decided by the categories is no surer than the less sure of the two categories.

The thresholds are chosen as `framejudge triage` chooses them (fixed-sequence testing with a
Clopper-Pearson bound at target TARGET and level DELTA, calibration/triage.py) over the
development units' confidences from this table; category A and B share one threshold, chosen over
every graded response. The table was fitted on the same units, so on them the bound is in-sample:
the figures that check it are cross-fitted (each item's turns marked with a table fitted without
that item: `fit`'s report, `./run bench confidence`) and those of the test half. (Cross-fitted
confidences are not used to choose: within a path they rank an item's units by how wrong the rest
of the path was, which orders exactly the wrong units first.) On labels of your own, `framejudge
triage` over this table's confidences gives the guarantee proper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from typing import Any

from ..schema import Confidence, FieldThreshold, Thresholds
from ..schema.triage import PACKAGED_THRESHOLDS, packaged_thresholds

FIT_COMMAND = "./run bench confidence"
TABLE_FILE = "reference-confidence.json"
THRESHOLDS_FILE = PACKAGED_THRESHOLDS
STRENGTHS = (1, 2, 4, 8, 16, 32)
TARGET, DELTA, MIN_UNITS = 0.90, 0.10, 30
CATEGORY_FIELDS = ("category_a", "category_b")
# what the pipeline's error-string rules decide without asking the judge (both responses fixed error strings)
RULED_PATHS = {"category_a": "error_string", "category_b": "error_string", "preference": "rules:error_strings"}
DIGITS = 6


def kind_of(field_name: str) -> str:
    return "preference" if field_name == "preference" else "category"


def family(path: str) -> str | None:
    """`golden` for `golden:agrees`; None for a path with no family (`error_string`, `default`)."""
    head, sep, _ = path.partition(":")
    return head if sep else None


@dataclass
class Turn:
    """One graded turn of the development data: per label field, the path that decided it, the
    margin of a decision by similarity, and whether the label agreed with the people's."""

    item: str
    paths: dict[str, str]
    correct: dict[str, bool]
    margins: dict[str, float] = field(default_factory=dict)
    category_decided: bool = False  # the preference followed from the categories


@dataclass(frozen=True)
class _Unit:
    item: str
    path: str
    margin: float | None
    correct: bool


def _units(turns: Iterable[Turn], kind: str) -> list[_Unit]:
    return [_Unit(t.item, path, t.margins.get(f), t.correct[f])
            for t in turns for f, path in t.paths.items() if kind_of(f) == kind and f in t.correct]


# ---------------------------------------------------------------------------- fitting one kind

def _posterior(right: int, n: int, prior_mean: float, strength: float) -> float:
    """The posterior mean of a rate with `right` of `n` under a Beta(strength * prior_mean,
    strength * (1 - prior_mean)) prior: (right + strength * prior_mean) / (n + strength), the mean of
    Beta(right + strength * prior_mean, n - right + strength * (1 - prior_mean))."""
    return (right + strength * prior_mean) / (n + strength)


def _count(units: Sequence[_Unit]) -> dict[str, int]:
    return {"n": len(units), "correct": sum(u.correct for u in units)}


def _entry(units: Sequence[_Unit], prior_mean: float, strength: float) -> dict[str, Any]:
    c = _count(units)
    return {**c, "confidence": round(_posterior(c["correct"], c["n"], prior_mean, strength), DIGITS)}


def _band(margin: float, cut: float) -> str:
    return "near" if margin < cut else "far"


def fit_kind(units: Sequence[_Unit], strength: float) -> dict[str, Any]:
    """One kind's table: pooled, families, paths, margin cuts and bands."""
    import numpy as np

    c = _count(units)
    pooled = round(_posterior(c["correct"], c["n"], 0.5, 2.0), DIGITS)  # Beta(1, 1) prior
    by_family: dict[str, list[_Unit]] = {}
    by_path: dict[str, list[_Unit]] = {}
    for u in units:
        by_path.setdefault(u.path, []).append(u)
        f = family(u.path)
        if f is not None:
            by_family.setdefault(f, []).append(u)
    families = {f: _entry(us, pooled, strength) for f, us in sorted(by_family.items())}
    paths = {}
    for p, us in sorted(by_path.items()):
        f = family(p)
        paths[p] = _entry(us, families[f]["confidence"] if f is not None else pooled, strength)
    cuts = {f: round(float(np.median([u.margin for u in us])), 4)
            for f, us in sorted(by_family.items()) if all(u.margin is not None for u in us)}
    for p, us in sorted(by_path.items()):
        f = family(p)
        if f not in cuts:
            continue
        bands = {b: [u for u in us if _band(u.margin, cuts[f]) == b] for b in ("near", "far")}  # type: ignore[arg-type]
        est = {b: _entry(bu, paths[p]["confidence"], strength) for b, bu in bands.items() if bu}
        if "near" in est and "far" in est and est["near"]["confidence"] > est["far"]["confidence"]:
            for e in est.values():  # near no less sure than far: the margin says nothing here
                e["confidence"] = paths[p]["confidence"]
            paths[p]["margin_used"] = False
        else:
            paths[p]["margin_used"] = True
        paths[p]["bands"] = est
    return {**c, "strength": strength, "pooled": pooled, "families": families, "paths": paths, "margin_cuts": cuts}


def estimate(part: Mapping[str, Any], path: str, margin: float | None = None) -> tuple[float, str]:
    """A path's confidence in a fitted kind, and what it rests on."""
    entry = part["paths"].get(path)
    f = family(path)
    if entry is None:
        fam = part["families"].get(f) if f is not None else None
        if fam is not None:
            return fam["confidence"], f"{path} unseen in the development data: its family {f}'s value"
        return part["pooled"], f"{path} unseen in the development data: the pooled value"
    cut = part["margin_cuts"].get(f) if f is not None else None
    if margin is not None and cut is not None and "bands" in entry:
        band = _band(margin, cut)
        if band in entry["bands"]:
            b = entry["bands"][band]
            return b["confidence"], (f"{path}, margin {margin:.2f} ({band}: {b['correct']} of {b['n']} right; "
                                     f"{entry['correct']} of {entry['n']} over the path)")
    return entry["confidence"], f"{path} ({entry['correct']} of {entry['n']} right)"


def _log_loss(p: float, right: bool) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return -math.log(p if right else 1 - p)


def _left_out(units: Sequence[_Unit], strength: float) -> list[float]:
    """Each unit's confidence from the table fitted without its item."""
    out: list[float] = [0.0] * len(units)
    for item in sorted({u.item for u in units}):
        rest = [u for u in units if u.item != item]
        part = fit_kind(rest, strength)
        for i, u in enumerate(units):
            if u.item == item:
                out[i] = estimate(part, u.path, u.margin)[0]
    return out


def choose_strength(units: Sequence[_Unit]) -> float:
    """The prior strength with the lowest leave-one-item-out log loss (ties: the stronger)."""
    losses = {}
    for s in STRENGTHS:
        losses[s] = round(sum(_log_loss(p, u.correct) for p, u in zip(_left_out(units, s), units)), 9)
    return float(min(STRENGTHS, key=lambda s: (losses[s], -s)))


# ---------------------------------------------------------------------------- a turn's confidence

# Paths that rest on no check of the answer's content: sentence similarity alone, "no rule applies"
# (the guideline's default), an answer in another language the rules could not compare. Their
# confidence is at most UNSURE_CAP, whatever their development figures, so that no threshold
# earned by the checked paths takes them without a look.
UNSURE_FAMILIES = frozenset({"meaning"})
UNSURE_PATHS = {"default": "no rule applies (the guideline's default)",
                "golden:other_language": "another language that the rules could not compare"}
UNSURE_CAP = 0.5


def unsure(path: str) -> str | None:
    """Why a path's decision rests on no check of the answer (None: it rests on one)."""
    if family(path) in UNSURE_FAMILIES:
        return "sentence similarity alone"
    return UNSURE_PATHS.get(path)


def _capped(path: str, found: tuple[float, str]) -> tuple[float, str]:
    why = unsure(path)
    if why is None or found[0] <= UNSURE_CAP:
        return found
    return UNSURE_CAP, f"{found[1]}, capped at {UNSURE_CAP:g}: rests on {why}, never taken without a look"


def field_confidences(table: Mapping[str, Any], paths: Mapping[str, str], margins: Mapping[str, float],
                      category_decided: bool) -> dict[str, tuple[float, str]]:
    """Per label field: the confidence and what it rests on. A preference the categories decided
    is no surer than the less sure category. A field decided by a path that checked nothing of the
    answer (`unsure`) is at most UNSURE_CAP. A field of a kind the table has no units of gets none."""
    out = {f: _capped(p, estimate(table["fields"][kind_of(f)], p, margins.get(f))) for f, p in paths.items()
           if kind_of(f) in table["fields"]}
    if category_decided and "preference" in out:
        cats = [out[f] for f in CATEGORY_FIELDS if f in out]
        low = min(cats, default=None)
        if low is not None and low[0] < out["preference"][0]:
            out["preference"] = (low[0], f"{paths['preference']}, no surer than the categories that decided it")
    return out


def _turn_confidences(tables: Mapping[str, Any], turn: Turn) -> dict[str, float]:
    return {f: c for f, (c, _) in field_confidences(tables, turn.paths, turn.margins, turn.category_decided).items()}


# ---------------------------------------------------------------------------- the whole fit

def fit(turns: Sequence[Turn], version: str, rubric_id: str, rubric_hash: str,
        source: str) -> tuple[dict[str, Any], Thresholds, dict[str, Any]]:
    """(the table, the thresholds, figures for the report) from the development turns."""
    from ..calibration.reliability import calibration_error
    from ..calibration.scored import Scored
    from ..calibration.triage import choose_threshold, figures

    kinds = {k: _units(turns, k) for k in ("category", "preference")}
    strengths = {k: choose_strength(us) if us else float(STRENGTHS[0]) for k, us in kinds.items()}
    fitted = {k: fit_kind(us, strengths[k]) for k, us in kinds.items() if us}
    table = {
        "record": "reference_confidence", "judge_version": version, "rubric_id": rubric_id,
        "rubric_hash": rubric_hash, "fitted_on": source, "command": FIT_COMMAND,
        "method": "Beta-binomial shrinkage: path -> family -> pooled (margin bands for meaning paths), "
                  "prior strength by leave-one-item-out log loss",
        "fields": fitted,
    }
    # cross-fitted: each turn's confidences from the tables fitted without its item
    items = sorted({t.item for t in turns})
    cross: dict[int, dict[str, float]] = {}
    for item in items:
        rest = [t for t in turns if t.item != item]
        tables = {"fields": {k: fit_kind(_units(rest, k), strengths[k]) for k in fitted if _units(rest, k)}}
        for i, t in enumerate(turns):
            if t.item == item:
                cross[i] = {f: c for f, c in _turn_confidences(tables, t).items()
                            if kind_of(f) in tables["fields"]}
    shipped = {i: _turn_confidences(table, t) for i, t in enumerate(turns)}

    def scored(conf: Mapping[int, Mapping[str, float]], fields: Sequence[str]) -> list[Scored]:
        return [Scored(turns[i].item, 0, turns[i].correct[f], True, conf[i].get(f))
                for i in range(len(turns)) for f in fields if f in turns[i].correct]

    out: dict[str, FieldThreshold] = {}
    chosen: dict[str, float | None] = {}
    for _kind, fields in (("category", CATEGORY_FIELDS), ("preference", ("preference",))):
        units = [u for u in scored(shipped, fields) if u.confidence is not None]
        threshold, bound, tested = choose_threshold([u.confidence for u in units],  # type: ignore[misc]
                                                    [bool(u.correct) for u in units], TARGET, DELTA, MIN_UNITS)
        if threshold is not None:
            threshold = round(threshold, DIGITS)
        for f in fields:
            chosen[f] = threshold
            mine = scored(shipped, (f,))
            if not mine:
                continue
            # bound and tests: of the one test over the kind's units (both sides for the categories)
            out[f] = FieldThreshold(threshold=threshold, guaranteed=TARGET if threshold is not None else None,
                                    lower_bound=None if bound is None else round(bound, DIGITS), tested=tested,
                                    calibration=figures(mine, threshold))
    thresholds = Thresholds(target=TARGET, delta=DELTA, seed=0, split=1.0, min_units=MIN_UNITS,
                            judge_backend="reference", model_id=version, rubric_id=rubric_id,
                            rubric_hash=rubric_hash, fields=out)

    def turn_figures(conf: Mapping[int, Mapping[str, float]]) -> dict[str, Any]:
        auto = []
        for i, t in enumerate(turns):
            have = [f for f in t.correct if f in chosen]
            if have and all(chosen[f] is not None and conf[i].get(f, -1) >= chosen[f] for f in have):  # type: ignore[operator]
                auto.append(all(t.correct[f] for f in have))
        return {"turns": len(turns), "auto": len(auto), "auto_share": len(auto) / len(turns) if turns else None,
                "auto_agreement": sum(auto) / len(auto) if auto else None,
                "agreement_all": sum(all(t.correct.values()) for t in turns) / len(turns) if turns else None}

    def reliability(conf: Mapping[int, Mapping[str, float]]) -> dict[str, Any]:
        res = {}
        for kind, fields in (("category", CATEGORY_FIELDS), ("preference", ("preference",))):
            units = [u for u in scored(conf, fields) if u.confidence is not None]
            ece, brier, _ = calibration_error([u.confidence for u in units], [bool(u.correct) for u in units])  # type: ignore[misc]
            res[kind] = {"units": len(units), "ece": ece, "brier": brier,
                         "agreement": sum(bool(u.correct) for u in units) / len(units) if units else None,
                         "mean_confidence": sum(u.confidence for u in units) / len(units) if units else None}  # type: ignore[misc]
        return res

    report = {"strengths": strengths, "thresholds": chosen,
              "shipped": {"triage": turn_figures(shipped), "reliability": reliability(shipped)},
              "cross_fitted": {"triage": turn_figures(cross), "reliability": reliability(cross)}}
    return table, thresholds, report


def table_json(table: Mapping[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def thresholds_json(thresholds: Thresholds) -> str:
    return thresholds.model_dump_json(indent=1) + "\n"


# ---------------------------------------------------------------------------- what ships

def _data(name: str) -> Any:
    return files("framejudge.judge") / "data" / name


@lru_cache(maxsize=1)
def shipped_table() -> dict[str, Any] | None:
    """The packaged table (None: absent or unreadable)."""
    try:
        return json.loads(_data(TABLE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def shipped_thresholds() -> Thresholds | None:
    """The packaged triage thresholds of the reference judge (None: absent or unreadable)."""
    return packaged_thresholds()


def default_thresholds_problem(backend: str, model_id: str | None) -> str | None:
    """Why `--triage default` (the packaged thresholds) cannot mark this judge's verdicts (None: it can)."""
    t = shipped_thresholds()
    if t is None:
        return f"this installation has no default thresholds (framejudge/judge/data/{THRESHOLDS_FILE} is absent)"
    if backend != t.judge_backend:
        return (f"the default thresholds were earned by the reference judge ({t.model_id}) on its own development "
                f"data; they say nothing about the {backend} judge's confidence. Thresholds are earned per judge: "
                "grade labelled items with it and run framejudge triage on your own labels")
    if model_id is not None and model_id != t.model_id:
        return (f"the default thresholds were earned by reference judge {t.model_id}, not {model_id}: its rules "
                f"changed since; refit them with {FIT_COMMAND}, or run framejudge triage on your own labels")
    return None


def confidence(version: str, paths: Mapping[str, str], margins: Mapping[str, float],
               category_decided: bool) -> Confidence:
    """The reference judge's confidence in a verdict whose fields these paths decided."""
    table = shipped_table()
    if table is None:
        return Confidence(informative=False, note=f"the reference judge's calibration table ({TABLE_FILE}) is "
                                                  "not installed: no confidence")
    if table.get("judge_version") != version:
        return Confidence(informative=False, note=(
            f"the calibration table was fitted for {table.get('judge_version')}, not {version}: refit it with "
            f"{FIT_COMMAND}"))
    found = field_confidences(table, paths, margins, category_decided)
    fields = {f: c for f, (c, _) in found.items()}
    said = "; ".join(f"{f}: {why}" for f, (_, why) in found.items())
    return Confidence(informative=True, fields=fields, methods={"rules": dict(fields)},
                      note=f"rules: how often the deciding path agreed with people on the reference judge's "
                           f"development data ({said})")
