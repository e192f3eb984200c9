"""The review queue's decisions on units whose labels disagree, and where gold labels stand."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .items import MAX_TEXT
from .labels import LabelValues
from .numbers import Whole


class Cause(str, Enum):
    """Why a reviewed unit's labels were wrong (a reviewer's tag)."""

    judge_wrong = "judge_wrong"
    humans_wrong = "humans_wrong"
    guideline_ambiguous = "guideline_ambiguous"
    needs_more_video = "needs_more_video"
    other = "other"


class Standing(str, Enum):
    """How a unit's gold labels came about: every annotator agreed, a reviewer decided, or
    neither (annotators split with no decision, or reviewers who disagree)."""

    unanimous = "unanimous"
    adjudicated = "adjudicated"
    unresolved = "unresolved"


class ReviewDecision(BaseModel):
    """One reviewer's decision on one unit (an item's turn) of a review queue. Decisions are
    never overwritten: a reviewer's later decision on the same unit stands in front of theirs."""

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1, max_length=200)
    turn: Whole = Field(0, ge=0)
    reviewer: str = Field(min_length=1, max_length=200, description="the reviewer's API key id")
    decided_at: datetime
    action: Literal["adopt_judge", "adopt_annotator", "manual", "skip"]
    source: str | None = Field(None, max_length=200, description="the annotator adopted (adopt_annotator)")
    labels: LabelValues = Field(default_factory=LabelValues, description="the labels decided (empty for skip)")
    replaced: LabelValues = Field(default_factory=LabelValues,
                                  description="the unit's standing labels before this decision")
    cause: Cause | None = None
    note: str = Field("", max_length=MAX_TEXT)
    flag_rubric: bool = Field(False, description="flagged for a change to the rubric")
    unit_version: str | None = Field(None, max_length=64,
                                     description="the version of the unit the reviewer saw when deciding (what it "
                                                 "showed: the item's turn, the verdict, the annotators' labels and "
                                                 "the decisions on it); none on a decision made before it was recorded")
    blind: bool = Field(False, description="made in blind mode, with the judge and the annotators hidden")
