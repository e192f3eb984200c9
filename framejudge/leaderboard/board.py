"""The leaderboard table as data: one row per model, the comparison graph's parts, the judge's
biases on the run, the same table per slice, and what its tie columns count in the words of the
rubric the battles were graded under. JSON-serialisable (no NaN: undefined figures are None with
the reason)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, model_validator

from ..calibration.bootstrap import containing

if TYPE_CHECKING:
    from ..rubrics.model import Rubric


class Tie(BaseModel):
    """What a tie column counts, in the words of the rubric the battles were graded under."""

    label: str = Field(description="the column's words: 'both good', 'both bad'")
    text: str = Field(description="what the choice means under the rubric")


def default_ties() -> dict[str, Tie]:
    """Tie columns described by the choices alone (a board built without its rubric, or before
    boards carried one)."""
    return {"Both": Tie(label="Both", text="the judge's Both"), "Neither": Tie(label="Neither", text="the judge's Neither")}


def tie_words(rubric: Rubric | None) -> dict[str, Tie]:
    """The tie columns in the rubric's words: each tie choice's label and text (video-qa: Both, "both
    good", two Successful answers no criterion separates; Neither, "both bad", two failing ones)."""
    if rubric is None or rubric.preference is None:
        return default_ties()
    out = default_ties()
    for choice in rubric.preference.choices:
        if choice.id.value in out:
            out[choice.id.value] = Tie(label=choice.label or choice.id.value, text=" ".join(choice.text.split()))
    return out


class Interval(BaseModel):
    """An estimate with its interval; `estimate` None with `reason` when it is undefined. The
    interval always contains the estimate (a degenerate bootstrap, every replicate agreeing, is
    the estimate itself, whatever the replicates' rounding)."""

    estimate: float | None
    low: float | None = None
    high: float | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _holds_estimate(self) -> Interval:
        self.low, self.high = containing(self.estimate, self.low, self.high)
        return self


class VsBaseline(BaseModel):
    """A model's battles against the baseline."""

    battles: int = Field(description="battles against the baseline, errors included")
    wins: int
    both: int = Field(description="ties graded Both (the board's `ties` says what Both means under its rubric; "
                                  "video-qa: both good, two Successful answers no criterion separates)")
    neither: int = Field(description="ties graded Neither (video-qa: both bad, two answers neither of which is "
                                     "Successful that no criterion separates)")
    losses: int
    errors: int = Field(description="battles the judge failed on (left out of the rates)")
    win_rate: Interval = Field(description="(wins + ties / 2) / graded battles; bootstrap over videos")
    length_controlled: Interval = Field(description="the win rate at zero length difference")


class ModelRow(BaseModel):
    model: str
    battles: int = Field(description="all its battles, errors included")
    turns: int = Field(description="distinct turns it answered in its battles")
    errors: int
    vs_baseline: VsBaseline | None = Field(None, description="None for the baseline itself")
    categories: dict[str, int] = Field(default_factory=dict, description="its graded answers per category")
    category_shares: dict[str, float] = Field(default_factory=dict)
    successful: Interval = Field(description="share of its graded answers that are Successful")
    strength: Interval = Field(description="Bradley-Terry strength (logit scale, mean zero in its part)")
    component: int = Field(description="its part of the comparison graph (index into Board.components)")
    rank: int | None = Field(None, description="its rank by strength inside its part (1: strongest; models of "
                                                "equal strength share a rank: 1, 1, 3)")
    ranks: list[int] = Field(default_factory=list,
                             description="how many bootstrap replicates put it at rank 1, 2, ... in its part")
    never_won: bool = False


class Bias(BaseModel):
    """The judge's known biases, measured on this run."""

    swap_graded: int = Field(description="battles graded in both orders")
    swap_consistent: int = Field(description="of those, battles whose two orders agreed")
    position_consistency: float | None = None
    length_coefficient: Interval = Field(description="beta of the length regressions (per unit of tanh(d / s)), "
                                         "the models' inverse-variance weighted mean")
    length_scale: float | None = Field(None, description="s: the length difference's standard deviation, characters")
    length_decided: int = Field(0, description="battles won outright (A or B) whose answers differ in length")
    longer_won: int = 0
    longer_won_share: float | None = None


class Board(BaseModel):
    baseline: str | None
    models: list[ModelRow]
    battles: int
    errors: int
    clusters: int = Field(description="bootstrap units: videos, or items without a video")
    replicates: int
    seed: int
    level: float
    alpha: float = Field(description="choix's I-LSR regularisation")
    components: list[list[str]] = Field(description="parts of the comparison graph; strengths compare only inside one")
    notes: list[str] = Field(default_factory=list)
    bias: Bias
    by: list[str] = Field(default_factory=list)
    rubric: str | None = Field(None, description="the rubric the battles were graded under: id and version")
    ties: dict[str, Tie] = Field(default_factory=default_ties,
                                 description="what the tie columns count (Both, Neither), in the rubric's words")
    slices: dict[str, dict[str, Board]] = Field(default_factory=dict,
                                                description="the same table per value of each `by` key")


Board.model_rebuild()
