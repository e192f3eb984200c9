"""Aligning a judge from its corrected mistakes (`framejudge align`).

The labelled units are split by whole items (seeded) into an example part and a held-apart
part. Where the judge's verdict on an example unit disagrees with the gold labels, the unit
is a correction; a set of them, chosen round-robin over (gold category, cause) groups within a
token budget, goes into a new version of the rubric. The base and the new rubric then grade the
held-apart units alone, and each is compared with the gold (a paired bootstrap over items), so
the figures are never measured on the examples the new rubric shows.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import tempfile
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from datetime import date
from enum import Enum
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel

from ..calibration.audit import FieldSpec, LabelRow, RunComparison, compare_runs, majority
from ..errors import FramejudgeError
from ..calibration.inputs import judge_rows, video_qa_fields
from ..frame_sampler import sample_frames
from ..judge.base import Judge
from ..judge.batch import errors_by_kind
from ..judge.pipeline import Grader, SampleFn
from ..progress import Progress, Reporter
from ..records import Record, latest, read_records
from ..rubrics.model import Change, Correction, Rubric
from ..rubrics.prompt import CORRECTIONS_HEADING, correction_text, estimate_tokens
from ..runner.local import run_batch
from ..schema import Cause, Category, GradeOptions, HumanLabel, Item, JudgeError, Preference, Standing, Verdict

FIELDS = ("category_a", "category_b", "preference")
GOLD = "gold"
E = TypeVar("E", bound=Enum)


class AlignError(FramejudgeError, ValueError):
    """Labels, items or options that cannot be aligned from; the message says which and why."""

    code = "cannot_align"


class Unit(BaseModel):
    item_id: str
    turn: int = 0


class Gold(BaseModel):
    """A unit's right labels (the adjudicated labels, or the annotators' majority), and why."""

    item_id: str
    turn: int = 0
    category_a: Category | None = None
    category_b: Category | None = None
    preference: Preference | None = None
    standing: Standing | None = None
    cause: Cause | None = None
    note: str = ""

    def values(self) -> dict[str, str]:
        return {f: getattr(self, f).value for f in FIELDS if getattr(self, f) is not None}


class FieldAgreement(BaseModel):
    """Share of held-apart units whose verdict equals the gold on one field, before and after."""

    field: str
    units: int  # held-apart units with a gold label and both verdicts for this field
    before: float | None
    after: float | None


class AlignResult(BaseModel):
    rubric_id: str
    rubric_version: str
    rubric_hash: str
    base_rubric_id: str
    base_rubric_version: str
    base_rubric_hash: str
    labels: str
    labels_sha256: str
    judge: str
    seed: int
    holdout: float
    budget_tokens: int
    example_items: list[str]
    held_apart_items: list[str]
    example_units: list[Unit]
    held_apart_units: list[Unit]
    judge_mistakes: int  # example units whose verdict disagrees with the gold
    unjudged_examples: int  # example units with no verdict (judge errors, or none in --verdicts)
    corrections: list[Unit]  # the units added to the rubric as corrected examples
    correction_tokens: int
    comparison: list[RunComparison]  # base (first) vs aligned (second), held-apart units only
    agreement: list[FieldAgreement]
    judge_errors: dict[str, int] = {}  # turns the judge could not grade in this run's gradings, by kind
    judge_error_examples: dict[str, str] = {}  # each kind's first message (item, turn and what happened)


# ----------------------------------------------------------------------------- gold

def _metadata_enum(label: HumanLabel, key: str, enum: type[E], where: str) -> E | None:
    value = label.metadata.get(key)
    if value in (None, ""):
        return None
    try:
        return enum(value)
    except ValueError:
        known = ", ".join(e.value for e in enum)
        raise AlignError(f"{where}: item {label.item_id} turn {label.turn} has {key} {value!r}; "
                         f"use one of {known}") from None


def gold_labels(labels: Sequence[HumanLabel], where: str = "labels") -> dict[tuple[str, int], Gold]:
    """Each unit's gold: its one row's labels (an adjudicated labels file), or per field the
    majority of its annotators (a plain labels file; a tie gives that field no gold). Units whose
    standing is unresolved, or with no gold on any field, are left out."""
    rows: dict[tuple[str, int], list[HumanLabel]] = {}
    for h in labels:
        rows.setdefault((h.item_id, h.turn), []).append(h)
    out: dict[tuple[str, int], Gold] = {}
    for (item_id, turn), unit in sorted(rows.items()):
        standings = {_metadata_enum(h, "standing", Standing, where) for h in unit} - {None}
        if Standing.unresolved in standings:
            continue
        causes = [c for h in unit if (c := _metadata_enum(h, "cause", Cause, where)) is not None]
        notes = [str(h.metadata["note"]).strip() for h in unit if str(h.metadata.get("note") or "").strip()]
        values = {f: majority([getattr(h, f) for h in unit if getattr(h, f) is not None]) for f in FIELDS}
        if all(v is None for v in values.values()):
            continue
        out[(item_id, turn)] = Gold(item_id=item_id, turn=turn, **values,
                                    standing=next(iter(standings)) if len(standings) == 1 else None,
                                    cause=majority(causes) if causes else None, note=notes[0] if notes else "")
    return out


def gold_rows(gold: Sequence[Gold]) -> list[LabelRow]:
    """The gold as one annotator's label rows (for compare_runs)."""
    return [LabelRow(item_id=g.item_id, turn=g.turn, annotator=GOLD, values=g.values()) for g in gold]


# ----------------------------------------------------------------------------- split

def split_items(item_ids: Sequence[str], holdout: float, seed: int,
                examples_already: Set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(example items, held-apart items): a seeded shuffle of whole items, `holdout` of them held
    apart (at least one on each side). Items the base rubric already shows as corrected examples
    always go to the example part: they cannot measure anything honestly."""
    if not 0 < holdout < 1:
        raise AlignError(f"--holdout {holdout}: the share of items held apart is between 0 and 1 (not inclusive)")
    fixed = sorted(i for i in set(item_ids) if i in examples_already)
    free = sorted(set(item_ids) - set(fixed))
    random.Random(seed).shuffle(free)
    n_held = min(len(free) - (0 if fixed else 1), max(1, round(holdout * len(set(item_ids)))))
    if len(set(item_ids)) < 2 or n_held < 1:
        raise AlignError(f"{len(set(item_ids))} labelled item(s)"
                         + (f", {len(fixed)} of them already corrected examples," if fixed else "")
                         + " are too few to split: align needs at least one item for examples and one held apart")
    return sorted(fixed + free[n_held:]), sorted(free[:n_held])


# ----------------------------------------------------------------------------- corrections

def _label(value: Enum | None) -> str:
    return "none" if value is None else value.value


def disagreement(gold: Gold, verdict: Verdict) -> list[str]:
    """The fields where the verdict differs from the gold (fields without gold do not count)."""
    judged = {"category_a": verdict.response_a.category,
              "category_b": verdict.response_b.category if verdict.response_b else None,
              "preference": verdict.preference}
    return [f for f in FIELDS if getattr(gold, f) is not None and judged[f] != getattr(gold, f)]


def make_correction(item: Item, gold: Gold, verdict: Verdict) -> Correction:
    """The corrected example of one unit: its question and responses, the gold's labels, and a
    one-line reason (the reviewer's note, else what the judge said instead)."""
    turn = item.turns[gold.turn]
    wrong = disagreement(gold, verdict)
    judged = {"category_a": verdict.response_a.category,
              "category_b": verdict.response_b.category if verdict.response_b else None,
              "preference": verdict.preference}
    names = {"category_a": "response A", "category_b": "response B", "preference": "the preference"}
    said = "; ".join(f"{names[f]} is {_label(getattr(gold, f))}, not {_label(judged[f])}" for f in wrong)
    reason = " ".join(gold.note.split()) or said
    if len(reason) > 300:
        reason = reason[:297].rstrip() + "..."
    has_b = turn.response_b is not None
    return Correction(item_id=item.id, turn=gold.turn, question=turn.question, golden=turn.golden,
                      response_a=turn.response_a, response_b=turn.response_b, category_a=gold.category_a,
                      category_b=gold.category_b if has_b else None, preference=gold.preference if has_b else None,
                      reason=reason, cause=gold.cause)


def choose_corrections(candidates: Sequence[Correction], budget_tokens: int) -> list[Correction]:
    """Corrections for coverage: round-robin over (gold category, cause) groups, taking the next
    of each group that still fits the budget (estimated as render_prompt estimates tokens)."""
    groups: dict[tuple[str, str], list[Correction]] = {}
    for c in candidates:
        label = c.category_a or c.category_b or c.preference
        groups.setdefault((_label(label), c.cause.value if c.cause else ""), []).append(c)
    queues = [sorted(g, key=lambda c: (c.item_id, c.turn)) for _, g in sorted(groups.items())]
    left = budget_tokens - estimate_tokens(CORRECTIONS_HEADING)
    chosen: list[Correction] = []
    while any(queues):
        for q in queues:
            while q:
                c = q.pop(0)
                cost = estimate_tokens(correction_text(c))
                if cost <= left:
                    chosen.append(c)
                    left -= cost
                    break
    return chosen


def correction_tokens(corrections: Sequence[Correction]) -> int:
    if not corrections:
        return 0
    return estimate_tokens(CORRECTIONS_HEADING) + sum(estimate_tokens(correction_text(c)) for c in corrections)


# ----------------------------------------------------------------------------- the new rubric

def bump_minor(version: str) -> str:
    major, minor, _ = (int(p) for p in version.split("."))
    return f"{major}.{minor + 1}.0"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def aligned_rubric(base: Rubric, chosen: Sequence[Correction], labels_name: str, labels_sha256: str,
                   judge: str, today: date | None = None, rubric_id: str | None = None) -> Rubric:
    """The next minor version of `base` with `chosen` added to its corrected examples, and a
    changelog entry naming the labels file and its sha256."""
    version = bump_minor(base.version)
    entry = Change(version=version, date=today or date.today(), changes=(
        f"{len(chosen)} corrected example(s) of the {judge} judge's mistakes added, from the labels file "
        f"{labels_name} (sha256 {labels_sha256})" + (f"; {len(base.corrections)} kept from {base.version}"
                                                    if base.corrections else "") + "."))
    data = base.model_dump()
    data.update(id=rubric_id or base.id, version=version, changelog=[entry.model_dump(), *data["changelog"]],
                corrections=[*data["corrections"], *(c.model_dump() for c in chosen)])
    return Rubric.model_validate(data)


def rubric_yaml(rubric: Rubric) -> str:
    """The rubric as a file `--rubric` loads (a rubric file without corrections leaves them out)."""
    data = rubric.model_dump(mode="json", exclude_none=True, exclude=set() if rubric.corrections else {"corrections"})
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


# ----------------------------------------------------------------------------- grading and measuring

async def grade_items(grader: Grader, items: Sequence[Item], concurrency: int = 4,
                      on_line: Callable[[Progress], None] | None = None) -> list[Record]:
    """Records of grading `items` through the runner `framejudge grade` uses (into a temporary file),
    its progress told as `grade` tells it (`on_line`: the lines framejudge.progress logs)."""
    reporter = Reporter(sum(len(it.turns) for it in items), on_line=on_line)
    with tempfile.TemporaryDirectory(prefix="framejudge-align-") as folder:
        out = Path(folder) / "verdicts.jsonl"
        await reporter.watch(run_batch(grader, list(items), out, concurrency=concurrency, on_progress=reporter.update))
        return read_records(out)


def verdict_map(records: Sequence[Record]) -> dict[tuple[str, int], Verdict]:
    return latest(list(records))[0]


def measure(gold: Sequence[Gold], before: dict[tuple[str, int], Verdict], after: dict[tuple[str, int], Verdict],
            replicates: int = 1000, seed: int = 0) -> tuple[list[RunComparison], list[FieldAgreement]]:
    """Each run against the gold on `gold`'s units: Krippendorff's alpha with the paired bootstrap
    interval of the difference (over items), and the plain share of units that agree."""
    fields = [f for f in video_qa_fields() if f.name in FIELDS]
    keys = {(g.item_id, g.turn) for g in gold}
    rows_b = [r for r in judge_rows(list(before.values()))[0] if (r.item_id, r.turn) in keys]
    rows_a = [r for r in judge_rows(list(after.values()))[0] if (r.item_id, r.turn) in keys]
    comparison = compare_runs(gold_rows(gold), rows_b, rows_a, fields, replicates, seed)
    return comparison, _agreement(gold, rows_b, rows_a, fields)


def _agreement(gold: Sequence[Gold], before: Sequence[LabelRow], after: Sequence[LabelRow],
               fields: Sequence[FieldSpec]) -> list[FieldAgreement]:
    b_of = {(r.item_id, r.turn): r.values for r in before}
    a_of = {(r.item_id, r.turn): r.values for r in after}
    out = []
    for spec in fields:
        hits_b = hits_a = n = 0
        for g in gold:
            right = g.values().get(spec.name)
            x = b_of.get((g.item_id, g.turn), {}).get(spec.name)
            y = a_of.get((g.item_id, g.turn), {}).get(spec.name)
            if right is None or x is None or y is None:
                continue
            n += 1
            hits_b += x == right
            hits_a += y == right
        out.append(FieldAgreement(field=spec.name, units=n, before=hits_b / n if n else None,
                                  after=hits_a / n if n else None))
    return out


@dataclass
class Split:
    """The gold split by items, and the items file's items by id."""

    example: list[Gold]
    held_apart: list[Gold]
    example_items: list[str]
    held_apart_items: list[str]


def split_gold(gold: dict[tuple[str, int], Gold], items: dict[str, Item], holdout: float, seed: int,
               base: Rubric, labels_where: str, items_where: str) -> Split:
    """The gold's units that name an item (and a turn) of ITEMS, split by whole items."""
    known = {k: g for k, g in gold.items() if k[0] in items and k[1] < len(items[k[0]].turns)}
    if not known:
        example = next(iter(gold), ("", 0))[0] if gold else None
        raise AlignError(f"{labels_where}: no labelled unit names an item (and turn) of {items_where}"
                         + (f" (the labels name items such as {example!r})" if example else ""))
    ids = sorted({k[0] for k in known})
    example_items, held_items = split_items(ids, holdout, seed, {c.item_id for c in base.corrections})
    ex, held = set(example_items), set(held_items)
    return Split([g for k, g in sorted(known.items()) if k[0] in ex], [g for k, g in sorted(known.items()) if k[0] in held],
                 example_items, held_items)


@dataclass
class Aligned:
    rubric: Rubric
    result: AlignResult
    warnings: list[str]


def align(base: Rubric, labels_path: Path, labels: Sequence[HumanLabel], items: Sequence[Item], judge: Judge,
          judge_spec: str, *, items_where: str = "the items", verdicts: Sequence[Record] | None = None,
          verdicts_where: str = "the verdicts", options: GradeOptions | None = None, media_root: Path | None = None,
          holdout: float = 0.5, seed: int = 0, budget_tokens: int = 1500, replicates: int = 1000,
          rubric_id: str | None = None, today: date | None = None, sample: SampleFn | None = None,
          labels_name: str | None = None, on_line: Callable[[str, Progress], None] | None = None) -> Aligned:
    """Split, find and choose the corrections, make the new rubric, and measure base and new
    rubric on the held-apart units (graded with `judge` through the runner; `sample` decodes the
    frames, as for Grader: in this process by default). `labels_name`: how messages and the
    result name the labels (default: their path; the service names a calibration's labels so,
    never by the file it writes them to). `on_line` is told each grading's progress lines, with
    what is graded: `examples` (base rubric), `held apart, base rubric`, `held apart, aligned rubric`."""
    shown = labels_name or str(labels_path)

    def told(what: str) -> Callable[[Progress], None] | None:
        return None if on_line is None else lambda now: on_line(what, now)

    def grader(rubric: Rubric) -> Grader:
        return Grader(judge, rubric, options, media_root=media_root, sample=sample or sample_frames)

    if budget_tokens < 1:
        raise AlignError(f"--budget-tokens {budget_tokens}: the budget must be at least 1 token")
    if replicates < 1:
        raise AlignError("--replicates must be at least 1")
    by_id = {it.id: it for it in items}
    split = split_gold(gold_labels(labels, shown), by_id, holdout, seed, base, shown, items_where)
    warnings: list[str] = []
    example_items = [by_id[i] for i in split.example_items]
    failed: list[JudgeError] = []  # what this run's gradings could not grade

    def graded(rubric: Rubric, these: list[Item], what: str) -> dict[tuple[str, int], Verdict]:
        verdicts, errors = latest(asyncio.run(grade_items(grader(rubric), these, on_line=told(what))))
        failed.extend(errors.values())
        return verdicts

    if verdicts is None:
        judged = graded(base, example_items, "examples")
    else:
        judged = verdict_map(verdicts)
        other = sorted({v.provenance.rubric_hash for k, v in judged.items() if k[0] in set(split.example_items)}
                       - {base.content_hash})
        if other:
            warnings.append(f"{verdicts_where}: some verdicts were graded with another rubric (hash "
                            f"{', '.join(other)}) than {base.id} {base.version} ({base.content_hash})")
    done = {(c.item_id, c.turn) for c in base.corrections}
    unjudged = [g for g in split.example if (g.item_id, g.turn) not in judged]
    if verdicts is not None and len(unjudged) == len(split.example):
        raise AlignError(f"{verdicts_where}: none of the {len(split.example)} example unit(s) has a verdict "
                         f"(they are units such as item {unjudged[0].item_id!r} turn {unjudged[0].turn})")
    if unjudged:
        warnings.append(f"{len(unjudged)} of {len(split.example)} example unit(s) have no verdict (a judge error, or "
                        f"none in {verdicts_where}); they cannot be corrections")
    mistakes = [make_correction(by_id[g.item_id], g, judged[(g.item_id, g.turn)]) for g in split.example
                if (g.item_id, g.turn) in judged and (g.item_id, g.turn) not in done
                and disagreement(g, judged[(g.item_id, g.turn)])]
    if not mistakes:
        raise AlignError(f"the judge agrees with the gold on every one of the {len(split.example) - len(unjudged)} "
                         "judged example unit(s): there is no mistake to correct (no rubric written)")
    chosen = choose_corrections(mistakes, budget_tokens)
    if not chosen:
        cheapest = min(correction_tokens([c]) for c in mistakes)
        raise AlignError(f"--budget-tokens {budget_tokens}: none of the {len(mistakes)} corrected example(s) fits "
                         f"(the smallest needs about {cheapest} tokens)")
    sha = file_sha256(labels_path)
    new = aligned_rubric(base, chosen, labels_path.name, sha, judge_spec, today, rubric_id)
    held = [by_id[i] for i in split.held_apart_items]
    before = graded(base, held, "held apart, base rubric")
    after = graded(new, held, "held apart, aligned rubric")
    comparison, agreement = measure(split.held_apart, before, after, replicates, seed)
    by_kind, examples = errors_by_kind(failed)
    unit = lambda g: Unit(item_id=g.item_id, turn=g.turn)  # noqa: E731
    result = AlignResult(
        rubric_id=new.id, rubric_version=new.version, rubric_hash=new.content_hash, base_rubric_id=base.id,
        base_rubric_version=base.version, base_rubric_hash=base.content_hash, labels=shown,
        labels_sha256=sha, judge=judge_spec, seed=seed, holdout=holdout,
        budget_tokens=budget_tokens, example_items=split.example_items, held_apart_items=split.held_apart_items,
        example_units=[unit(g) for g in split.example], held_apart_units=[unit(g) for g in split.held_apart],
        judge_mistakes=len(mistakes), unjudged_examples=len(unjudged),
        corrections=[Unit(item_id=c.item_id, turn=c.turn) for c in chosen], correction_tokens=correction_tokens(chosen),
        comparison=comparison, agreement=agreement, judge_errors=by_kind,
        judge_error_examples=examples)
    return Aligned(new, result, warnings)
