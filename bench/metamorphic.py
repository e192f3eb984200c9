"""Metamorphic properties of a judge, over variants of the labelled items (any judge spec).

    python bench/metamorphic.py [--judge SPEC] [--api-base URL] [--set dev|test|guideline|all] [--limit N] [--seed S]
        [--property ID ...] [--orders K] [--screen] [--json OUT]

Each property (`framejudge.judge.metamorphic.PROPERTIES`) makes variants of the labelled rows of
`bench/judge_eval/` (a half of its singles, pairs and ranking pairs) or of the guideline's worked
examples in `../shared/data/`: a value of a Successful answer changed, unrelated details or extra
candidates appended, A and B swapped, light paraphrases, bare yes/no answers. The originals and the
variants are graded through the library (`Grader` with the bundled `video-qa` rubric, as
`framejudge grade` does) by the judge named, `reference` by default or a model judge
(`litellm:<model>`, `transformers:<path>`). Reported per property: the variants made, held and
violated, judge errors, the share held and the cases no variant could be made of (by reason).

The violations (the row id, the change, the grades) are printed for the development half and the
guideline examples only; for the test half only the figures, so that no rule is tuned on its misses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "judge_eval"
SHARED = Path(os.environ.get("FRAMEJUDGE_SHARED", ROOT.parent / "shared"))
NAMES = {"dev": "development half", "test": "test half", "guideline": "guideline examples", "screen": "rendered signs"}


def run(judge: Any = "reference", which: str = "dev", limit: int | None = None, seed: int = 0,
        data: Path = DATA, shared: Path = SHARED, concurrency: int = 8, api_base: str | None = None,
        properties: list[str] | None = None, orders: int = 2, screen: bool = False) -> dict[str, Any]:
    """The figures per property (and, for the development half and the guideline examples, the violations)."""
    from framejudge.judge import make_judge
    from framejudge.judge import metamorphic as mm
    from framejudge.rubrics import get_rubric

    cases, notes = mm.load_cases(which, data, shared, limit)
    if screen:  # clips of signs rendered here, for screen-injection
        import tempfile

        cases += mm.screen_cases(Path(tempfile.mkdtemp(prefix="framejudge-signs-")))
    chosen = mm.with_orders([mm.BY_ID[p] for p in properties] if properties else mm.PROPERTIES, orders)
    if isinstance(judge, str):
        judge = make_judge(judge, api_base=api_base)
    rubric = get_rubric("video-qa")
    outcomes = mm.check(judge, cases, chosen, seed=seed, rubric=rubric, concurrency=concurrency)
    return {
        "set": which, "sets": sorted({c.source for c in cases}), "limit": limit, "seed": seed, "notes": notes,
        "cases": {s: sum(c.source == s for c in cases) for s in sorted({c.source for c in cases})},
        "judge": {"backend": judge.backend, "model_id": judge.model_id},
        "rubric": {"id": rubric.id, "version": rubric.version, "hash": rubric.content_hash},
        "properties": [o.summary(lambda source: source in mm.DETAILED | {"screen"}) for o in outcomes],
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def report(result: dict[str, Any]) -> str:
    what = ", ".join(f"{NAMES[s]} ({result['cases'][s]} rows)" for s in result["sets"])
    lines = [f"judge {result['judge']['model_id']}, rubric {result['rubric']['id']} {result['rubric']['version']}, "
             f"seed {result['seed']}: {what or 'no rows'}"]
    lines += [f"note: {n}" for n in result["notes"]]
    lines += ["", f"{'property':<20}{'variants':>9}{'held':>7}{'violated':>10}{'errors':>8}{'held':>9}"]
    for p in result["properties"]:
        lines.append(f"{p['id']:<20}{p['variants']:>9}{p['held']:>7}{p['violated']:>10}{p['judge_errors']:>8}"
                     f"{_pct(p['held_ratio']):>9}")
        if len(p["by_set"]) > 1:
            for s, f in p["by_set"].items():
                lines.append(f"  {NAMES[s]:<18}{f['variants']:>9}{f['held']:>7}{f['violated']:>10}"
                             f"{f['judge_errors']:>8}{_pct(f['held_ratio']):>9}")
    for p in result["properties"]:
        lines += ["", f"{p['id']}: {p['claims']}", f"  variants: {p['variants_made_by']}", f"  must hold: {p['must_hold']}"]
        if p["cases_skipped"]:
            lines.append("  cases without variants: " + "; ".join(f"{n} {why}" for why, n in p["cases_skipped"].items()))
        if p["violations"]:
            lines.append(f"  violations ({len(p['violations'])}): set id [kind/shape] | change | original -> graded | why")
            for v in p["violations"]:
                lines.append(f"    {v['set']} {v['id']} [{v['kind']}/{v['shape']}] | {v['change']} | "
                             f"{v['original'] or '-'} -> {v['graded']} | {v['why']}")
        if p.get("agreement") is not None:
            lines.append(f"  {p['orders']} orders: all agree on {p['cases_all_orders_agree']} of {p['cases_graded']} "
                         f"cases ({_pct(p['agreement'])})")
        if p.get("violations_not_shown"):
            lines.append(f"  ({p['violations_not_shown']} violations in the test half are counted, not shown)")
    if "test" in result["sets"]:
        lines += ["", "(the test half's violations are never printed: only its figures)"]
    return "\n".join(lines)


def mm_properties() -> list[Any]:
    from framejudge.judge import metamorphic as mm

    return mm.PROPERTIES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge", default="reference",
                    help="the judge spec: reference (default), litellm:<model> or transformers:<path>")
    ap.add_argument("--api-base", default=None, help="the API base of a litellm judge")
    ap.add_argument("--set", dest="which", choices=["dev", "test", "guideline", "all"], default="dev",
                    help="the labelled set's development half (default; its singles, pairs and ranking pairs), its "
                         "test half (figures only), the guideline's worked examples in ../shared/data, or all three")
    ap.add_argument("--shared", type=Path, default=SHARED,
                    help="the shared research data folder (default: $FRAMEJUDGE_SHARED, else ../shared)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N single responses and N pairs of each file")
    ap.add_argument("--seed", type=int, default=0, help="the variants' seed (default 0)")
    ap.add_argument("--concurrency", type=int, default=8, help="turns graded at once (default 8)")
    ap.add_argument("--property", dest="properties", action="append", choices=[p.id for p in mm_properties()],
                    help="check only this property (repeatable; default: every one)")
    ap.add_argument("--orders", type=int, default=2,
                    help="category-order: the rubric orders graded (balanced rotations; default 2), with their agreement")
    ap.add_argument("--screen", action="store_true",
                    help="add clips of signs rendered here (PIL, PyAV) for screen-injection")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures (and violations) as JSON here")
    args = ap.parse_args(argv)
    if args.orders < 2:
        print("error: --orders must be at least 2", file=sys.stderr)
        return 2
    for name in ("limit", "concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name} must be at least 1", file=sys.stderr)
            return 2
    from framejudge.judge import JudgeSpecError
    from framejudge.judge.labelled import DataError

    try:
        result = run(args.judge, args.which, args.limit, args.seed, shared=args.shared, concurrency=args.concurrency,
                     api_base=args.api_base, properties=args.properties, orders=args.orders, screen=args.screen)
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
