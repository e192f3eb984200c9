"""The labelled set for measuring the judge: its split, its labels against the rubric's rules, and
the measuring command (bench/judge_eval.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from framejudge.judge.reference import grade_response
from framejudge.rubrics import get_rubric
from framejudge.rubrics.rules import error_message_match
from framejudge.schema import Category, Item

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "judge_eval"
SCRIPT = ROOT / "bench" / "judge_eval.py"
CATEGORIES = [c.value for c in Category]
RUBRIC = get_rubric("video-qa")


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


SINGLES, PAIRS = rows("labelled-singles.jsonl"), rows("labelled-pairs.jsonl")
SPLIT = json.loads((DATA / "split.json").read_text(encoding="utf-8"))


def command(tmp_path: Path, *args: str, name: str = "out.json") -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / name
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_the_split_is_by_item_and_each_half_covers_every_category():
    dev, test = set(SPLIT["dev"]), set(SPLIT["test"])
    assert not dev & test
    items = {r["item"] for r in SINGLES + PAIRS}
    assert dev | test == items
    assert abs(len(dev) - len(test)) <= 1  # about half
    for half in (dev, test):
        labels = {r["label"] for r in SINGLES if r["item"] in half}
        assert labels == set(CATEGORIES), labels
        assert any("turn" in r for r in SINGLES if r["item"] in half)  # conversations in both
        assert sum(p["item"] in half for p in PAIRS) >= 20
    assert {"seed", "date", "dev", "test"} <= SPLIT.keys()


def test_the_set_is_large_enough_and_its_ids_are_unique():
    assert len(SINGLES) >= 160 and len(PAIRS) >= 44
    ids = [r["id"] for r in SINGLES + PAIRS]
    assert len(ids) == len(set(ids))
    for r in SINGLES + PAIRS:
        assert r["scene"] and r["query"] and r["why"]


def test_the_labels_keep_the_rubric_rules():
    for r in SINGLES:
        assert r["label"] in CATEGORIES
        # the error strings decide Error message, both ways
        assert bool(error_message_match(r["response"], RUBRIC)) == (r["label"] == "Error message"), r["id"]
        if "turn" in r:
            assert r["turn"] == len(r["earlier"]) and all(e["time"] < r["time"] for e in r["earlier"]), r["id"]
    for p in PAIRS:
        a, b, pref = p["label_a"], p["label_b"], p["preference"]
        if (a == "Successful") != (b == "Successful"):  # a Successful response always wins
            assert pref == ("A" if a == "Successful" else "B"), p["id"]
        if pref == "Both":
            assert a == b, p["id"]


def test_the_command_reproduces_its_figures_on_a_subset(tmp_path):
    proc, first = command(tmp_path, "--half", "dev", "--limit", "16", name="a.json")
    assert proc.returncode == 0, proc.stderr
    again = command(tmp_path, "--half", "dev", "--limit", "16", name="b.json")[1]
    assert first == again
    assert first["categories"]["responses"] == 16 and first["preferences"]["pairs"] == 16
    # the figures from its own graded rows, with scikit-learn's kappa
    graded = first["graded"]
    labels, got = [g["label"] for g in graded], [g["graded"] for g in graded]
    assert first["categories"]["agreement"] == pytest.approx(sum(x == y for x, y in zip(labels, got)) / 16)
    assert first["categories"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(labels, got, labels=CATEGORIES))
    pairs = first["graded_pairs"]
    assert first["preferences"]["agreement"] == pytest.approx(
        sum(p["preference"] == p["graded"] for p in pairs) / 16)
    # and the grades are the reference judge's on the row's question, golden response and response
    dev = set(SPLIT["dev"])
    by_id = {r["id"]: r for r in SINGLES}
    for g in graded:
        r = by_id[g["id"]]
        assert r["item"] in dev
        if "turn" not in r:
            item = Item(id=r["id"], turns=[{"question": r["query"], "golden": r["golden"], "response_a": r["response"]}])
            assert grade_response(RUBRIC, item, 0, r["response"])[0].value == g["graded"], r["id"]
    assert len(first["misses"]) == sum(x != y for x, y in zip(labels, got))
    assert "misses (" in proc.stdout and "confusion" in proc.stdout


def test_the_test_half_gives_figures_only(tmp_path):
    proc, result = command(tmp_path, "--half", "test", "--limit", "12")
    assert proc.returncode == 0, proc.stderr
    assert not {"misses", "graded", "graded_pairs", "confusion", "preference_misses"} & result.keys()
    assert "misses (" not in proc.stdout and "confusion" not in proc.stdout
    test_ids = {r["id"] for r in SINGLES + PAIRS if r["item"] in set(SPLIT["test"])}
    assert not any(i in proc.stdout for i in test_ids)
    assert result["categories"]["responses"] == 12 and result["categories"]["cohen_kappa"] is not None


def test_the_guideline_examples(tmp_path, shared_dir):
    proc, result = command(tmp_path, "--set", "guideline", "--shared", str(shared_dir))
    assert proc.returncode == 0, proc.stderr
    assert result["categories"]["responses"] == 42 and result["preferences"]["pairs"] == 1
    assert "misses (" in proc.stdout


def test_any_judge_is_measured_the_same_way(tmp_path):
    """A model judge (here an OpenAI-compatible server on loopback that grades everything
    Successful and both answers alike) on the same rows: its figures are its own."""
    pytest.importorskip("aiohttp")
    sys.path.insert(0, str(ROOT / "bench"))
    from model_server import ModelServer

    with ModelServer() as server:
        proc, result = command(tmp_path, "--half", "dev", "--limit", "6", "--judge", "litellm:openai/bench",
                               "--api-base", server.base_url, "--concurrency", "3")
        stats = server.stats()
    assert proc.returncode == 0, proc.stderr
    assert result["judge"] == {"backend": "litellm", "model_id": "openai/bench"}
    graded = result["graded"]
    assert len(graded) == 6 and {g["graded"] for g in graded} == {"Successful"}
    labels = [g["label"] for g in graded]
    assert result["categories"]["agreement"] == pytest.approx(labels.count("Successful") / 6)
    assert {p["graded"] for p in result["graded_pairs"]} == {"Both"}
    assert stats["completed"] >= 12 and stats["peak_in_flight"] <= 3


@pytest.mark.parametrize("args,says", [
    (["--limit", "0"], "--limit must be at least 1"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--judge", "nosuch:judge"], "nosuch"),
    (["--set", "guideline", "--shared", "/nonexistent/shared"], "guideline examples are not here"),
])
def test_bad_arguments_are_refused_with_a_reason(tmp_path, args, says):
    proc, result = command(tmp_path, *args)
    assert proc.returncode == 2 and result is None
    assert proc.stderr.startswith("error: ") and says in proc.stderr and "Traceback" not in proc.stderr


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("judge_eval_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_rows_become_items_without_the_scene():
    bench = _bench_module()
    single = next(r for r in SINGLES if "turn" not in r)
    convo = next(r for r in SINGLES if r.get("turn") == 2)
    pair = next(p for p in PAIRS if "turn" in p)
    item, turn = bench.to_item(bench.Row(single, False, "x"))
    assert (item.task_type.value, turn, item.video) == ("single_turn", 0, None)
    assert item.turns[0].response_a == single["response"] and item.turns[0].response_b is None
    item, turn = bench.to_item(bench.Row(convo, False, "x"))
    assert item.task_type.value == "multi_turn" and turn == 2
    assert [t.time for t in item.turns] == [e["time"] for e in convo["earlier"]] + [convo["time"]]
    assert [t.question for t in item.turns[:2]] == [e["question"] for e in convo["earlier"]]
    assert convo["scene"] not in item.model_dump_json()
    item, turn = bench.to_item(bench.Row(pair, True, "x"))
    assert item.turns[turn].response_b == pair["response_b"] and all(t.response_b for t in item.turns)


RANKING = rows("labelled-ranking.jsonl")


def test_the_ranking_pairs_are_between_two_successful_answers_and_split_by_item():
    split = SPLIT["ranking"]
    dev, test = set(split["dev"]), set(split["test"])
    assert not dev & test and dev | test == {r["item"] for r in RANKING}
    assert not (dev | test) & (set(SPLIT["dev"]) | set(SPLIT["test"]))  # items of their own
    assert len(RANKING) >= 30 and len({r["id"] for r in RANKING}) == len(RANKING)
    for r in RANKING:
        assert r["label_a"] == r["label_b"] == "Successful" and r["preference"] in {"A", "B", "Both"}, r["id"]
        assert r["scene"] and r["query"] and r["golden"] and r["why"], r["id"]
    for half in (dev, test):  # every criterion in both halves
        kinds = {r["why"].split(":")[0] for r in RANKING if r["item"] in half}
        assert {"relevancy", "helpfulness", "conciseness"} <= kinds and any(k.startswith("both") for k in kinds)


def test_the_ranking_test_half_gives_figures_only(tmp_path):
    proc, result = command(tmp_path, "--set", "ranking", "--half", "test")
    assert proc.returncode == 0, proc.stderr
    assert result["preferences"]["pairs"] == sum(r["item"] in SPLIT["ranking"]["test"] for r in RANKING)
    assert "misses (" not in proc.stdout and not any(r["id"] in proc.stdout for r in RANKING)


def test_the_test_half_reproduces_the_figures_the_docs_give(tmp_path):
    """The whole test half, with the judge as installed here, against docs/figures.md's "Today's figures"."""
    import re

    from framejudge.judge import eyes, meaning

    if not meaning.available() or eyes.unavailable() is not None:
        pytest.skip("the documented figures are those of the judge with framejudge[eyes] and framejudge[meaning]")
    page = (ROOT / "docs" / "figures.md").read_text(encoding="utf-8")
    found = re.search(r"test half \*\*([\d.]+) % category\s+agreement, Cohen's kappa ([\d.]+), ([\d.]+) % preference "
                      r"agreement\*\*", page)
    assert found, "docs/figures.md states today's test-half figures"
    proc, result = command(tmp_path, "--half", "test")
    assert proc.returncode == 0, proc.stderr
    assert f"{100 * result['categories']['agreement']:.1f}" == found.group(1)
    assert f"{result['categories']['cohen_kappa']:.3f}" == found.group(2)
    assert f"{100 * result['preferences']['agreement']:.1f}" == found.group(3)


# The held-out set: written from the guideline alone and run once, figures only. These tests read its
# rows and check them against the guideline's rules; they never grade them.
HELDOUT_SINGLES, HELDOUT_PAIRS = rows("heldout-singles.jsonl"), rows("heldout-pairs.jsonl")
HELDOUT_COUNTS = {"singles": 179, "pairs": 66, "items": 43,
                  "labels": {"Successful": 71, "Not Successful": 64, "Irrelevant": 17, "Missing": 15,
                             "Error message": 12},
                  "preferences": {"A": 22, "B": 20, "Neither": 18, "Both": 6}}
# the guideline's error messages, word for word, and its suffix after a normal response
GUIDELINE_ERRORS = ["I can't help with that kind of request.", "I can't help with that kind of video/photo or request.",
                    "I can't help with that yet, but I'm learning more everyday!", "I cannot answer that."]
CUT_OFF = "Umm. Actually, I can't continue with this response."


def _is_error_string(text: str) -> bool:
    return text in GUIDELINE_ERRORS or (text.endswith(CUT_OFF) and bool(text[: -len(CUT_OFF)].strip()))


def test_the_heldout_set_parses_and_has_its_documented_counts():
    from collections import Counter

    bench = _bench_module()
    singles = bench.read_rows(DATA / "heldout-singles.jsonl", pair=False)
    pairs = bench.read_rows(DATA / "heldout-pairs.jsonl", pair=True)
    for row in singles + pairs:
        bench.to_item(row)  # every row is a gradable item
    assert len(singles) == HELDOUT_COUNTS["singles"] and len(pairs) == HELDOUT_COUNTS["pairs"]
    assert len({r.item for r in singles + pairs}) == HELDOUT_COUNTS["items"]
    assert Counter(r["label"] for r in HELDOUT_SINGLES) == HELDOUT_COUNTS["labels"]
    assert Counter(r["preference"] for r in HELDOUT_PAIRS) == HELDOUT_COUNTS["preferences"]
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert f"({HELDOUT_COUNTS['singles']} single responses)" in readme
    assert f"({HELDOUT_COUNTS['pairs']} pairs)" in readme
    assert f"over {HELDOUT_COUNTS['items']} further" in readme
    assert ", ".join(f"{n} {label}" for label, n in HELDOUT_COUNTS["labels"].items()) in readme
    for pref in ("Both", "Neither"):
        assert f"{HELDOUT_COUNTS['preferences'][pref]} {pref}" in readme


def test_the_heldout_labels_keep_the_guideline_rules():
    ids = [r["id"] for r in HELDOUT_SINGLES + HELDOUT_PAIRS]
    assert len(ids) == len(set(ids))
    items = {r["item"] for r in HELDOUT_SINGLES + HELDOUT_PAIRS}
    assert all(i.startswith("ho-") for i in items)
    labelled = set(SPLIT["dev"]) | set(SPLIT["test"]) | set(SPLIT["ranking"]["dev"]) | set(SPLIT["ranking"]["test"])
    assert not items & labelled
    for r in HELDOUT_SINGLES + HELDOUT_PAIRS:
        assert r["scene"] and r["query"] and r["why"] and r["class"] and r["domain"], r["id"]
        assert r.get("expression", "other") in {"other", "meme_or_caption"}, r["id"]
        if "turn" in r:
            assert r["turn"] == len(r["earlier"]) and all(e["time"] < r["time"] for e in r["earlier"]), r["id"]
            assert [e["time"] for e in r["earlier"]] == sorted(e["time"] for e in r["earlier"]), r["id"]
    for r in HELDOUT_SINGLES:
        assert r["label"] in CATEGORIES, r["id"]
        assert _is_error_string(r["response"]) == (r["label"] == "Error message"), r["id"]
    for p in HELDOUT_PAIRS:
        a, b, pref = p["label_a"], p["label_b"], p["preference"]
        assert a in CATEGORIES and b in CATEGORIES and pref in {"A", "B", "Both", "Neither"}, p["id"]
        for side in "ab":
            assert _is_error_string(p[f"response_{side}"]) == (p[f"label_{side}"] == "Error message"), p["id"]
        if (a == "Successful") != (b == "Successful"):  # a Successful response always wins
            assert pref == ("A" if a == "Successful" else "B"), p["id"]
        if pref == "Both":  # equally good
            assert a == b == "Successful", p["id"]
        if pref == "Neither":  # both failing, not separated by the criteria
            assert a != "Successful" and b != "Successful", p["id"]
    # the same response to the same question keeps one label, in singles and pairs alike
    seen: dict[tuple, set] = {}
    for r in HELDOUT_SINGLES:
        seen.setdefault((r["item"], r.get("turn"), r["response"]), set()).add(r["label"])
    for p in HELDOUT_PAIRS:
        for side in "ab":
            seen.setdefault((p["item"], p.get("turn"), p[f"response_{side}"]), set()).add(p[f"label_{side}"])
    assert all(len(labels) == 1 for labels in seen.values())
    # what it covers: conversations, items without a golden response, creative requests of both kinds
    assert len({r["item"] for r in HELDOUT_SINGLES if "turn" in r}) >= 3
    assert any(r["golden"] is None for r in HELDOUT_SINGLES) and any(r["golden"] is None for r in HELDOUT_PAIRS)
    assert {r.get("expression") for r in HELDOUT_SINGLES} >= {"other", "meme_or_caption"}


def test_the_heldout_set_has_no_halves_and_checking_it_grades_nothing(tmp_path):
    proc, result = command(tmp_path, "--set", "heldout", "--half", "test")
    assert proc.returncode == 2 and result is None and "--half does not apply" in proc.stderr
    proc, counts = command(tmp_path, "--set", "heldout", "--check")
    assert proc.returncode == 0, proc.stderr
    assert (counts["responses"], counts["pairs"], counts["items"]) == (
        HELDOUT_COUNTS["singles"], HELDOUT_COUNTS["pairs"], HELDOUT_COUNTS["items"])
    assert not {"categories", "preferences", "misses"} & counts.keys() and "nothing graded" in proc.stdout
    assert not any(r["id"] in proc.stdout for r in HELDOUT_SINGLES + HELDOUT_PAIRS)


def test_a_heldout_set_gives_figures_only(tmp_path):
    """On a stand-in held-out set of two rows (the real one is graded once, by hand, not by the suite)."""
    bench = _bench_module()
    single = {"id": "ho-standin-1", "item": "ho-standin", "scene": "a red bus", "query": "What colour is the bus?",
              "golden": "It's red.", "response": "Red.", "label": "Successful", "why": "same colour"}
    pair = {**{k: v for k, v in single.items() if k not in {"response", "label"}}, "id": "ho-standin-p1",
            "response_a": "Red.", "response_b": "Blue.", "label_a": "Successful", "label_b": "Not Successful",
            "preference": "A"}
    (tmp_path / "heldout-singles.jsonl").write_text(json.dumps(single) + "\n", encoding="utf-8")
    (tmp_path / "heldout-pairs.jsonl").write_text(json.dumps(pair) + "\n", encoding="utf-8")
    result = bench.run(None, "heldout", data=tmp_path)
    assert result["set"] == "heldout" and result["half"] is None
    assert result["categories"]["responses"] == 1 and result["preferences"]["pairs"] == 1
    details = {"misses", "graded", "graded_pairs", "confusion", "preference_misses", "preference_confusion"}
    assert not details & result.keys()
    text = bench.report(result)
    assert "held-out set" in text and "confusion" not in text and "misses (" not in text and "ho-standin" not in text
    with pytest.raises(bench.DataError, match="no halves"):
        bench.run("dev", "heldout", data=tmp_path)
    (tmp_path / "heldout-pairs.jsonl").write_text(json.dumps({**pair, "item": "standin"}) + "\n", encoding="utf-8")
    with pytest.raises(bench.DataError, match="prefix"):
        bench.check("heldout", data=tmp_path)


def test_swapping_a_and_b_mirrors_every_labelled_pair():
    """Order-free preference: every labelled pair (both halves of the labelled and the ranking pairs,
    and the guideline's pair where the shared data is here), graded by the reference judge in the
    order given and with A and B swapped, gets the mirrored verdict: the categories swap, the
    preference swaps (A for B; Both and Neither stay), the deciding criterion is the same. Not an
    accuracy figure: the labels are not read. A failure names development rows only and counts the
    test half's."""
    from framejudge.judge.reference import ReferenceJudge
    from tests.conftest import SHARED

    bench = _bench_module()
    test_items = set(SPLIT["test"]) | set(SPLIT["ranking"]["test"])
    sources = [("labelled-pairs.jsonl", PAIRS), ("labelled-ranking.jsonl", RANKING)]
    guideline = SHARED / "data" / "guideline-pairs.jsonl"
    if guideline.is_file():
        sources.append(("guideline-pairs.jsonl", [json.loads(x) for x in guideline.read_text().splitlines() if x.strip()]))
    judge, mirror = ReferenceJudge(read_text=False), {"A": "B", "B": "A", "Both": "Both", "Neither": "Neither"}
    rows, graded = [r for _, some in sources for r in some], []
    for n, r in enumerate(rows):
        item, turn = bench.to_item(bench.Row(r, True, f"row {n}"))
        swapped = item.model_copy(update={"turns": [t.model_copy(update={"response_a": t.response_b,
                                                                         "response_b": t.response_a})
                                                    for t in item.turns]})
        graded += [(item, turn), (swapped, turn)]

    async def decide_all():  # together, so the sentences they need are embedded in shared passes
        return await asyncio.gather(*(judge._decided(RUBRIC, item, turn, ()) for item, turn in graded))

    decided = [d.judgement for d in asyncio.run(decide_all())]
    broken_dev, broken_test = [], 0
    for r, j, k in zip(rows, decided[::2], decided[1::2]):
        same = ((k.response_a.category, k.response_b.category) == (j.response_b.category, j.response_a.category)
                and k.preference.value == mirror[j.preference.value] and k.deciding_criterion == j.deciding_criterion)
        if not same and r.get("item", r["id"]) in test_items:
            broken_test += 1
        elif not same:
            broken_dev.append(r["id"])
    assert len(rows) >= len(PAIRS) + len(RANKING)
    assert not broken_dev and not broken_test, f"not mirrored: {broken_dev} and {broken_test} test-half pair(s)"


FRESH = rows("fresh-singles.jsonl")


def test_the_fresh_set_parses_covers_both_sides_of_each_class_and_has_its_documented_counts(tmp_path):
    from collections import Counter

    bench = _bench_module()
    singles, pairs, info = bench.select_fresh(DATA, None)
    for row in singles:
        bench.to_item(row)
    assert len(singles) == len(FRESH) >= 60 and pairs == [] and info["set"] == "fresh"
    labels = Counter(r["label"] for r in FRESH)
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert f"`fresh-singles.jsonl`: {len(FRESH)} single responses over {info['items']} further items" in readme
    assert f"{labels['Successful']} Successful, {labels['Not Successful']} Not Successful" in readme
    for cls in {r["class"] for r in FRESH}:
        sides = {r["label"] == "Successful" for r in FRESH if r["class"] == cls}
        assert sides == {True, False}, cls
    proc, result = command(tmp_path, "--set", "fresh", "--half", "dev")
    assert proc.returncode == 2 and "--half does not apply to --set fresh" in proc.stderr
