"""Battle plans: which two models meet on which turns, each meeting an ordinary pairwise item
graded by the usual pipeline, and the outcomes read back from the verdicts.

A battle item is one of the lineup's items with one model's answers as response A and the other's
as response B, on the turns both answered; its id is `<item>@<model A>~<model B>` (a hash in place
of the models where that would be ambiguous or too long), and its metadata records the item, the
models and the turns under the key `battle`. Turn by turn, one battle is one graded turn.

A budget keeps at most N battles: shared evenly among the pairs (a pair with fewer turns gives
its share to the others) and, within a pair, spread over the items: one turn of each item (in a
seeded order) before a second turn of any, each pair starting at another place in that order.
Which model answers as A is decided along the same order, so that each model stands in A and in
B equally often (within one turn per pair); a larger budget keeps every battle of a smaller one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import FramejudgeError
from ..files import first_problem
from ..records import Record, latest, turn_hash
from ..schema import MAX_TURNS, GradeOptions, Item, JudgeError, ModelItem, ModelName, ModelTurn, TaskType
from .inputs import Lineup, LineupError, check_same_item, check_same_turn
from .outcomes import BattleOutcome

if TYPE_CHECKING:
    from ..runner.resume import ResumePlan

BATTLE_KEY = "battle"  # the metadata key of a battle item that says what it is
MAX_ID = 200


class PlanError(FramejudgeError, ValueError):
    """A battle plan that cannot be made (an unknown baseline, models with no turn in common), or
    battle items read back that are not one plan's battles."""

    code = "invalid_battle_plan"


class BattleMeta(BaseModel):
    """A battle item's metadata `battle`: the original item, the two models (A's answers are the
    item's response_a, B's its response_b) and the original turn of each of the item's turns."""

    model_config = ConfigDict(extra="forbid", strict=True)

    item: str = Field(min_length=1, max_length=200, description="the original item's id")
    model_a: ModelName
    model_b: ModelName
    turns: list[Annotated[int, Field(ge=0, lt=MAX_TURNS)]] = Field(
        min_length=1, max_length=MAX_TURNS, description="the original turn of each turn, in the order asked")

    @model_validator(mode="after")
    def _two_models_in_order(self) -> BattleMeta:
        if self.model_a == self.model_b:
            raise ValueError(f"model_a and model_b are both {self.model_a!r}: a battle is between two models")
        if any(b <= a for a, b in zip(self.turns, self.turns[1:])):
            raise ValueError(f"turns {self.turns}: the original turns in the order they were asked, each once")
        return self


@dataclass(frozen=True)
class Battle:
    """One battle item: `item` is graded; its turn k is turn `turns[k]` of the lineup's item
    `source`; `graded` are the item's turns this plan grades (a budget may leave some out)."""

    item: Item
    source: ModelItem
    model_a: str
    model_b: str
    turns: tuple[int, ...]
    graded: frozenset[int]

    @property
    def id(self) -> str:
        return self.item.id


@dataclass
class BattlePlan:
    battles: list[Battle]
    pairs: list[tuple[str, str]]
    baseline: str | None  # the model the others are compared with (all pairs: the one the table reads from)
    possible: int  # battles without a budget

    @property
    def items(self) -> list[Item]:
        return [b.item for b in self.battles]

    @property
    def size(self) -> int:
        """Battles (graded turns) in the plan."""
        return sum(len(b.graded) for b in self.battles)

    def restrict(self, resume: ResumePlan) -> ResumePlan:
        """A resume plan of these battle items that also skips the turns this plan leaves out."""
        graded = {b.id: b.graded for b in self.battles}
        work = []
        for item, skip in resume.work:
            skip = skip | {t for t in range(len(item.turns)) if t not in graded[item.id]}
            if len(skip) < len(item.turns):
                work.append((item, skip))
        return replace(resume, work=work)


def model_pairs(models: Sequence[str], baseline: str | None = None, all_pairs: bool = False) -> list[tuple[str, str]]:
    """Every model against the baseline (default: the first model), or every pair."""
    if baseline is not None and baseline not in models:
        raise PlanError(f"baseline {baseline!r} is not one of the models ({', '.join(models)})")
    if all_pairs:
        return list(itertools.combinations(models, 2))
    baseline = models[0] if baseline is None else baseline
    return [(m, baseline) for m in models if m != baseline]


def battle_id(item_id: str, model_a: str, model_b: str) -> str:
    """`<item>@<A>~<B>`; where a model's name holds @ or ~, or that is too long, a hash of the
    three stands for the models (the plain form always has a ~ after its last @, the hashed never)."""
    plain = f"{item_id}@{model_a}~{model_b}"
    if len(plain) <= MAX_ID and not any(c in m for m in (model_a, model_b) for c in "@~"):
        return plain
    digest = hashlib.sha256(json.dumps([item_id, model_a, model_b]).encode()).hexdigest()[:20]
    return f"{item_id[:MAX_ID - 21]}@{digest}"


def _shares(total: int, room: list[int], rng: random.Random) -> list[int]:
    """`total` split as evenly as the room of each share allows (extra ones to seeded shares)."""
    shares = [0] * len(room)
    left = min(total, sum(room))
    while left:
        open_ = [i for i in range(len(room)) if shares[i] < room[i]]
        each = left // len(open_)
        if each:
            for i in open_:
                add = min(each, room[i] - shares[i])
                shares[i] += add
                left -= add
        else:
            for i in rng.sample(open_, left):
                shares[i] += 1
            left = 0
    return shares


def plan_battles(lineup: Lineup, pairs: Sequence[tuple[str, str]], budget: int | None = None,
                 seed: int = 0, baseline: str | None = None) -> BattlePlan:
    """The battles of `pairs` over the lineup's turns both models answered, at most `budget`."""
    if budget is not None and budget < 1:
        raise PlanError(f"a budget of {budget} battles leaves nothing to grade: give at least 1")
    for it in lineup.items:
        if BATTLE_KEY in it.metadata:
            raise PlanError(f"item {it.id!r}: its metadata has a field {BATTLE_KEY!r}, which battle items use to "
                            "say which models met: rename it")
    rng = random.Random(seed)
    order = list(range(len(lineup.items)))
    rng.shuffle(order)
    turn_order = {i: rng.sample(range(len(lineup.items[i].turns)), len(lineup.items[i].turns)) for i in order}
    # a pair's candidates: the r-th turn of each item (in the seeded order), r = 0, 1, ...
    rounds = max(len(it.turns) for it in lineup.items)
    candidates: list[list[tuple[int, int]]] = []
    for a, b in pairs:
        seq = [(i, turn_order[i][r]) for r in range(rounds) for i in order
               if r < len(turn_order[i]) and _both(lineup.items[i], turn_order[i][r], a, b)]
        if not seq:
            raise PlanError(f"models {a!r} ({lineup.sources.get(a)}) and {b!r} ({lineup.sources.get(b)}) answered "
                            "no turn in common: do their item ids line up?")
        start = round(len(candidates) * len(seq) / len(pairs))  # pairs start at other places in the order
        candidates.append(seq[start:] + seq[:start])
    possible = sum(len(seq) for seq in candidates)
    shares = [len(seq) for seq in candidates] if budget is None else \
        _shares(budget, [len(seq) for seq in candidates], random.Random(seed + 1))
    battles: list[Battle] = []
    for (x, y), seq, share in zip(pairs, candidates, shares):
        battles += _pair_battles(lineup, x, y, seq, share, random.Random(f"{seed}:{x}:{y}"))
    return BattlePlan(battles=battles, pairs=list(pairs), baseline=baseline, possible=possible)


def _both(item: ModelItem, turn: int, a: str, b: str) -> bool:
    return item.answer(a, turn) is not None and item.answer(b, turn) is not None


def _pair_battles(lineup: Lineup, x: str, y: str, seq: list[tuple[int, int]], share: int,
                  rng: random.Random) -> list[Battle]:
    """The battles of one pair: the first `share` candidates; an item's slots are chosen when it
    first comes up, for the model with fewer turns in A so far (a seeded coin on a tie)."""
    in_a = {x: 0, y: 0}
    first: dict[int, str] = {}  # item index -> the model answering as A
    chosen: dict[int, set[int]] = {}
    for i, t in seq[:share]:
        if i not in first:
            first[i] = x if in_a[x] < in_a[y] or (in_a[x] == in_a[y] and rng.random() < 0.5) else y
        in_a[first[i]] += 1
        chosen.setdefault(i, set()).add(t)
    out = []
    for i in chosen:  # in the order the items first came up
        a = first[i]
        out.append(battle(lineup.items[i], a, y if a == x else x, chosen[i]))
    return out


def battle(source: ModelItem, model_a: str, model_b: str, graded: Iterable[int] | None = None) -> Battle:
    """The battle item of `source` between two models, on the turns both answered; `graded`: the
    source's turns it grades (default: all of those)."""
    turns = tuple(k for k in range(len(source.turns)) if _both(source, k, model_a, model_b))
    graded = set(turns if graded is None else graded)
    if not graded <= set(turns):
        raise PlanError(f"item {source.id!r}: turns {sorted(graded - set(turns))} were not answered by both "
                        f"{model_a!r} and {model_b!r}")
    meta = {**source.metadata, BATTLE_KEY: {"item": source.id, "model_a": model_a, "model_b": model_b,
                                            "turns": list(turns)}}
    try:
        # every turn in `turns` was answered by both
        answers_a = {k: said for k in turns if (said := source.answer(model_a, k)) is not None}
        answers_b = {k: said for k in turns if (said := source.answer(model_b, k)) is not None}
        item = source.item(answers_a, answers_b, battle_id(source.id, model_a, model_b), meta)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise PlanError(f"item {source.id!r}: its battle of {model_a!r} and {model_b!r} is not an item "
                        f"({'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')})") from None
    return Battle(item=item, source=source, model_a=model_a, model_b=model_b, turns=turns,
                  graded=frozenset(k for k, t in enumerate(turns) if t in graded))


def standing(records: Iterable[Record], battles: BattlePlan | Iterable[Battle]) -> Iterator[tuple[Battle, int, Record]]:
    """(battle, its turn, the standing record) for each graded battle turn that has one: the last
    verdict, else the judge error. A verdict of other content (an older battle under the same id)
    is left out, as is a turn not graded yet."""
    plan = battles.battles if isinstance(battles, BattlePlan) else list(battles)
    verdicts, errors = latest(list(records))
    for b in plan:
        for k in sorted(b.graded):
            record: Record | None = verdicts.get((b.id, k)) or errors.get((b.id, k))
            if record is None or (record.provenance is not None and record.provenance.turn_hash is not None
                                  and record.provenance.turn_hash != turn_hash(b.item, k)):
                continue
            yield b, k, record


def outcomes(records: Iterable[Record], battles: BattlePlan | Iterable[Battle]) -> list[BattleOutcome]:
    """One outcome per graded battle turn that has a record (see `standing`): the verdict's
    preference and categories, or the judge error's kind."""
    return [_outcome(b, k, record) for b, k, record in standing(records, battles)]


def _outcome(b: Battle, k: int, record: Record) -> BattleOutcome:
    turn = b.item.turns[k]
    src = b.source
    meta: dict[str, Any] = dict(src.metadata)
    common: dict[str, Any] = dict(
        item_id=src.id, turn=b.turns[k], video=src.video, model_a=b.model_a, model_b=b.model_b,
        length_a=len(turn.response_a), length_b=len(turn.response_b or ""), domain=src.domain,
        task_type=src.task_type.value, metadata=meta)
    if isinstance(record, JudgeError):
        return BattleOutcome(**common, error=record.kind.value)
    return BattleOutcome(
        **common, winner=record.preference.value if record.preference else None,
        category_a=record.response_a.category.value,
        category_b=record.response_b.category.value if record.response_b else None,
        swap_consistent=record.swap.consistent if record.swap is not None else None)


def battle_options(options: GradeOptions) -> GradeOptions:
    """How battles are graded: in both orders unless `swap` says otherwise, whatever the judge,
    so that every board measures position consistency. The one default of `framejudge
    leaderboard`, `framejudge compare` and a job of battle items."""
    return options if options.swap is not None else options.model_copy(update={"swap": True})


def check_battle_job(items: Sequence[Item], options: GradeOptions) -> GradeOptions:
    """A job's options, its battle items checked first as a leaderboard reads them back (a
    PlanError naming the item, before anything is graded); a job of battle items only is graded
    as battles are (`battle_options`)."""
    found = [it for it in items if isinstance(it.metadata.get(BATTLE_KEY), dict)]  # those that say they are battles
    if not found:
        return options
    battles_from_items(found)
    return battle_options(options) if len(found) == len(items) else options


def battles_from_items(items: Iterable[Item]) -> list[Battle]:
    """The battles of battle items read back (a job's items, a battles file's items): each names
    its item, models and turns in its metadata; every turn of a battle item is graded. Each battle
    (two models on one turn of an item) is given once, and the copies of an item in several battle
    items agree (video, questions, golden responses, times, and each model's answers); else a
    PlanError naming the battle item."""
    out: list[Battle] = []
    first: dict[str, tuple[ModelItem, str]] = {}  # original item -> its first reading, and where
    # original item -> its turns read so far: the turn, where first read, where each model's answer was
    turns_of: dict[str, dict[int, tuple[ModelTurn, str, dict[str, str]]]] = {}
    met: dict[tuple[str, frozenset[str], int], str] = {}  # (item, the two models, turn) -> battle item
    for item in items:
        where = f"battle item {item.id!r}"
        meta = _battle_meta(item)
        a, b, turns = meta.model_a, meta.model_b, tuple(meta.turns)
        if len(turns) != len(item.turns):
            raise PlanError(f"{where}: its battle names {len(turns)} turn(s) but it has {len(item.turns)}")
        if item.task_type is TaskType.single_turn and turns != (0,):
            raise PlanError(f"{where}: turn {turns[0]} is past the end of item {meta.item!r}, a single_turn item "
                            "(its one turn is turn 0)")
        if not item.pairwise:
            raise PlanError(f"{where}: has no response_b: a battle item holds the answers of {a!r} as response_a "
                            f"and those of {b!r} as response_b")
        try:
            source = ModelItem.model_validate(dict(
                id=meta.item, video=item.video, task_type=item.task_type, domain=item.domain,
                expression=item.expression, metadata={k: v for k, v in item.metadata.items() if k != BATTLE_KEY},
                turns=[{"time": t.time, "question": t.question, "golden": t.golden,
                        "responses": {a: t.response_a, b: t.response_b}} for t in item.turns]))
        except ValidationError as exc:
            raise PlanError(f"{where}: its battle is not an item ({first_problem(exc, 'item')})") from None
        for t in turns:
            pair = (meta.item, frozenset((a, b)), t)
            if pair in met:
                raise PlanError(f"{where}: the battle of {a!r} and {b!r} on item {meta.item!r} turn {t} is also "
                                f"battle item {met[pair]!r}: each battle is given once (it would count twice)")
            met[pair] = item.id
        try:
            if meta.item in first:
                check_same_item(first[meta.item][0], first[meta.item][1], source, where)
            else:
                first[meta.item] = (source, where)
            known = turns_of.setdefault(meta.item, {})
            for k, t in enumerate(turns):
                if t not in known:
                    known[t] = (source.turns[k].model_copy(deep=True), where, {a: where, b: where})
                    continue
                read, read_where, answered_at = known[t]
                check_same_turn(t, read, read_where, source.turns[k], meta.item, where, answered_at)
                read.responses.update(source.turns[k].responses)
                answered_at.update({m: answered_at.get(m, where) for m in (a, b)})
        except LineupError as exc:
            raise PlanError(str(exc)) from None
        out.append(Battle(item=item, source=source, model_a=a, model_b=b, turns=turns,
                          graded=frozenset(range(len(item.turns)))))
    return out


def _battle_meta(item: Item) -> BattleMeta:
    raw = item.metadata.get(BATTLE_KEY)
    if not isinstance(raw, dict):
        raise PlanError(f"item {item.id!r} is not a battle item (its metadata has no {BATTLE_KEY!r} naming "
                        "the item, the two models and the turns)")
    try:
        return BattleMeta.model_validate(raw)
    except ValidationError as exc:
        problem = first_problem(exc, "")  # "field: why", or ": why" for the whole
        raise PlanError(f"battle item {item.id!r}: metadata.{BATTLE_KEY}{'' if problem[0] == ':' else '.'}"
                        f"{problem}") from None
