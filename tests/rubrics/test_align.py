"""Aligning a rubric from the judge's corrected mistakes: the corrections on the rubric and its
hash, the prompt's leakage guard, the reference judge's precedents, and an honest split, on the
guideline's labelled examples with the reference judge."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from framejudge.calibration.inputs import load_human_labels
from framejudge.judge import Grader, ReferenceJudge
from framejudge.rubrics import get_rubric, parse_rubric
from framejudge.rubrics.corrections import corrections_for
from framejudge.rubrics.model import Correction, Rubric
from framejudge.rubrics.prompt import estimate_tokens, render_prompt, rubric_text
from framejudge.schema import Category, HumanLabel, Item, Verdict
from framejudge.workflows.align import (AlignError, Gold, align, choose_corrections, gold_labels, rubric_yaml,
                                        split_items)

BASE = get_rubric("video-qa")
# The hash every verdict graded with the built-in rubric carries: corrections (none) leave it alone.
BASE_HASH = "0e605a728abbee35"


def guideline_files(shared: Path, folder: Path) -> tuple[Path, Path]:
    """Items (one single-response item per labelled example) and their labels (the guideline's
    category, with its reason as the note)."""
    rows = [json.loads(line) for line in (shared / "data/guideline-examples.jsonl").open()]
    items, labels = folder / "items.jsonl", folder / "labels.jsonl"
    items.write_text("".join(json.dumps({"id": r["id"], "turns": [
        {"question": r["query"], "golden": r["golden"], "response_a": r["response"]}]}) + "\n" for r in rows))
    labels.write_text("".join(json.dumps({"item_id": r["id"], "annotator": "guideline", "category_a": r["label"],
                                          "metadata": {"standing": "adjudicated", "note": r["why"]}}) + "\n"
                              for r in rows))
    return items, labels


def load_items(path: Path) -> list[Item]:
    return [Item.model_validate_json(line) for line in path.read_text().splitlines()]


def grade(rubric: Rubric, item: Item) -> Verdict:
    [record] = asyncio.run(Grader(ReferenceJudge(), rubric).grade(item))
    assert isinstance(record, Verdict)
    return record


def correction(item_id: str, question: str = "What is this?", response: str = "A plant.", **kw) -> Correction:
    return Correction(item_id=item_id, question=question, response_a=response,
                      category_a=kw.pop("category_a", Category.successful), reason=kw.pop("reason", "names it"), **kw)


def with_corrections(*corrections: Correction) -> Rubric:
    return BASE.model_copy(update={"corrections": list(corrections)})


@pytest.fixture(scope="module")
def aligned(shared_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("align")
    items_path, labels_path = guideline_files(shared_dir, folder)
    items = load_items(items_path)
    done = align(BASE, labels_path, load_human_labels(labels_path), items, ReferenceJudge(), "reference",
                 replicates=200)
    return done, {it.id: it for it in items}, labels_path


# ----------------------------------------------------------------------------- the rubric model

def test_the_base_rubric_hash_is_unchanged_by_the_corrections_field():
    assert BASE.corrections == []
    assert BASE.content_hash == BASE_HASH
    assert with_corrections().content_hash == BASE_HASH


def test_corrections_are_part_of_the_hash():
    one, other = with_corrections(correction("a")), with_corrections(correction("b"))
    assert len({BASE.content_hash, one.content_hash, other.content_hash}) == 3


def test_a_correction_gives_a_label_and_one_line_of_reason():
    with pytest.raises(ValueError, match="at least one right label"):
        Correction(item_id="a", question="q", response_a="r", reason="why")
    with pytest.raises(ValueError, match="one line"):
        correction("a", reason="first\nsecond")
    with pytest.raises(ValueError, match="need a response_b"):
        correction("a", category_b=Category.missing)
    with pytest.raises(ValueError, match="corrected twice"):
        Rubric.model_validate({**BASE.model_dump(), "corrections": [correction("a").model_dump()] * 2})


# ----------------------------------------------------------------------------- the prompt and its guard

def test_the_prompt_never_shows_an_item_its_own_correction():
    rubric = with_corrections(correction("mine", response="A fern."), correction("other", response="A heron."))
    item = Item(id="mine", turns=[{"question": "What is this?", "response_a": "A fern."}])
    system = render_prompt(rubric, item).messages[0]["content"]
    assert "Corrected examples" in system and "A heron." in system
    assert "A fern." not in system
    assert [c.item_id for c in corrections_for(rubric, "mine")] == ["other"]
    assert "A fern." in rubric_text(rubric)  # the rubric on its own (rubrics show) lists every one


def test_no_turn_of_a_conversation_sees_a_correction_from_that_conversation():
    rubric = with_corrections(correction("talk", question="And now?", response="Still raining."))
    item = Item(id="talk", task_type="multi_turn", turns=[
        {"time": 1.0, "question": "Is it raining?", "response_a": "Yes."},
        {"time": 5.0, "question": "And now?", "response_a": "Sunny."}])
    for turn in (0, 1):
        assert "Still raining." not in render_prompt(rubric, item, turn=turn).messages[0]["content"]


def test_corrections_are_dropped_before_the_other_examples():
    rubric = with_corrections(*(correction(f"c{i}", response="words " * 200) for i in range(4)))
    item = Item(id="x", turns=[{"question": "What is this?", "response_a": "A plant."}])
    full = render_prompt(rubric, item)
    lean = render_prompt(rubric, item, token_budget=full.estimated_tokens - 1)
    assert lean.dropped == ["corrected examples"]
    assert "Corrected examples" not in lean.messages[0]["content"]
    assert lean.messages[0]["content"] == render_prompt(BASE, item).messages[0]["content"]
    # a rubric without corrections drops its category examples first, as before
    assert render_prompt(BASE, item, token_budget=render_prompt(BASE, item).estimated_tokens - 1).dropped[0] == \
        "category examples"


# ----------------------------------------------------------------------------- the reference judge's precedents

def test_the_reference_judge_takes_a_precedent_from_another_item_only():
    rubric = with_corrections(correction("tree-1", question="Tell me what this is?", response="This is a tree.",
                                         category_a=Category.successful, reason="names what is shown"))
    own = Item(id="tree-1", turns=[{"question": "Tell me what this is?", "response_a": "This is a tree."}])
    copy = own.model_copy(update={"id": "tree-copy"})
    assert grade(BASE, own).response_a.category == Category.not_successful  # too generic, by the rules
    assert grade(rubric, own).response_a == grade(BASE, own).response_a
    took = grade(rubric, copy).response_a
    assert took.category == Category.successful
    assert took.rationale == "as the corrected example from item tree-1: names what is shown"
    # the same after normalising case, quotes and spaces; a different answer is not a precedent
    spaced = Item(id="z", turns=[{"question": "tell me  what this is?", "response_a": "“This is a TREE.”"}])
    assert grade(rubric, spaced).response_a.category == Category.successful
    other = Item(id="z", turns=[{"question": "Tell me what this is?", "response_a": "This is a bush."}])
    assert grade(rubric, other).response_a == grade(BASE, other).response_a


def test_a_precedent_for_response_b_grades_b():
    rubric = with_corrections(Correction(item_id="p", question="What is this?", response_a="A fern.",
                                         response_b="A plant.", category_b=Category.successful, reason="fine"))
    pair = Item(id="q", turns=[{"question": "What is this?", "response_a": "A plant.", "response_b": "A fern."}])
    v = grade(rubric, pair)
    assert v.response_a.category == Category.successful and "item p" in v.response_a.rationale
    assert "corrected example" not in v.response_b.rationale  # A of the correction gives no category


# ----------------------------------------------------------------------------- gold, split, choice

def test_gold_is_the_adjudicated_row_or_the_majority():
    labels = [HumanLabel(item_id="a", annotator=n, category_a=c) for n, c in
              (("h1", "Missing"), ("h2", "Missing"), ("h3", "Successful"))]
    labels += [HumanLabel(item_id="b", annotator=n, category_a=c) for n, c in (("h1", "Missing"), ("h2", "Successful"))]
    labels += [HumanLabel(item_id="c", annotator="lead", category_a="Missing",
                          metadata={"standing": "unresolved"})]
    labels += [HumanLabel(item_id="d", annotator="lead", category_a="Irrelevant",
                          metadata={"standing": "adjudicated", "cause": "humans_wrong", "note": "off topic"})]
    gold = gold_labels(labels)
    assert sorted(gold) == [("a", 0), ("d", 0)]  # b ties, c is unresolved
    assert gold[("a", 0)].category_a == Category.missing
    assert gold[("d", 0)].cause.value == "humans_wrong" and gold[("d", 0)].note == "off topic"
    with pytest.raises(AlignError, match="cause 'wrong'"):
        gold_labels([HumanLabel(item_id="e", annotator="lead", category_a="Missing", metadata={"cause": "wrong"})])


def test_the_split_is_by_whole_items_and_seeded():
    ids = [f"i{k}" for k in range(10)]
    ex, held = split_items(ids, 0.3, seed=7)
    assert len(held) == 3 and sorted(ex + held) == sorted(ids)
    assert split_items(ids, 0.3, seed=7) == (ex, held) and split_items(ids, 0.3, seed=8) != (ex, held)
    ex, held = split_items(ids, 0.5, 0, examples_already={"i1", "i2"})
    assert {"i1", "i2"} <= set(ex)
    with pytest.raises(AlignError, match="too few to split"):
        split_items(["only"], 0.5, 0)
    with pytest.raises(AlignError, match="between 0 and 1"):
        split_items(ids, 1.0, 0)


def test_corrections_are_chosen_round_robin_within_the_budget():
    cands = [correction(f"s{i}", category_a=Category.successful) for i in range(5)]
    cands += [correction("m0", category_a=Category.missing), correction("m1", category_a=Category.missing,
                                                                        cause="judge_wrong")]
    chosen = choose_corrections(cands, 1000)
    assert len(chosen) == 7
    assert {c.item_id for c in chosen[:3]} == {"s0", "m0", "m1"}  # one of each (category, cause) group first
    tight = choose_corrections(cands, 80)
    assert 0 < len(tight) < 7
    from framejudge.workflows.align import correction_tokens
    assert correction_tokens(tight) <= 80


# ----------------------------------------------------------------------------- on the guideline examples

def test_the_split_is_honest(aligned):
    done, items, _ = aligned
    r = done.result
    example = {(u.item_id, u.turn) for u in r.example_units}
    held = {(u.item_id, u.turn) for u in r.held_apart_units}
    assert len(example) + len(held) == len(items) == 42
    assert not set(r.example_items) & set(r.held_apart_items)
    assert len(r.example_items) + len(r.held_apart_items) == 42
    corrected = {(c.item_id, c.turn) for c in done.rubric.corrections}
    assert corrected == {(u.item_id, u.turn) for u in r.corrections}
    assert corrected and corrected <= example
    assert not {c.item_id for c in done.rubric.corrections} & set(r.held_apart_items)
    assert r.judge_mistakes >= len(corrected)
    [cat_a] = [a for a in r.agreement if a.field == "category_a"]
    assert cat_a.units == len(held)


def test_the_measurement_is_a_recount_of_the_held_apart_verdicts(aligned, shared_dir):
    done, items, _ = aligned
    labels = {json.loads(line)["id"]: json.loads(line)["label"]
              for line in (shared_dir / "data/guideline-examples.jsonl").open()}
    held = done.result.held_apart_items
    for rubric, share in ((BASE, "before"), (done.rubric, "after")):
        hits = sum(grade(rubric, items[i]).response_a.category.value == labels[i] for i in held)
        [cat_a] = [a for a in done.result.agreement if a.field == "category_a"]
        assert getattr(cat_a, share) == hits / len(held)


def test_grading_a_corrected_item_never_uses_its_own_correction(aligned):
    done, items, _ = aligned
    for c in done.rubric.corrections:
        own = items[c.item_id]
        mine, base = grade(done.rubric, own), grade(BASE, own)
        assert mine.response_a == base.response_a, c.item_id
        assert mine.response_a.category != c.category_a  # still its mistake: it was not shown the answer
        copy = grade(done.rubric, own.model_copy(update={"id": f"{c.item_id}-copy"}))
        assert copy.response_a.category == c.category_a
        assert copy.response_a.rationale.startswith(f"as the corrected example from item {c.item_id}: ")


def test_the_written_rubric_loads_with_a_new_hash_and_says_so_in_provenance(aligned):
    done, items, labels_path = aligned
    loaded = parse_rubric(rubric_yaml(done.rubric))
    assert loaded == done.rubric
    assert loaded.version == "1.2.0" and loaded.changelog[0].version == "1.2.0"
    assert labels_path.name in loaded.changelog[0].changes and done.result.labels_sha256 in loaded.changelog[0].changes
    assert loaded.content_hash == done.result.rubric_hash != BASE_HASH
    assert BASE.content_hash == BASE_HASH and get_rubric("video-qa").corrections == []
    v = grade(loaded, next(iter(items.values())))
    assert (v.provenance.rubric_id, v.provenance.rubric_version, v.provenance.rubric_hash) == \
        ("video-qa", "1.2.0", loaded.content_hash)


def test_labels_of_other_items_are_refused(aligned, tmp_path):
    _, items, labels_path = aligned
    stranger = [HumanLabel(item_id="nobody", annotator="lead", category_a="Missing")]
    with pytest.raises(AlignError, match="no labelled unit names an item"):
        align(BASE, labels_path, stranger, list(items.values()), ReferenceJudge(), "reference")
    one = [HumanLabel(item_id="trains-1", annotator="lead", category_a="Missing")]
    with pytest.raises(AlignError, match="too few to split"):
        align(BASE, labels_path, one, list(items.values()), ReferenceJudge(), "reference")


def test_a_judge_without_mistakes_writes_nothing(aligned):
    _, items, labels_path = aligned
    agree = [HumanLabel(item_id=i, annotator="lead", category_a=grade(BASE, items[i]).response_a.category)
             for i in ("trains-1", "trains-2", "trash-1", "trash-2")]
    with pytest.raises(AlignError, match="no mistake to correct"):
        align(BASE, labels_path, agree, list(items.values()), ReferenceJudge(), "reference")


def test_gold_units_keep_their_reason(aligned):
    done, _, _ = aligned
    assert all(isinstance(g, Gold) for g in gold_labels(load_human_labels(aligned[2])).values())
    assert all(c.reason and "\n" not in c.reason for c in done.rubric.corrections)
    assert estimate_tokens(rubric_text(done.rubric)) > estimate_tokens(rubric_text(BASE))


def test_gold_from_a_csv_labels_file(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("item_id,turn,annotator,category_a,standing,cause,note\n"
                    "a,0,lead,Missing,adjudicated,judge_wrong,declines a supported question\n"
                    "b,0,lead,Successful,unresolved,,\n")
    gold = gold_labels(load_human_labels(path))
    assert list(gold) == [("a", 0)]
    assert gold[("a", 0)].cause.value == "judge_wrong" and gold[("a", 0)].note == "declines a supported question"
