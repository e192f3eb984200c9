"""The rubric as data: a pydantic model every rubric file is validated against."""

from __future__ import annotations

import hashlib
import json
from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..schema import Category, Cause, Judgement, Preference


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Change(_Strict):
    version: str
    date: date
    changes: str


class TaskType(_Strict):
    id: Literal["single_turn", "multi_turn"]
    name: str
    description: str
    frames: str
    notes: list[str] = []


class Example(_Strict):
    query: str
    response: str
    scene: str | None = None
    golden: str | None = None


class Inclusion(_Strict):
    id: str
    text: str
    examples: list[Example] = []


class CategoryDef(_Strict):
    name: Category
    definition: str
    includes: list[Inclusion] = []


class ErrorMessages(_Strict):
    exact: list[str] = Field(min_length=1)
    cutoff_suffix: str | None = None


class Choice(_Strict):
    id: Preference
    text: str
    label: str | None = Field(None, description="a few words for where the choice is counted (a leaderboard's "
                                               "tie columns: 'both good', 'both bad')")


TIE_CHOICES = (Preference.both, Preference.neither)


class Ties(_Strict):
    """Which choice a tie takes: two answers that no criterion separates. A Successful answer
    against one of another category is never a tie (the category decides)."""

    successful: Preference = Field(description="both answers Successful")
    not_successful: Preference = Field(description="neither answer Successful")

    @model_validator(mode="after")
    def _tie_choices(self) -> Ties:
        for side in ("successful", "not_successful"):
            if getattr(self, side) not in TIE_CHOICES:
                raise ValueError(f"ties.{side} is Both or Neither, got {getattr(self, side).value}")
        return self


class Criterion(_Strict):
    rank: int = Field(ge=1)
    id: str
    name: str
    text: str
    applies_to: Literal["all", "all_but_long_expression", "expression"] = "all"
    # which pairs it compares: any two answers, or only two Successful ones (how well an answer
    # delivers what it says: two failing answers deliver nothing, so it cannot separate them)
    compares: Literal["all", "successful"] = "all"
    note: str | None = None


class PairExample(_Strict):
    query: str
    response_a: str
    response_b: str
    category_a: Category
    category_b: Category
    preference: Preference
    deciding_criterion: str | None = None  # None: a tie (Both or Neither), no criterion separates them
    golden: str | None = None
    scene: str | None = None


class PreferenceSection(_Strict):
    choices: list[Choice]
    rules: list[str]
    criteria: list[Criterion]
    examples: list[PairExample] = []
    ties: Ties | None = None  # None: a tie is Both when the categories match, else Neither (rubrics before ties)

    @model_validator(mode="after")
    def _ranked(self) -> PreferenceSection:
        ranks = [c.rank for c in self.criteria]
        if ranks != list(range(1, len(ranks) + 1)):
            raise ValueError(f"criteria must be ranked 1..{len(ranks)} in order, got {ranks}")
        if {c.id for c in self.choices} != set(Preference):
            raise ValueError("preference choices must be exactly A, B, Both and Neither")
        ids = {c.id for c in self.criteria}
        for ex in self.examples:
            decided = ex.preference in (Preference.A, Preference.B)
            if decided and ex.deciding_criterion not in ids | {"category"}:
                raise ValueError(f"example decided by unknown criterion {ex.deciding_criterion!r}")
            if not decided and ex.deciding_criterion is not None:
                raise ValueError(f"an example with preference {ex.preference.value} is a tie: no deciding criterion")
            if not decided and self.tie(ex.category_a, ex.category_b) != ex.preference:
                raise ValueError(f"an example of a tie between {ex.category_a.value} and {ex.category_b.value} "
                                 f"answers is {self.tie(ex.category_a, ex.category_b).value}, not {ex.preference.value}")
        return self

    def tie(self, cat_a: Category, cat_b: Category) -> Preference:
        """The choice for two answers of these categories that no criterion separates. With `ties`:
        by whether they are Successful; without (rubrics written before it): Both when the
        categories match, else Neither. (A Successful answer against another category is decided
        by the category, never tied; this answers what `ties` would say for neither Successful.)"""
        succ = Category.successful
        if self.ties is None:
            return Preference.both if cat_a == cat_b else Preference.neither
        return self.ties.successful if cat_a == succ and cat_b == succ else self.ties.not_successful

    def choice(self, pref: Preference) -> Choice:
        return next(c for c in self.choices if c.id == pref)


class Flag(_Strict):
    id: str
    scope: Literal["response", "item"]
    name: str
    text: str


class Domain(_Strict):
    id: str
    name: str
    supported: bool
    text: str


class Case(_Strict):
    query: str
    successful: str
    not_successful: str
    scene: str | None = None


class SpecialCase(_Strict):
    id: str
    name: str
    text: str
    cases: list[Case] = []


class IntegrityTopic(_Strict):
    id: str
    name: str
    items: list[str] = Field(min_length=1)


class Correction(_Strict):
    """A unit the judge got wrong, with the right labels: shown to the judge as a corrected example
    (never when grading the item it comes from: see corrections.corrections_for)."""

    item_id: str = Field(min_length=1)
    turn: int = Field(0, ge=0)
    question: str
    golden: str | None = None
    response_a: str
    response_b: str | None = None
    category_a: Category | None = None
    category_b: Category | None = None
    preference: Preference | None = None
    reason: str
    cause: Cause | None = None

    @model_validator(mode="after")
    def _labelled(self) -> Correction:
        if self.category_a is None and self.category_b is None and self.preference is None:
            raise ValueError("a correction gives at least one right label (category_a, category_b or preference)")
        if self.response_b is None and (self.category_b is not None or self.preference is not None):
            raise ValueError("category_b and preference need a response_b")
        if "\n" in self.reason.strip():
            raise ValueError("a correction's reason is one line")
        return self


class Rubric(_Strict):
    """A versioned grading rubric. `content_hash` identifies the exact text a verdict used."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    kind: Literal["video_qa", "mcq"]
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    title: str
    summary: str
    changelog: list[Change] = Field(min_length=1)
    task_types: list[TaskType] = []
    golden_response: str | None = None
    categories: list[CategoryDef] = []
    error_messages: ErrorMessages | None = None
    preference: PreferenceSection | None = None
    flags: list[Flag] = []
    domains: list[Domain] = []
    special_cases: list[SpecialCase] = []
    integrity_topics: list[IntegrityTopic] = []
    answer_format: str | None = None  # mcq: how a reply must name its option
    corrections: list[Correction] = []  # corrected examples (framejudge align)

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        if self.changelog[0].version != self.version:
            raise ValueError(
                f"the newest changelog entry is {self.changelog[0].version} but the rubric "
                f"version is {self.version}"
            )
        if self.kind == "video_qa":
            names = [c.name for c in self.categories]
            if sorted(names, key=str) != sorted(Category, key=str):
                raise ValueError(
                    "a video_qa rubric defines each of the five categories exactly once, got "
                    + ", ".join(n.value for n in names)
                )
            if self.preference is None or self.error_messages is None:
                raise ValueError("a video_qa rubric needs preference and error_messages sections")
        elif self.corrections:
            raise ValueError("corrected examples are for video_qa rubrics")
        units = [(c.item_id, c.turn) for c in self.corrections]
        twice = next((u for u in units if units.count(u) > 1), None)
        if twice is not None:
            raise ValueError(f"item {twice[0]} turn {twice[1]} is corrected twice")
        return self

    @property
    def content_hash(self) -> str:
        # a rubric without corrections hashes as it did before they existed (written verdicts resume)
        data = self.model_dump(mode="json", exclude=set() if self.corrections else {"corrections"})
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def category(self, name: Category) -> CategoryDef:
        return next(c for c in self.categories if c.name == name)

    def criterion(self, criterion_id: str) -> Criterion:
        assert self.preference is not None
        return next(c for c in self.preference.criteria if c.id == criterion_id)

    def judgement_problems(self, judgement: Judgement, responses: dict[str, str | None]) -> list[str]:
        """Every way a judgement breaks this rubric's own rules (its tie convention, criterion ids and
        error strings): what Judgement's validation adds when this rubric is in its context."""
        from .rules import rubric_problems  # rules reads the rubric's sections: built on this module

        return rubric_problems(judgement, self, responses)
