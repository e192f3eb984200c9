"""The answers of several models to the same turns: one items file whose turns carry `responses`
(model name -> answer), or one ordinary items file per model (its answers as response_a), or both.
Every problem names the file and line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import FramejudgeError
from ..files import first_problem, jsonl_objects, read_text
from ..schema import Item, ModelItem, ModelTurn


class LineupError(FramejudgeError, ValueError):
    """Answers of models that cannot be compared; the message names the file and line."""

    code = "invalid_lineup"


@dataclass
class Lineup:
    """The models, and the items with every model's answers merged turn by turn."""

    models: list[str]
    items: list[ModelItem]
    sources: dict[str, str] = field(default_factory=dict)  # model -> the file its answers came from

    @property
    def turns(self) -> int:
        return sum(len(it.turns) for it in self.items)

    def answered(self, model: str) -> int:
        """The turns `model` answered."""
        return sum(t.responses.get(model) is not None for it in self.items for t in it.turns)

    def unanswered(self, model: str) -> list[tuple[str, int]]:
        """(item id, turn) of every turn `model` did not answer."""
        return [(it.id, k) for it in self.items for k, t in enumerate(it.turns) if t.responses.get(model) is None]


def _file_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = jsonl_objects(path, read_text(path, "items", LineupError), LineupError)
    if not rows:
        raise LineupError(f"{path}: no items")
    return rows


def _is_responses_file(rows: list[tuple[int, dict[str, Any]]]) -> bool:
    turns = rows[0][1].get("turns")
    return isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict) and "responses" in turns[0]


def read_model_items(path: Path, name: str | None = None) -> tuple[list[tuple[int, ModelItem]], bool]:
    """(line, item) for each item of one file, and whether it is a responses file (several models
    per turn). An ordinary items file holds the answers of one model, `name` (else the file's stem)."""
    rows = _file_rows(path)
    several = _is_responses_file(rows)
    if several and name is not None:
        raise LineupError(f"{path}: gives the answers of several models (turns with responses); --model NAME=FILE "
                          "names a file of one model's answers (response_a)")
    model = name or path.stem
    out: list[tuple[int, ModelItem]] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        where = f"{path}:{line}"
        try:
            if several:
                item = ModelItem.model_validate(row)
            else:
                plain = Item.model_validate(row)
                if plain.pairwise:
                    raise LineupError(f"{where}: item {plain.id!r} has a response_b: a model's items file holds its "
                                      "own answers as response_a (one file per model), or give every model's answer "
                                      "in a turn's responses")
                item = ModelItem(id=plain.id, video=plain.video, task_type=plain.task_type, domain=plain.domain,
                                 expression=plain.expression, metadata=plain.metadata,
                                 turns=[ModelTurn(time=t.time, question=t.question, golden=t.golden,
                                                  responses={model: t.response_a}) for t in plain.turns])
        except ValidationError as exc:
            hint = ""
            if not several and any(isinstance(t, dict) and "responses" in t for t in row.get("turns") or []):
                hint = " (the file's first item gives response_a: every item of a file gives its answers the same way)"
            elif several and "responses" in first_problem(exc):
                hint = " (the file's first item gives responses: every item of a file gives its answers the same way)"
            raise LineupError(f"{where}: {first_problem(exc, 'item')}{hint}") from None
        if item.video and "://" in item.video:
            raise LineupError(f"{where}: video URLs are not fetched; give a local path ({item.video})")
        if item.id in seen:
            raise LineupError(f"{where}: duplicate item id {item.id!r} (first on line {seen[item.id]})")
        seen[item.id] = line
        out.append((line, item))
    return out, several


def _shown(text: str | None) -> str:
    if text is None:
        return "none"
    return repr(text if len(text) <= 60 else text[:57] + "...")


def check_same_item(into: ModelItem, into_where: str, other: ModelItem, where: str) -> None:
    """Refuse an item read again (from another file, another battle item) whose video, task type,
    domain or expression differs from its first reading."""
    for what in ("video", "task_type", "domain", "expression"):
        a, b = getattr(into, what), getattr(other, what)
        if a != b:
            a, b = getattr(a, "value", a), getattr(b, "value", b)
            raise LineupError(f"{where}: item {other.id!r}: the {what.replace('_', ' ')} differs from {into_where} "
                              f"({_shown(b)} here, {_shown(a)} there); the models must answer the same items")


def check_same_turn(k: int, mine: ModelTurn, into_where: str, theirs: ModelTurn, item_id: str, where: str,
                    answered_at: dict[str, str] | None = None) -> None:
    """Refuse turn `k` of an item read again whose question, golden response or time differs
    from its first reading, or where a model's answer does (`answered_at`: where each model's
    answer was read, if not at `into_where`)."""
    for what in ("question", "golden", "time"):
        a, b = getattr(mine, what), getattr(theirs, what)
        if a != b:
            shown = (_shown(b), _shown(a)) if what != "time" else (b, a)
            raise LineupError(f"{where}: item {item_id!r} turn {k}: the {what} differs from {into_where} "
                              f"({shown[0]} here, {shown[1]} there); the models must answer the same turns")
    for model, b in theirs.responses.items():
        a = mine.responses.get(model)
        if a is not None and b is not None and a != b:
            there = (answered_at or {}).get(model, into_where)
            raise LineupError(f"{where}: item {item_id!r} turn {k}: model {model!r}'s answer differs from {there} "
                              f"({_shown(b)} here, {_shown(a)} there); a model gives one answer a turn")


def _merge(into: ModelItem, into_where: str, other: ModelItem, where: str) -> None:
    """Add `other`'s answers to `into` (the same item read from another file), refusing what differs."""
    check_same_item(into, into_where, other, where)
    for k, (mine, theirs) in enumerate(zip(into.turns, other.turns)):
        check_same_turn(k, mine, into_where, theirs, other.id, where)
        mine.responses.update(theirs.responses)
    into.turns.extend(other.turns[len(into.turns):])  # a file with the longer conversation adds its turns


def load_lineup(paths: Sequence[str | os.PathLike[str]] = (),
                named: Sequence[tuple[str, str | os.PathLike[str]]] = ()) -> Lineup:
    """The models' answers from `paths` (responses files, or one model's items file each, named by
    its stem) and `named` ((model, file): one model's items file), in that order. Items are matched by id and
    turns by position; the questions, golden responses, times and videos must agree. A model
    that did not answer some turns is compared on the turns it answered."""
    names = {Path(p).absolute(): name for name, p in named}
    sources: list[tuple[Path, str | None]] = [(Path(p), names.pop(Path(p).absolute(), None)) for p in paths]
    sources += [(Path(p), name) for name, p in named if Path(p).absolute() in names]  # named, not in paths
    by_model: dict[str, str] = {}
    merged: dict[str, ModelItem] = {}
    first_where: dict[str, str] = {}
    for path, name in sources:
        items, several = read_model_items(path, name)
        models = list(dict.fromkeys(m for _, it in items for t in it.turns for m in t.responses))
        if not several:
            models = [name or path.stem]
        for m in models:
            if m in by_model:
                how = "" if several else " (a file's stem names its model): name them apart with --model NAME=FILE"
                raise LineupError(f"{path}: model {m!r} is also given by {by_model[m]}{how}")
            by_model[m] = str(path)
        for line, item in items:
            where = f"{path}:{line}"
            if item.id not in merged:
                merged[item.id] = item
                first_where[item.id] = where
            else:
                _merge(merged[item.id], first_where[item.id], item, where)
    if len(by_model) < 2:
        given = ", ".join(f"{m!r} from {src}" for m, src in by_model.items()) or "none"
        raise LineupError(f"comparing models needs the answers of at least two; got {len(by_model)} ({given})")
    lineup = Lineup(models=list(by_model), items=list(merged.values()), sources=by_model)
    for m in lineup.models:
        if not lineup.answered(m):
            raise LineupError(f"{by_model[m]}: model {m!r} answered no turn")
    return lineup
