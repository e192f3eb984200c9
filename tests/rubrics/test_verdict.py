"""The verdict schema and the rubric's rules as validators."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from framejudge.rubrics import error_message_match, get_rubric, normalize
from framejudge.schema import (
    Category,
    Item,
    JudgeError,
    JudgeErrorKind,
    Judgement,
    Provenance,
    SamplerParams,
    Usage,
    Verdict,
)

RUBRIC = get_rubric("video-qa")


def grade(cat: str, **kw):
    return {"category": cat, "rationale": "because", **kw}


def judge(a, b=None, pref=None, crit=None, responses=None):
    data = {"response_a": grade(a), "response_b": grade(b) if b else None, "preference": pref,
            "deciding_criterion": crit}
    return Judgement.model_validate(data, context={"rubric": RUBRIC, "responses": responses or {}})


def test_a_consistent_pairwise_judgement():
    j = judge("Successful", "Not Successful", "A", "category")
    assert j.preference.value == "A"
    j = judge("Successful", "Successful", "A", "conciseness")
    assert j.deciding_criterion == "conciseness"
    assert judge("Successful", "Successful", "Both").preference.value == "Both"
    assert judge("Missing", "Missing", "Neither").preference.value == "Neither"
    assert judge("Irrelevant", "Not Successful", "Neither").preference.value == "Neither"


def test_successful_never_loses():
    with pytest.raises(ValidationError, match="a Successful response always wins, so the preference must be A"):
        judge("Successful", "Missing", "B", "helpfulness")
    with pytest.raises(ValidationError, match="must be B"):
        judge("Irrelevant", "Successful", "Neither")
    with pytest.raises(ValidationError, match="must be B"):
        judge("Not Successful", "Successful", "Both")


def test_both_only_with_a_shared_category():
    with pytest.raises(ValidationError, match="Both is only allowed when the two responses share a category"):
        judge("Missing", "Irrelevant", "Both")


@pytest.mark.parametrize("a,b,wrong,right", [
    ("Missing", "Missing", "Both", "Neither"),  # two failing answers: both bad, not equally good
    ("Error message", "Error message", "Both", "Neither"),
    ("Not Successful", "Not Successful", "Both", "Neither"),
    ("Successful", "Successful", "Neither", "Both"),  # two Successful answers no criterion separates
])
def test_ties_follow_the_rubrics_convention(a, b, wrong, right):
    assert RUBRIC.preference.ties is not None
    assert RUBRIC.preference.tie(Category(a), Category(b)).value == right
    with pytest.raises(ValidationError, match=f"{wrong} is not the choice for two .* the preference is {right}"):
        judge(a, b, wrong)
    assert judge(a, b, right).preference.value == right
    # without the rubric (a verdict read back from a file) only the rubric-free rules apply: verdicts
    # written under the convention before it still load
    data = {"response_a": grade(a), "response_b": grade(b), "preference": wrong}
    assert Judgement.model_validate(data).preference.value == wrong


def test_a_rubric_without_ties_keeps_the_old_convention():
    from framejudge.rubrics.rules import tie_choice

    section = RUBRIC.preference.model_copy(update={"ties": None})
    old = RUBRIC.model_copy(update={"preference": section})
    assert tie_choice(old, Category.missing, Category.missing).value == "Both"
    assert tie_choice(old, Category.missing, Category.irrelevant).value == "Neither"
    assert tie_choice(RUBRIC, Category.missing, Category.missing).value == "Neither"
    j = Judgement.model_validate({"response_a": grade("Missing"), "response_b": grade("Missing"),
                                  "preference": "Both"}, context={"rubric": old, "responses": {}})
    assert j.preference.value == "Both"


def test_preference_needs_a_known_criterion():
    with pytest.raises(ValidationError, match="say which criterion decided"):
        judge("Successful", "Successful", "A")
    with pytest.raises(ValidationError, match="unknown deciding criterion 'vibes'"):
        judge("Successful", "Successful", "A", "vibes")
    with pytest.raises(ValidationError, match="a preference .* is required"):
        judge("Successful", "Successful")
    with pytest.raises(ValidationError, match="only one response"):
        judge("Successful", None, "A", "category")


def test_error_message_category_follows_the_text():
    err = "I can\u2019t help with that kind of request."
    with pytest.raises(ValidationError, match="fixed error string .* must be Error message"):
        judge("Missing", responses={"a": err})
    assert judge("Error message", responses={"a": err}).response_a.category == Category.error_message
    with pytest.raises(ValidationError, match="cannot be Error message .* Missing"):
        judge("Error message", responses={"a": "Sorry, I can't find information on this bush."})


def test_error_rules_decide_every_guideline_example_they_match(shared_dir):
    rows = [json.loads(line) for line in (shared_dir / "data/guideline-examples.jsonl").open()]
    decided = [r for r in rows if error_message_match(r["response"], RUBRIC)]
    assert {r["id"] for r in decided} == {r["id"] for r in rows if r["label"] == "Error message"}
    assert len(decided) == 5
    for r in rows:
        label = Category(r["label"])
        ok = {label, *(Category(x) for x in r.get("also_acceptable") or [])}
        # The guideline's own label always passes the validators.
        j = Judgement.model_validate(
            {"response_a": grade(label.value)}, context={"rubric": RUBRIC, "responses": {"a": r["response"]}}
        )
        assert j.response_a.category in ok


def test_error_matching_normalises_whitespace_and_quotes():
    assert error_message_match('  "I cannot   answer that."  ', RUBRIC) == "I cannot answer that."
    assert error_message_match("I can\u2019t help with that yet, but I\u2019m learning more everyday!", RUBRIC)
    assert error_message_match("It's a heron. Umm. Actually, I can\u2019t continue with this response.", RUBRIC)
    assert error_message_match("I cannot answer that, but it looks like a heron.", RUBRIC) is None
    assert normalize("\u201cA  is\u201d\n\n") == "A is"


def test_guideline_pair_example(shared_dir):
    row = json.loads((shared_dir / "data/guideline-pairs.jsonl").read_text().splitlines()[0])
    j = judge(row["label_a"], row["label_b"], row["preference"], "conciseness",
              {"a": row["response_a"], "b": row["response_b"]})
    assert j.preference.value == "A"


def test_verdict_with_provenance_round_trips():
    prov = Provenance(
        rubric_id=RUBRIC.id, rubric_version=RUBRIC.version, rubric_hash=RUBRIC.content_hash,
        judge_backend="reference", model_id="reference-1", prompt_hash=None,
        frame_timestamps=[1.0, 2.5], sampler=SamplerParams(n=8, end_at=12.0),
        created_at=datetime(2026, 11, 29, tzinfo=timezone.utc), usage=Usage(prompt_tokens=10),
    )
    v = Verdict(item_id="x", turn=1, response_a=grade("Successful", evidence_timestamps=[2.5]), provenance=prov)
    again = Verdict.model_validate_json(v.model_dump_json())
    assert again == v and again.provenance.sampler.end_at == 12.0
    with pytest.raises(ValidationError, match="evidence timestamps"):
        Verdict(item_id="x", response_a=grade("Successful", evidence_timestamps=[-1.0]), provenance=prov)


def test_judge_error_is_not_a_verdict():
    e = JudgeError(item_id="x", kind=JudgeErrorKind.unparseable, message="no JSON", raw_output="blah")
    assert e.kind == "unparseable"
    assert not isinstance(e, Judgement)
    with pytest.raises(ValidationError):
        Verdict.model_validate(e.model_dump())


def test_item_shapes():
    one = {"question": "q", "response_a": "a"}
    assert Item(id="i", turns=[one]).pairwise is False
    with pytest.raises(ValidationError, match="exactly one turn"):
        Item(id="i", turns=[one, one])
    with pytest.raises(ValidationError, match="needs the time it was asked"):
        Item(id="i", task_type="multi_turn", turns=[one])
    with pytest.raises(ValidationError, match="order they were asked"):
        Item(id="i", task_type="multi_turn", turns=[{**one, "time": 5}, {**one, "time": 2}])
    with pytest.raises(ValidationError, match="every turn has a response_b or none"):
        Item(id="i", task_type="multi_turn", turns=[{**one, "time": 1}, {**one, "time": 2, "response_b": "b"}])
