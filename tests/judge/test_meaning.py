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
                                 "(pip install '.[meaning]')")
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
    category, rationale, *_ = graded(question, golden, response)
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
    category, rationale, *_ = graded("What nutrients are in these?", "Bananas are a good source of potassium.",
                                 "These bananas are ripe and yellow.")
    assert (category, rationale) == (Category.successful, "agrees with the golden response")


# ----------------------------------------------------------------------------- batching

PAIRS = [  # (question, golden, response A, response B): most reach the comparison of meanings
    ("What nutrients are in these?", "Bananas are a good source of potassium, vitamin B6 and fibre.",
     "These bananas are ripe and yellow, sitting in a bunch on a plate.", "They give you potassium and fibre."),
    ("What variety of apple is that?", "The label says Braeburn, a crisp red apple variety.",
     "Apple trees need pruning every winter to fruit well.", "It's a crisp Braeburn."),
    ("What can I cook with these?", "You could make a tomato and basil pasta with the tomatoes, basil and garlic.",
     "You could make a chocolate cake with the flour and eggs in your cupboard.", "A pasta sauce from the tomatoes."),
    ("What is the man doing?", "He is riding a bicycle.", "The guy is cycling.", "The man is riding a horse."),
    ("What is the woman doing in the park?", "A young woman is jogging through the park.",
     "The lady runs across the lawn.", "The woman in the park holds a cup of coffee."),
    ("Where is the dog sleeping?", "The dog sleeps on a rug by the fireplace.", "The puppy naps near the hearth.",
     "The dog is barking at the mailman."),
    ("What is the child carrying?", "The child is carrying a heavy school bag.", "The kid hauls a backpack.",
     "The child carries nothing at all."),
    ("When does the cafe open?", "It opens at 9 AM.", "It opens at 10 AM.", "Nine in the morning."),
    ("What is this?", "A heron standing in shallow water.", "A wading bird.", "I'm sorry, I can't tell."),
]


def pair_items() -> list[Item]:
    return [Item(id=f"b{k}", turns=[{"question": q, "golden": g, "response_a": a, "response_b": b}])
            for k, (q, g, a, b) in enumerate(PAIRS)]


@pytest.fixture
def fresh(monkeypatch):
    """An empty vector cache, and a count of forward passes (embed calls) and their sizes."""
    monkeypatch.setattr(meaning, "_vectors", meaning.OrderedDict())
    passes: list[list[str]] = []
    embed = meaning.embed

    def counted(texts):
        passes.append(list(texts))
        return embed(texts)

    monkeypatch.setattr(meaning, "embed", counted)
    return passes


async def judge_all(items: list[Item]) -> list:
    judge = ReferenceJudge()
    results = await asyncio.gather(*(judge.judge(JudgeRequest(item=it, turn=0, rubric=RUBRIC)) for it in items))
    return [r.judgement for r in results]


@needs_model
def test_batched_judgements_are_those_of_the_direct_decision(fresh, monkeypatch):
    items = pair_items()
    direct = [ReferenceJudge().decide(RUBRIC, it, 0) for it in items]
    assert all(len(p) == 1 for p in fresh)  # on demand: one sentence a pass
    assert any("(similarity" in j.response_a.rationale for j in direct)  # meaning decided some
    monkeypatch.setattr(meaning, "_vectors", meaning.OrderedDict())
    fresh.clear()
    batched = asyncio.run(judge_all(items))
    assert [j.model_dump() for j in batched] == [j.model_dump() for j in direct]
    assert all(len(p) > 1 for p in fresh)


@needs_model
def test_concurrent_turns_share_forward_passes(fresh):
    items = pair_items()
    asyncio.run(judge_all(items))
    sentences = [t for p in fresh for t in p]
    assert len(sentences) == len(set(sentences)) >= 2 * len(items)  # each text embedded once
    assert len(fresh) <= 2  # nine turns' sentences in one or two passes, not one pass per sentence
    before = len(fresh)
    asyncio.run(judge_all(items))  # cached: nothing embedded again
    assert len(fresh) == before


@needs_model
def test_a_pass_holds_at_most_max_batch_sentences_sorted_by_length(fresh, monkeypatch):
    monkeypatch.setattr(meaning, "MAX_BATCH", 4)
    texts = [f"Sentence {'word ' * k}number {k}." for k in range(10, 0, -1)]
    asyncio.run(meaning.ensure(texts))
    assert [len(p) for p in fresh] == [4, 4, 2]
    flat = [t for p in fresh for t in p]
    assert flat == sorted(texts, key=len)
    assert meaning.missing(texts) == []


@needs_model
def test_a_cancelled_turn_does_not_cancel_the_pass_others_wait_for(fresh):
    async def run() -> None:
        first = asyncio.create_task(meaning.ensure(["A cat sits on a warm windowsill."]))
        second = asyncio.create_task(meaning.ensure(["A cat sits on a warm windowsill.", "Rain falls on the roof."]))
        await asyncio.sleep(0)
        first.cancel()
        await second
        assert first.cancelled()

    asyncio.run(run())
    assert meaning.missing(["A cat sits on a warm windowsill.", "Rain falls on the roof."]) == []
    assert len(fresh) == 1


@needs_model
def test_a_failed_pass_fails_its_waiters_and_the_next_one_runs(monkeypatch, fresh):
    def broken(texts):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(meaning, "embed", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        asyncio.run(meaning.ensure(["Snow covers the mountain."]))
    monkeypatch.undo()
    asyncio.run(meaning.ensure(["Snow covers the mountain."]))
    assert meaning.missing(["Snow covers the mountain."]) == []


@needs_model
def test_the_model_loads_once_for_concurrent_turns_and_threads(monkeypatch):
    import threading

    from framejudge.judge import encoder

    loads = []
    init = encoder.Encoder.__init__

    def counted(self, *args, **kwargs):
        loads.append(args)
        init(self, *args, **kwargs)

    monkeypatch.setattr(encoder.Encoder, "__init__", counted)
    monkeypatch.setattr(meaning, "_loaded", None)
    monkeypatch.setattr(meaning, "_vectors", meaning.OrderedDict())
    threads = [threading.Thread(target=meaning.embed, args=([f"Thread {k} says hello."],)) for k in range(4)]
    for t in threads:
        t.start()
    asyncio.run(judge_all(pair_items()))
    for t in threads:
        t.join()
    meaning.similarity("A boat on the lake.", "A ship at sea.")
    assert len(loads) == 1


def test_without_the_model_batching_changes_nothing(monkeypatch):
    monkeypatch.setattr(meaning, "available", lambda: False)

    def never(texts):
        raise AssertionError("embedded without the model")

    monkeypatch.setattr(meaning, "embed", never)
    items = pair_items()
    direct = [ReferenceJudge().decide(RUBRIC, it, 0) for it in items]
    batched = asyncio.run(judge_all(items))
    assert [j.model_dump() for j in batched] == [j.model_dump() for j in direct]
    assert not any("(similarity" in g.rationale for j in direct for g in (j.response_a, j.response_b))
