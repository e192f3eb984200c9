"""Fit the reference judge's confidence and its default triage thresholds on its development data.

    ./run bench confidence            # fit, write the package files, print the figures
    ./run bench confidence --check    # exit 1 if the package files are not what the fit gives now
    ./run bench confidence --export DIR   # also write the development turns as items and labels
    ./run bench confidence --measure test # the shipped files on a half (or `heldout`: the held-out
                                          # set), as grade --triage default marks it: figures only,
                                          # nothing fitted or written (`fresh`: the fresh set)

The development halves of `bench/judge_eval` (`split.json`'s `dev`, and its `ranking` entry's
`dev` for the ranking pairs; never the test halves) are graded with the reference judge through
the library (`Grader`, the bundled `video-qa` rubric). Per turn and label field it records the
path that decided the field (`Decision.paths`; the error-string rules' own paths for turns they
decide), the similarity margin of a decision by meaning, and whether the label agrees with the
set's (a single response's `also_acceptable` counts as agreeing). `framejudge.judge.rule_confidence.fit`
turns that into the calibration table and the thresholds, written to
`framejudge/judge/data/reference-confidence.json` and `reference-thresholds.json`.

Rerun it whenever the reference judge's rules, its VERSION or the bundled rubric change: the test
suite fails until the shipped files are what this command gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import judge_eval  # noqa: E402

DATA_DIR = ROOT / "framejudge" / "judge" / "data"
SOURCE = ("bench/judge_eval development halves: labelled-singles.jsonl and labelled-pairs.jsonl (split.json dev), "
          "labelled-ranking.jsonl (split.json ranking.dev)")


def dev_rows(half: str = "dev") -> list[tuple[str, judge_eval.Row]]:
    """(the item the row belongs to, the row) for every row of a half (the development half unless
    measuring: nothing is fitted on the test half)."""
    if half in ("heldout", "fresh"):  # measured once the rules are final, never fitted on
        select = judge_eval.select_heldout if half == "heldout" else judge_eval.select_fresh
        singles, pairs, _ = select(judge_eval.DATA, None)
        return [(r.item, r) for r in singles + pairs]
    singles, pairs, _ = judge_eval.select(half, judge_eval.DATA, None)
    _, ranking, _ = judge_eval.select_ranking(half, judge_eval.DATA, None)
    return [(r.item, r) for r in singles + pairs] + [(f"ranking:{r.item}", r) for r in ranking]


def _agrees(row: judge_eval.Row, judgement: Any) -> dict[str, bool]:
    d = row.data
    if not row.pair:
        return {"category_a": judgement.response_a.category.value in {d["label"], *(d.get("also_acceptable") or [])}}
    return {"category_a": judgement.response_a.category.value == d["label_a"],
            "category_b": judgement.response_b.category.value == d["label_b"],
            "preference": judgement.preference is not None and judgement.preference.value == d["preference"]}


def _labels(judgement: Any) -> tuple[Any, ...]:
    return (judgement.response_a.category, judgement.response_b.category if judgement.response_b else None,
            judgement.preference)


async def _graded(rows: list[tuple[str, judge_eval.Row]]) -> list[Any]:
    from framejudge.judge import Grader
    from framejudge.judge.reference import ReferenceJudge
    from framejudge.rubrics import get_rubric

    grader = Grader(ReferenceJudge(), get_rubric("video-qa"))
    turns = [judge_eval.to_item(row) for _, row in rows]
    return await asyncio.gather(*(grader.grade_turn(item, turn) for item, turn in turns))


def gather() -> list[Any]:
    """The development turns as `rule_confidence.Turn`s."""
    from framejudge.judge.reference import ReferenceJudge
    from framejudge.judge.rule_confidence import RULED_PATHS, Turn
    from framejudge.rubrics import get_rubric

    rows = dev_rows()
    verdicts = asyncio.run(_graded(rows))  # as users get them; the sentences embedded in shared passes
    judge, rubric = ReferenceJudge(), get_rubric("video-qa")
    out = []
    for (item_key, row), verdict in zip(rows, verdicts):
        if getattr(verdict, "record", None) != "verdict":
            raise SystemExit(f"error: {row.source}: the reference judge failed: {getattr(verdict, 'message', verdict)}")
        correct = _agrees(row, verdict)
        if verdict.decided_by == "rules":
            out.append(Turn(item_key, {f: RULED_PATHS[f] for f in correct}, correct))
            continue
        item, turn = judge_eval.to_item(row)
        decision = judge.decide_with(rubric, item, turn)  # the paths (its sentences are embedded already)
        if _labels(decision.judgement) != _labels(verdict):
            raise SystemExit(f"error: {row.source}: the judge's decision and the graded verdict differ")
        out.append(Turn(item_key, dict(decision.paths), correct, dict(decision.margins),
                        decision.judgement.deciding_criterion == "category"))
    return out


def fitted() -> tuple[str, str, dict[str, Any]]:
    """(the table's JSON, the thresholds' JSON, the figures) the fit gives now."""
    from framejudge.judge import rule_confidence as rc
    from framejudge.judge.reference import VERSION
    from framejudge.rubrics import get_rubric

    rubric = get_rubric("video-qa")
    table, thresholds, figures = rc.fit(gather(), VERSION, rubric.id, rubric.content_hash, SOURCE)
    return rc.table_json(table), rc.thresholds_json(thresholds), figures


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def report(figures: dict[str, Any]) -> str:
    t = figures["thresholds"]
    lines = [f"prior strength: categories {figures['strengths']['category']:g}, preferences "
             f"{figures['strengths']['preference']:g} (pseudo-units, by leave-one-item-out log loss)",
             "thresholds at target 90 %, delta 0.10: " + ", ".join(
                 f"{f} {'none' if v is None else f'{v:.4f}'}" for f, v in t.items())]
    for name, what in (("shipped", "with the shipped table (what grade --triage default does on these turns)"),
                       ("cross_fitted", "cross-fitted (each item's confidence from a table fitted without it)")):
        tri, rel = figures[name]["triage"], figures[name]["reliability"]
        lines += ["", f"{what}:",
                  f"  turns auto {tri['auto']} of {tri['turns']} ({_pct(tri['auto_share'])}), agreeing with the labels "
                  f"{_pct(tri['auto_agreement'])} (every field; all turns: {_pct(tri['agreement_all'])})"]
        for kind, r in rel.items():
            ece = "n/a" if r["ece"] is None else f"{r['ece']:.3f}"
            brier = "n/a" if r["brier"] is None else f"{r['brier']:.3f}"
            lines.append(f"  {kind}: {r['units']} units, agreement {_pct(r['agreement'])}, mean confidence "
                         f"{_pct(r['mean_confidence'])}, ECE {ece}, Brier {brier}")
    return "\n".join(lines)


def measure(half: str) -> str:
    """What the shipped table and thresholds do on a half, as `grade --triage default` marks it:
    turns auto and their agreement with the labels, and the reliability of the confidence. Figures
    only (no row is printed)."""
    from framejudge.calibration.reliability import calibration_error
    from framejudge.calibration.triage import mark
    from framejudge.judge.rule_confidence import shipped_thresholds

    thresholds = shipped_thresholds()
    if thresholds is None:
        raise SystemExit("error: no shipped thresholds: run ./run bench confidence first")
    rows = dev_rows(half)
    verdicts = asyncio.run(_graded(rows))
    auto, agree, units = 0, 0, {"category": [], "preference": []}
    for (_, row), v in zip(rows, verdicts):
        correct = _agrees(row, v)
        for f, ok in correct.items():
            c = v.confidence.fields.get(f) if v.confidence.informative else None
            if c is not None:
                units["preference" if f == "preference" else "category"].append((c, ok))
        if mark(v, thresholds).decision == "auto":
            auto += 1
            agree += all(correct.values())
    what = {"heldout": "the held-out set", "fresh": "the fresh set"}.get(half, f"{half} half")
    lines = [f"{what} with the shipped thresholds (target {thresholds.target:.0%}, delta {thresholds.delta:g}): "
             f"turns auto {auto} of {len(rows)} ({_pct(auto / len(rows))}), agreeing with the labels "
             f"{_pct(agree / auto if auto else None)} ({auto - agree} auto turns disagree)"]
    for kind, us in units.items():
        ece, brier, _ = calibration_error([c for c, _ in us], [ok for _, ok in us])
        lines.append(f"  {kind}: {len(us)} units, agreement {_pct(sum(ok for _, ok in us) / len(us) if us else None)}, "
                     f"mean confidence {_pct(sum(c for c, _ in us) / len(us) if us else None)}, "
                     f"ECE {'n/a' if ece is None else f'{ece:.3f}'}, Brier {'n/a' if brier is None else f'{brier:.3f}'}")
    return "\n".join(lines)


def export(folder: Path) -> None:
    """The development turns as items.jsonl and labels.jsonl (one item per row), for `framejudge grade`
    and `framejudge calibrate`."""
    from framejudge.schema import HumanLabel

    folder.mkdir(parents=True, exist_ok=True)
    items, labels = [], []
    for item_key, row in dev_rows():
        item, turn = judge_eval.to_item(row)
        item = item.model_copy(update={"metadata": {"item": item_key}})
        items.append(item.model_dump_json(exclude_none=True))
        d = row.data
        values = ({"category_a": d["label"]} if not row.pair else
                  {"category_a": d["label_a"], "category_b": d["label_b"], "preference": d["preference"]})
        labels.append(HumanLabel(item_id=item.id, turn=turn, annotator="label", **values).model_dump_json(
            exclude_none=True))
    (folder / "items.jsonl").write_text("\n".join(items) + "\n", encoding="utf-8")
    (folder / "labels.jsonl").write_text("\n".join(labels) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    from framejudge.judge.rule_confidence import TABLE_FILE, THRESHOLDS_FILE

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the package files differ from the fit")
    ap.add_argument("--export", type=Path, default=None, help="also write the development turns as items and labels here")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    ap.add_argument("--measure", choices=["dev", "test", "heldout", "fresh"], default=None,
                    help="fit nothing: the shipped files on this half (or the held-out or fresh set), figures only")
    args = ap.parse_args(argv)
    if args.measure is not None:
        print(measure(args.measure))
        return 0
    try:
        table, thresholds, figures = fitted()
    except judge_eval.DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = {DATA_DIR / TABLE_FILE: table, DATA_DIR / THRESHOLDS_FILE: thresholds}
    if args.check:
        stale = [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
        if stale:
            print("error: the reference judge's shipped confidence is not what its development data give now ("
                  + ", ".join(p.name for p in stale) + "): refit with ./run bench confidence", file=sys.stderr)
            return 1
        print("the shipped confidence table and thresholds are what the fit gives")
    else:
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        for p, text in files.items():
            p.write_text(text, encoding="utf-8")
        print(f"wrote {', '.join(str(p.relative_to(ROOT)) for p in files)}")
    print(report(figures))
    if args.export is not None:
        export(args.export)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
