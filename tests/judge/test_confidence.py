"""Confidence per verdict field: the arithmetic of each method, the label-token probabilities,
and what the real pipeline records (a scripted judge stands in for a model's replies)."""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, field

import pytest

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import GradeOptions, Grader, JudgeRequest, JudgeResult, ReferenceJudge
from framejudge.judge.confidence import (TokenStep, blind_confidence, combine, label_probabilities,
                                         logprob_confidence, sample_confidence, swap_confidence, value_offsets)
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, Judgement, SamplerParams, Usage, Verdict

RUBRIC = get_rubric("video-qa")


def j(cat_a, cat_b=None, pref=None, crit=None, integrity_a=False):
    data = {"response_a": {"category": cat_a, "rationale": "r", "integrity_violation": integrity_a}}
    if cat_b is not None:
        data.update(response_b={"category": cat_b, "rationale": "r"}, preference=pref, deciding_criterion=crit)
    return Judgement.model_validate(data)


S, NS, M = "Successful", "Not Successful", "Missing"


def approx(x):
    return pytest.approx(x, abs=1e-6)  # confidences are recorded to 6 decimals


# ------------------------------------------------------------------ the methods

def test_swap_is_one_where_both_orders_agree_and_a_half_where_they_do_not():
    first = j(S, M, "A", "category")
    c = swap_confidence(first, j(S, NS, "A", "category"))
    assert c == {"category_a": 1.0, "category_b": 0.5, "preference": 1.0, "integrity_a": 1.0, "integrity_b": 1.0,
                 "transcription_error": 1.0, "multiturn": 1.0}


def test_samples_give_the_share_that_agrees_with_the_verdict_per_field():
    samples = [j(S, M, "A", "category"), j(S, M, "A", "category"), j(NS, M, "B", "correctness")]
    c = sample_confidence(samples, samples[0])
    assert c["category_a"] == pytest.approx(2 / 3) and c["category_b"] == 1.0
    assert c["preference"] == pytest.approx(2 / 3) and c["integrity_a"] == 1.0


def test_blind_is_one_where_the_video_changed_the_answer_and_a_half_where_it_did_not():
    verdict = j(S, M, "A", "category")
    c = blind_confidence(j(NS, M, "B", "correctness"), verdict)
    assert c["category_a"] == 1.0 and c["preference"] == 1.0 and c["category_b"] == 0.5


def test_logprobs_are_the_verdicts_label_probability_averaged_over_calls():
    verdict = j(S)
    probs = [{"category_a": {S: 0.8, NS: 0.2}}, {"category_a": {S: 0.6, NS: 0.4}}, {}]
    assert logprob_confidence(probs, verdict) == {"category_a": pytest.approx(0.7)}


def test_a_field_takes_the_lowest_over_the_methods_that_measured_it():
    c = combine({"swap": {"preference": 0.5, "category_a": 1.0}, "logprobs": {"category_a": 0.8},
                 "samples": {}})
    assert c.informative and c.fields == {"preference": 0.5, "category_a": 0.8}
    assert set(c.methods) == {"swap", "logprobs"}
    nothing = combine({})
    assert nothing.informative is False and nothing.fields == {} and nothing.note


# ------------------------------------------------------------------ label token probabilities

def tokens(text: str) -> list[str]:
    """A stand-in tokenizer: words, single punctuation marks and runs of spaces."""
    return re.findall(r"\w+|\s+|[^\w\s]", text)


def steps(text: str, alternatives: dict[int, dict[str, float]]) -> list[TokenStep]:
    """Each token chosen with the probability left over from its alternatives (by token index)."""
    out = []
    for i, tok in enumerate(tokens(text)):
        alt = alternatives.get(i, {})
        out.append(TokenStep(tok, {**alt, tok: 1.0 - sum(alt.values())}))
    return out


def index_of(text: str, token: str, nth: int = 0) -> int:
    return [i for i, t in enumerate(tokens(text)) if t == token][nth]


def test_value_offsets_point_at_each_value():
    text = 'Here: {"response_a": {"category": "Missing", "flag": true}, "list": [1, {"x": null}]}'
    where = value_offsets(text)
    assert text[where[("response_a", "category")]:].startswith('"Missing"')
    assert text[where[("response_a", "flag")]:].startswith("true")
    assert text[where[("list", "1", "x")]:].startswith("null")
    assert value_offsets("no json here") == {} and value_offsets('{"a": ') == {}


def test_option_probabilities_from_the_first_token_that_tells_options_apart():
    reply = json.dumps({"response_a": {"category": S, "rationale": "ok", "integrity_violation": False},
                        "preference": "B"})
    at_cat = index_of(reply, "Successful")
    at_flag = index_of(reply, "false")
    at_pref = index_of(reply, "B")
    alternatives = {at_cat: {"Not": 0.2, "Missing": 0.1},  # "Not" starts only Not Successful
                    at_flag: {"true": 0.25},
                    at_pref: {"A": 0.3, "Both": 0.1, "Neither": 0.05},
                    at_pref + 1: {"oth": 0.5}}  # after "B": the closing quote (B) or "oth" (Both)
    probs = label_probabilities(reply, steps(reply, alternatives), {
        "category_a": [S, NS, M, "Irrelevant", "Error message"], "integrity_a": ["true", "false"],
        "preference": ["A", "B", "Both", "Neither"]})
    cat = probs["category_a"]
    assert cat[S] == pytest.approx(0.7) and cat[NS] == pytest.approx(0.2) and cat[M] == pytest.approx(0.1)
    assert probs["integrity_a"] == {"true": pytest.approx(0.25), "false": pytest.approx(0.75)}
    pref = probs["preference"]
    # B was chosen with 0.55; half of that went on to "oth": Both = 0.1 + 0.275, B = 0.275
    assert pref["B"] == pytest.approx(0.275) and pref["Both"] == pytest.approx(0.375)
    assert pref["A"] == pytest.approx(0.3) and pref["Neither"] == pytest.approx(0.05)
    for p in probs.values():
        assert math.isclose(sum(p.values()), 1.0)


def test_a_token_that_takes_in_the_quote_and_unknown_tokens_give_nothing():
    reply = '{"preference":"Neither"}'
    toks = ['{"', 'pre', 'ference', '":"', 'Ne', 'ither', '"}']
    probs = label_probabilities(reply, [TokenStep(t, {t: 1.0}) for t in toks[:4]]
                                + [TokenStep("Ne", {"Ne": 0.6, "A": 0.4})]
                                + [TokenStep(t, {t: 1.0}) for t in toks[5:]], {"preference": ["A", "B", "Neither"]})
    assert probs == {"preference": {"A": pytest.approx(0.4), "B": 0.0, "Neither": pytest.approx(0.6)}}
    # tokens that do not spell the reply: no probabilities rather than wrong ones
    assert label_probabilities(reply, [TokenStep("x", {"x": 1.0})], {"preference": ["A"]}) == {}


# ------------------------------------------------------------------ the pipeline

@dataclass
class ScriptedJudge:
    """Replies from a script: a function of the request (a judgement, with option
    probabilities). Records every request it saw."""

    reply: object
    backend: str = "scripted"
    model_id: str = "scripted-1"
    needs_frames: bool = True
    sees_images: bool = True
    deterministic: bool = False
    seen: list[JudgeRequest] = field(default_factory=list)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        self.seen.append(request)
        judgement, probs = self.reply(request)
        return JudgeResult(judgement, usage=Usage(prompt_tokens=1, completion_tokens=1), prompt_hash="p" * 16,
                           label_probs=probs)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("v") / "c.mp4", countdown, cfr_times(4, 30), gop=30)


def pair(video=None, a="a answer", b="b answer"):
    return Item(id="it", video=str(video) if video else None,
                turns=[{"question": "q", "response_a": a, "response_b": b}])


def grade(judge, item, **options):
    cache_dir = options.pop("cache_dir", None)
    opts = GradeOptions(sampler=SamplerParams(n=2), **{"cache": False, **options})
    return asyncio.run(Grader(judge, RUBRIC, opts, cache_dir=cache_dir).grade(item))


def test_k_samples_are_drawn_above_temperature_zero_with_a_seed_each():
    def by_seed(r):
        first = r.item.turns[0].response_a == "a answer"
        if r.seed == 2:  # the third sample calls A not successful
            return j(NS, M, "A", "correctness") if first else j(M, NS, "B", "correctness"), None
        return j(S, M, "A", "category") if first else j(M, S, "B", "category"), None

    judge = ScriptedJudge(by_seed)
    [v] = grade(judge, pair(), samples=3, sample_temperature=0.9)
    samples = judge.seen[:3]
    assert [(r.sample, r.temperature, r.seed) for r in samples] == [(0, 0.9, 0), (1, 0.9, 1), (2, 0.9, 2)]
    swap = judge.seen[3]
    assert swap.item.turns[0].response_a == "b answer" and swap.temperature is None and swap.seed is None
    assert v.response_a.category.value == S and v.sample_agreement == approx(2 / 3)
    c = v.confidence
    assert c.informative and set(c.methods) == {"samples", "swap"}
    assert c.methods["samples"]["category_a"] == approx(2 / 3)
    assert c.methods["samples"]["category_b"] == 1.0 and c.methods["swap"]["category_a"] == 1.0
    assert c.fields["category_a"] == approx(2 / 3) and c.fields["preference"] == 1.0
    assert "3 samples at temperature 0.9, seeds 0 to 2" in v.provenance.notes
    assert v.provenance.options.sample_temperature == 0.9


def test_one_sample_is_drawn_at_the_judges_own_temperature():
    judge = ScriptedJudge(lambda r: (j(S), None))
    [v] = grade(judge, Item(id="one", turns=[{"question": "q", "response_a": "a"}]))
    assert [(r.temperature, r.seed) for r in judge.seen] == [(None, None)]
    # nothing measured: one sample, no pair to swap, no blind control, no probabilities
    assert v.confidence.informative is False and "no confidence measured" in v.confidence.note


def test_samples_are_not_served_one_cached_answer(tmp_path):
    judge = ScriptedJudge(lambda r: (j(S) if r.seed != 1 else j(NS), {"category_a": {S: 0.9, NS: 0.1}}))
    item = Item(id="one", turns=[{"question": "q", "response_a": "a"}])
    [v1] = grade(judge, item, samples=3, cache=True, cache_dir=tmp_path)
    assert len(judge.seen) == 3 and v1.sample_agreement == approx(2 / 3)
    [v2] = grade(judge, item, samples=3, cache=True, cache_dir=tmp_path)
    assert len(judge.seen) == 3  # all three from the cache, each its own answer and probabilities
    assert v2.sample_agreement == approx(2 / 3) and v2.confidence == v1.confidence
    assert v1.confidence.methods["logprobs"]["category_a"] == approx(0.9)
    [v3] = grade(judge, item, samples=3, sample_temperature=0.3, cache=True, cache_dir=tmp_path)
    assert len(judge.seen) == 6  # another temperature is another answer


def test_swap_disagreement_halves_the_preference():
    biased = ScriptedJudge(lambda r: (j(S, S, "A", "conciseness"), None))  # prefers whatever is shown first
    [v] = grade(biased, pair())
    assert v.swap.consistent is False
    assert v.confidence.methods["swap"]["preference"] == 0.5 and v.confidence.fields["category_a"] == 1.0


def test_blind_control_and_logprobs_combine_at_the_lowest(clip):
    def reply(r):
        if not r.frames:  # blind: the same categories without the video
            return j(S, M, "A", "category"), None
        first = r.item.turns[0].response_a == "a answer"
        cats = (S, M) if first else (M, S)
        return j(*cats, "A" if first else "B", "category"), {"category_a": {cats[0]: 0.9, NS: 0.1}}

    [v] = grade(ScriptedJudge(reply), pair(clip), blind=True)
    c = v.confidence
    assert c.methods["blind"]["category_a"] == 0.5 and c.methods["swap"]["category_a"] == 1.0
    assert c.methods["logprobs"] == {"category_a": approx(0.9)}
    assert c.fields["category_a"] == 0.5 and c.fields["preference"] == 0.5


def test_later_turns_are_not_measured_on_the_multiturn_flag(clip):
    item = Item(id="mt", video=str(clip), task_type="multi_turn", turns=[
        {"time": t, "question": "q", "response_a": "a answer", "response_b": "b answer"} for t in (1.0, 2.0)])
    judge = ScriptedJudge(lambda r: (j(S, S, "Both", None), None))
    verdicts = grade(judge, item)
    assert "multiturn" in verdicts[0].confidence.fields and "multiturn" not in verdicts[1].confidence.fields


def test_the_reference_judge_has_a_calibrated_confidence_and_the_rules_alone_none():
    verdicts = grade(ReferenceJudge(), pair(a="The heron is grey.", b="Sorry, I can't help with that."))
    [v] = verdicts
    assert isinstance(v, Verdict) and v.decided_by == "judge"
    assert v.confidence.informative is True and set(v.confidence.methods) == {"rules"}
    assert set(v.confidence.fields) == {"category_a", "category_b", "preference"}
    assert all(0 < c < 1 for c in v.confidence.fields.values()) and "development data" in v.confidence.note
    # the error-string rules decide before the judge is asked; the reference judge knows how sure that rule is
    [r] = grade(ReferenceJudge(), pair(a="I cannot answer that.", b="I can't help with that kind of request."))
    assert r.decided_by == "rules" and r.confidence.informative is True and "error_string" in r.confidence.note
    [r] = grade(ScriptedJudge(lambda req: pytest.fail("must not be called")),
                pair(a="I cannot answer that.", b="I can't help with that kind of request."))
    assert r.decided_by == "rules" and r.confidence.informative is False and r.confidence.fields == {}
