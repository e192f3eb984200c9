"""Selective judging: a thresholds file (per field the confidence a judge's label needs to stand
without review), its figures, and the mark it puts on a verdict."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .labels import LABEL_FIELDS
from .numbers import Count, Number, Share, Whole


class TriageFigures(BaseModel):
    """How one field's threshold splits one part of the labelled units (calibration or test)."""

    model_config = ConfigDict(extra="forbid")

    units: Count = Field(description="labelled units the judge gave this field (the coverage's denominator)")
    covered: Count = Field(description="of those, the units whose confidence reaches the threshold (auto)")
    coverage: Share = Field(description="covered / units; 0 with no threshold or no units")
    scored_above: Count = Field(description="covered units with a human majority (agreement is measured on them)")
    scored_below: Count
    agreement_above: Share | None = Field(None, description="share of scored_above equal to the human majority")
    agreement_below: Share | None = None
    no_majority: Count = Field(0, description="units left out of agreement: the humans tie")
    no_confidence: Count = Field(0, description="units with no informative confidence for this field (never auto)")


class FieldThreshold(BaseModel):
    """One field's confidence threshold, chosen by fixed-sequence testing, and what it gives."""

    model_config = ConfigDict(extra="forbid")

    threshold: Share | None = Field(description="confidence (0 to 1) at or above which the field stands; null: none "
                                                "passed, the field always goes to review")
    guaranteed: Share | None = Field(None, description="the agreement with the human majority guaranteed above "
                                                       "the threshold with probability 1 - delta (the target)")
    lower_bound: Share | None = Field(None, description="the exact one-sided binomial lower bound at level delta "
                                                        "of the agreement above the threshold, on the calibration "
                                                        "part")
    tested: Count = Field(0, description="thresholds tested before the first that failed")
    human_agreement: Share | None = Field(None, description="humans' pairwise agreement on this field: the "
                                                            "human-human ceiling")
    calibration: TriageFigures
    test: TriageFigures | None = Field(None, description="the same on the held-out test part (null: no test part)")


class Thresholds(BaseModel):
    """A thresholds file (`framejudge triage`): per field the confidence a judge's label needs to
    stand without review, for the judge, model and rubric its verdicts were calibrated on."""

    model_config = ConfigDict(extra="forbid")

    record: Literal["triage_thresholds"] = "triage_thresholds"
    target: Number = Field(gt=0, lt=1, description="agreement with the human majority to guarantee")
    delta: Number = Field(gt=0, lt=1, description="the guarantee holds with probability at least 1 - delta")
    seed: Whole = Field(0, ge=0, description="seed of the split of items into calibration and test parts")
    split: Number = Field(0.5, gt=0, le=1, description="share of the labelled items in the calibration part")
    min_units: Whole = Field(30, ge=1, description="a threshold is tested only with at least this many scored "
                                                 "calibration units at or above it")
    judge_backend: str
    model_id: str
    rubric_id: str
    rubric_hash: str
    fields: dict[str, FieldThreshold] = Field(min_length=1, description="label field -> its threshold and figures")

    @field_validator("fields")
    @classmethod
    def _label_fields(cls, fields: dict[str, FieldThreshold]) -> dict[str, FieldThreshold]:
        unknown = next((f for f in fields if f not in LABEL_FIELDS), None)
        if unknown is not None:
            raise ValueError(f"{unknown!r} is not a label field (they are: {', '.join(LABEL_FIELDS)})")
        return fields


class TriageMark(BaseModel):
    """Whether a verdict may stand as it is (auto) or goes to people (to_review), by a thresholds file."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["auto", "to_review"]
    below: list[str] = Field(default_factory=list,
                             description="the fields whose confidence is below their threshold (or has none)")
    thresholds: str = Field(description="sha256 of the thresholds file applied (of its compact JSON, as "
                                        "`framejudge.calibration.triage.thresholds_hash` computes it)")


# The reference judge's thresholds ship with the package (`./run bench confidence` writes them);
# a grading option's `triage: "default"` stands for them. Read here, as data, so that the options
# need nothing from the judge package.
PACKAGED_THRESHOLDS = "reference-thresholds.json"


@lru_cache(maxsize=1)
def packaged_thresholds() -> Thresholds | None:
    """The packaged triage thresholds of the reference judge (None: absent or unreadable)."""
    try:
        text = (files("framejudge") / "judge" / "data" / PACKAGED_THRESHOLDS).read_text(encoding="utf-8")
        return Thresholds.model_validate_json(text)
    except (OSError, ValueError):
        return None
