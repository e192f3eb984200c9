"""The grading pipeline: rules first, frames per turn, swaps, samples, blind control, failures.

`ScriptedJudge` stands in for a model's replies (the one edge these tests cannot reach
with a real model quickly); everything around it is the real pipeline and sampler.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import GradeOptions, Grader, JudgeFailure, JudgeRequest, JudgeResult, ReferenceJudge
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, JudgeError, JudgeErrorKind, Judgement, SamplerParams, Usage, Verdict

RUBRIC = get_rubric("video-qa")


@dataclass
class ScriptedJudge:
    """Replies from a script: a function of the request. Records every request it saw."""

    reply: object
    backend: str = "scripted"
    model_id: str = "scripted-1"
    needs_frames: bool = True
    sees_images: bool = True
    deterministic: bool = False
    seen: list[JudgeRequest] = field(default_factory=list)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        self.seen.append(request)
        out = self.reply(request)
        if isinstance(out, Exception):
            raise out
        return JudgeResult(Judgement.model_validate(out), usage=Usage(prompt_tokens=100, completion_tokens=20, cost_usd=0.001),
                           prompt_hash="p" * 16)


def g(cat):
    return {"category": cat, "rationale": "r"}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("v") / "countdown.mp4"
    return write_video(path, countdown, cfr_times(10, 30), gop=30)


def pair_item(video, task="single_turn", times=(None,)):
    turns = [{"time": t, "question": f"q{i}", "response_a": "a answer", "response_b": "b answer"} for i, t in enumerate(times)]
    return Item(id="it", video=str(video), task_type=task, turns=turns)


def run(grader, item):
    return asyncio.run(grader.grade(item))


def test_error_strings_decide_without_the_model(clip):
    judge = ScriptedJudge(lambda r: AssertionError("must not be called"))
    item = Item(id="e", video=str(clip), turns=[{"question": "q", "response_a": "I cannot answer that.",
                                                 "response_b": "I can't help with that kind of request."}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), item)
    # two error strings: a tie of two failing answers, the rubric's Neither (both bad)
    assert isinstance(v, Verdict) and v.decided_by == "rules" and v.preference.value == "Neither"
    assert judge.seen == []


def test_multi_turn_windows_end_at_each_question(clip):
    judge = ScriptedJudge(lambda r: {"response_a": g("Successful"), "response_b": g("Missing"), "preference": "A",
                                     "deciding_criterion": "category"})
    item = pair_item(clip, "multi_turn", (2.5, 7.25))
    opts = GradeOptions(sampler=SamplerParams(n=4, lookback=3), swap=False, cache=False)
    verdicts = run(Grader(judge, RUBRIC, opts), item)
    assert [v.turn for v in verdicts] == [0, 1]
    for v, t in zip(verdicts, (2.5, 7.25)):
        ts = v.provenance.frame_timestamps
        assert ts[-1] <= t and t - ts[-1] < 1 / 30 + 1e-9 and ts[0] >= t - 3 - 1 / 30
        assert v.provenance.sampler.end_at == t
    assert verdicts[1].multiturn is True
    assert all(f.image_url.startswith("data:image/jpeg;base64,") for f in judge.seen[0].frames)


def test_single_turn_sees_the_whole_clip(clip):
    judge = ScriptedJudge(lambda r: {"response_a": g("Successful")})
    item = Item(id="s", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=5), cache=False)), item)
    ts = v.provenance.frame_timestamps
    assert len(ts) == 5 and ts[0] < 2 and ts[-1] > 8
    assert v.preference is None


def test_provenance_names_the_ffmpeg_that_decoded_the_video(clip):
    import av

    judge = ScriptedJudge(lambda r: {"response_a": g("Successful")})
    with_video = Item(id="s", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), cache=False)), with_video)
    assert v.provenance.ffmpeg == av.ffmpeg_version_info and v.provenance.ffmpeg[0].isdigit()
    without = Item(id="t", turns=[{"question": "q", "response_a": "a"}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), without)
    assert v.provenance.ffmpeg is None


def test_swap_agreement_and_disagreement(clip):
    # Position-biased judge: always prefers whatever is shown first.
    biased = ScriptedJudge(lambda r: {"response_a": g("Successful"), "response_b": g("Successful"),
                                      "preference": "A", "deciding_criterion": "conciseness"})
    [v] = run(Grader(biased, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), cache=False)), pair_item(clip))
    assert len(biased.seen) == 2
    assert biased.seen[1].item.turns[0].response_a == "b answer"  # B/A order
    assert v.swap.consistent is False and v.preference.value == "Both"
    assert v.swap.original.preference.value == "A" and v.swap.swapped.preference.value == "B"
    assert "tie" in v.swap.resolution

    def fair(r):
        a_is_good = r.item.turns[0].response_a == "a answer"
        return {"response_a": g("Successful" if a_is_good else "Missing"),
                "response_b": g("Missing" if a_is_good else "Successful"),
                "preference": "A" if a_is_good else "B", "deciding_criterion": "category"}

    fair_judge = ScriptedJudge(fair)
    [v] = run(Grader(fair_judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), cache=False)), pair_item(clip))
    assert v.swap.consistent is True and v.preference.value == "A"
    assert v.provenance.usage.prompt_tokens == 200 and v.provenance.usage.cost_usd == pytest.approx(0.002)


def test_k_samples_majority(clip):
    replies = iter(["Successful", "Missing", "Successful"])
    judge = ScriptedJudge(lambda r: {"response_a": g(next(replies))})
    item = Item(id="k", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), samples=3, cache=False)), item)
    assert v.response_a.category.value == "Successful" and v.sample_agreement == pytest.approx(2 / 3)


def test_blind_control_flags_verdicts_that_ignore_the_video(clip):
    judge = ScriptedJudge(lambda r: {"response_a": g("Successful")})
    item = Item(id="b", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), blind=True, cache=False)), item)
    assert v.blind_unchanged is True
    assert [len(r.frames) for r in judge.seen] == [2, 0]
    sees = ScriptedJudge(lambda r: {"response_a": g("Successful" if r.frames else "Missing")})
    [v] = run(Grader(sees, RUBRIC, GradeOptions(sampler=SamplerParams(n=2), blind=True, cache=False)), item)
    assert v.blind_unchanged is False


def test_failures_are_judge_errors_not_verdicts(clip, tmp_path):
    judge = ScriptedJudge(lambda r: JudgeFailure(JudgeErrorKind.unparseable, "no JSON in reply", raw_output="hmm"))
    item = Item(id="f", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    [e] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), item)
    assert isinstance(e, JudgeError) and e.kind == "unparseable" and e.raw_output == "hmm"
    broken = tmp_path / "broken.mp4"
    broken.write_text("<html>")
    [e] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), item.model_copy(update={"video": str(broken)}))
    assert e.kind == "bad_input" and "not a readable media file" in e.message


def test_verdict_cache_makes_repeats_free(clip, tmp_path):
    judge = ScriptedJudge(lambda r: {"response_a": g("Successful")})
    item = Item(id="c", video=str(clip), turns=[{"question": "q", "response_a": "a"}])
    opts = GradeOptions(sampler=SamplerParams(n=2))
    [v1] = run(Grader(judge, RUBRIC, opts, cache_dir=tmp_path / "vc"), item)
    [v2] = run(Grader(judge, RUBRIC, opts, cache_dir=tmp_path / "vc"), item)
    assert len(judge.seen) == 1
    assert "from the verdict cache" in v2.provenance.notes
    changed = item.model_copy(update={"turns": [item.turns[0].model_copy(update={"response_a": "other"})]})
    run(Grader(judge, RUBRIC, opts, cache_dir=tmp_path / "vc"), changed)
    assert len(judge.seen) == 2


def test_reference_judge_skips_frames_even_with_a_video(clip):
    def no_decoding(path, params):
        raise AssertionError("the reference judge decoded frames")

    item = Item(id="r", video=str(clip), turns=[{"question": "q", "response_a": "I cannot answer that."}])
    [v] = run(Grader(ReferenceJudge(), RUBRIC, sample=no_decoding), item)
    assert v.provenance.frame_timestamps == [] and v.provenance.judge_backend == "reference"


def _unreadable_videos(tmp_path):
    folder = tmp_path / "folder.mp4"
    folder.mkdir()
    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)  # opening it to read would wait for a writer forever
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    return [(tmp_path / "not-there.mp4", "file not found"), (folder, "is a directory"),
            (fifo, "named pipe"), (empty, "file is empty"), (loop, "symbolic link loop")]


@pytest.mark.parametrize("responses", [("It shows 10.",), ("It shows 10.", "I cannot answer that."),
                                       ("I cannot answer that.",)])
def test_a_named_video_that_cannot_be_read_is_bad_input_for_every_judge(tmp_path, responses):
    scripted = ScriptedJudge(lambda r: {"response_a": g("Successful")})
    turn = {"question": "What number?", "response_a": responses[0]}
    if len(responses) > 1:
        turn["response_b"] = responses[1]
    for video, reason in _unreadable_videos(tmp_path):
        item = Item(id="v", video=str(video), turns=[turn])
        for judge in (ReferenceJudge(), scripted):  # the error-string rules do not skip the check either
            [e] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), item)
            assert isinstance(e, JudgeError), (judge.backend, video)
            assert e.kind == "bad_input" and reason in e.message and str(video) in e.message
            assert e.provenance.video == str(video)
    assert scripted.seen == []


def test_relative_videos_are_checked_under_the_media_root(clip, tmp_path):
    item = Item(id="rel", video=clip.name, turns=[{"question": "q", "response_a": "It shows 10."}])
    [v] = run(Grader(ReferenceJudge(), RUBRIC, media_root=clip.parent), item)
    assert isinstance(v, Verdict)
    [e] = run(Grader(ReferenceJudge(), RUBRIC, media_root=tmp_path), item)
    assert isinstance(e, JudgeError) and e.kind == "bad_input" and str(tmp_path / clip.name) in e.message


@pytest.mark.parametrize("video", ["", "   "])
def test_an_empty_video_name_is_refused_not_graded_as_no_video(video):
    with pytest.raises(ValidationError, match="video is empty"):
        Item(id="e", video=video, turns=[{"question": "q", "response_a": "a"}])


def test_item_metadata_passes_through():
    item = Item(id="m", turns=[{"question": "q", "response_a": "I cannot answer that."}],
                metadata={"model": "assistant-v7", "slice": {"domain": "birds"}})
    [v] = run(Grader(ReferenceJudge(), RUBRIC), item)
    assert v.metadata == {"model": "assistant-v7", "slice": {"domain": "birds"}}


def test_frames_through_killable_decoding_processes(clip, tmp_path):
    """The same verdict with the decoding in an IsolatedSampler; a decode past its time limit is a
    bad_input JudgeError for that turn, not a stuck grader."""
    from framejudge.frame_sampler import IsolatedSampler

    reply = {"response_a": g("Successful"), "response_b": g("Missing"), "preference": "A",
             "deciding_criterion": "category"}
    opts = GradeOptions(sampler=SamplerParams(n=4), swap=False, cache=False)
    [here] = run(Grader(ScriptedJudge(lambda r: reply), RUBRIC, opts), pair_item(clip))
    judge = ScriptedJudge(lambda r: reply)
    with IsolatedSampler(workers=1, timeout_s=60, cache_dir=None) as isolated:
        [there] = run(Grader(judge, RUBRIC, opts, sample=isolated.sample), pair_item(clip))
        assert there.provenance.frame_timestamps == here.provenance.frame_timestamps
        assert len(judge.seen[0].frames) == 4
        hd = write_video(tmp_path / "hd.mp4", countdown, cfr_times(4, 30), size=(1920, 1080), gop=60)
        isolated.timeout_s = 0.01
        [error] = run(Grader(judge, RUBRIC, GradeOptions(sampler=SamplerParams(n=16), swap=False, cache=False),
                             sample=isolated.sample), pair_item(hd))
    assert isinstance(error, JudgeError) and error.kind is JudgeErrorKind.bad_input
    assert "longer than 0.01 s" in error.message


def test_the_verdict_cache_tells_endpoints_apart(tmp_path):
    """Two servers may serve different models under one name: a verdict from one is not the other's."""
    def served(api_base: str) -> ScriptedJudge:
        judge = ScriptedJudge(lambda r: {"response_a": g("Successful")}, needs_frames=False)
        judge.api_base = api_base
        return judge

    item = Item(id="c", turns=[{"question": "Q?", "response_a": "A."}])
    first, second, again = served("http://a/v1"), served("http://b/v1"), served("http://a/v1")
    options = GradeOptions(swap=False)
    for judge in (first, second, again):
        [v] = run(Grader(judge, RUBRIC, options, cache_dir=tmp_path), item)
    assert len(first.seen) == 1 and len(second.seen) == 1 and len(again.seen) == 0
    assert "from the verdict cache" in v.provenance.notes


def test_a_response_b_the_turn_does_not_have_is_dropped_whatever_the_judge_says():
    phantom = {"response_a": g("Successful"), "response_b": g("Not Successful"), "preference": "A",
               "deciding_criterion": "category"}
    judge = ScriptedJudge(lambda r: phantom, needs_frames=False)
    item = Item(id="one", turns=[{"question": "Q?", "response_a": "A."}])
    [v] = run(Grader(judge, RUBRIC, GradeOptions(cache=False)), item)
    assert v.response_b is None and v.preference is None and v.deciding_criterion is None
    assert "the judge graded a response B this turn does not have; dropped" in v.provenance.notes
    from framejudge.judge import summarize

    summary = summarize([v], 1)
    assert summary.categories_b == {} and summary.preferences == {} and summary.win_rate_a.n == 0


def test_the_verdict_cache_tells_output_modes_apart_and_not_service_tiers(tmp_path):
    """A verdict held to the schema is not one asked in JSON mode; one asked on the flex tier is the
    standard tier's. A server that refuses the schema moves a run to JSON mode, and the verdicts it
    gives then are found again by the next run, which starts from the schema again."""
    import json

    pytest.importorskip("litellm")
    from framejudge.judge.litellm_backend import LiteLLMJudge
    from framejudge.schema import ServiceTier
    from tests.judge.test_litellm_backend import GOOD, ScriptedServer, completion

    items = [Item(id=f"c{k}", turns=[{"question": f"Q{k}?", "golden": "G.", "response_a": "A.", "response_b": "B."}])
             for k in range(2)]

    def graded(base: str, **judge) -> list:
        grader = Grader(LiteLLMJudge("openai/m", api_base=base, api_key="k", logprobs=False, **judge), RUBRIC,
                        GradeOptions(swap=False), cache_dir=tmp_path)
        return [r for it in items for r in run(grader, it)]

    def cached(records: list) -> bool:
        return all("from the verdict cache" in r.provenance.notes for r in records)

    ok = (200, completion(json.dumps(GOOD)), {})
    server = ScriptedServer([ok])  # one server: the endpoint is part of the key
    with server as base:
        graded(base, output="schema")
        assert len(server.requests) == 2
        graded(base, output="json_object")  # another mode: asked again
        assert len(server.requests) == 4 and server.requests[-1]["body"]["response_format"] == {"type": "json_object"}
        assert cached(graded(base, output="schema", service_tier=ServiceTier.flex))  # another tier: the same
        assert len(server.requests) == 4

    refused = (400, {"error": {"message": "response_format json_schema is not supported",
                               "type": "invalid_request_error"}}, {})
    server = ScriptedServer([refused, ok])
    with server as base:
        graded(base, output="schema")
        assert [r["body"]["response_format"]["type"] for r in server.requests] == [
            "json_schema", "json_object", "json_object"]
        assert cached(graded(base, output="schema")) and len(server.requests) == 3  # the next run finds both
