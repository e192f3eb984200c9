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
import re

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


def item(video: str | None) -> Item:
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

    # each image labelled with its time, just before it (for Ollama, whose chat API keeps a message's
    # text and images apart, each frame is a message of its own with its label as the text)
    parts = server.user_parts(body)
    labels = [f"[t = {t:.2f} s]" for t in times]
    before = [parts[k - 1] for k, p in enumerate(parts) if isinstance(p, Image)]
    assert before == labels
    if kind is OllamaServer:
        users = [m for m in body["messages"] if m["role"] == "user"]
        assert [m["content"] for m in users if m.get("images")] == labels
        assert all(len(m.get("images") or []) <= 1 for m in users)
    text = parts[-1]
    assert re.search(r"Question:\n<<<question (\w+)>>>\nWhat bird is this\?\n<<<end question \1>>>", text)
    assert re.search(r"Response B:\n<<<response_b (\w+)>>>\nSorry, I can't help identify birds\.\n<<<end response_b \1>>>",
                     text)

    # the rubric as the system text, as rendered
    assert server.system_text(body) == render_prompt(RUBRIC, it, [], 0).messages[0]["content"]
    assert server.temperature(body) == 0
    # the reply reached the verdict, with the server's usage
    assert v.response_b.category.value == "Missing" and v.response_a.evidence_timestamps == [1.0]
    assert v.provenance.usage.prompt_tokens == 2412 and v.provenance.usage.completion_tokens == 96
    assert call.headers.get("x-api-key", call.headers.get("x-goog-api-key", call.headers.get("authorization"))) \
        in ("contract-key", "Bearer contract-key")
    assert "output mode: schema" in v.provenance.notes


# ------------------------------------------------------------------ output modes: the schema and JSON mode

def keywords(schema) -> set[str]:
    """Every keyword used in a JSON schema, at any depth (property and definition names left out)."""
    found: set[str] = set()
    if isinstance(schema, list):
        for s in schema:
            found |= keywords(s)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            subs = value.values() if key in ("properties", "$defs") and isinstance(value, dict) else [value]
            for sub in subs:
                found |= keywords(sub)
    return found


def enums(schema) -> list[list]:
    if isinstance(schema, list):
        return [e for s in schema for e in enums(s)]
    if isinstance(schema, dict):
        return ([schema["enum"]] if "enum" in schema else []) + [e for v in schema.values() for e in enums(v)]
    return []


def test_the_reply_schema_is_the_judgements_with_every_property_required():
    from framejudge.judge.reask import reply_schema
    from framejudge.schema import Judgement

    schema = reply_schema()
    assert schema["required"] == list(Judgement.model_fields) and schema["additionalProperties"] is False
    grade = schema["properties"]["response_a"]
    assert grade["required"] == ["category", "rationale", "evidence_timestamps", "integrity_violation"]
    assert schema["properties"]["response_b"]["anyOf"] == [grade, {"type": "null"}]
    assert not keywords(schema) & {"default", "$ref", "$defs"} and "description" not in schema
    assert ["Successful", "Not Successful", "Irrelevant", "Missing", "Error message"] in enums(schema)
    schema["properties"].clear()
    assert reply_schema()["properties"]  # each caller gets its own copy


def test_keywords_a_provider_refuses_are_left_out_and_names_stay():
    from framejudge.judge.litellm_backend import SCHEMA_REFUSED, response_format, without_keywords

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "T", "type": "object",
              "properties": {"title": {"type": "string", "title": "Title", "maxLength": 5},
                             "const": {"const": 3, "exclusiveMinimum": 0}},
              "$defs": {"title": {"type": "object", "propertyNames": {"pattern": "^a"}}}}
    out = without_keywords(schema, SCHEMA_REFUSED["gemini"])
    assert out == {"type": "object", "properties": {"title": {"type": "string", "maxLength": 5}, "const": {}},
                   "$defs": {"title": {"type": "object"}}}
    assert schema["title"] == "T"  # the original is left as it was
    for provider, refused in SCHEMA_REFUSED.items():
        sent = response_format("schema", provider)["json_schema"]["schema"]
        assert not keywords(sent) & refused, provider
    # the Judgement's schema uses some of them, so the table is not idle
    assert {"title", "maxLength"} <= keywords(response_format("schema", "hosted_vllm")["json_schema"]["schema"])
    assert response_format("json_object", "gemini") == {"type": "json_object"}


@pytest.mark.parametrize("kind", SERVERS, ids=lambda k: k.prefix)
def test_the_reply_schema_arrives_in_each_providers_field(kind, video):
    from framejudge.judge.litellm_backend import SCHEMA_REFUSED, without_keywords
    from framejudge.judge.reask import reply_schema

    with kind(json.dumps(GOOD)) as server:
        judge = judge_for(server)
        assert judge.output == "schema"  # auto: each of these providers takes one
        grade(judge, item(video))
    [call] = server.calls
    body, sent = call.body, server.schema(call.body)
    expected = without_keywords(reply_schema(), SCHEMA_REFUSED.get(kind.prefix, frozenset()))
    if kind in (OpenAIServer, VLLMServer):
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "judgement"
        assert body["response_format"]["json_schema"]["strict"] is True
        assert sent == expected
    elif kind is GeminiServer:
        assert server.json_mode(body) == "application/json"
        assert "response_json_schema" in body["generationConfig"]  # Gemini 2+: JSON Schema as it is
        assert sent == expected
        assert not keywords(sent) & {"$schema", "title", "const", "exclusiveMinimum", "propertyNames", "strict"}
    elif kind is AnthropicServer:
        # litellm's native structured output: the $defs inlined, the bounds it cannot enforce moved
        # into descriptions, behind the structured-outputs beta
        assert "structured-outputs" in call.headers["anthropic-beta"]
        assert set(sent["properties"]) == set(expected["properties"]) and sent["required"] == expected["required"]
        assert "maxLength" not in keywords(sent)
        assert sent["properties"]["response_a"]["required"] == expected["properties"]["response_a"]["required"]
    else:
        assert body["format"] == expected
    assert ["Successful", "Not Successful", "Irrelevant", "Missing", "Error message"] in enums(sent)


def test_an_older_anthropic_model_is_held_to_the_schema_by_a_forced_tool(video):
    """Where Anthropic has no native structured output, litellm sends the schema as a tool the model
    must call and reads the call back as the reply."""
    from framejudge.judge.reask import reply_schema

    with AnthropicServer(json.dumps(GOOD)) as server:
        judge = LiteLLMJudge(server.model("claude-3-5-haiku-20241022"), api_base=server.api_base, api_key="k")
        v = grade(judge, item(video))
    [call] = server.calls
    assert call.body["tool_choice"] == {"name": "json_tool_call", "type": "tool"}
    assert server.schema(call.body) == {**reply_schema(), "type": "object"}
    assert "anthropic-beta" not in call.headers
    assert v.response_a.category.value == "Successful" and "output mode: schema" in v.provenance.notes


@pytest.mark.parametrize("kind", SERVERS, ids=lambda k: k.prefix)
def test_json_mode_arrives_in_each_providers_field(kind):
    it = item(None)
    with kind(json.dumps(GOOD)) as server:
        v = grade(judge_for(server, output="json_object"), it)
    [call] = server.calls
    assert server.schema(call.body) is None
    expected = {OpenAIServer: {"type": "json_object"}, VLLMServer: {"type": "json_object"},
                GeminiServer: "application/json", OllamaServer: "json",
                AnthropicServer: None}[kind]  # Anthropic has no JSON mode: litellm sends nothing for it
    assert server.json_mode(call.body) == expected
    assert "output mode: json_object" in v.provenance.notes


@pytest.mark.parametrize("kind,status", [(OpenAIServer, 400), (VLLMServer, 422), (GeminiServer, 400),
                                         (AnthropicServer, 400), (OllamaServer, 400)], ids=lambda k: getattr(k, "prefix", k))
def test_a_refused_schema_falls_back_to_json_mode_and_is_not_sent_again(kind, status):
    def reply(seen):
        if server.schema(seen.body) is not None:
            return server.refuse(status, "response_format json_schema is not supported by this model")
        return json.dumps(GOOD)

    server = kind(reply)
    it = item(None)
    with server:
        judge = judge_for(server, logprobs=False)
        first = grade(judge, it)
        second = grade(judge, it)
    assert [server.schema(r.body) is not None for r in server.calls] == [True, False, False]
    assert judge.output == "json_object"
    assert any(n.startswith("the server refused the reply's JSON schema (") and "not supported" in n
               for n in first.provenance.notes)
    assert "output mode: json_object" in first.provenance.notes and "output mode: json_object" in second.provenance.notes
    assert not any("refused" in n for n in second.provenance.notes)
    assert first.provenance.usage.attempts == 1  # the refused call gave no reply


def test_a_server_that_refuses_logprobs_and_the_schema_loses_both_once():
    def reply(seen):
        if seen.body.get("logprobs"):
            return server.refuse(400, "logprobs is not supported")
        if seen.body["response_format"]["type"] == "json_schema":
            return server.refuse(400, "json_schema is not supported")
        return json.dumps(GOOD)

    server = OpenAIServer(reply)
    with server:
        judge = judge_for(server)
        assert judge.logprobs is True
        first = grade(judge, item(None))
        grade(judge, item(None))
    sent = [(bool(r.body.get("logprobs")), r.body["response_format"]["type"]) for r in server.calls]
    assert sent == [(True, "json_schema"), (False, "json_schema"), (False, "json_object"), (False, "json_object")]
    notes = " ".join(first.provenance.notes)
    assert "refused logprobs" in notes and "refused the reply's JSON schema" in notes


def test_a_request_error_that_is_not_about_either_is_not_hidden():
    """A 400 that the JSON mode call gets too is the judge's error, and nothing is given up for it."""
    server = OpenAIServer(lambda seen: server.refuse(400, "image too large"))
    with server:
        judge = judge_for(server)
        [e] = asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False)).grade(item(None)))
    assert e.kind == "backend_error" and "image too large" in e.message
    assert len(server.calls) == 3  # with both, without logprobs, in JSON mode
    assert judge.output == "schema" and judge.logprobs is True


def test_the_output_mode_comes_from_the_judges_file_and_auto_asks_litellm():
    from pydantic import ValidationError

    from framejudge.backends import JudgeSpecError
    from framejudge.judge import make_judge
    from framejudge.schema import JudgeConfig

    spec = "litellm:openai/self-hosted"
    base = "http://127.0.0.1:9/v1"
    assert make_judge(spec, base).output == "schema"
    assert make_judge(spec, base, JudgeConfig(spec=spec, output="json_object")).output == "json_object"
    # Gemini 2 and later by name (as litellm sends them the schema); an older one where litellm's list says so
    assert [make_judge(f"litellm:gemini/{m}").output for m in ("gemini-2.0-flash", "gemini-3.5-pro", "gemini-1.5-flash")] \
        == ["schema", "schema", "json_object"]
    other = "litellm:openrouter/nobody/unknown-model"  # a provider outside the table, a model litellm does not know
    assert make_judge(other, base).output == "json_object"
    assert make_judge(other, base, JudgeConfig(spec=other, output="schema")).output == "schema"
    with pytest.raises(ValidationError, match="output"):
        JudgeConfig(spec=spec, output="grammar")
    with pytest.raises(JudgeSpecError, match="output 'grammar'"):
        LiteLLMJudge("openai/m", output="grammar")


def test_a_provider_that_takes_no_seed_is_sent_none(video):
    with AnthropicServer(json.dumps(GOOD)) as server:
        v = grade(judge_for(server), item(None))
    assert "seed" not in server.calls[0].body and "anthropic takes no seed: none sent" in v.provenance.notes
    with OpenAIServer(json.dumps(GOOD)) as server:
        v = grade(judge_for(server), item(None))
    assert server.calls[0].body["seed"] == 1234 and not any("seed" in n for n in v.provenance.notes)


def test_a_content_policy_refusal_is_not_taken_for_a_refused_schema():
    refusal = {"error": {"message": "Invalid prompt: your prompt was flagged as potentially violating our usage policy.",
                         "type": "invalid_request_error", "param": None, "code": "content_policy_violation"}}
    server = OpenAIServer(lambda seen: (400, refusal, {}))
    with server:
        judge = judge_for(server)
        [e] = asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False)).grade(item(None)))
    assert e.kind == "refused" and len(server.calls) == 1
    assert judge.output == "schema" and judge.logprobs is True


def test_the_schema_vllm_gets_compiles_in_xgrammar_and_holds_a_reply_to_the_judgement():
    """xgrammar is vLLM's default structured-output backend: the schema sent must compile there
    (strict, as vLLM compiles a strict json_schema), let every field of a Judgement through and
    stop a reply that leaves one out or names no category."""
    xgr = pytest.importorskip("xgrammar")
    from framejudge.judge.litellm_backend import response_format
    from framejudge.schema import Judgement

    schema = response_format("schema", "hosted_vllm")["json_schema"]["schema"]
    tokens = xgr.TokenizerInfo(["<eos>"] + [chr(i) for i in range(32, 127)], stop_token_ids=[0])
    compiled = xgr.GrammarCompiler(tokens).compile_grammar(xgr.Grammar.from_json_schema(json.dumps(schema),
                                                                                        strict_mode=True))

    def accepted(reply: dict) -> bool:
        matcher = xgr.GrammarMatcher(compiled)
        return matcher.accept_string(json.dumps(reply)) and matcher.accept_token(0) and matcher.is_terminated()

    one = {"category": "Successful", "rationale": "ok", "evidence_timestamps": [1.0], "integrity_violation": False}
    single = {"response_a": one, "response_b": None, "preference": None, "deciding_criterion": None,
              "transcription_error": False, "multiturn": False}
    pair = {**single, "response_b": {**one, "category": "Missing"}, "preference": "A", "deciding_criterion": "category"}
    for reply in (single, pair):
        assert accepted(reply) and Judgement.model_validate(reply)
    assert not accepted({"response_a": {"category": "Successful", "rationale": "ok"}})
    assert not accepted({**single, "response_a": {**one, "category": "Great"}})
    assert not accepted({**single, "verdict": "A"})


def single(video: str) -> Item:
    return Item(id="heron", video=video, turns=[{"question": "What bird is this?", "golden": "A heron.",
                                                 "response_a": "A grey heron."}])


@pytest.mark.parametrize("clip_fps", [1.0, 2.5])
def test_vllm_is_told_the_clips_sampling_rate_beside_the_clip(video, clip_fps):
    """litellm turns the clip into vLLM's video_url part and drops the part's fps; the request's
    media_io_kwargs carries it (with no cap on the frame count), and the verdict says so."""
    with VLLMServer(json.dumps({"response_a": GOOD["response_a"]})) as server:
        one = single(video)
        v = grade(judge_for(server, logprobs=False), one, video_input="clip", clip_fps=clip_fps)
    [call] = server.calls
    [clip] = server.media(call.body)
    assert clip.mime == "video/mp4" and v.provenance.clip.fps == clip_fps
    import hashlib

    assert hashlib.sha256(clip.data).hexdigest() == v.provenance.clip.sha256
    assert server.video_sampling(call.body) == {"fps": clip_fps, "num_frames": -1}
    [note] = [n for n in v.provenance.notes if n.startswith("clip sampling pinned")]
    assert f'"fps": {clip_fps}' in note


def test_frames_and_other_providers_clips_carry_no_vllm_sampling(video):
    with VLLMServer(json.dumps(GOOD)) as server:
        v = grade(judge_for(server, logprobs=False), item(video))
    assert "media_io_kwargs" not in server.calls[0].body
    assert not [n for n in v.provenance.notes if n.startswith("clip sampling")]
    with GeminiServer(json.dumps({"response_a": GOOD["response_a"]})) as server:
        one = single(video)
        asyncio.run(Grader(judge_for(server, logprobs=False), RUBRIC, GradeOptions(
            cache=False, swap=False, video_input="clip", clip_fps=2.0)).grade(one))
    body = server.calls[0].body
    [part] = [p for c in body["contents"] for p in c["parts"] if "video_metadata" in p]
    assert part["video_metadata"] == {"fps": 2.0} and "media_io_kwargs" not in body


def test_images_per_message_keeps_every_part_in_order_and_each_label_beside_its_image():
    from framejudge.judge.litellm_backend import images_per_message

    def url(k):
        return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{k}"}}

    def text(t):
        return {"type": "text", "text": t}

    for n in (1, 2, 5):
        user = [text("Frames:"), *[p for k in range(n) for p in (text(f"[t = {k}.00 s]"), url(k))], text("Question")]
        system = {"role": "system", "content": "rubric"}
        out = images_per_message([system, {"role": "user", "content": user}])
        assert out[0] == system
        assert [p for m in out[1:] for p in m["content"]] == user  # nothing lost, nothing reordered
        with_images = [m["content"] for m in out[1:] if any(p["type"] == "image_url" for p in m["content"])]
        assert with_images == [[text(f"[t = {k}.00 s]"), url(k)] for k in range(n)]
        assert out[1]["content"] == [text("Frames:")] and out[-1]["content"] == [text("Question")]
    # an image without a label, and a message without images, are kept as they are
    plain = [{"role": "user", "content": [text("no frames here")]}]
    assert images_per_message(plain) == plain
    out = images_per_message([{"role": "user", "content": [url(0), url(1), text("Q")]}])
    assert [m["content"] for m in out] == [[url(0)], [url(1)], [text("Q")]]
