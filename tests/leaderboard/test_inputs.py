"""Leaderboard inputs: a responses file, one items file per model, and what is refused."""

from __future__ import annotations

import json

import pytest

from framejudge.leaderboard.inputs import LineupError, load_lineup
from framejudge.schema import ModelItem
from tests.leaderboard.lineups import model_file, plain_items, responses_file, write_jsonl

CONVERSATION = {"id": "talk", "task_type": "multi_turn", "turns": [
    {"time": 1.0, "question": "What is on the table?", "golden": "A red cup."},
    {"time": 4.0, "question": "And now?", "golden": "A blue plate."},
    {"time": 9.0, "question": "What is left?", "golden": "Nothing."}]}


def answer(text):
    return lambda i, k, turn: f"{text} {i}.{k}"


def test_one_responses_file_gives_every_model(tmp_path):
    items = plain_items(4)
    path = responses_file(tmp_path / "answers.jsonl", items, {
        "alpha": answer("alpha"), "beta": lambda i, k, t: None if i == 2 else f"beta {i}",
        "gamma": answer("gamma")})
    lineup = load_lineup([path])
    assert lineup.models == ["alpha", "beta", "gamma"]
    assert lineup.turns == 4 and lineup.answered("alpha") == 4 and lineup.answered("beta") == 3
    assert lineup.unanswered("beta") == [("q2", 0)]
    assert lineup.items[0].answer("gamma", 0) == "gamma 0.0"
    assert lineup.sources == {m: str(path) for m in ("alpha", "beta", "gamma")}


def test_one_file_per_model_named_by_stem_or_by_option(tmp_path):
    items = plain_items(3) + [CONVERSATION]
    a = model_file(tmp_path / "alpha.jsonl", items, answer("a"))
    # beta stopped after the first turn of the conversation: compared on the turns it has
    b = model_file(tmp_path / "run7.jsonl", items, lambda i, k, t: None if k > 0 else f"b {i}")
    lineup = load_lineup([a], named=[("beta", b)])
    assert lineup.models == ["alpha", "beta"]  # ITEMS, then the named files
    assert load_lineup([b, a], named=[("beta", b)]).models == ["beta", "alpha"]  # a named file among ITEMS
    talk = next(it for it in lineup.items if it.id == "talk")
    assert [t.responses for t in talk.turns] == [{"beta": "b 3", "alpha": "a 3.0"}, {"alpha": "a 3.1"},
                                                 {"alpha": "a 3.2"}]
    assert lineup.answered("beta") == 4 and lineup.turns == 6
    assert lineup.unanswered("beta") == [("talk", 1), ("talk", 2)]
    # the shorter conversation first: the longer file adds the turns
    assert [len(it.turns) for it in load_lineup([b, a]).items] == [1, 1, 1, 3]


def test_an_item_one_model_lacks_is_compared_without_it(tmp_path):
    items = plain_items(3)
    a = model_file(tmp_path / "a.jsonl", items, answer("a"))
    b = model_file(tmp_path / "b.jsonl", items[:2], answer("b"))
    lineup = load_lineup([a, b])
    assert lineup.unanswered("b") == [("q2", 0)] and lineup.unanswered("a") == []


def refused(exc: pytest.ExceptionInfo, *words: str) -> None:
    for w in words:
        assert w in str(exc.value), str(exc.value)


def test_turns_that_differ_between_files_are_refused_by_file_and_line(tmp_path):
    items = plain_items(3)
    a = model_file(tmp_path / "a.jsonl", items, answer("a"))
    changed = json.loads(json.dumps(items))
    changed[1]["turns"][0]["question"] = "What colour is the clip?"
    b = model_file(tmp_path / "b.jsonl", changed, answer("b"))
    with pytest.raises(LineupError) as exc:
        load_lineup([a, b])
    refused(exc, f"{b}:2: item 'q1' turn 0: the question differs from {a}:2", "'What colour is the clip?' here")
    changed = json.loads(json.dumps(items))
    changed[2]["turns"][0]["golden"] = None
    with pytest.raises(LineupError) as exc:
        load_lineup([a, model_file(tmp_path / "c.jsonl", changed, answer("c"))])
    refused(exc, "c.jsonl:3: item 'q2' turn 0: the golden differs", "(none here, 'The number 2.' there)")
    changed = json.loads(json.dumps(items))
    changed[0]["video"] = "clip.mp4"
    with pytest.raises(LineupError) as exc:
        load_lineup([a, model_file(tmp_path / "d.jsonl", changed, answer("d"))])
    refused(exc, "d.jsonl:1: item 'q0': the video differs", "the models must answer the same items")
    talk = json.loads(json.dumps(CONVERSATION))
    e = model_file(tmp_path / "e.jsonl", [talk], answer("e"))
    talk["turns"][1]["time"] = 5.0
    with pytest.raises(LineupError) as exc:
        load_lineup([e, model_file(tmp_path / "f.jsonl", [talk], answer("f"))])
    refused(exc, "f.jsonl:1: item 'talk' turn 1: the time differs", "(5.0 here, 4.0 there)")


def test_duplicate_model_names_and_too_few_models_are_refused(tmp_path):
    items = plain_items(2)
    a = model_file(tmp_path / "one" / "model.jsonl", items, answer("a"))
    b = model_file(tmp_path / "two" / "model.jsonl", items, answer("b"))
    with pytest.raises(LineupError) as exc:
        load_lineup([a, b])
    refused(exc, f"{b}: model 'model' is also given by {a}", "--model NAME=FILE")
    with pytest.raises(LineupError) as exc:
        load_lineup([], named=[("x", a), ("x", b)])
    refused(exc, "model 'x' is also given by")
    many = responses_file(tmp_path / "many.jsonl", items, {"alpha": answer("a"), "model": answer("m")})
    with pytest.raises(LineupError) as exc:
        load_lineup([many, a])
    refused(exc, f"{a}: model 'model' is also given by {many}")
    with pytest.raises(LineupError) as exc:
        load_lineup([a])
    refused(exc, "at least two; got 1 ('model' from")
    with pytest.raises(LineupError) as exc:
        load_lineup([responses_file(tmp_path / "solo.jsonl", items, {"alpha": answer("a")})])
    refused(exc, "at least two; got 1")
    with pytest.raises(LineupError) as exc:
        load_lineup([a], named=[("b", many)])
    refused(exc, f"{many}: gives the answers of several models", "--model NAME=FILE names a file of one model's")


def test_bad_rows_are_refused_by_file_and_line(tmp_path):
    items = plain_items(3)
    a = model_file(tmp_path / "a.jsonl", items, answer("a"))
    pairwise = json.loads(json.dumps(items))
    for row in pairwise:
        row["turns"][0].update(response_a="x", response_b="y")
    with pytest.raises(LineupError) as exc:
        load_lineup([a, write_jsonl(tmp_path / "pair.jsonl", pairwise)])
    refused(exc, "pair.jsonl:1: item 'q0' has a response_b", "one file per model")
    rows = [json.loads(line) for line in a.read_text().splitlines()]
    rows[2]["id"] = "q0"
    with pytest.raises(LineupError) as exc:
        load_lineup([write_jsonl(tmp_path / "dup.jsonl", rows), a])
    refused(exc, "dup.jsonl:3: duplicate item id 'q0' (first on line 1)")
    many = responses_file(tmp_path / "many.jsonl", items, {"alpha": answer("a"), " beta": answer("b")})
    with pytest.raises(LineupError) as exc:
        load_lineup([many])
    refused(exc, "many.jsonl:1: turns.0.responses", "no spaces at either end")
    mixed = [json.loads(line) for line in responses_file(tmp_path / "m.jsonl", items, {
        "alpha": answer("a"), "beta": answer("b")}).read_text().splitlines()]
    mixed[1] = rows[1]
    with pytest.raises(LineupError) as exc:
        load_lineup([write_jsonl(tmp_path / "mixed.jsonl", mixed)])
    refused(exc, "mixed.jsonl:2: turns.0.responses: Field required", "every item of a file gives its answers the same way")
    nobody = responses_file(tmp_path / "nobody.jsonl", items, {"alpha": answer("a"), "beta": lambda i, k, t: None})
    with pytest.raises(LineupError) as exc:
        load_lineup([nobody])
    refused(exc, "model 'beta' answered no turn")
    single = [{**items[0], "turns": [{**items[0]["turns"][0], "responses": {"a": "x"}}] * 2}]
    with pytest.raises(LineupError) as exc:
        load_lineup([write_jsonl(tmp_path / "two_turns.jsonl", single)])
    refused(exc, "two_turns.jsonl:1:", "a single_turn item has exactly one turn, got 2")
    with pytest.raises(LineupError) as exc:
        load_lineup([tmp_path / "absent.jsonl", a])
    refused(exc, "absent.jsonl: no such items file")


def test_a_model_item_keeps_the_shape_rules_of_an_item():
    with pytest.raises(ValueError, match="multi_turn turns must be in the order they were asked"):
        ModelItem.model_validate({"id": "x", "task_type": "multi_turn", "turns": [
            {"time": 5, "question": "a", "responses": {"m": "1"}}, {"time": 2, "question": "b", "responses": {"m": "2"}}]})
    with pytest.raises(ValueError, match="video is empty"):
        ModelItem.model_validate({"id": "x", "video": " ", "turns": [{"question": "a", "responses": {"m": "1"}}]})
    item = ModelItem.model_validate({"id": "x", "turns": [{"question": "a", "responses": {"m": "1", "n": None}}]})
    assert item.models() == ["m"] and item.answer("n", 0) is None
