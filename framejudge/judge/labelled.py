"""Labelled rows (the `bench/judge_eval` format) as framejudge items, and their halves.

A row is one labelled response (`response`, `label`) or pair (`response_a`, `response_b`,
`label_a`, `label_b`, `preference`) to a question (`query`, `golden`), possibly a turn of a
conversation (`turn`, `time`, `earlier`). `to_item` makes the item a row is graded as: no video,
and the clip's `scene` line never given to the judge. `select`, `select_ranking` and
`select_guideline` read a labelled folder's rows and keep one half of its split (or the
guideline's worked examples). Used by `bench/judge_eval.py` and by the metamorphic checks
(`metamorphic.py`), so that both grade a row as the same item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FramejudgeError

CATEGORIES = ["Successful", "Not Successful", "Irrelevant", "Missing", "Error message"]
PREFERENCES = ["A", "B", "Both", "Neither"]


class DataError(FramejudgeError, ValueError):
    """A labelled file that is absent or has a row that cannot be graded."""

    code = "invalid_labelled_data"


@dataclass
class Row:
    data: dict[str, Any]
    pair: bool
    source: str  # file:line

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def item(self) -> str:
        return str(self.data.get("item") or self.data["id"])


def read_rows(path: Path, pair: bool) -> list[Row]:
    if not path.is_file():
        raise DataError(f"{path} is absent")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not JSON ({exc.msg})") from None
        need = ["id", "query"] + (["response_a", "response_b", "label_a", "label_b", "preference"] if pair
                                  else ["response", "label"])
        missing = [k for k in need if k not in data]
        if missing:
            raise DataError(f"{where}: no {', '.join(missing)}")
        for key in ["label_a", "label_b"] if pair else ["label"]:
            if data[key] not in CATEGORIES:
                raise DataError(f"{where}: {key} {data[key]!r} is not one of {CATEGORIES}")
        for extra in data.get("also_acceptable") or []:
            if extra not in CATEGORIES:
                raise DataError(f"{where}: also_acceptable {extra!r} is not one of {CATEGORIES}")
        if pair and data["preference"] not in PREFERENCES:
            raise DataError(f"{where}: preference {data['preference']!r} is not one of {PREFERENCES}")
        if "turn" in data and data["turn"] != len(data.get("earlier") or []):
            raise DataError(f"{where}: turn {data['turn']} but {len(data.get('earlier') or [])} earlier turns")
        rows.append(Row(data, pair, where))
    return rows


def to_item(row: Row):
    """The framejudge item a row is graded as (no video, no scene), and the turn to grade."""
    from ..schema import Item

    d = row.data
    turns: list[dict[str, Any]] = []
    for e in d.get("earlier") or []:
        t = {"time": e["time"], "question": e["question"], "golden": e.get("golden"), "response_a": e["response"]}
        if row.pair:
            t["response_b"] = e.get("response_b", e["response"])
        turns.append(t)
    this: dict[str, Any] = {"question": d["query"], "golden": d.get("golden")}
    if row.pair:
        this.update(response_a=d["response_a"], response_b=d["response_b"])
    else:
        this["response_a"] = d["response"]
    multi = "turn" in d
    if multi:
        this["time"] = d["time"]
    turns.append(this)
    try:
        item = Item(id=row.id, task_type="multi_turn" if multi else "single_turn", turns=turns,
                    expression=d.get("expression", "none"), metadata={"item": row.item})
    except ValueError as exc:
        raise DataError(f"{row.source}: not a gradable item: {exc}") from None
    return item, len(turns) - 1


def _halves(split: dict[str, Any], where: str, rows: list[Row], what: str = "items") -> tuple[set[str], set[str]]:
    dev, test = set(split["dev"]), set(split["test"])
    if dev & test:
        raise DataError(f"{where}: {what} in both halves: {sorted(dev & test)}")
    unsplit = sorted({r.item for r in rows} - dev - test)
    if unsplit:
        raise DataError(f"{where}: {what} in neither half: {unsplit}")
    return dev, test


def _split(data: Path) -> dict[str, Any]:
    path = data / "split.json"
    if not path.is_file():
        raise DataError(f"{path} is absent")
    return json.loads(path.read_text(encoding="utf-8"))


def select(half: str, data: Path, limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    """The single responses and pairs of one half ('dev', 'test' or 'all') of a labelled folder."""
    singles = read_rows(data / "labelled-singles.jsonl", pair=False)
    pairs = read_rows(data / "labelled-pairs.jsonl", pair=True)
    split = _split(data)
    dev, test = _halves(split, str(data / "split.json"), singles + pairs)
    keep = {"dev": dev, "test": test, "all": dev | test}[half]
    singles = [r for r in singles if r.item in keep][:limit]
    pairs = [r for r in pairs if r.item in keep][:limit]
    info = {"set": "labelled", "half": half, "items": len({r.item for r in singles + pairs}),
            "split_seed": split["seed"], "split_date": split["date"]}
    return singles, pairs, info


def select_ranking(half: str, data: Path, limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    """The pairs between two Successful answers (`labelled-ranking.jsonl`), by their own split."""
    pairs = read_rows(data / "labelled-ranking.jsonl", pair=True)
    split = _split(data).get("ranking")
    if not split:
        raise DataError(f"{data / 'split.json'}: no split of the ranking pairs (a 'ranking' entry)")
    dev, test = _halves(split, str(data / "split.json"), pairs, "ranking items")
    keep = {"dev": dev, "test": test, "all": dev | test}[half]
    pairs = [r for r in pairs if r.item in keep][:limit]
    info = {"set": "ranking", "half": half, "items": len({r.item for r in pairs}),
            "split_seed": split["seed"], "split_date": split["date"]}
    return [], pairs, info


def select_guideline(shared: Path, limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    """The guideline's worked examples in `<shared>/data/`."""
    folder = shared / "data"
    if not folder.is_dir():
        raise DataError(f"the guideline examples are not here: {folder} is absent (give --shared or set FRAMEJUDGE_SHARED)")
    singles = read_rows(folder / "guideline-examples.jsonl", pair=False)[:limit]
    pairs = read_rows(folder / "guideline-pairs.jsonl", pair=True)[:limit]
    return singles, pairs, {"set": "guideline", "half": None, "items": len(singles) + len(pairs)}
