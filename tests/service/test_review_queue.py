"""The queue's order and states, from verdicts and labels alone (no server)."""

from __future__ import annotations

from datetime import datetime, timezone

from framejudge.schema import Confidence, HumanLabel, LabelValues, ReviewDecision, TriageMark, Verdict
from framejudge.service.review.queue import Filters, build_units, neighbours, state_of

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def verdict(item: str, category: str = "Successful", **extra) -> Verdict:
    return Verdict.model_validate({
        "item_id": item, "response_a": {"category": category, "rationale": "r"},
        "provenance": {"rubric_id": "video-qa", "rubric_version": "1.0.0", "rubric_hash": "h", "judge_backend": "x",
                       "model_id": "m", "created_at": NOW.isoformat()}, **extra})


def label(item: str, annotator: str, category: str) -> HumanLabel:
    return HumanLabel(item_id=item, annotator=annotator, category_a=category)


def test_units_come_by_why_they_need_a_look():
    records = [verdict("agree"), verdict("judge-off", "Not Successful"), verdict("split"),
               verdict("unsure", confidence=Confidence(informative=True, fields={"category_a": 0.6})),
               verdict("sure", confidence=Confidence(informative=True, fields={"category_a": 0.95})),
               verdict("swapped", swap={"consistent": False, "swapped": {"response_a": {"category": "Missing",
                                                                                      "rationale": "r"}}})]
    labels = [label(i, a, "Successful") for i in ("agree", "judge-off", "unsure", "sure", "swapped") for a in "xy"]
    labels += [label("split", "x", "Successful"), label("split", "y", "Irrelevant")]
    units = build_units(labels, records, [])
    # within a reason, the judge's doubts first: a confidence of 0.95 before none measured
    assert [u.item_id for u in units] == ["judge-off", "split", "swapped", "unsure", "sure", "agree"]
    assert units[0].reasons[0] == "judge_vs_majority" and units[3].reasons == ["low_confidence"]


def test_triage_units_join_the_queue_without_labels():
    mark = TriageMark(decision="to_review", below=["category_a"], thresholds="t")
    records = [verdict("sent", triage=mark), verdict("kept", triage=TriageMark(decision="auto", thresholds="t"))]
    assert build_units([], records, []) == []
    units = build_units([], records, [], to_review=True)
    assert [(u.item_id, u.reasons, u.humans) for u in units] == [("sent", ["triage"], {})]


def test_states_and_where_submit_goes_next():
    units = build_units([label(i, "x", "Successful") for i in "abc"], [verdict(i) for i in "abc"], [])

    def decided(item: str, reviewer: str, category: str, action: str = "manual") -> ReviewDecision:
        return ReviewDecision(item_id=item, reviewer=reviewer, decided_at=NOW, action=action,
                              labels=LabelValues(category_a=category) if action != "skip" else LabelValues())

    of = {"a": [decided("a", "r1", "Successful")], "b": [decided("b", "r1", "Missing", "skip")],
          "c": [decided("c", "r1", "Successful"), decided("c", "r2", "Missing")]}
    states = {u.key: state_of(of.get(u.item_id, []), "r1") for u in units}
    assert states == {("a", 0): "done", ("b", 0): "skipped", ("c", 0): "conflicting"}
    assert state_of(of["b"], "r2") == "to_review"  # another reviewer's skip is theirs
    previous, following, to_decide = neighbours(units, ("a", 0), Filters(), states)
    assert previous is None and following.item_id == "b" and to_decide is None  # nothing left to review for r1
