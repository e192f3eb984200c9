"""An OpenAI-compatible server named by api_base is sent its calls directly (openai_wire), not
through litellm. The two routes must be indistinguishable from the server's side and in the
records: for each way a server can answer (a verdict, a rate limit, server errors, a reply that
breaks the rubric, a refused schema or log-probabilities, a content-policy refusal, a prompt too
long), the same requests arrive, byte for byte as JSON, and the same record comes out."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("litellm")

from framejudge.judge.litellm_backend import DIRECT_PARAMS, LiteLLMJudge
from framejudge.judge.openai_wire import direct_route
from framejudge.schema import JudgeError, Verdict
from tests.judge.test_litellm_backend import BREAKS_RUBRIC, GOOD, ITEM, ScriptedServer, completion, grade

ERR = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}


def bad_request(message: str, code: str | None = None) -> tuple:
    return 400, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}, {}


def ok(reply: dict = GOOD) -> tuple:
    return 200, completion(json.dumps(reply)), {}


def refuses_schema(body: dict) -> tuple:
    if body["response_format"]["type"] == "json_schema":
        return bad_request("response_format json_schema is not supported by this model")
    return ok()


def refuses_logprobs(body: dict) -> tuple:
    if body.get("logprobs"):
        return bad_request("logprobs are not supported")
    return ok()


SCENARIOS = {
    "verdict": [ok()],
    "rate limited, then a verdict": [(429, ERR, {"Retry-After": "0"}), ok()],
    "server errors, then a verdict": [(503, ERR, {}), (502, ERR, {}), ok()],
    "a reply that breaks the rubric, re-asked": [ok(BREAKS_RUBRIC), ok()],
    "no JSON at all": [(200, completion("I think A is better!"), {})],
    "the schema refused": [refuses_schema],
    "log-probabilities refused": [refuses_logprobs],
    "a content-policy refusal": [bad_request("Your prompt was flagged as potentially violating our usage policy.",
                                             "content_policy_violation")],
    "a prompt too long": [bad_request("This model's maximum context length is 8192 tokens. However, your messages "
                                      "resulted in 9000 tokens.", "context_length_exceeded")],
    "a server that keeps failing": [(500, ERR, {})],
}


def run(script: list, direct: bool, **judge) -> tuple[list[dict], object, LiteLLMJudge]:
    server = ScriptedServer(script)
    with server as base:
        j = LiteLLMJudge("openai/scripted", api_base=base, api_key="k", max_retries=3, max_wait=0.05,
                         overload_budget_s=5, **judge)
        assert j.direct
        j.direct = direct
        [record] = grade(j)
    return [r["body"] for r in server.requests], record, j


def outcome(record) -> tuple:
    if isinstance(record, JudgeError):
        return ("error", record.kind)
    assert isinstance(record, Verdict)
    return ("verdict", record.response_a.category, record.response_b.category, record.preference,
            [n for n in record.provenance.notes if not n.startswith("the server refused")])


@pytest.mark.parametrize("logprobs", [False, True], ids=["plain", "logprobs"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_both_routes_send_the_same_requests_and_record_the_same_outcome(name, logprobs):
    sent_litellm, record_litellm, via_litellm = run(SCENARIOS[name], direct=False, logprobs=logprobs,
                                                    service_tier="flex")
    sent_direct, record_direct, direct = run(SCENARIOS[name], direct=True, logprobs=logprobs, service_tier="flex")
    assert sent_direct == sent_litellm
    assert outcome(record_direct) == outcome(record_litellm)
    assert (direct.output, direct.logprobs) == (via_litellm.output, via_litellm.logprobs)


def test_what_each_scenario_comes_to():
    """The outcomes themselves, on the direct route: so that the comparison above compares
    outcomes that are right, not two routes equally wrong."""
    expect = {"verdict": ("verdict", 1), "rate limited, then a verdict": ("verdict", 2),
              "server errors, then a verdict": ("verdict", 3), "a reply that breaks the rubric, re-asked": ("verdict", 2),
              "no JSON at all": ("invalid_after_retries", 3), "the schema refused": ("verdict", 2),
              "log-probabilities refused": ("verdict", 2), "a content-policy refusal": ("refused", 1),
              "a prompt too long": ("backend_error", 1), "a server that keeps failing": ("backend_error", 3)}
    for name, (what, calls) in expect.items():
        sent, record, _ = run(SCENARIOS[name], direct=True, logprobs=True)
        got = "verdict" if isinstance(record, Verdict) else record.kind
        assert (got, len(sent)) == (what, calls), name


def test_a_direct_reply_is_priced_by_litellms_list_or_the_judges_file():
    _, priced, _ = run([ok()], direct=True)  # openai/scripted: not in litellm's list
    assert priced.provenance.usage.cost_usd is None
    _, own, _ = run([ok()], direct=True, price=(1e-6, 2e-6))
    assert own.provenance.usage.cost_usd == pytest.approx(100 * 1e-6 + 20 * 2e-6)
    server = ScriptedServer([ok()])
    with server as base:
        [listed] = grade(LiteLLMJudge("openai/gpt-4o-mini", api_base=base, api_key="k"))
    import litellm

    prompt, completion_cost = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=100, completion_tokens=20)
    assert listed.provenance.usage.cost_usd == pytest.approx(prompt + completion_cost) and prompt > 0


def test_which_judges_go_direct():
    assert direct_route("openai/qwen", "http://127.0.0.1:8000/v1")
    assert direct_route("hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct", "http://gpu-3:8000/v1")
    assert not direct_route("openai/gpt-4o", None)  # OpenAI itself: litellm maps parameters per model family
    assert not direct_route("gemini/gemini-2.5-flash", "http://127.0.0.1:8000")
    assert not direct_route("ollama_chat/qwen2.5vl", "http://127.0.0.1:11434")


@pytest.mark.parametrize("model", ["openai/any-served-model", "hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct"])
def test_what_a_direct_judge_asks_is_what_litellm_lists_for_the_provider(model):
    import litellm

    provider = model.partition("/")[0]
    listed = set(litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or [])
    assert set(DIRECT_PARAMS) <= listed


def test_the_direct_route_imports_no_litellm_and_leaves_no_connection_open():
    """litellm's import is most of a run's start-up (with the judges file's price: litellm's price
    list is litellm's to read); the session is closed with its event loop."""
    server = ScriptedServer([ok()])
    with server as base:
        code = textwrap.dedent(f"""
            import asyncio, gc, sys, warnings
            warnings.simplefilter("always")
            from framejudge.judge import GradeOptions, Grader
            from framejudge.judge.litellm_backend import LiteLLMJudge
            from framejudge.rubrics import get_rubric
            from framejudge.schema import Item
            ITEM = Item.model_validate({ITEM.model_dump(mode="json")!r})
            judge = LiteLLMJudge("openai/scripted", api_base={base!r}, api_key="k", price=(0.0, 0.0))
            for _ in range(2):  # two event loops, one after the other
                [v] = asyncio.run(Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False)).grade(ITEM))
                assert v.record == "verdict", v
            gc.collect()
            print("litellm" in sys.modules)
        """)
        done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", code], capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
    assert "Unclosed" not in done.stderr, done.stderr[-2000:]
    assert len(server.requests) == 4  # swap on: two calls a grading


@pytest.mark.parametrize("model", ["openai/scripted", "hosted_vllm/scripted"])
@pytest.mark.parametrize("env", [{}, {"OPENAI_API_KEY": "sk-env"}, {"HOSTED_VLLM_API_KEY": "vllm-env"}],
                         ids=["no key", "OPENAI_API_KEY", "HOSTED_VLLM_API_KEY"])
@pytest.mark.parametrize("own", [None, "own-key"])
def test_both_routes_send_the_same_key(model, env, own, monkeypatch):
    for name in ("OPENAI_API_KEY", "HOSTED_VLLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    keys = []
    for direct in (False, True):
        server = ScriptedServer([ok()])
        with server as base:
            j = LiteLLMJudge(model, api_base=base, api_key=own)
            j.direct = direct
            grade(j)
        keys.append({r["authorization"] for r in server.requests})
    assert keys[0] == keys[1] and len(keys[0]) == 1
