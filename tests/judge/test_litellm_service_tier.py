"""The service tier a judge's calls ask for (a judges file's `service_tier`, a run's
--service-tier), against the loopback OpenAI-format server: the field arrives, flex calls get a
longer time limit, a shed flex call (429) is retried under the overload budget, and flex costs half."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("litellm")

from framejudge.backends import JudgeSpecError
from framejudge.judge import make_judge
from framejudge.runner.judges import Judges
from framejudge.schema import JudgeConfig, ServiceTier, Verdict
from tests.judge.test_litellm_backend import GOOD, ScriptedServer, completion, grade

SPEC = "litellm:openai/scripted"
PRICE = {"prompt_usd_per_token": 2e-6, "completion_usd_per_token": 8e-6}  # 100 prompt + 20 completion: $0.00036
STANDARD = 100 * 2e-6 + 20 * 8e-6


def judge_for(base: str, **entry) -> object:
    return make_judge(SPEC, base, JudgeConfig(spec=SPEC, api_base=base, price=PRICE, logprobs=False, **entry))


def test_flex_is_sent_shed_calls_are_retried_and_it_costs_half():
    shed = {"error": {"message": "Resource unavailable: flex capacity", "type": "rate_limit_error"}}
    server = ScriptedServer([(429, shed, {"Retry-After": "0"}), (200, completion(json.dumps(GOOD)), {})])
    with server as base:
        judge = judge_for(base, service_tier="flex")
        [v] = grade(judge)
    assert isinstance(v, Verdict), v
    assert [r["body"].get("service_tier") for r in server.requests] == ["flex", "flex"]
    assert v.provenance.usage.attempts == 1 and len(server.requests) == 2  # the shed call was asked again
    assert v.provenance.usage.cost_usd == pytest.approx(STANDARD / 2)
    assert judge.timeout == 900.0  # flex calls wait for capacity


def test_the_default_tier_costs_the_listed_price_and_sends_what_it_is_told():
    with ScriptedServer([(200, completion(json.dumps(GOOD)), {})]) as base:
        [plain] = grade(judge_for(base))
    with ScriptedServer([(200, completion(json.dumps(GOOD)), {})]) as base:
        [priority] = grade(judge_for(base, service_tier="priority", timeout_s=30))
    assert plain.provenance.usage.cost_usd == pytest.approx(STANDARD)
    assert judge_for("http://127.0.0.1:9/v1").timeout == 120.0
    assert judge_for("http://127.0.0.1:9/v1", service_tier="flex", timeout_s=300).timeout == 300.0
    assert isinstance(priority, Verdict)


def test_a_shed_flex_call_past_the_overload_budget_is_rate_limited():
    shed = {"error": {"message": "Resource unavailable", "type": "service_unavailable"}}
    server = ScriptedServer([(503, shed, {"Retry-After": "0"})])
    with server as base:
        [e] = grade(judge_for(base, service_tier="flex", overload_budget_s=1.0))
    assert e.record == "judge_error" and len(server.requests) > 2


def gemini_reply(body):
    return 200, {"candidates": [{"content": {"parts": [{"text": json.dumps(GOOD)}], "role": "model"},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
                 "modelVersion": "gemini-2.5-flash"}, {}


@pytest.mark.parametrize("model, reply, base_suffix", [
    ("gemini/gemini-2.5-flash", gemini_reply, ""),  # litellm's list has its flex price
    ("openai/gpt-4o-mini", (200, completion(json.dumps(GOOD), model="gpt-4o-mini"), {}), "/v1"),  # it has none
])
def test_litellm_prices_flex_where_its_list_has_a_flex_price_and_it_is_halved_where_not(model, reply, base_suffix):
    import litellm

    server = ScriptedServer([reply])
    with server as base:
        base = base.removesuffix("/v1") + base_suffix
        [v] = grade(make_judge(f"litellm:{model}", base, JudgeConfig(
            spec=f"litellm:{model}", api_base=base, service_tier="flex", logprobs=False)))
    assert isinstance(v, Verdict), v
    body = server.requests[0]["body"]
    assert body.get("service_tier", body.get("serviceTier")) == "flex"
    info = litellm.get_model_info(model)
    standard = 100 * info["input_cost_per_token"] + 20 * info["output_cost_per_token"]
    assert v.provenance.usage.cost_usd == pytest.approx(standard / 2)
    halved = any("litellm lists no flex price" in n for n in v.provenance.notes)
    assert halved is (info.get("input_cost_per_token_flex") is None)


def test_a_runs_service_tier_overrides_the_judges_file():
    judges = Judges([JudgeConfig(spec=SPEC, api_base="http://127.0.0.1:9/v1", service_tier="flex")])
    judges.override(SPEC, None, None, service_tier=ServiceTier.default)
    assert judges.make(SPEC).service_tier is ServiceTier.default and judges.make(SPEC).timeout == 120.0
    with pytest.raises(JudgeSpecError, match="--service-tier flex: the reference judge calls no model server"):
        Judges().override("reference", None, None, service_tier=ServiceTier.flex)


def priced(text: str) -> tuple[int, float]:
    """The prompt tokens and the dollars an estimate names."""
    import re

    found = re.match(r"about ([\d,]+) prompt tokens, about \$([\d.]+)", text)
    assert found, text
    return int(found[1].replace(",", "")), float(found[2])


def planned_calls(calls: int) -> list:
    from framejudge.judge.base import PlannedTurn
    from tests.judge.test_litellm_backend import ITEM

    return [PlannedTurn(ITEM, 0, calls=calls, with_frames=calls)]


def test_the_estimate_is_priced_on_the_tier_and_the_batch_share_the_calls_are_billed_at():
    from tests.judge.test_litellm_backend import RUBRIC

    big = {"prompt_usd_per_token": 1e-3, "completion_usd_per_token": 4e-3}  # dollars, not cents, to compare

    def estimate(tier: str | None, batch: tuple[str, float] | None = None) -> str:
        judge = make_judge(SPEC, "http://127.0.0.1:9/v1", JudgeConfig(spec=SPEC, api_base="http://127.0.0.1:9/v1",
                                                                      price=big, service_tier=tier))
        return judge.estimate(RUBRIC, planned_calls(40), 8, **({"batch": batch} if batch else {}))

    tokens, standard = priced(estimate(None))
    assert standard == pytest.approx(tokens * 1e-3 + 40 * 200 * 4e-3, abs=0.005)
    assert priced(estimate("priority")) == (tokens, standard)  # the entry's price, charged as given
    flex = estimate("flex")
    assert priced(flex)[1] == pytest.approx(standard / 2, abs=0.01) and "halved on the flex tier" in flex
    batched = estimate(None, ("OpenAI's Batch API", 0.5))
    assert priced(batched)[1] == pytest.approx(standard / 2, abs=0.01)
    assert batched.endswith("(the judges file's price; OpenAI's Batch API: 50% of the synchronous price)")
    # a batch is a tier of its own: a flex judge's batch is billed at the batch share alone
    assert estimate("flex", ("OpenAI's Batch API", 0.5)) == batched


@pytest.mark.parametrize("model", ["gemini/gemini-2.5-flash", "openai/gpt-4o-mini"])
def test_the_flex_estimate_takes_litellms_flex_price_or_halves_the_standard_one(model):
    import litellm

    from tests.judge.test_litellm_backend import RUBRIC

    spec = f"litellm:{model}"
    judge = make_judge(spec, None, JudgeConfig(spec=spec, service_tier="flex"))
    text = judge.estimate(RUBRIC, planned_calls(2000), 8)
    tokens, cost = priced(text)
    info = litellm.model_cost[model] if model in litellm.model_cost else litellm.model_cost[model.split("/")[1]]
    standard = tokens * info["input_cost_per_token"] + 2000 * 200 * info["output_cost_per_token"]
    if info.get("input_cost_per_token_flex") is not None:
        listed = tokens * info["input_cost_per_token_flex"] + 2000 * 200 * info.get(
            "output_cost_per_token_flex", info["output_cost_per_token"])
        assert cost == pytest.approx(listed, abs=0.005) and text.endswith("(flex tier)")
    else:
        assert cost == pytest.approx(standard / 2, abs=0.005) and "the standard price halved" in text
