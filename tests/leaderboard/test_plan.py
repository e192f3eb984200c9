"""Battle plans: pairs against a baseline or all pairs, a budget spread evenly over the pairs and
the items, balanced slots, battle items that are ordinary pairwise items."""

from __future__ import annotations

from collections import Counter

import pytest

from framejudge.leaderboard.inputs import load_lineup
from framejudge.leaderboard.plan import BATTLE_KEY, PlanError, battle, battle_id, model_pairs, plan_battles
from framejudge.runner.resume import ResumePlan
from framejudge.schema import Item
from tests.leaderboard.lineups import plain_items, responses_file

MODELS = ["m0", "m1", "m2", "m3"]


@pytest.fixture
def lineup(tmp_path):
    answers = {m: (lambda m: lambda i, k, t: f"{m} says {i}")(m) for m in MODELS}
    return load_lineup([responses_file(tmp_path / "answers.jsonl", plain_items(20), answers)])


def test_pairs_against_a_baseline_or_all():
    assert model_pairs(MODELS) == [("m1", "m0"), ("m2", "m0"), ("m3", "m0")]
    assert model_pairs(MODELS, "m2") == [("m0", "m2"), ("m1", "m2"), ("m3", "m2")]
    assert model_pairs(MODELS, all_pairs=True) == [("m0", "m1"), ("m0", "m2"), ("m0", "m3"), ("m1", "m2"),
                                                  ("m1", "m3"), ("m2", "m3")]
    with pytest.raises(PlanError, match="baseline 'm9' is not one of the models"):
        model_pairs(MODELS, "m9")


def test_without_a_budget_every_pair_meets_on_every_turn(lineup):
    plan = plan_battles(lineup, model_pairs(MODELS))
    assert plan.size == plan.possible == 3 * 20
    assert Counter(frozenset((b.model_a, b.model_b)) for b in plan.battles) == {
        frozenset(p): 20 for p in model_pairs(MODELS)}
    b = plan.battles[0]
    assert isinstance(b.item, Item) and b.item.pairwise
    src = b.source
    assert b.item.turns[0].response_a == src.answer(b.model_a, 0)
    assert b.item.turns[0].response_b == src.answer(b.model_b, 0)
    assert b.item.turns[0].question == src.turns[0].question and b.item.turns[0].golden == src.turns[0].golden
    assert b.id == f"{src.id}@{b.model_a}~{b.model_b}"
    assert b.item.metadata == {"source": "synthetic", BATTLE_KEY: {
        "item": src.id, "model_a": b.model_a, "model_b": b.model_b, "turns": [0]}}
    assert b.item.domain == src.domain


def test_a_budget_is_spread_evenly_over_pairs_and_items(lineup):
    pairs = model_pairs(MODELS, all_pairs=True)
    plan = plan_battles(lineup, pairs, budget=33, seed=4)
    assert plan.size == 33 and plan.possible == 120
    per_pair = Counter((b.model_a, b.model_b) if (b.model_a, b.model_b) in pairs else (b.model_b, b.model_a)
                       for b in plan.battles)
    assert sorted(per_pair.values()) == [5, 5, 5, 6, 6, 6]
    per_item = Counter(b.source.id for b in plan.battles)
    assert len(per_item) == 20 and max(per_item.values()) - min(per_item.values()) <= 1
    # more budget than battles: all of them
    assert plan_battles(lineup, pairs, budget=1000).size == 120
    with pytest.raises(PlanError, match="leaves nothing to grade"):
        plan_battles(lineup, pairs, budget=0)


def test_a_pair_with_fewer_turns_gives_its_share_to_the_others(tmp_path):
    answers = {"a": lambda i, k, t: "a", "b": lambda i, k, t: "b", "c": lambda i, k, t: "c" if i < 2 else None}
    lineup = load_lineup([responses_file(tmp_path / "r.jsonl", plain_items(10), answers)])
    plan = plan_battles(lineup, model_pairs(["a", "b", "c"]), budget=12)
    assert Counter(b.model_a if b.model_a != "a" else b.model_b for b in plan.battles) == {"b": 10, "c": 2}


def test_each_model_stands_in_a_and_in_b_equally_often(lineup):
    for pairs, budget in ((model_pairs(MODELS), None), (model_pairs(MODELS, all_pairs=True), 45)):
        plan = plan_battles(lineup, pairs, budget=budget, seed=1)
        for x, y in pairs:
            mine = [b for b in plan.battles if {b.model_a, b.model_b} == {x, y}]
            in_a = Counter(b.model_a for b in mine)
            assert abs(in_a[x] - in_a[y]) <= 1, (x, y, in_a)
        a, b = Counter(b.model_a for b in plan.battles), Counter(b.model_b for b in plan.battles)
        for m in MODELS:
            assert abs(a[m] - b[m]) <= sum(m in p for p in pairs)


def test_plans_are_seeded_and_a_larger_budget_keeps_the_smaller_ones_battles(lineup):
    pairs = model_pairs(MODELS)
    small = plan_battles(lineup, pairs, budget=12, seed=3)
    assert [(b.id, b.graded) for b in small.battles] == [(b.id, b.graded) for b in
                                                         plan_battles(lineup, pairs, budget=12, seed=3).battles]
    assert {b.id for b in small.battles} != {b.id for b in plan_battles(lineup, pairs, budget=12, seed=4).battles}
    large = {b.id: b for b in plan_battles(lineup, pairs, budget=30, seed=3).battles}
    assert all(b.id in large and b.graded <= large[b.id].graded for b in small.battles)


def test_a_multi_turn_battle_keeps_the_turns_both_answered(tmp_path):
    talk = {"id": "talk", "task_type": "multi_turn", "turns": [
        {"time": t, "question": f"question {t}?"} for t in (1.0, 2.0, 3.0)]}
    answers = {"a": lambda i, k, t: f"a{k}", "b": lambda i, k, t: None if k == 1 else f"b{k}"}
    lineup = load_lineup([responses_file(tmp_path / "r.jsonl", [talk], answers)])
    (b,) = plan_battles(lineup, model_pairs(["a", "b"])).battles
    assert b.turns == (0, 2) and b.graded == {0, 1}
    assert [t.question for t in b.item.turns] == ["question 1.0?", "question 3.0?"]
    assert {b.item.turns[1].response_a, b.item.turns[1].response_b} == {"a2", "b2"}
    # a budget of one battle grades one turn of the conversation, the other skipped on resume
    plan = plan_battles(lineup, model_pairs(["a", "b"]), budget=1)
    (one,) = plan.battles
    assert len(one.graded) == 1 and one.item == b.item
    restricted = plan.restrict(ResumePlan(work=[(one.item, set())]))
    assert restricted.work == [(one.item, {0, 1} - one.graded)] and restricted.turns == 1


def test_battle_ids_stay_unambiguous():
    assert battle_id("q1", "gpt", "gemini") == "q1@gpt~gemini"
    odd = battle_id("q1", "a~b", "c")
    assert odd != battle_id("q1", "a", "b~c") and "~" not in odd.rsplit("@", 1)[1]
    long = battle_id("q" * 190, "model-one", "model-two")
    assert len(long) <= 200 and long != battle_id("q" * 190, "model-two", "model-one")


def test_a_battle_refuses_turns_a_model_did_not_answer(tmp_path):
    answers = {"a": lambda i, k, t: "a", "b": lambda i, k, t: None if i == 0 else "b"}
    lineup = load_lineup([responses_file(tmp_path / "r.jsonl", plain_items(2), answers)])
    with pytest.raises(PlanError, match="not answered by both"):
        battle(lineup.items[0], "a", "b", [0])
    none = {"a": lambda i, k, t: "a" if i == 0 else None, "b": lambda i, k, t: "b" if i == 1 else None}
    lineup = load_lineup([responses_file(tmp_path / "s.jsonl", plain_items(2), none)])
    with pytest.raises(PlanError, match="answered no turn in common: do their item ids line up"):
        plan_battles(lineup, model_pairs(["a", "b"]))


def test_metadata_that_would_hide_the_battle_is_refused(tmp_path):
    items = plain_items(2)
    items[1]["metadata"] = {BATTLE_KEY: "mine"}
    lineup = load_lineup([responses_file(tmp_path / "r.jsonl", items, {"a": lambda *_: "a", "b": lambda *_: "b"})])
    with pytest.raises(PlanError, match="item 'q1': its metadata has a field 'battle'"):
        plan_battles(lineup, model_pairs(["a", "b"]))
