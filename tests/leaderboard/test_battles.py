"""Battles graded by the reference judge through the ordinary pipeline and runner: the outcomes
read back from the verdicts, compare's counts and flipped turns, and a resumed leaderboard run."""

from __future__ import annotations

import asyncio
import json
from math import comb
from pathlib import Path

import pytest

from framejudge.judge import Grader, ReferenceJudge, read_records
from framejudge.judge.batch import latest
from framejudge.leaderboard.compare import compare
from framejudge.leaderboard.inputs import load_lineup
from framejudge.leaderboard.plan import BATTLE_KEY, model_pairs, outcomes, plan_battles
from framejudge.leaderboard.stats import build_board
from framejudge.rubrics import get_rubric
from framejudge.runner import run_batch
from framejudge.runner.resume import plan_resume
from framejudge.schema import GradeOptions, JudgeError, Verdict
from tests.leaderboard.lineups import examples, model_file, responses_file
from tests.test_cli_outputs import cli, refused



def three_models(bundled_examples: Path, folder: Path) -> Path:
    """The bundled items with three models: alpha gives response_a, beta response_b (none where
    there is no B), gamma refuses everything."""
    rows = examples(bundled_examples)
    return responses_file(folder / "answers.jsonl", rows, {
        "alpha": lambda i, k, t: t["response_a"], "beta": lambda i, k, t: t.get("response_b"),
        "gamma": lambda i, k, t: "I'm sorry, but I can't help with that request."})


def grade(plan, out: Path, media_root: Path) -> list:
    grader = Grader(ReferenceJudge(), get_rubric("video-qa"), GradeOptions(swap=True), media_root=media_root)
    asyncio.run(run_batch(grader, plan.items, out, plan=plan.restrict(plan_resume(grader, plan.items, out))))
    return read_records(out)


def test_outcomes_follow_the_verdicts_of_real_battles(bundled_examples, tmp_path):
    answers = three_models(bundled_examples, tmp_path)
    rows = [json.loads(line) for line in answers.read_text().splitlines()]
    rows[0]["id"], rows[0]["video"] = "no-clip", "videos/absent.mp4"  # a judge error: the clip is missing
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lineup = load_lineup([answers])
    plan = plan_battles(lineup, model_pairs(lineup.models, all_pairs=True), seed=2)
    records = grade(plan, tmp_path / "battles.jsonl", bundled_examples.parent)
    assert len(records) == plan.size == 13 + 12 + 12  # beta has no answer to one turn
    results = outcomes(records, plan)
    assert len(results) == plan.size
    verdicts, errors = latest(records)
    by_id = {b.id: b for b in plan.battles}
    for o in results:
        (b, k), = [(b, k) for b in plan.battles for k in b.graded
                   if b.source.id == o.item_id and b.turns[k] == o.turn and {o.model_a, o.model_b} == {b.model_a, b.model_b}]
        assert (o.model_a, o.model_b) == (b.model_a, b.model_b)
        turn = lineup.items[[it.id for it in lineup.items].index(o.item_id)].turns[o.turn]
        assert (o.length_a, o.length_b) == (len(turn.responses[o.model_a]), len(turn.responses[o.model_b]))
        assert o.video == b.source.video and o.domain == b.source.domain and o.task_type == b.source.task_type.value
        record = verdicts.get((b.id, k)) or errors[(b.id, k)]
        assert record.metadata[BATTLE_KEY]["item"] == o.item_id and by_id[record.item_id] is b
        if isinstance(record, JudgeError):
            assert o.error == "bad_input" and o.winner is None and o.item_id == "no-clip"
        else:
            assert o.error is None and o.winner == record.preference.value
            assert (o.category_a, o.category_b) == (record.response_a.category.value, record.response_b.category.value)
            if record.decided_by == "rules":  # error strings on both sides: no judge call, no swap
                assert record.swap is None and o.swap_consistent is None
            else:
                assert o.swap_consistent == record.swap.consistent
            assert BATTLE_KEY not in o.metadata
    assert sum(o.error is not None for o in results) == 3  # the missing clip, in each of the three pairs
    # the second conversation turn keeps its index in the item
    assert {o.turn for o in results if o.item_id == "beach-garden"} == {0, 1}
    # alpha's answers are the good ones of the bundled pairs: it wins most of its battles with beta
    ab = [o for o in results if {o.model_a, o.model_b} == {"alpha", "beta"} and o.error is None]
    alpha_wins = sum(o.winner == ("A" if o.model_a == "alpha" else "B") for o in ab)
    assert alpha_wins > len(ab) / 2
    # a verdict of an older battle under the same id (other answers) is not this battle's outcome
    stale = [r.model_copy(update={"provenance": r.provenance.model_copy(update={"turn_hash": "0" * 64})})
             if isinstance(r, Verdict) else r for r in records]
    assert outcomes(stale, plan) == [o for o in results if o.error is not None]


def hand_count(records: list, new: str) -> dict:
    """gained, lost and flipped turns counted from the verdict records and their battle metadata."""
    gained, lost, flipped = 0, 0, set()
    for r in records:
        if not isinstance(r, Verdict):
            continue
        meta = r.metadata[BATTLE_KEY]
        grades = {meta["model_a"]: r.response_a.category.value, meta["model_b"]: r.response_b.category.value}
        ok_new = grades.pop(new) == "Successful"
        ok_base = next(iter(grades.values())) == "Successful"
        gained += ok_new and not ok_base
        if ok_base and not ok_new:
            lost += 1
            flipped.add((meta["item"], meta["turns"][r.turn]))
    return {"gained": gained, "lost": lost, "flipped": flipped}


def sign_test(b: int, c: int) -> float:
    n = b + c
    return min(1.0, 2 * sum(comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n)


def test_compare_counts_the_flipped_turns_and_the_exact_test(bundled_examples, tmp_path):
    rows = examples(bundled_examples)
    new = model_file(tmp_path / "new.jsonl", rows, lambda i, k, t: t.get("response_b", "I don't know."))
    base = model_file(tmp_path / "base.jsonl", rows, lambda i, k, t: t["response_a"])
    flipped_path, summary = tmp_path / "flipped.jsonl", tmp_path / "cmp.json"
    proc = cli("compare", new, base, "--battles", tmp_path / "cmp.jsonl", "--flipped", flipped_path,
               "--out", summary, "--media-root", bundled_examples.parent)
    assert proc.returncode == 0, proc.stderr
    records = read_records(tmp_path / "cmp.jsonl")
    assert len(records) == 13 and all(isinstance(r, Verdict) for r in records)
    hand = hand_count(records, "new")
    assert hand["lost"] > 2 and hand["gained"] >= 1  # both kinds of discordant turns occur
    result = json.loads(summary.read_text())
    assert (result["gained"], result["lost"]) == (hand["gained"], hand["lost"])
    assert result["p_value"] == pytest.approx(sign_test(hand["gained"], hand["lost"]), rel=1e-9)
    assert f"p = {result['p_value']:.4g}" in proc.stdout
    assert result["wins"] + result["ties_both"] + result["ties_neither"] + result["losses"] == result["turns"] == 13
    flipped = [json.loads(line) for line in flipped_path.read_text().splitlines()]
    assert {(f["item_id"], f["turn"]) for f in flipped} == hand["flipped"]
    f = flipped[0]
    original = next(r for r in rows if r["id"] == f["item_id"])["turns"][f["turn"]]
    assert f["question"] == original["question"] and f["answer_baseline"] == original["response_a"]
    assert f["answer_new"] == original.get("response_b", "I don't know.")
    assert f["category_baseline"] == "Successful" and f["category_new"] != "Successful" and f["rationale_new"]


def test_compare_library_from_records(bundled_examples, tmp_path):
    rows = examples(bundled_examples)
    lineup = load_lineup([], named=[("v2", model_file(tmp_path / "a.jsonl", rows, lambda i, k, t: t["response_a"])),
                                    ("v1", model_file(tmp_path / "b.jsonl", rows, lambda i, k, t: t["response_a"]))])
    plan = plan_battles(lineup, [("v2", "v1")])
    result = compare(grade(plan, tmp_path / "same.jsonl", bundled_examples.parent), plan, "v2", "v1",
                     rubric=get_rubric("video-qa"))
    # the same answers on both sides: every turn a tie, nothing gained or lost, nothing to test
    assert result.turns == 13 and result.wins == result.losses == 0 and result.ties_both + result.ties_neither == 13
    # Both where the two (same) answers are Successful, Neither where they fail
    verdicts = [r for r in read_records(tmp_path / "same.jsonl") if isinstance(r, Verdict)]
    good = sum(r.response_a.category.value == "Successful" for r in verdicts)
    assert (result.ties_both, result.ties_neither) == (good, 13 - good) and 0 < good < 13
    assert all(r.preference.value == ("Both" if r.response_a.category.value == "Successful" else "Neither")
               for r in verdicts)
    assert result.ties["Both"].label == "both good" and result.ties["Neither"].label == "both bad"
    assert result.gained == result.lost == 0 and result.p_value is None and result.flipped == []


def test_a_resumed_leaderboard_run_repeats_no_battle(bundled_examples, tmp_path):
    answers = three_models(bundled_examples, tmp_path)
    battles = tmp_path / "battles.jsonl"
    args = ["leaderboard", answers, "--battles", battles, "--pairs", "all", "--replicates", 50,
            "--media-root", bundled_examples.parent]
    first = cli(*args, "--budget", 12)
    assert first.returncode == 0, first.stderr
    assert "12 battle(s) of 3 pair(s) of models, 12 to grade" in first.stderr
    assert "model 'beta' (" in first.stderr and "answered 12 of 13 turn(s)" in first.stderr
    assert "progress: done: 12/12 battle(s) (100%), " in first.stderr  # its stderr is a pipe: plain lines
    lines = battles.read_text().splitlines()
    assert len(lines) == 12
    again = cli(*args, "--budget", 12)
    assert again.returncode == first.returncode, again.stderr
    assert "0 to grade, 12 already graded" in again.stderr
    assert battles.read_text().splitlines() == lines
    more = cli(*args, "--budget", 20)
    assert "20 battle(s) of 3 pair(s) of models, 8 to grade, 12 already graded" in more.stderr
    grown = battles.read_text().splitlines()
    assert len(grown) == 20 and grown[:12] == lines
    ids = [(json.loads(x)["item_id"], json.loads(x)["turn"]) for x in grown]
    assert len(set(ids)) == 20
    assert "alpha" in again.stdout and "gamma" in again.stdout
    assert "judge biases on this run: position consistency" in again.stdout and "the longer answer won" in again.stdout
    page = tmp_path / "board.html"
    shown = cli(*args, "--budget", 20, "--html", page, "--out", tmp_path / "board.json")
    assert shown.returncode == 0 and "<html" in page.read_text() and json.loads((tmp_path / "board.json").read_text())["models"]
    # the tie columns in the rubric's words
    board = json.loads((tmp_path / "board.json").read_text())
    assert board["rubric"] == "video-qa 1.1.0"
    assert {k: v["label"] for k, v in board["ties"].items()} == {"Both": "both good", "Neither": "both bad"}
    # the tie columns in the rubric's words (the terminal table may fold its header; the page does not)
    assert "both good" in page.read_text() and "both bad" in page.read_text()
    assert "ties: both good</th>" in page.read_text() and "ties: both bad</th>" in page.read_text()


def test_leaderboard_refuses_bad_arguments(bundled_examples, tmp_path):
    answers = three_models(bundled_examples, tmp_path)
    battles = tmp_path / "b.jsonl"
    refused(cli("leaderboard", "--battles", battles), "name the models' items files")
    refused(cli("leaderboard", answers, "--battles", battles, "--model", "x"), "--model x: give NAME=FILE")
    refused(cli("leaderboard", answers, "--battles", battles, "--baseline", "delta"),
            "baseline 'delta' is not one of the models (alpha, beta, gamma)")
    refused(cli("leaderboard", answers, "--battles", answers), "would overwrite an input")
    refused(cli("leaderboard", answers, "--battles", battles, "--budget", 0), "leaves nothing to grade")
    one = model_file(tmp_path / "solo.jsonl", examples(bundled_examples), lambda i, k, t: t["response_a"])
    refused(cli("leaderboard", one, "--battles", battles), "at least two")
    refused(cli("compare", one, answers, "--battles", battles), f"{answers}: gives the answers of several models")
    assert not battles.exists()


# One question per row: the golden response, an honest answer (right and plain), a padded one (the
# honest answer and unrelated codes after it) and a shotgun (every candidate, the right one among them).
GAMING = [
    ("How many legs does a spider have?", "Spiders have eight legs.", "Eight legs.",
     "Eight legs. Reference codes: 17, 42, 99.", "Six, seven, eight or nine legs."),
    ("When was this bridge built?", "It was built in 1937.", "It was built in 1937.",
     "It was built in 1937. Reference codes: 17, 42, 99.", "1935, 1936, 1937, 1938 or 1939."),
    ("What time does the bakery close?", "It closes at 6 PM.", "It closes at 6 PM.",
     "It closes at 6 PM. Ticket 4471, aisle 12, code 9.", "It closes at 5, 6 or 7 PM."),
    ("What year was this painted?", "It was painted in 1889.", "In 1889.",
     "In 1889. Catalogue numbers 17, 42 and 99.", "In 1887, 1888, 1889, 1890 or 1891."),
    ("How many people are waiting?", "Four people are waiting in the queue.", "Four people are waiting.",
     "Four people are waiting. Reference codes: 17, 42, 99.", "Three, four or five people are waiting."),
    ("How much does a coffee cost here?", "A coffee costs $3.50.", "A coffee costs $3.50.",
     "A coffee costs $3.50. Codes 17, 42, 99.", "It costs $3, $3.50 or $4."),
]


def test_padded_and_shotgun_models_do_not_rank_above_an_honest_one(tmp_path):
    """The leaderboard of three models graded by the reference judge through the real battle plan,
    pipeline (both orders) and board: the honest model's right, plain answers against a model that
    pads them with unrelated codes and one that lists every candidate. Helpfulness counts only
    details that bear on the question, so neither gamed model wins a battle against the honest one,
    whatever category the shotgun's answers get."""
    items = [{"id": f"g{i}", "turns": [{"question": q, "golden": g}]} for i, (q, g, *_) in enumerate(GAMING)]
    answers = responses_file(tmp_path / "answers.jsonl", items, {
        "honest": lambda i, k, t: GAMING[i][2], "padded": lambda i, k, t: GAMING[i][3],
        "shotgun": lambda i, k, t: GAMING[i][4]})
    lineup = load_lineup([answers])
    plan = plan_battles(lineup, model_pairs(lineup.models, all_pairs=True), seed=0, baseline="honest")
    records = grade(plan, tmp_path / "battles.jsonl", tmp_path)
    assert all(isinstance(r, Verdict) for r in records) and len(records) == 3 * len(GAMING)
    results = outcomes(records, plan)
    assert all(o.swap_consistent for o in results)  # both orders agreed on every battle
    board = build_board(results, baseline="honest", replicates=200, seed=0, rubric=get_rubric("video-qa"))
    rows = {r.model: r for r in board.models}
    for gamed in ("padded", "shotgun"):
        vs = rows[gamed].vs_baseline
        assert vs.wins == 0 and vs.losses >= 1, (gamed, vs)
        assert vs.win_rate.estimate < 0.5
        assert rows[gamed].strength.estimate < rows["honest"].strength.estimate
    assert rows["honest"].rank == 1 and board.models[0].model == "honest"
    # and the padded answers lose on the criteria, not on their category: all three models' answers
    # to these questions are right
    padded = [o for o in results if {o.model_a, o.model_b} == {"honest", "padded"}]
    assert all(o.category_a == o.category_b == "Successful" for o in padded)


def test_a_board_on_one_item_prints_and_draws_its_page(tmp_path):
    # one item: one bootstrap cluster, every replicate the same, each strength's interval one value
    # (the replicates' fits round apart from the point fit); alpha and gamma answer alike and tie
    from tests.leaderboard.lineups import plain_items

    answers = responses_file(tmp_path / "answers.jsonl", plain_items(1), {
        "alpha": lambda i, k, t: f"The number {i}.", "beta": lambda i, k, t: f"The number {i + 1}.",
        "gamma": lambda i, k, t: f"The number {i}."})
    page, out = tmp_path / "board.html", tmp_path / "board.json"
    proc = cli("leaderboard", answers, "--pairs", "all", "--battles", tmp_path / "battles.jsonl", "--replicates", 20,
               "--html", page, "--out", out)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert 'id="strength-plot"' in page.read_text()
    rows = {m["model"]: m for m in json.loads(out.read_text())["models"]}
    assert all(m["strength"]["low"] <= m["strength"]["estimate"] <= m["strength"]["high"] for m in rows.values())
    assert rows["alpha"]["rank"] == rows["gamma"]["rank"]


def test_a_slice_key_the_battles_cannot_have_is_refused_before_grading(tmp_path):
    from tests.leaderboard.lineups import plain_items

    answers = responses_file(tmp_path / "answers.jsonl", plain_items(2), {
        "alpha": lambda i, k, t: f"The number {i}.", "beta": lambda i, k, t: f"The number {i + 1}."})
    for by, words in ((["lang"], ("--by: no battle has a field 'lang' (domain, task_type, or a metadata field: "
                                  "source)")), (["domain", "domain"], "--by: 'domain' is given twice")):
        proc = cli("leaderboard", answers, "--battles", tmp_path / "battles.jsonl",
                   *[a for key in by for a in ("--by", key)])
        refused(proc, words)
        assert not (tmp_path / "battles.jsonl").exists()  # nothing graded
