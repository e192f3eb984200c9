"""What the litellm judge puts on each provider's wire: a real item with a real video graded
through LiteLLMJudge against loopback servers that speak OpenAI, Gemini, Anthropic, vLLM and
Ollama (tests/judge/providers.py), and the requests that arrived read back in each provider's own
shape: the frames as images (how many, in which order, which frame each is, the time label beside
each), the rubric as the system text, the temperature, the field that asks for JSON and the one
that carries the reply's schema. These are the checks that catch a part litellm drops or moves
without a word."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
import pytest

pytest.importorskip("litellm")

from framejudge.judge import GradeOptions, Grader
from framejudge.judge.litellm_backend import LiteLLMJudge
from framejudge.rubrics import get_rubric
from framejudge.rubrics.prompt import render_prompt
from framejudge.schema import Item, Verdict
from tests.conftest import barcode_frame, read_barcode
from tests.judge.providers import (AnthropicServer, GeminiServer, Image, OllamaServer, OpenAIServer,
                                   ProviderServer, VLLMServer)

RUBRIC = get_rubric("video-qa")
FPS = 10
GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response",
                       "evidence_timestamps": [1.0]},
        "response_b": {"category": "Missing", "rationale": "declines a supported question"},
        "preference": "A", "deciding_criterion": "category"}
MODELS = {OpenAIServer: "gpt-4o-mini", GeminiServer: "gemini-2.5-flash", AnthropicServer: "claude-sonnet-4-5-20250929",
          VLLMServer: "Qwen/Qwen2.5-VL-7B-Instruct", OllamaServer: "qwen2.5vl:7b"}
SERVERS = list(MODELS)


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> str:
    """3 s at 10 fps, each frame carrying its number as a barcode (tests/conftest.py)."""
    from framejudge.examples.synth import cfr_times, write_video

    path = tmp_path_factory.mktemp("contract") / "barcode.mp4"
    write_video(path, barcode_frame(640, 360), cfr_times(3, FPS), gop=FPS)
    return str(path)


def item(video: str) -> Item:
    return Item(id="heron", video=video, turns=[{
        "question": "What bird is this?", "golden": "A heron.", "response_a": "A grey heron.",
        "response_b": "Sorry, I can't help identify birds."}])


def grade(judge: LiteLLMJudge, it: Item, **options) -> Verdict:
    [v] = asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False, **options)).grade(it))
    assert isinstance(v, Verdict), v
    return v


def judge_for(server: ProviderServer, **kw) -> LiteLLMJudge:
    return LiteLLMJudge(server.model(MODELS[type(server)]), api_base=server.api_base, api_key="contract-key",
                        max_retries=1, **kw)


def frame_number(image: Image) -> int:
    from PIL import Image as PILImage

    assert image.data[:3] == b"\xff\xd8\xff", "not a JPEG"
    return read_barcode(np.asarray(PILImage.open(io.BytesIO(image.data)).convert("RGB")))


@pytest.mark.parametrize("kind", SERVERS, ids=lambda k: k.prefix)
def test_the_frames_the_rubric_and_the_settings_arrive_in_each_providers_shape(kind, video):
    it = item(video)
    with kind(json.dumps(GOOD)) as server:
        v = grade(judge_for(server), it)
    [call] = server.calls
    body = call.body
    times = v.provenance.frame_timestamps
    assert len(times) == 8

    # every frame, as an image, in order: the frame at each sampled time, told by its barcode
    images = server.images(body)
    assert [frame_number(i) for i in images] == [round(t * FPS) for t in times]
    assert all(i.mime in ("image/jpeg", "") for i in images)  # Ollama's images carry no MIME type

    # each image labelled with its time, just before it, where the provider keeps parts apart
    parts = server.user_parts(body)
    labels = [f"[t = {t:.2f} s]" for t in times]
    if kind is OllamaServer:  # one text and a list of images: the labels stay, in order, in the text
        [text] = [p for p in parts if isinstance(p, str)]
        at = [text.index(label) for label in labels]
        assert at == sorted(at)
    else:
        before = [parts[k - 1] for k, p in enumerate(parts) if isinstance(p, Image)]
        assert before == labels
        text = parts[-1]
    assert "Question: What bird is this?" in text and "Response B: Sorry, I can't help identify birds." in text

    # the rubric as the system text, as rendered
    assert server.system_text(body) == render_prompt(RUBRIC, it, [], 0).messages[0]["content"]
    assert server.temperature(body) == 0
    # the reply reached the verdict, with the server's usage
    assert v.response_b.category.value == "Missing" and v.response_a.evidence_timestamps == [1.0]
    assert v.provenance.usage.prompt_tokens == 2412 and v.provenance.usage.completion_tokens == 96
    assert call.headers.get("x-api-key", call.headers.get("x-goog-api-key", call.headers.get("authorization"))) \
        in ("contract-key", "Bearer contract-key")
