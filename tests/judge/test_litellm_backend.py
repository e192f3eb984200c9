"""The litellm backend against OpenAI-compatible servers on loopback, started by the tests.

`ScriptedServer` is the one stand-in: an HTTP server that answers like a paid API would
(429 with Retry-After, 5xx, replies that break the rubric), to prove the retry and re-ask
paths. Everything between it and the verdict (litellm, tenacity, the re-ask
loop, the pipeline) is real.
"""

from __future__ import annotations

import asyncio
import json
import re
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("litellm")

from framejudge.judge import GradeOptions, Grader, make_judge
from framejudge.judge.litellm_backend import LiteLLMJudge, retry_after_seconds
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, JudgeError, Verdict

RUBRIC = get_rubric("video-qa")
ITEM = Item(id="pair", turns=[{"question": "What bird is this?", "golden": "A heron.",
                               "response_a": "A grey heron.", "response_b": "Sorry, I can't help identify birds."}])


def completion(content: str, model: str = "scripted-model-2026-11") -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"},
        "response_b": {"category": "Missing", "rationale": "declines a supported question"},
        "preference": "A", "deciding_criterion": "category"}
BREAKS_RUBRIC = {**GOOD, "preference": "B", "deciding_criterion": "helpfulness"}


class ScriptedServer:
    def __init__(self, script: list):
        """`script`: (status, payload, headers) replies in turn (the last one repeated), or functions
        of the request's body that return one."""
        self.script = list(script)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "time": time.monotonic(),
                                        "authorization": self.headers.get("Authorization")})
                entry = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                status, payload, headers = entry(body) if callable(entry) else entry  # a reply to the request
                data = (json.dumps(payload) if not isinstance(payload, str) else payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def grade(judge, item=ITEM, swap=False):
    return asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=swap)).grade(item))


def test_429_with_retry_after_then_a_reask_then_success():
    err = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    script = [(429, err, {"Retry-After": "1"}), (200, completion(json.dumps(BREAKS_RUBRIC)), {}),
              (200, completion(json.dumps(GOOD)), {})]
    with ScriptedServer(script) as base:
        judge = LiteLLMJudge("openai/scripted", api_base=base, api_key="test-key", max_retries=3)
        started = time.monotonic()
        [v] = grade(judge)
    assert isinstance(v, Verdict), v
    assert v.preference.value == "A" and v.response_b.category.value == "Missing"
    assert v.provenance.usage.attempts == 2 and v.provenance.usage.prompt_tokens == 200
    assert "served by scripted-model-2026-11" in v.provenance.notes
    assert time.monotonic() - started >= 1.0  # the Retry-After wait was honoured


def test_reask_carries_the_validators_reason():
    server = ScriptedServer([(200, completion(json.dumps(BREAKS_RUBRIC)), {}), (200, completion(json.dumps(GOOD)), {})])
    with server as base:
        [v] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k"))
    assert isinstance(v, Verdict)
    second = server.requests[1]["body"]
    assert second["temperature"] == 0 and second["seed"] == 1234
    text = json.dumps(second["messages"])
    assert "a Successful response always wins, so the preference must be A" in text


def test_responses_reach_the_model_verbatim_and_the_error_rule_still_re_asks():
    """Text that looks like a template ({{ }}, {% %}) is sent as written, never rendered; and the
    rules that need the responses (a fixed error string must be graded Error message) still
    apply to the model's reply."""
    item = Item(id="tpl", turns=[{"question": "What does the sign say? {{ 7 * 7 }}", "golden": "{% raw %}",
                                  "response_a": "It says {{ rubric }} and {% if x %}.",
                                  "response_b": "I cannot answer that."}])
    wrong = {**GOOD, "response_b": {"category": "Missing", "rationale": "declines"}}
    right = {**GOOD, "response_b": {"category": "Error message", "rationale": "a fixed error string"}}
    server = ScriptedServer([(200, completion(json.dumps(wrong)), {}), (200, completion(json.dumps(right)), {})])
    with server as base:
        [v] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k"), item)
    assert isinstance(v, Verdict) and v.response_b.category.value == "Error message"
    first = json.dumps(server.requests[0]["body"]["messages"])
    assert "{{ 7 * 7 }}" in first and "It says {{ rubric }} and {% if x %}." in first and "49" not in first
    assert len(server.requests) == 2  # the first reply broke the error-message rule and was re-asked


def test_persistent_rate_limit_becomes_a_judge_error_after_the_overload_budget():
    """Rate limits are retried for a time budget, not a count: a minute of 429s is waited out."""
    err = {"error": {"message": "quota", "type": "rate_limit_error"}}
    server = ScriptedServer([(429, err, {"Retry-After": "0"})])
    with server as base:
        started = time.monotonic()
        [e] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k", max_retries=3,
                                 overload_budget_s=1.0))
        spent = time.monotonic() - started
    assert isinstance(e, JudgeError) and e.kind == "rate_limited"
    assert "over 1 s" in e.message
    assert spent >= 1.0 and len(server.requests) > 3  # more tries than max_retries: the budget decides


def test_retry_after_ms_is_read_before_retry_after():
    class Response:
        headers = {"retry-after-ms": "250", "retry-after": "3"}

    class Exc(Exception):
        response = Response()

    assert retry_after_seconds(Exc()) == 0.25


def test_server_errors_are_retried():
    err = {"error": {"message": "boom", "type": "server_error"}}
    server = ScriptedServer([(503, err, {}), (502, err, {}), (200, completion(json.dumps(GOOD)), {})])
    with server as base:
        [v] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k", max_retries=4, max_wait=0.2))
    assert isinstance(v, Verdict) and len(server.requests) == 3


def test_unparseable_replies_end_as_invalid_after_retries_with_the_raw_output():
    server = ScriptedServer([(200, completion("I think A is better!"), {})])
    with server as base:
        [e] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k", max_reasks=1))
    assert isinstance(e, JudgeError) and e.kind == "invalid_after_retries"
    assert "I think A is better!" in e.raw_output
    assert len(server.requests) == 2


def test_frames_go_as_image_parts_and_swap_runs_both_orders(tmp_path):
    from framejudge.examples.clips import countdown
    from framejudge.examples.synth import cfr_times, write_video

    clip = write_video(tmp_path / "c.mp4", countdown, cfr_times(3, 30), gop=30)
    swapped = {"response_a": GOOD["response_b"], "response_b": GOOD["response_a"], "preference": "B",
               "deciding_criterion": "category"}
    server = ScriptedServer([(200, completion(json.dumps(GOOD)), {}), (200, completion(json.dumps(swapped)), {})])
    item = ITEM.model_copy(update={"video": str(clip)})
    with server as base:
        [v] = grade(LiteLLMJudge("openai/scripted", api_base=base, api_key="k"), item, swap=True)
    assert v.swap.consistent is True
    parts = server.requests[0]["body"]["messages"][-1]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 8 and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    # the second request shows the responses in B/A order
    assert re.search(r"Response A:\n<<<response_a \w+>>>\nSorry, I can't help identify birds\.\n",
                     server.requests[1]["body"]["messages"][-1]["content"][-1]["text"])


def test_retry_after_parsing():
    class R:
        headers = {"retry-after": "2.5"}

    class E(Exception):
        response = R()

    assert retry_after_seconds(E()) == 2.5
    assert make_judge("litellm:openai/x", "http://127.0.0.1:1/v1").api_base == "http://127.0.0.1:1/v1"


def test_estimate_before_spending():
    from framejudge.judge.base import PlannedTurn

    judge = LiteLLMJudge("gpt-4o-mini")
    text = judge.estimate(RUBRIC, [PlannedTurn(ITEM, 0, calls=10, with_frames=10)], frames_per_call=8)
    assert "prompt tokens" in text and ("$" in text or "unknown" in text)
    planned = [PlannedTurn(ITEM, 0, 1, 1)]
    assert LiteLLMJudge("openai/unknown-model-xyz").estimate(RUBRIC, planned, 8).endswith("unknown)")
    assert judge.estimate(RUBRIC, [], 8) == "nothing to do"


def test_readiness_says_why_a_judge_cannot_be_called(monkeypatch):
    # a self-hosted server that answers (any status) is ready; one that does not answer is not
    with ScriptedServer([(200, completion("{}"), {})]) as base:
        assert asyncio.run(LiteLLMJudge("openai/m", api_base=base).ready()) is None
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    why = asyncio.run(LiteLLMJudge("openai/m", api_base=dead).ready())
    assert why is not None and why.startswith(dead) and "does not answer" in why
    monkeypatch.setenv("OPENAI_BASE_URL", dead)
    assert "does not answer" in asyncio.run(LiteLLMJudge("openai/m").ready())
    # a hosted provider is not called; it needs its key in the environment
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert asyncio.run(LiteLLMJudge("anthropic/claude-x").ready()) == "missing ANTHROPIC_API_KEY"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert asyncio.run(LiteLLMJudge("anthropic/claude-x").ready()) is None


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


# ------------------------------------------------------------------ log-probabilities and samples

def with_logprobs(content: str, alternatives: dict[str, dict[str, float]], model: str = "scripted-model-2026-11") -> dict:
    """A completion whose reply comes with OpenAI-style token log-probabilities: the reply cut into
    words, punctuation marks and spaces, each token chosen with what its alternatives leave."""
    import math
    import re

    tokens = []
    for tok in re.findall(r"\w+|\s+|[^\w\s]", content):
        alt = alternatives.get(tok, {})
        chosen = 1.0 - sum(alt.values())
        top = [{"token": tok, "logprob": math.log(chosen), "bytes": list(tok.encode())}]
        top += [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in alt.items()]
        tokens.append({"token": tok, "logprob": math.log(chosen), "bytes": list(tok.encode()), "top_logprobs": top})
    body = completion(content, model)
    body["choices"][0]["logprobs"] = {"content": tokens}
    return body


LABEL_ALTERNATIVES = {"Successful": {"Not": 0.25}, "Missing": {"Irrelevant": 0.3, "Not": 0.1}, "A": {"B": 0.1}}


def test_a_server_that_gives_logprobs_gives_each_labels_option_probabilities():
    from framejudge.judge import JudgeRequest

    def reply(body):
        assert body.get("logprobs") is True and body.get("top_logprobs") == 5
        return 200, with_logprobs(json.dumps(GOOD), LABEL_ALTERNATIVES), {}

    with ScriptedServer([reply]) as base:
        judge = LiteLLMJudge("openai/scripted", api_base=base, api_key="k")
        assert judge.logprobs is True  # litellm says an OpenAI-compatible server takes them
        result = asyncio.run(judge.judge(JudgeRequest(ITEM, 0, RUBRIC)))
        [v] = grade(judge)
    probs = result.label_probs
    chosen = {"category_a": "Successful", "category_b": "Missing", "preference": "A"}
    assert set(probs) == set(chosen)
    for name, label in chosen.items():
        assert sum(probs[name].values()) == pytest.approx(1.0)
        assert max(probs[name], key=probs[name].get) == label
    assert probs["category_a"]["Not Successful"] == pytest.approx(0.25)
    assert probs["category_b"] == pytest.approx({"Successful": 0, "Not Successful": 0.1, "Irrelevant": 0.3,
                                                  "Missing": 0.6, "Error message": 0})
    assert v.confidence.informative and v.confidence.methods == {"logprobs": v.confidence.fields}
    assert v.confidence.fields == pytest.approx({"category_a": 0.75, "category_b": 0.6, "preference": 0.9})


def test_a_server_that_refuses_logprobs_still_grades_and_is_not_asked_for_them_again():
    def reply(body):
        if "logprobs" in body or "top_logprobs" in body:
            return 400, {"error": {"message": "logprobs is not supported", "type": "invalid_request_error"}}, {}
        return 200, completion(json.dumps(GOOD)), {}

    server = ScriptedServer([reply])
    with server as base:
        judge = LiteLLMJudge("openai/scripted", api_base=base, api_key="k")
        [v1] = grade(judge)
        [v2] = grade(judge)
    assert isinstance(v1, Verdict) and isinstance(v2, Verdict), (v1, v2)
    assert ["logprobs" in r["body"] for r in server.requests] == [True, False, False]
    assert any("the server refused logprobs" in n for n in v1.provenance.notes)
    assert v1.confidence.informative is False and v1.provenance.usage.attempts == 1
    # a judges file can say not to ask at all, or to ask where litellm does not know
    from framejudge.schema import JudgeConfig

    spec = "litellm:openai/scripted"
    assert make_judge(spec, base, JudgeConfig(spec=spec, logprobs=False)).logprobs is False
    assert make_judge("litellm:anthropic/claude-x", base).logprobs is False  # litellm: it does not take them
    assert make_judge("litellm:anthropic/claude-x", base,
                      JudgeConfig(spec="litellm:anthropic/claude-x", logprobs=True)).logprobs is True


def test_k_samples_reach_the_server_at_a_temperature_with_a_seed_each():
    other = {**GOOD, "response_b": {"category": "Irrelevant", "rationale": "off topic"}}

    def reply(body):
        return 200, completion(json.dumps(other if body["seed"] == 1 else GOOD)), {}

    server = ScriptedServer([reply])
    with server as base:
        judge = LiteLLMJudge("openai/scripted", api_base=base, api_key="k", logprobs=False)
        [v] = asyncio.run(Grader(judge, RUBRIC, GradeOptions(cache=False, swap=False, samples=3)).grade(ITEM))
    sent = [(r["body"]["temperature"], r["body"]["seed"]) for r in server.requests]
    assert sent == [(0.7, 0), (0.7, 1), (0.7, 2)]
    assert v.response_b.category.value == "Missing" and v.sample_agreement == pytest.approx(2 / 3)
    assert v.confidence.methods["samples"]["category_b"] == pytest.approx(2 / 3, abs=1e-6)
    assert v.confidence.fields["category_a"] == 1.0
    assert "3 samples at temperature 0.7, seeds 0 to 2" in v.provenance.notes


def test_the_estimate_counts_frames_only_for_calls_that_send_them(tmp_path):
    """`framejudge grade`'s estimate before spending: 50 text-only pairs send no frames, so their
    tokens are their prompts' alone; with a video, the frames of the seen calls (not the blind's)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from framejudge.examples.clips import countdown
    from framejudge.examples.synth import cfr_times, write_video
    from framejudge.rubrics.prompt import IMAGE_TOKENS, render_prompt

    root = Path(__file__).parents[2]
    pairs = [Item(id=f"p{k}", turns=[{"question": f"What is {k} plus {k}?", "golden": f"{2 * k}.",
                                      "response_a": f"It is {2 * k}.", "response_b": f"Perhaps {k}."}])
             for k in range(50)]
    write_video(tmp_path / "c.mp4", countdown, cfr_times(1, 10), gop=10)

    def estimate(items: list[Item], *options: str) -> int:
        path = tmp_path / "items.jsonl"
        path.write_text("".join(it.model_dump_json(exclude_none=True) + "\n" for it in items))
        with ScriptedServer([(500, {}, {})]) as base:  # it answers (the run stops before any call)
            proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(path), "--out",
                                   str(tmp_path / "v.jsonl"), "--judge", "litellm:openai/gpt-4o-mini", "--api-base",
                                   base, "--no-cache", "-n", "4", *options],
                                  capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"})
        assert proc.returncode == 2 and "pass --yes" in proc.stderr, proc.stderr  # nothing was spent
        return int(re.search(r"about ([\d,]+) prompt tokens", proc.stderr)[1].replace(",", ""))

    text = sum(render_prompt(RUBRIC, it, [], 0).estimated_tokens for it in pairs)
    assert estimate(pairs) == 2 * text  # swapped: twice the calls, still no frames
    seen = [it.model_copy(update={"video": "c.mp4"}) for it in pairs[:10]] + pairs[10:]
    assert estimate(seen, "--no-swap", "--blind") == text + sum(
        render_prompt(RUBRIC, it, [], 0).estimated_tokens for it in seen[:10]) + 10 * 4 * IMAGE_TOKENS
