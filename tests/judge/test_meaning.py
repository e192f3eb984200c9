"""Sentence meaning for the reference judge: the real packaged embedding model, offline, and the
decisions of the reference judge it changes."""

from __future__ import annotations

import asyncio

import pytest

from framejudge.judge import meaning
from framejudge.judge.base import JudgeRequest
from framejudge.judge.reference import ReferenceJudge, grade_response
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, Item

needs_model = pytest.mark.skipif(not meaning.available(), reason="the embedding model is not installed "
                                 "(pip install 'framejudge[meaning]')")
RUBRIC = get_rubric("video-qa")


def graded(question: str, golden: str, response: str) -> tuple[Category, str]:
    item = Item(id="m", turns=[{"question": question, "golden": golden, "response_a": response}])
    return grade_response(RUBRIC, item, 0, response)


@needs_model
def test_the_model_loads_offline_and_paraphrases_are_closer_than_unrelated_sentences(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    vectors = meaning.embed(["The shop opens at nine in the morning.", "x"])
    assert vectors.shape == (2, 384)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4  # L2-normalised
    paraphrase = meaning.similarity("The shop opens at nine in the morning.", "Its doors open at 9 am.")
    unrelated = meaning.similarity("The shop opens at nine in the morning.", "Penguins live in the Antarctic.")
    assert paraphrase > unrelated + 0.3
    assert meaning.similarity("A dog runs on the beach.", "A dog runs on the beach.") == pytest.approx(1.0, abs=1e-4)


@needs_model
@pytest.mark.parametrize(
    "question,golden,response,expected,why",
    [
        # on the topic, sharing words with the golden response, but another question's answer
        ("What nutrients are in these?", "Bananas are a good source of potassium, vitamin B6 and fibre.",
         "These bananas are ripe and yellow, sitting in a bunch on a plate.", Category.irrelevant, "not an answer"),
        ("What variety of apple is that?", "The label says Braeburn, a crisp red apple variety.",
         "Apple trees need pruning every winter to fruit well.", Category.irrelevant, "not an answer"),
        # an attempt at the question that shares words but not the meaning
        ("What can I cook with these?", "You could make a tomato and basil pasta with the tomatoes, basil and garlic.",
         "You could make a chocolate cake with the flour and eggs in your cupboard.", Category.not_successful,
         "not its meaning"),
        # the golden response in other words, with no content word in common
        ("What is the man doing?", "He is riding a bicycle.", "The guy is cycling.", Category.successful,
         "in other words"),
    ],
)
def test_decisions_that_meaning_changes(question, golden, response, expected, why):
    category, rationale = graded(question, golden, response)
    assert category == expected, rationale
    assert why in rationale


@needs_model
def test_exact_lexical_rules_still_decide_first():
    # numbers and names are compared exactly, whatever the similarity of the sentences
    assert graded("When does the cafe open?", "It opens at 9 AM.", "It opens at 10 AM.")[0] == Category.not_successful
    assert graded("What colour is the car?", "It is a red car.", "The car is blue.")[0] == Category.not_successful
    # a shared number keeps the agreement even when the wording is far apart
    assert graded("What time does that bakery close?", "The bakery's sign says it's open 7 to 3, so it closes at 3.",
                  "It closes at 3 PM.")[0] == Category.successful


def test_the_verdict_says_whether_meaning_was_used():
    item = Item(id="n", turns=[{"question": "What is this?", "golden": "A heron.", "response_a": "A heron."}])
    result = asyncio.run(ReferenceJudge().judge(JudgeRequest(item=item, turn=0, rubric=RUBRIC)))
    expected = meaning.USED_NOTE if meaning.available() else meaning.MISSING_NOTE
    assert result.notes == [expected]


def test_without_the_model_the_judge_decides_from_words(monkeypatch):
    monkeypatch.setattr(meaning, "available", lambda: False)
    assert meaning.note() == meaning.MISSING_NOTE
    category, rationale = graded("What nutrients are in these?", "Bananas are a good source of potassium.",
                                 "These bananas are ripe and yellow.")
    assert (category, rationale) == (Category.successful, "agrees with the golden response")
