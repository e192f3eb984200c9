"""A reviewer's decision on a unit, made the same way from the page's form and from the API."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
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
    unit_version: str = Field(min_length=1, max_length=64,
                              description="the unit's version as the reviewer saw it (GET .../unit gives it; the "
                                          "page's form carries it): a decision on a unit that has changed since "
                                          "(another decision on it, a reviewer removed) is refused with 409")
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


class StaleDecision(DecisionError):
    """A decision made on a version of the unit that is no longer the unit's (the message says what changed)."""

    code = "stale_decision"


def unit_version(unit: Unit, unit_decisions: Sequence[ReviewDecision], removed: Collection[str] = ()) -> str:
    """What a reviewer is shown of a unit, as a short digest: the item (the turn and the conversation
    before it), the judge's verdict or error, each annotator's labels, and the decisions on it
    (skips aside: the page shows none), each marked as counted or by a reviewer since `removed`.
    Any change to what the unit page shows changes it; a decision made on the page carries it."""
    shown = {
        "unit": [unit.item_id, unit.turn],
        "item": unit.item.model_dump(mode="json") if unit.item is not None else None,
        "verdict": unit.verdict.model_dump(mode="json") if unit.verdict is not None else None,
        "error": unit.error.model_dump(mode="json") if unit.error is not None else None,
        "humans": {a: v.model_dump(mode="json") for a, v in sorted(unit.humans.items())},
        "decisions": [[d.model_dump(mode="json"), d.reviewer in removed] for d in unit_decisions if d.action != "skip"],
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:20]


def check_version(request: DecisionRequest, unit: Unit, unit_decisions: Sequence[ReviewDecision],
                  removed: Collection[str] = ()) -> str:
    """The unit's version, when it is the one the decision was made on; else StaleDecision, saying
    what changed since."""
    now = unit_version(unit, unit_decisions, removed)
    if request.unit_version == now:
        return now
    decided = [d for d in unit_decisions if d.action != "skip"]
    latest = (f"; the latest decision on it is key {decided[-1].reviewer}'s, at "
              f"{decided[-1].decided_at.strftime('%Y-%m-%d %H:%M:%S')} UTC") if decided else ""
    raise StaleDecision(f"item {unit.item_id!r} turn {unit.turn} has changed since it was shown (this decision was "
                        f"made on version {request.unit_version[:64]!r}; the unit now stands at {now!r}{latest}): "
                        "nothing was saved; look at the unit again and decide")


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
                  labels: Sequence[HumanLabel], removed: Collection[str] = (), blind: bool = False) -> ReviewDecision:
    """The decision `request` asks for, made on the unit as it stands: refused (StaleDecision) when
    the unit has changed since the version the reviewer saw, or (DecisionError) when it cannot be
    made. `unit_decisions` are every decision on the unit, `removed` the reviewers among them no
    longer allowed to review the queue (their decisions are kept but do not count)."""
    version = check_version(request, unit, unit_decisions, removed)
    counted = [d for d in unit_decisions if d.reviewer not in removed]
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
                          labels=chosen, replaced=standing(unit, counted, labels), cause=request.cause,
                          note=request.note, flag_rubric=request.flag_rubric, unit_version=version, blind=blind)


def _form_number(text: str) -> int | str:
    """A form's text as a number where it is a plain one; the text as it is otherwise (refused where a
    number is wanted, naming the field)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


def form_turn(form: Mapping[str, str]) -> int:
    """The form's turn, or -1 (no unit) for one that is not a plain number (a form's text may be anything)."""
    turn = _form_number(form.get("turn", "0") or "0")
    return turn if isinstance(turn, int) else -1


def from_form(form: Mapping[str, str]) -> DecisionRequest:
    """The page's form as a DecisionRequest: the chosen decision is the action ('adopt_annotator:h1'
    names the annotator; the Skip button is a skip); empty selects are labels left unset. A form
    with no decision chosen is refused: submitting an untouched unit decides nothing."""
    chosen = "skip" if form.get("skip") else form.get("action", "")
    if not chosen:
        raise DecisionError("no decision chosen: adopt the judge's or an annotator's labels, or set the labels by "
                            "hand, then submit (nothing was saved)")
    action, _, source = chosen.partition(":")
    # a select's text; the page writes a switch's choices as True and False
    values: dict[str, Any] = {f: (text_switch(v) if f in FLAG_FIELDS else v) if (v := form.get(f)) else None
                              for f in LABEL_FIELDS}
    try:
        return DecisionRequest.model_validate({
            "item_id": form.get("item", ""), "turn": _form_number(form.get("turn", "0")),
            "unit_version": form.get("version", ""), "action": action,
            "source": source or None, "labels": values if action == "manual" else None,
            "cause": form.get("cause") or None, "note": form.get("note", ""),
            "flag_rubric": form.get("flag_rubric") in ("on", "true", "1")})
    except ValidationError as exc:
        raise DecisionError(first_problem(exc, "decision")) from None
