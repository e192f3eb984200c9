"""How well the reference judge generalises: its agreement with a labelled set it was not written on.

    python bench/judge_eval.py [--half dev|test|all] [--set labelled|ranking|guideline] [--limit N] [--json OUT]
    python bench/judge_eval.py --set heldout|fresh [--check] [--json OUT]
    python bench/judge_eval.py --judge litellm:hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct --api-base http://gpu:8000/v1

`--judge SPEC` measures any judge the same way (the reference judge by default): a model judge on
the same rows, `--concurrency` turns at a time (default 8).

The rows of `bench/judge_eval/` (or, with `--set guideline`, the guideline's own worked examples in
`../shared/data/`) become framejudge items: a single response is a turn with `response_a`, a pair a
turn with both responses, a conversation's row the item's earlier turns and this one, with the times
they were asked. They are graded through the library (`Grader` with the bundled `video-qa` rubric);
the items have no video, and the clip's `scene` line is never given to the judge.

Reported: category agreement over the single responses and Cohen's kappa (framejudge's own, over
the rubric's five categories), and preference agreement over the pairs. The confusion table and the
misses are printed for the development half and the guideline examples only; for the test half and
`all` only the figures, so that rules are never tuned to the test half's misses.

`--set heldout` grades the held-out set (`heldout-singles.jsonl`, `heldout-pairs.jsonl`), written
from the guideline alone after the test half had been looked at: it has no halves, is run once after
the judge's rules are final, and only its figures are ever printed or written, whatever the options.
`--set fresh` grades the fresh set (`fresh-singles.jsonl`, single responses only) the same way:
whole, once, figures only.
`--check` validates a set's rows (read and turned into items) and prints their counts, grading nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "judge_eval"
SHARED = Path(os.environ.get("FRAMEJUDGE_SHARED", ROOT.parent / "shared"))

# the rows and their halves: the library's (the metamorphic checks read them the same way)
from framejudge.judge.labelled import (  # noqa: E402
    CATEGORIES, PREFERENCES, DataError, Row, read_rows, select, select_guideline, select_ranking, to_item)


async def _grade(rows: list[Row], judge: Any, concurrency: int) -> list[Any]:
    from framejudge.judge import Grader
    from framejudge.rubrics import get_rubric

    grader = Grader(judge, get_rubric("video-qa"))
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(row: Row) -> Any:
        item, turn = to_item(row)
        async with gate:
            return await grader.grade_turn(item, turn)

    return list(await asyncio.gather(*(one(row) for row in rows)))


def grade(rows: list[Row], judge: Any = None, concurrency: int = 1) -> list[Any]:
    """One verdict (or judge error) per row, in order (the reference judge unless another is given)."""
    if judge is None:
        from framejudge.judge import ReferenceJudge

        judge = ReferenceJudge()
    return asyncio.run(_grade(rows, judge, concurrency))


def _kappa(pairs: list[tuple[str, str]]) -> float | None:
    from framejudge.calibration import Ratings, cohen_kappa

    ratings = Ratings(units=[{"label": a, "judge": b} for a, b in pairs], categories=CATEGORIES)
    return cohen_kappa(ratings, "label", "judge").value


def _category(record: Any, side: str) -> str | None:
    grade = getattr(record, f"response_{side}", None)
    return grade.category.value if grade is not None else None


def _rationale(record: Any, side: str) -> str:
    grade = getattr(record, f"response_{side}", None)
    return grade.rationale if grade is not None else f"judge error: {getattr(record, 'message', '')}"


def measure(singles: list[Row], pairs: list[Row], details: bool, judge: Any = None,
            concurrency: int = 1) -> dict[str, Any]:
    """The figures; with `details`, also the confusion tables, the misses and every row's grade."""
    s_records, p_records = grade(singles, judge, concurrency), grade(pairs, judge, concurrency)
    s_rows = []
    for row, rec in zip(singles, s_records):
        label, graded = row.data["label"], _category(rec, "a")
        ok = graded is not None and graded in {label, *(row.data.get("also_acceptable") or [])}
        s_rows.append({"id": row.id, "item": row.item, "label": label, "graded": graded, "agrees": ok,
                       "rationale": _rationale(rec, "a")})
    p_rows = []
    for row, rec in zip(pairs, p_records):
        graded_pref = rec.preference.value if getattr(rec, "preference", None) is not None else None
        ga, gb = _category(rec, "a"), _category(rec, "b")
        p_rows.append({"id": row.id, "item": row.item, "preference": row.data["preference"], "graded": graded_pref,
                       "agrees": graded_pref == row.data["preference"],
                       "label_a": row.data["label_a"], "label_b": row.data["label_b"], "graded_a": ga, "graded_b": gb,
                       "rationale_a": _rationale(rec, "a"), "rationale_b": _rationale(rec, "b")})
    # kappa: a grade the guideline's data also accepts counts as the label; a judge error counts against
    scored = [(r["graded"] if r["agrees"] else r["label"], r["graded"]) for r in s_rows if r["graded"] is not None]
    pair_cats = [(r[f"label_{s}"], r[f"graded_{s}"]) for r in p_rows for s in "ab"]
    out: dict[str, Any] = {
        "categories": {
            "responses": len(s_rows),
            "agreement": sum(r["agrees"] for r in s_rows) / len(s_rows) if s_rows else None,
            "cohen_kappa": _kappa(scored) if scored else None,
            "judge_errors": sum(r["graded"] is None for r in s_rows),
        },
        "preferences": {
            "pairs": len(p_rows),
            "agreement": sum(r["agrees"] for r in p_rows) / len(p_rows) if p_rows else None,
            "category_agreement": sum(a == b for a, b in pair_cats) / len(pair_cats) if pair_cats else None,
        },
    }
    if details:
        confusion = {lab: {g: 0 for g in CATEGORIES} for lab in CATEGORIES}
        for r in s_rows:
            if r["graded"] is not None:
                confusion[r["label"]][r["graded"]] += 1
        pref_confusion = {lab: {g: 0 for g in PREFERENCES} for lab in PREFERENCES}
        for r in p_rows:
            if r["graded"] is not None:
                pref_confusion[r["preference"]][r["graded"]] += 1
        out["confusion"] = confusion
        out["preference_confusion"] = pref_confusion
        out["misses"] = [r for r in s_rows if not r["agrees"]]
        out["preference_misses"] = [r for r in p_rows if not r["agrees"]]
        out["graded"] = [{"id": r["id"], "label": r["label"], "graded": r["graded"]} for r in s_rows]
        out["graded_pairs"] = [{"id": r["id"], "preference": r["preference"], "graded": r["graded"]} for r in p_rows]
    return out


HELDOUT_PREFIX = "ho-"
FRESH_PREFIX = "fr-"


def select_heldout(data: Path, limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    """The held-out set: every row, no split; its items are its own (prefixed `ho-`)."""
    singles = read_rows(data / "heldout-singles.jsonl", pair=False)
    pairs = read_rows(data / "heldout-pairs.jsonl", pair=True)
    repeated = [i for i, n in Counter(r.id for r in singles + pairs).items() if n > 1]
    if repeated:
        raise DataError(f"held-out set: {len(repeated)} ids used more than once")
    items = {r.item for r in singles + pairs}
    foreign = sorted(i for i in items if not i.startswith(HELDOUT_PREFIX))
    if foreign:
        raise DataError(f"held-out set: {len(foreign)} items without the {HELDOUT_PREFIX!r} prefix")
    split_path = data / "split.json"
    if split_path.is_file():
        split = json.loads(split_path.read_text(encoding="utf-8"))
        known = set(split.get("dev", [])) | set(split.get("test", []))
        known |= set((split.get("ranking") or {}).get("dev", [])) | set((split.get("ranking") or {}).get("test", []))
        if items & known:
            raise DataError(f"held-out set: {len(items & known)} items are also in the labelled set")
    singles, pairs = singles[:limit], pairs[:limit]
    return singles, pairs, {"set": "heldout", "half": None, "items": len({r.item for r in singles + pairs})}


def select_fresh(data: Path, limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    """The fresh set: single responses only, every row, no split; its items are its own (prefixed `fr-`)."""
    singles = read_rows(data / "fresh-singles.jsonl", pair=False)
    repeated = [i for i, n in Counter(r.id for r in singles).items() if n > 1]
    if repeated:
        raise DataError(f"fresh set: {len(repeated)} ids used more than once")
    foreign = sorted(i for i in {r.item for r in singles} if not i.startswith(FRESH_PREFIX))
    if foreign:
        raise DataError(f"fresh set: {len(foreign)} items without the {FRESH_PREFIX!r} prefix")
    singles = singles[:limit]
    return singles, [], {"set": "fresh", "half": None, "items": len({r.item for r in singles})}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def report(result: dict[str, Any]) -> str:
    c, p = result["categories"], result["preferences"]
    kappa = "n/a" if c["cohen_kappa"] is None else f"{c['cohen_kappa']:.3f}"
    what = ("the guideline's worked examples" if result["set"] == "guideline"
            else "the held-out set" if result["set"] == "heldout"
            else "the fresh set" if result["set"] == "fresh"
            else {"dev": "development half", "test": "test half", "all": "both halves"}[result["half"]]
            + (" of the ranking pairs" if result["set"] == "ranking" else ""))
    lines = [
        f"judge {result['judge']['model_id']}, rubric {result['rubric']['id']} {result['rubric']['version']}: {what}"
        + (f" (split seed {result['split_seed']})" if result.get("split_seed") is not None else ""),
        f"categories:  {c['responses']} responses, agreement {_pct(c['agreement'])}, Cohen's kappa {kappa}"
        + (f", {c['judge_errors']} judge errors" if c["judge_errors"] else ""),
        f"preferences: {p['pairs']} pair{'' if p['pairs'] == 1 else 's'}, agreement {_pct(p['agreement'])} "
        f"(the pairs' categories: {_pct(p['category_agreement'])})",
    ]
    if "confusion" not in result:
        lines.append("(only figures are printed for this set: its misses are not for development)"
                     if result["set"] in ("heldout", "fresh") else
                     "(only figures are printed for this half: its misses are not for development)")
        return "\n".join(lines)
    short = {"Successful": "S", "Not Successful": "NS", "Irrelevant": "Irr", "Missing": "Miss", "Error message": "Err"}
    lines += ["", "confusion (rows: label, columns: graded)", "          " + "".join(f"{short[g]:>6}" for g in CATEGORIES)]
    for lab in CATEGORIES:
        lines.append(f"{short[lab]:<10}" + "".join(f"{result['confusion'][lab][g]:>6}" for g in CATEGORIES))
    lines += ["", "preferences (rows: label, columns: graded)", "          " + "".join(f"{g:>8}" for g in PREFERENCES)]
    for lab in PREFERENCES:
        lines.append(f"{lab:<10}" + "".join(f"{result['preference_confusion'][lab][g]:>8}" for g in PREFERENCES))
    lines += ["", f"misses ({len(result['misses'])}): id | label -> graded | the judge's rationale"]
    for m in result["misses"]:
        lines.append(f"  {m['id']} | {m['label']} -> {m['graded']} | {m['rationale']}")
    lines += ["", f"preference misses ({len(result['preference_misses'])}): id | label -> graded | categories | rationales"]
    for m in result["preference_misses"]:
        lines.append(f"  {m['id']} | {m['preference']} -> {m['graded']} | {m['label_a']}/{m['label_b']} graded "
                     f"{m['graded_a']}/{m['graded_b']} | A: {m['rationale_a']}; B: {m['rationale_b']}")
    return "\n".join(lines)


def select_set(which: str, half: str | None, data: Path, shared: Path,
               limit: int | None) -> tuple[list[Row], list[Row], dict[str, Any]]:
    if which == "guideline":
        return select_guideline(shared, limit)
    if which == "heldout":
        return select_heldout(data, limit)
    if which == "fresh":
        return select_fresh(data, limit)
    if which == "ranking":
        return select_ranking(half or "dev", data, limit)
    return select(half or "dev", data, limit)


def check(which: str, half: str | None = None, data: Path = DATA, shared: Path = SHARED) -> dict[str, Any]:
    """Reads a set's rows and turns each into an item, grading nothing: the counts, or a DataError."""
    singles, pairs, info = select_set(which, half or "all", data, shared, None)
    for row in singles + pairs:
        to_item(row)
    return {**info, "responses": len(singles), "pairs": len(pairs)}


def run(half: str | None = None, which: str = "labelled", limit: int | None = None, data: Path = DATA,
        shared: Path = SHARED, judge: str = "reference", api_base: str | None = None,
        concurrency: int = 8) -> dict[str, Any]:
    """The figures (and, for the development half and the guideline examples, the details), of the
    reference judge or the judge `judge` names."""
    from framejudge.judge import make_judge
    from framejudge.rubrics import get_rubric

    if which in ("heldout", "fresh") and half is not None:
        raise DataError(f"the {'held-out' if which == 'heldout' else 'fresh'} set has no halves: run it whole, without --half")
    singles, pairs, info = select_set(which, half, data, shared, limit)
    half = info["half"]
    # the held-out set gives figures only, always; so do the test half and both halves
    details = which == "guideline" or (which not in ("heldout", "fresh") and half == "dev")
    rubric = get_rubric("video-qa")
    the_judge = make_judge(judge, api_base=api_base)
    result = {**info, "limit": limit, "judge": {"backend": the_judge.backend, "model_id": the_judge.model_id},
              "rubric": {"id": rubric.id, "version": rubric.version, "hash": rubric.content_hash}}
    result.update(measure(singles, pairs, details, the_judge, concurrency if the_judge.spends else 1))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--half", choices=["dev", "test", "all"], default=None,
                    help="which half of the labelled set or the ranking pairs (default dev; the held-out set has none)")
    ap.add_argument("--set", dest="which", choices=["labelled", "ranking", "guideline", "heldout", "fresh"],
                    default="labelled",
                    help="the labelled set (default), its pairs between two Successful answers (ranking), the "
                         "guideline's worked examples in ../shared/data, the held-out set or the fresh set of "
                         "single responses (each run once, figures only)")
    ap.add_argument("--check", action="store_true",
                    help="only read and validate the set's rows and print their counts; grade nothing")
    ap.add_argument("--shared", type=Path, default=SHARED,
                    help="the shared research data folder (default: $FRAMEJUDGE_SHARED, else ../shared)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N single responses and N pairs")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures (and details) as JSON here")
    ap.add_argument("--judge", default="reference",
                    help="the judge spec: reference (default), litellm:<model> or transformers:<path>")
    ap.add_argument("--api-base", default=None, help="the API base of a litellm judge")
    ap.add_argument("--concurrency", type=int, default=8, help="turns graded at once by a model judge (default 8)")
    args = ap.parse_args(argv)
    for name in ("limit", "concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name} must be at least 1", file=sys.stderr)
            return 2
    if args.which in ("heldout", "fresh") and args.half is not None:
        print(f"error: --half does not apply to --set {args.which}: it has no halves and is run whole, once",
              file=sys.stderr)
        return 2
    if args.check:
        try:
            counts = check(args.which, args.half, shared=args.shared)
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"{counts['set']}: {counts['responses']} single responses and {counts['pairs']} pairs over "
              f"{counts['items']} items read and valid (nothing graded)")
        result = counts
    else:
        from framejudge.judge import JudgeSpecError

        try:
            result = run(args.half, args.which, args.limit, shared=args.shared, judge=args.judge,
                         api_base=args.api_base, concurrency=args.concurrency)
        except (DataError, JudgeSpecError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(report(result))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"error: cannot write {args.json}: {exc.strerror}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
