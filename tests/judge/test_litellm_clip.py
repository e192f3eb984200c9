"""video_input clip through the litellm judge: the turn's window cut as an MP4 and sent to a
loopback server in the wire format of each route that takes video, decoded back from what
arrived. hosted_vllm/ speaks OpenAI's format (litellm turns the `file` part into vLLM's
`video_url`); gemini/ speaks Gemini's generateContent (`inline_data` beside `video_metadata`)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json

import pytest

pytest.importorskip("litellm")

from framejudge.backends import JudgeSpecError
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import GradeOptions, Grader, make_judge
from framejudge.judge.base import unused_options
from framejudge.judge.litellm_backend import LiteLLMJudge
from framejudge.schema import Item, JudgeConfig, JudgeError, Verdict, VideoInput
from tests.frame_sampler.test_clip import SIZE, decoded, numbered
from tests.judge.test_litellm_backend import GOOD, RUBRIC, ScriptedServer, completion

# a conversation whose second question is asked at 12.5 s: its window is 7.5-12.5 s (lookback 5)
TURNS = [{"question": "What number is shown?", "time": 4.0, "golden": "Six.", "response_a": "Six."},
         {"question": "And the number now?", "time": 12.5, "golden": "Ten.", "response_a": "Ten."}]
GOOD_ONE = {"response_a": GOOD["response_a"]}


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("v") / "v.mp4", numbered, cfr_times(20, 30), size=SIZE, gop=30,
                       bframes=0)


def conversation(video) -> Item:
    return Item(id="talk", task_type="multi_turn", video=str(video), turns=TURNS)


def reply_with(usage: dict | None = None):
    def reply(body):
        c = completion(json.dumps(GOOD_ONE))
        if usage is not None:
            c["usage"]["prompt_tokens_details"] = usage
        return 200, c, {}
    return reply


def grade_clips(judge, item, **options):
    return asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False, video_input="clip",
                                                          sampler={"lookback": 5.0}, **options)).grade(item))


def test_a_clip_of_the_turns_window_reaches_vllm_as_a_video_url(video):
    server = ScriptedServer([reply_with({"cached_tokens": 0, "video_tokens": 1290})])
    with server as base:
        judge = LiteLLMJudge("hosted_vllm/qwen-vl", api_base=base, api_key="k", logprobs=False)
        first, second = grade_clips(judge, conversation(video))
    assert isinstance(second, Verdict), second
    parts = server.requests[1]["body"]["messages"][-1]["content"]
    videos = [p for p in parts if p["type"] == "video_url"]
    assert len(videos) == 1 and not [p for p in parts if p["type"] in ("image_url", "file")]
    url = videos[0]["video_url"]["url"]
    assert url.startswith("data:video/mp4;base64,")
    data = base64.b64decode(url.split(",", 1)[1])
    numbers, times, _ = decoded(data)
    assert numbers == list(range(210, 376))  # 7.0 s (the key frame before 7.5 s) to the frame at 12.5 s
    clip = second.provenance.clip
    assert clip.sha256 == hashlib.sha256(data).hexdigest() and clip.bytes == len(data)
    assert (clip.start, clip.end, clip.fps, clip.method) == (7.0, 12.5, 1.0, "remux")
    assert second.provenance.frame_timestamps == [] and second.provenance.options.video_input is VideoInput.clip
    text = " ".join(p["text"] for p in parts if p["type"] == "text")
    assert "from 7.00 s to 12.50 s" in text and "(asked at 12.50 s" in text
    assert second.provenance.usage.video_tokens == 1290
    # litellm drops the part's fps on the way to vLLM: the request's media_io_kwargs carries it
    assert server.requests[1]["body"]["media_io_kwargs"] == {"video": {"fps": 1.0, "num_frames": -1}}
    assert any(n.startswith("clip sampling pinned: media_io_kwargs") for n in second.provenance.notes)
    # the first turn's window ends at its own question, 4 s
    assert (first.provenance.clip.start, first.provenance.clip.end) == (0.0, 4.0)


def test_a_reply_that_counts_no_video_tokens_is_a_judge_error_not_a_verdict(video):
    item = conversation(video).model_copy(update={"turns": conversation(video).turns[:1]})
    server = ScriptedServer([reply_with({"cached_tokens": 0, "video_tokens": 0})])
    with server as base:
        [e] = grade_clips(LiteLLMJudge("hosted_vllm/qwen-vl", api_base=base, api_key="k", logprobs=False), item)
    assert isinstance(e, JudgeError) and e.kind == "backend_error"
    assert "counted no video tokens for the clip of 0.00-4.00 s" in e.message and e.raw_output
    assert e.provenance.clip is not None and e.provenance.usage.video_tokens == 0
    # a server that gives no count by modality is taken at its word: no error, no count
    with ScriptedServer([reply_with({"cached_tokens": 0})]) as base:
        [v] = grade_clips(LiteLLMJudge("hosted_vllm/qwen-vl", api_base=base, api_key="k", logprobs=False), item)
    assert isinstance(v, Verdict) and v.provenance.usage.video_tokens is None


def gemini_reply(modalities: list[dict]):
    def reply(body):
        return 200, {"candidates": [{"content": {"parts": [{"text": json.dumps(GOOD_ONE)}], "role": "model"},
                                     "finishReason": "STOP", "index": 0}],
                     "usageMetadata": {"promptTokenCount": sum(m["tokenCount"] for m in modalities),
                                       "candidatesTokenCount": 40,
                                       "totalTokenCount": sum(m["tokenCount"] for m in modalities) + 40,
                                       "promptTokensDetails": modalities},
                     "modelVersion": "gemini-2.5-flash"}, {}
    return reply


def test_gemini_gets_the_clip_inline_with_its_rate_pinned(video):
    item = conversation(video).model_copy(update={"turns": conversation(video).turns[:1]})
    server = ScriptedServer([gemini_reply([{"modality": "TEXT", "tokenCount": 900},
                                           {"modality": "VIDEO", "tokenCount": 1032}])])
    with server as base:
        judge = LiteLLMJudge("gemini/gemini-2.5-flash", api_base=base.removesuffix("/v1"), api_key="k",
                             logprobs=False)
        [v] = grade_clips(judge, item, clip_fps=2.0)
    assert isinstance(v, Verdict), v
    request = server.requests[0]
    assert request["path"].startswith("/models/gemini-2.5-flash:generateContent")
    [part] = [p for c in request["body"]["contents"] for p in c["parts"] if "inline_data" in p]
    assert part["inline_data"]["mime_type"] == "video/mp4" and part["video_metadata"] == {"fps": 2.0}
    assert "media_io_kwargs" not in request["body"]  # vLLM's field, not Gemini's
    data = base64.b64decode(part["inline_data"]["data"])
    assert hashlib.sha256(data).hexdigest() == v.provenance.clip.sha256 and v.provenance.clip.fps == 2.0
    assert decoded(data)[0] == list(range(0, 121))  # 0 s to the frame on screen at the question, 4 s
    assert v.provenance.usage.video_tokens == 1032
    # Gemini counts the prompt by modality: one without a VIDEO entry did not read the clip
    with ScriptedServer([gemini_reply([{"modality": "TEXT", "tokenCount": 900}])]) as base:
        [e] = grade_clips(LiteLLMJudge("gemini/gemini-2.5-flash", api_base=base.removesuffix("/v1"), api_key="k",
                                       logprobs=False), item)
    assert isinstance(e, JudgeError) and e.kind == "backend_error" and "no video tokens" in e.message


@pytest.mark.parametrize(("model", "request_mb"), [("gemini/gemini-2.5-flash", 100), ("vertex_ai/gemini-2.5-flash", 20),
                                                  ("hosted_vllm/qwen-vl", 20)])
def test_each_provider_gets_clips_up_to_its_own_inline_request_size(model, request_mb):
    from framejudge.frame_sampler.clip import PROMPT_ALLOWANCE

    judge = LiteLLMJudge(model, api_base="http://127.0.0.1:9", api_key="k", logprobs=False)
    grader = Grader(judge, RUBRIC, GradeOptions(cache=False, video_input="clip"))
    # the clip's base64 text and the prompt fit the provider's request, with no more than 3 bytes to spare
    assert 0 <= request_mb * 10**6 - PROMPT_ALLOWANCE - grader.clip_max_bytes * 4 / 3 < 4


def test_a_clip_over_the_judges_limit_is_a_bad_input_record_before_any_call(video):
    """The judge's limit reaches the cut, in the decoding process: a provider taking 1.0004 MB requests
    leaves room for a 300-byte clip, which the turn's window does not fit in."""
    from framejudge.frame_sampler import IsolatedSampler

    item = conversation(video).model_copy(update={"turns": conversation(video).turns[:1]})
    server = ScriptedServer([])
    with server as base, IsolatedSampler(workers=1, timeout_s=60, cache_dir=None) as sampler:
        judge = LiteLLMJudge("hosted_vllm/qwen-vl", api_base=base, api_key="k", logprobs=False)
        judge.clip_request_bytes = 1_000_400
        grader = Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False, video_input="clip",
                                                    sampler={"lookback": 5.0}), cut=sampler.cut)
        [e] = asyncio.run(grader.grade(item))
    assert isinstance(e, JudgeError) and e.kind == "bad_input", e
    assert "is over 0.3 kB" in e.message and "(1 MB a request)" in e.message
    assert server.requests == []


def test_judges_without_video_refuse_clips_up_front():
    for spec in ("litellm:openai/gpt-4o", "litellm:anthropic/claude-x", "litellm:ollama/llava", "reference"):
        judge = make_judge(spec, "http://127.0.0.1:9/v1") if spec != "reference" else make_judge(spec)
        why = unused_options(judge, spec, 1, False, video_input=VideoInput.clip)
        assert why.startswith("--video-input clip: the " + spec) and why.endswith("; send frames"), why
        assert unused_options(type(judge), spec, 1, False, "options.", VideoInput.clip).startswith(
            "options.video_input clip: ")
        with pytest.raises(JudgeSpecError, match="video_input clip: .* takes no video"):
            Grader(judge, RUBRIC, GradeOptions(video_input="clip"))
    gemini = make_judge("litellm:gemini/gemini-2.5-flash")
    assert unused_options(gemini, "litellm:gemini/gemini-2.5-flash", 1, False, video_input=VideoInput.clip) is None


def test_a_judges_files_default_applies_unless_the_run_says_otherwise():
    spec = "litellm:hosted_vllm/qwen-vl"
    judge = make_judge(spec, "http://127.0.0.1:9/v1", JudgeConfig(spec=spec, video_input="clip"))
    assert Grader(judge, RUBRIC, GradeOptions()).video_input is VideoInput.clip
    assert Grader(judge, RUBRIC, GradeOptions(video_input="frames")).effective_options.video_input is VideoInput.frames
    assert Grader(make_judge(spec, "http://127.0.0.1:9/v1"), RUBRIC, GradeOptions()).video_input is VideoInput.frames


def test_grade_on_the_command_line_cuts_clips_in_its_decoding_processes(video, tmp_path):
    """`framejudge grade --video-input clip`: the clips are cut by the run's killable decoding
    processes and reach the server; the verdicts file records each one."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    items = tmp_path / "items.jsonl"
    items.write_text(conversation(video).model_dump_json(exclude_none=True) + "\n")
    out = tmp_path / "v.jsonl"
    server = ScriptedServer([reply_with({"video_tokens": 700})])
    root = Path(__file__).parents[2]
    with server as base:
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                               "--judge", "litellm:hosted_vllm/qwen-vl", "--api-base", base, "--video-input", "clip",
                               "--lookback", "5", "--no-swap", "--yes", "--no-cache"],
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(root), "FRAMEJUDGE_CACHE_DIR": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["record"] for r in records] == ["verdict", "verdict"]
    clips = [r["provenance"]["clip"] for r in records]
    assert [(c["start"], c["end"]) for c in clips] == [(0.0, 4.0), (7.0, 12.5)]
    sent = [base64.b64decode(p["video_url"]["url"].split(",", 1)[1]) for r in server.requests
            for p in r["body"]["messages"][-1]["content"] if p["type"] == "video_url"]
    assert sorted(hashlib.sha256(d).hexdigest() for d in sent) == sorted(c["sha256"] for c in clips)
    assert all(r["provenance"]["options"]["video_input"] == "clip" for r in records)
    assert sum(r["provenance"]["usage"]["video_tokens"] for r in records) == 1400
