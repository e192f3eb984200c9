"""A new version of a model against its baseline on the same turns: wins, ties and losses per
turn, an exact paired test on the category Successful, and the turns that flipped (Successful
before, not any more)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..records import Record
from ..schema import Category, JudgeError, Preference
from .board import Tie, default_ties, tie_words
from .plan import BattlePlan, standing

if TYPE_CHECKING:
    from ..rubrics.model import Rubric


class FlippedTurn(BaseModel):
    """A turn whose baseline answer was Successful and whose new answer is not."""

    model_config = ConfigDict(extra="forbid")

    item_id: str
    turn: int
    question: str
    golden: str | None = None
    answer_new: str
    answer_baseline: str
    category_new: str
    category_baseline: str
    rationale_new: str = Field(description="why the judge gave the new answer its category")
    rationale_baseline: str
    preferred: str | None = Field(None, description="new, baseline, Both or Neither")
    battle_id: str = Field(description="the battle item in the battles file")


class Comparison(BaseModel):
    """NEW against BASELINE, turn by turn (judge errors counted apart)."""

    model_config = ConfigDict(extra="forbid")

    new: str
    baseline: str
    turns: int = Field(description="turns with a verdict")
    wins: int = Field(description="turns the judge preferred the new answer")
    ties_both: int = Field(description="ties graded Both (video-qa: both good)")
    ties_neither: int = Field(description="ties graded Neither (video-qa: both bad)")
    losses: int
    errors: int = Field(description="turns the judge failed on (left out of everything else)")
    successful_new: int
    successful_baseline: int
    gained: int = Field(description="turns Successful in the new version only")
    lost: int = Field(description="turns Successful in the baseline only (the flipped turns)")
    p_value: float | None = Field(
        None, description="exact two-sided McNemar (sign) test of gained against lost; None with neither")
    flipped: list[FlippedTurn] = Field(default_factory=list)
    rubric: str | None = Field(None, description="the rubric the turns were graded under: id and version")
    ties: dict[str, Tie] = Field(default_factory=default_ties,
                                 description="what the tie counts mean (Both, Neither), in the rubric's words")


def compare(records: Iterable[Record], plan: BattlePlan, new: str, baseline: str,
            rubric: Rubric | None = None) -> Comparison:
    """Count the verdicts of `plan` (the battles of `new` against `baseline`) from `new`'s side;
    `rubric`, the one they were graded under, names the ties in its words."""
    from scipy.stats import binomtest

    counts = dict.fromkeys(("turns", "wins", "ties_both", "ties_neither", "losses", "errors", "successful_new",
                            "successful_baseline", "gained", "lost"), 0)
    flipped: list[FlippedTurn] = []
    for b, k, record in standing(records, plan):
        if {b.model_a, b.model_b} != {new, baseline}:
            continue
        if isinstance(record, JudgeError):
            counts["errors"] += 1
            continue
        counts["turns"] += 1
        new_is_a = b.model_a == new
        grade_new, grade_base = (record.response_a, record.response_b) if new_is_a else \
            (record.response_b, record.response_a)
        assert grade_new is not None and grade_base is not None  # a battle is a pair
        pref = record.preference
        if pref in (Preference.A, Preference.B):
            counts["wins" if (pref is Preference.A) == new_is_a else "losses"] += 1
        elif pref is Preference.both:
            counts["ties_both"] += 1
        elif pref is Preference.neither:
            counts["ties_neither"] += 1
        ok_new, ok_base = grade_new.category is Category.successful, grade_base.category is Category.successful
        counts["successful_new"] += ok_new
        counts["successful_baseline"] += ok_base
        counts["gained"] += ok_new and not ok_base
        if ok_base and not ok_new:
            counts["lost"] += 1
            turn = b.item.turns[k]
            answer_new, answer_base = (turn.response_a, turn.response_b) if new_is_a else \
                (turn.response_b, turn.response_a)
            preferred = None if pref is None else (
                pref.value if pref in (Preference.both, Preference.neither)
                else "new" if (pref is Preference.A) == new_is_a else "baseline")
            flipped.append(FlippedTurn(
                item_id=b.source.id, turn=b.turns[k], question=turn.question, golden=turn.golden,
                answer_new=answer_new or "", answer_baseline=answer_base or "",
                category_new=grade_new.category.value, category_baseline=grade_base.category.value,
                rationale_new=grade_new.rationale, rationale_baseline=grade_base.rationale, preferred=preferred,
                battle_id=b.id))
    discordant = counts["gained"] + counts["lost"]
    p_value = float(binomtest(counts["gained"], discordant, 0.5).pvalue) if discordant else None
    return Comparison(new=new, baseline=baseline, **counts, p_value=p_value, flipped=flipped,
                      rubric=f"{rubric.id} {rubric.version}" if rubric is not None else None, ties=tie_words(rubric))
