"""Simulated judges with a known error rate at each confidence level, and the humans they are
measured against: verdict records and label rows as the CLI and the library read them."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from framejudge.calibration.audit import LabelRow
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, Confidence, HumanLabel, Provenance, ResponseGrade, Usage, Verdict

CATEGORIES = [c.value for c in Category]
RUBRIC = get_rubric("video-qa")
# confidence levels, how often the judge says each, and how often it is right at each
LEVELS = np.array([0.55, 0.7, 0.85, 0.95, 0.99])
SHARES = np.array([0.15, 0.2, 0.2, 0.25, 0.2])
RIGHT = np.array([0.5, 0.7, 0.85, 0.95, 0.99])


def true_agreement(threshold: float | None, levels=LEVELS, shares=SHARES, right=RIGHT) -> float | None:
    """The judge's agreement with the majority over the whole population above `threshold`."""
    if threshold is None:
        return None
    keep = levels >= threshold
    return float((shares[keep] * right[keep]).sum() / shares[keep].sum()) if keep.any() else None


def true_coverage(threshold: float | None, levels=LEVELS, shares=SHARES) -> float:
    return 0.0 if threshold is None else float(shares[levels >= threshold].sum())


_TEMPLATE: dict[str, Verdict] = {}


def template(backend: str = "litellm", model: str = "sim-judge") -> Verdict:
    key = backend + model
    if key not in _TEMPLATE:
        prov = Provenance(rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, rubric_hash=RUBRIC.content_hash,
                          judge_backend=backend, model_id=model, created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                          usage=Usage(prompt_tokens=100, completion_tokens=10, cost_usd=0.01))
        _TEMPLATE[key] = Verdict(item_id="x", response_a=ResponseGrade(category="Successful", rationale="r"),
                                 provenance=prov)
    return _TEMPLATE[key]


def simulate(n_items: int, seed: int, turns: int = 1, informative: bool = True, constant: float | None = None,
             levels=LEVELS, shares=SHARES, right=RIGHT, backend: str = "litellm", model: str = "sim-judge",
             ) -> tuple[list[LabelRow], list[HumanLabel], list[Verdict]]:
    """Three annotators who all give the truth (so the majority is the truth, and no ties), and a
    judge whose category_a is right with probability right[l] at confidence level l. With
    `constant` every verdict claims that confidence whatever its hit rate; with informative=False
    the verdicts say their confidence is not informative."""
    rng = np.random.default_rng(seed)
    base = template(backend, model)
    rows, labels, verdicts = [], [], []
    for i in range(n_items):
        for t in range(turns):
            truth = CATEGORIES[int(rng.integers(0, 3))]
            level = int(rng.choice(len(levels), p=shares))
            ok = rng.random() < right[level]
            judged = truth if ok else CATEGORIES[(CATEGORIES.index(truth) + 1 + int(rng.integers(0, 4))) % 5]
            conf = float(levels[level]) if constant is None else constant
            confidence = (Confidence(informative=True, fields={"category_a": conf}, methods={"samples": {"category_a": conf}})
                          if informative else Confidence(informative=False, note="deterministic judge"))
            grade = base.response_a.model_copy(update={"category": Category(judged)})
            verdicts.append(base.model_copy(update={"item_id": f"i{i}", "turn": t, "response_a": grade,
                                                    "confidence": confidence}))
            for a in ("h1", "h2", "h3"):
                rows.append(LabelRow(item_id=f"i{i}", turn=t, annotator=a, values={"category_a": truth}))
                labels.append(HumanLabel(item_id=f"i{i}", turn=t, annotator=a, category_a=truth))
    return rows, labels, verdicts


def write_files(folder: Path, labels: list[HumanLabel], verdicts: list[Verdict]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    human, judge = folder / "labels.jsonl", folder / "verdicts.jsonl"
    human.write_text("".join(label.model_dump_json(exclude_none=True) + "\n" for label in labels))
    judge.write_text("".join(json.dumps(v.model_dump(mode="json")) + "\n" for v in verdicts))
    return human, judge
