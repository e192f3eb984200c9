"""The review queue of a calibration: its units (an item's turn with human labels), why each is
worth a look, in what order, which of them a filter keeps, and where each stands."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ...calibration.adjudication import majority_values
from ...records import latest
from ...schema import LABEL_FIELDS, HumanLabel, Item, JudgeError, LabelValues, ReviewDecision, Verdict, judge_values

# why a unit is worth reviewing, most important first
REASONS = {
    "judge_vs_majority": "the judge disagrees with the human majority",
    "humans_split": "the annotators disagree",
    "swap_inconsistent": "the judge changed its mind when A and B were swapped",
    "blind_unchanged": "the judge's verdict did not change without the video",
    "low_confidence": "the judge was not sure (its samples, orders or label probabilities disagreed, or the rule "
                      "that decided a field is often wrong)",
    "triage": "the judge's confidence is below the triage threshold",
    "agreed": "judge and annotators agree",
}
State = Literal["to_review", "done", "skipped", "conflicting"]
STATES: tuple[State, ...] = ("to_review", "done", "skipped", "conflicting")


def values_of(label: HumanLabel) -> LabelValues:
    """The label's fields, as checked when the label was read (a HumanLabel is LabelValues with more)."""
    return LabelValues.model_construct(**{name: getattr(label, name) for name in LABEL_FIELDS})


@dataclass
class Unit:
    item_id: str
    turn: int
    humans: dict[str, LabelValues]  # annotator -> labels
    majority: LabelValues
    verdict: Verdict | None
    error: JudgeError | None
    item: Item | None
    metadata: dict[str, Any]
    reasons: list[str] = field(default_factory=list)  # keys of REASONS, most important first
    judge_disagrees: list[str] = field(default_factory=list)  # fields where judge != majority
    humans_disagree: list[str] = field(default_factory=list)  # fields where annotators differ

    @property
    def key(self) -> tuple[str, int]:
        return (self.item_id, self.turn)

    @property
    def judge(self) -> LabelValues | None:
        return judge_values(self.verdict) if self.verdict is not None else None

    @property
    def priority(self) -> int:
        return list(REASONS).index(self.reasons[0])

    def slice_value(self, key: str) -> str | None:
        if key == "task_type":
            value: Any = self.item.task_type.value if self.item else self.metadata.get("task_type")
        else:
            value = self.metadata.get(key)
        return None if value is None else str(value)

    def in_slices(self) -> set[str]:
        """The 'key:value' slices the unit falls in: its task type and its scalar metadata."""
        task_type = self.slice_value("task_type")
        found = {f"task_type:{task_type}"} if task_type else set()
        return found | {f"{k}:{v}" for k, v in self.metadata.items()
                        if k != "task_type" and isinstance(v, (str, int, float, bool))}

    def categories(self) -> set[str]:
        """Every category anyone gave this unit (annotators, majority, judge)."""
        rows = [*self.humans.values(), self.majority, *([self.judge] if self.judge else [])]
        return {c.value for r in rows for c in (r.category_a, r.category_b) if c is not None}


def build_units(labels: Sequence[HumanLabel], records: Sequence[Verdict | JudgeError],
                items: Sequence[Item], to_review: bool = False) -> list[Unit]:
    """One unit per labelled (item, turn) (and with `to_review`, per verdict a triage sent to
    review, labelled or not), in queue order: by the most important reason to look, then by how
    many fields are in dispute, then the judge's doubts first (its lowest field confidence), then by
    item and turn."""
    verdicts, errors = latest(list(records))
    by_id = {it.id: it for it in items}
    grouped: dict[tuple[str, int], list[HumanLabel]] = {}
    if to_review:
        for key, v in verdicts.items():
            if v.triage is not None and v.triage.decision == "to_review":
                grouped[key] = []
    for label in labels:
        grouped.setdefault((label.item_id, label.turn), []).append(label)
    units = []
    for key in sorted(grouped):
        rows = grouped[key]
        verdict = verdicts.get(key)
        item = by_id.get(key[0])
        if item is not None and key[1] >= len(item.turns):
            item = None  # labels of a turn the item does not have: shown as an item not given
        metadata: dict[str, Any] = {}
        for row in rows:
            metadata.update(row.metadata)
        if verdict is not None:
            metadata = {**verdict.metadata, **({"task_type": verdict.task_type.value} if verdict.task_type else {}),
                        **metadata}
        unit = Unit(item_id=key[0], turn=key[1], humans={r.annotator: values_of(r) for r in rows},
                    majority=majority_values(rows), verdict=verdict, error=errors.get(key), item=item,
                    metadata=metadata)
        _diagnose(unit)
        units.append(unit)
    units.sort(key=lambda u: (u.priority, -len(set(u.judge_disagrees) | set(u.humans_disagree)), lowest(u.verdict),
                              u.key))
    return units


def _diagnose(unit: Unit) -> None:
    judge = unit.judge
    for name in LABEL_FIELDS:
        given = [getattr(v, name) for v in unit.humans.values() if getattr(v, name) is not None]
        if len(Counter(given)) > 1:
            unit.humans_disagree.append(name)
        gold = getattr(unit.majority, name)
        if judge is not None and gold is not None and getattr(judge, name) is not None and getattr(judge, name) != gold:
            unit.judge_disagrees.append(name)
    v = unit.verdict
    checks = [("judge_vs_majority", bool(unit.judge_disagrees)), ("humans_split", bool(unit.humans_disagree)),
              ("swap_inconsistent", v is not None and v.swap is not None and not v.swap.consistent),
              ("blind_unchanged", v is not None and v.blind_unchanged is True),
              ("low_confidence", v is not None and (v.sample_agreement is not None and v.sample_agreement < 1
                                                    or unsure(v))),
              ("triage", v is not None and v.triage is not None and v.triage.decision == "to_review")]
    unit.reasons = [name for name, hit in checks if hit] or ["agreed"]


LOW_CONFIDENCE = 0.75


def lowest(verdict: Verdict | None) -> float:
    """The verdict's lowest informative field confidence (1.0 where it has none: no doubt to put first)."""
    c = verdict.confidence if verdict is not None else None
    if c is None or not c.informative or not c.fields:
        return 1.0
    return min(c.fields.values())


def unsure(verdict: Verdict) -> bool:
    """Whether the judge's own confidence in some field of the verdict is below LOW_CONFIDENCE."""
    c = verdict.confidence
    return c is not None and c.informative and any(value < LOW_CONFIDENCE for value in c.fields.values())


def standing_decisions(unit_decisions: Sequence[ReviewDecision]) -> dict[str, ReviewDecision]:
    """Each reviewer's latest decision on a unit (a skip included)."""
    out: dict[str, ReviewDecision] = {}
    for d in unit_decisions:
        out[d.reviewer] = d
    return out


def state_of(unit_decisions: Sequence[ReviewDecision], reviewer: str) -> State:
    """Where a unit stands for this reviewer: decided by someone (done), decided differently by two
    reviewers (conflicting), skipped by this reviewer, or to review."""
    standing = standing_decisions(unit_decisions)
    decided = [d for d in standing.values() if d.action != "skip"]
    if len({d.labels.model_dump_json() for d in decided}) > 1:
        return "conflicting"
    if decided:
        return "done"
    if reviewer in standing:
        return "skipped"
    return "to_review"


@dataclass(frozen=True)
class Filters:
    """What part of the queue is shown: units disputed on a field, involving a category, in a slice
    ('task_type:multi_turn', 'domain:food'), in a state; blind hides the judge and annotators."""

    field: str | None = None
    category: str | None = None
    slice: str | None = None
    state: State | None = None
    blind: bool = False

    def keeps(self, unit: Unit, state: State, with_state: bool = True) -> bool:
        if self.field and self.field not in unit.judge_disagrees + unit.humans_disagree:
            return False
        if self.category and self.category not in unit.categories():
            return False
        if self.slice and self.slice not in unit.in_slices():  # whole: a metadata key may hold a ':'
            return False
        return not (with_state and self.state and state != self.state)

    def query(self) -> dict[str, str]:
        """As query parameters (only those set)."""
        q = {"field": self.field, "category": self.category, "slice": self.slice, "state": self.state,
             "blind": "1" if self.blind else None}
        return {k: v for k, v in q.items() if v}


def slices(units: Sequence[Unit]) -> list[str]:
    """The 'key:value' slices the units fall in (task type and scalar metadata), for the filter menu."""
    found: set[str] = set()
    for u in units:
        found |= u.in_slices()
    return sorted(found)[:200]


def neighbours(units: Sequence[Unit], current: tuple[str, int], filters: Filters,
               states: dict[tuple[str, int], State]) -> tuple[Unit | None, Unit | None, Unit | None]:
    """(previous, next, next to decide): previous and next among the units the filter keeps,
    whatever their state; 'next to decide' is the next one after this that the state filter also
    keeps (Submit & next and Skip go there)."""
    order = {u.key: i for i, u in enumerate(units)}
    at = order.get(current, -1)
    shown = [u for u in units if filters.keeps(u, states[u.key], with_state=False)]
    before = [u for u in shown if order[u.key] < at]
    after = [u for u in shown if order[u.key] > at]
    wanted = filters.state or "to_review"
    following = [u for u in after if states[u.key] == wanted] or [u for u in shown if states[u.key] == wanted
                                                                     and u.key != current]
    return (before[-1] if before else None, after[0] if after else None, following[0] if following else None)
