"""A reviewer's decision on a unit, made the same way from the page's form and from the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...calibration.adjudication import standing_labels
from ...errors import FramejudgeError
from ...files import first_problem
from ...rubrics.loader import all_rubrics
from ...rubrics.rules import check_labels
from ...schema import (FLAG_FIELDS, LABEL_FIELDS, MAX_TEXT, Cause, Flag, HumanLabel, LabelValues, ReviewDecision, Whole,
                       text_switch)
from .queue import Unit, values_of


class DecisionRequest(BaseModel):
    """What a reviewer decides about one unit (the page's form and POST .../decisions alike)."""

    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1, max_length=200)
    turn: Whole = Field(0, ge=0)
    action: Literal["adopt_judge", "adopt_annotator", "manual", "skip"]
    source: str | None = Field(None, max_length=200, description="the annotator to adopt (adopt_annotator)")
    labels: LabelValues | None = Field(None, description="the labels set by hand (manual)")
    cause: Cause | None = None
    note: str = Field("", max_length=MAX_TEXT)
    flag_rubric: Flag = False

    @model_validator(mode="after")
    def _used(self) -> DecisionRequest:
        """Nothing given is silently dropped: labels go with a manual decision, a source with adopt_annotator."""
        if self.labels is not None and self.action != "manual":
            raise ValueError(f"labels: only a manual decision sets labels (this one is {self.action})")
        if self.source is not None and self.action != "adopt_annotator":
            raise ValueError(f"source: only adopt_annotator names an annotator (this decision is {self.action})")
        if self.source is None and self.action == "adopt_annotator":
            raise ValueError("source: name the annotator whose labels adopt_annotator adopts")
        return self


class DecisionError(FramejudgeError, ValueError):
    """A decision that cannot be made (the message says why)."""

    code = "invalid_decision"


def standing(unit: Unit, unit_decisions: Sequence[ReviewDecision], labels: Sequence[HumanLabel]) -> LabelValues:
    """The unit's gold labels as they stand now (the majority, or the decision in force)."""
    rows = standing_labels([h for h in labels if (h.item_id, h.turn) == unit.key], unit_decisions,
                           unlabelled=[] if unit.humans else [unit.key])
    return values_of(rows[0]) if rows else unit.majority


DEFAULT_RUBRIC = "video-qa"


def rated_fields(unit: Unit) -> list[str]:
    """The fields a person rated or disputed on this unit: those any annotator rated (every field
    in dispute among them), or on a unit no annotator labelled, those its triage sent to review.
    Only these may take the judge's labels as gold: the rest were seen by no one but the judge."""
    if unit.humans:
        return [f for f in LABEL_FIELDS if any(getattr(v, f) is not None for v in unit.humans.values())]
    triage = unit.verdict.triage if unit.verdict is not None else None
    return [f for f in LABEL_FIELDS if triage is not None and f in triage.below]


def rule_problems(unit: Unit, values: LabelValues) -> list[str]:
    """How these labels break the rules a verdict of this unit must keep (by the rubric its verdict
    names, when this server has it, else the default one)."""
    rubric_id = unit.verdict.provenance.rubric_id if unit.verdict is not None else DEFAULT_RUBRIC
    rubric = all_rubrics().get(rubric_id)  # by id only: a verdict's text never names a file read here
    responses: dict[str, str | None] = {}
    if unit.item is not None:
        turn = unit.item.turns[unit.turn]
        responses = {"a": turn.response_a, "b": turn.response_b}
    return check_labels(values, rubric, responses)


def make_decision(unit: Unit, request: DecisionRequest, reviewer: str, unit_decisions: Sequence[ReviewDecision],
                  labels: Sequence[HumanLabel]) -> ReviewDecision:
    if request.action == "adopt_judge":
        if unit.judge is None:
            raise DecisionError("the judge has no verdict for this unit: set the labels by hand")
        fields = rated_fields(unit)
        if not fields:
            raise DecisionError("no annotator rated this unit and its triage put no field in doubt, so nothing "
                                "of the judge's can be adopted: set the labels by hand")
        chosen = LabelValues(**{f: getattr(unit.judge, f) for f in fields})
    elif request.action == "adopt_annotator":
        if request.source not in unit.humans:
            raise DecisionError(f"no annotator {request.source!r} labelled this unit (it has: {', '.join(unit.humans)})")
        chosen = unit.humans[request.source]
    elif request.action == "manual":
        chosen = request.labels or LabelValues()
        if not any(getattr(chosen, f) is not None for f in LABEL_FIELDS):
            raise DecisionError("no label set: set at least one field, or skip the unit")
    else:
        chosen = LabelValues()
    problems = rule_problems(unit, chosen) if request.action != "skip" else []
    if problems:
        whose = {"adopt_judge": "the judge's labels", "adopt_annotator": f"{request.source}'s labels",
                 "manual": "these labels"}[request.action]
        raise DecisionError(f"{whose} break the rubric's rules: " + "; ".join(problems))
    return ReviewDecision(item_id=unit.item_id, turn=unit.turn, reviewer=reviewer, decided_at=datetime.now(timezone.utc),
                          action=request.action, source=request.source if request.action == "adopt_annotator" else None,
                          labels=chosen, replaced=standing(unit, unit_decisions, labels), cause=request.cause,
                          note=request.note, flag_rubric=request.flag_rubric)


def _form_number(text: str) -> int | str:
    """A form's text as a number where it is a plain one; the text as it is otherwise (refused where a
    number is wanted, naming the field)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


def form_turn(form: Mapping[str, str]) -> int:
    """The form's turn, or -1 (no unit) for one that is not a plain number (a form's text may be anything)."""
    turn = _form_number(form.get("turn", "0") or "0")
    return turn if isinstance(turn, int) else -1


def from_form(form: Mapping[str, str]) -> DecisionRequest:
    """The page's form as a DecisionRequest: the pressed button's value is the action
    ('adopt_annotator:h1' names the annotator); empty selects are labels left unset."""
    action, _, source = form.get("action", "").partition(":")
    # a select's text; the page writes a switch's choices as True and False
    values: dict[str, Any] = {f: (text_switch(v) if f in FLAG_FIELDS else v) if (v := form.get(f)) else None
                              for f in LABEL_FIELDS}
    try:
        return DecisionRequest.model_validate({
            "item_id": form.get("item", ""), "turn": _form_number(form.get("turn", "0")), "action": action,
            "source": source or None, "labels": values if action == "manual" else None,
            "cause": form.get("cause") or None, "note": form.get("note", ""),
            "flag_rubric": form.get("flag_rubric") in ("on", "true", "1")})
    except ValidationError as exc:
        raise DecisionError(first_problem(exc, "decision")) from None
