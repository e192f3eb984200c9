"""Leaderboard inputs written the two ways: one responses file, or one items file per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def plain_items(n: int, answers: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """n single-turn items without a video, each with a golden response."""
    return [{"id": f"q{i}", "turns": [{"question": f"What number is shown in clip {i}?", "golden": f"The number {i}."}],
             "domain": "even" if i % 2 == 0 else "odd", "metadata": {"source": "synthetic"}} for i in range(n)]


def responses_file(path: Path, items: list[dict[str, Any]], answers: dict[str, Any]) -> Path:
    """`answers`: model -> a function (item index, turn index, turn) -> its answer (None: no answer)."""
    rows = []
    for i, item in enumerate(items):
        row = json.loads(json.dumps(item))
        for k, turn in enumerate(row["turns"]):
            turn.pop("response_a", None)
            turn.pop("response_b", None)
            turn["responses"] = {m: f(i, k, item["turns"][k]) for m, f in answers.items()}
        rows.append(row)
    return write_jsonl(path, rows)


def model_file(path: Path, items: list[dict[str, Any]], answer: Any) -> Path:
    """One model's items file: `answer(i, k, turn)` as each turn's response_a (None: the item's
    turns from that one on are left out; an item with no turn left is left out)."""
    rows = []
    for i, item in enumerate(items):
        row = json.loads(json.dumps(item))
        turns = []
        for k, turn in enumerate(row["turns"]):
            text = answer(i, k, item["turns"][k])
            if text is None:
                break
            turn.pop("response_b", None)
            turn["response_a"] = text
            turns.append(turn)
        if turns:
            row["turns"] = turns
            rows.append(row)
    return write_jsonl(path, rows)


def examples(items_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in items_path.read_text().splitlines() if line.strip()]
