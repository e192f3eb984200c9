"""A model server that misreports its token usage (a negative count, a count as a string, a null, a
fraction, `true`, a count no call could reach, or none at all) never makes a figure: the turn's
tokens and cost are unknown (null) with a note that names what was sent, in the records, the Python
API's result, the CLI's summary (which says how many records had unknown usage) and the service's
/metrics; a cost only ever adds. Loopback servers speak each provider's real wire format
(tests/judge/providers.py), on the direct route (openai_wire) and through litellm."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

pytest.importorskip("litellm")

from framejudge import grade
from framejudge.cli import app
from framejudge.judge import GradeOptions, Grader
from framejudge.judge.litellm_backend import LiteLLMJudge
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, Usage, Verdict
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.judge.providers import AnthropicServer, GeminiServer, OllamaServer, OpenAIServer, VLLMServer

GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"}}
TURN = {"question": "What does the sign say?", "golden": "STOP", "response_a": "STOP."}
PRICE = (1e-6, 2e-6)
MISSING = object()

# where each provider's reply carries its prompt count, and the model it is asked for
FIELDS = {OpenAIServer: ("usage", "prompt_tokens", "gpt-4o-mini"),
          AnthropicServer: ("usage", "input_tokens", "claude-sonnet-4-5-20250929"),
          GeminiServer: ("usageMetadata", "promptTokenCount", "gemini-2.5-flash"),
          OllamaServer: ("", "prompt_eval_count", "qwen2.5vl:7b")}
VALUES = {"negative": -5, "string": "12", "null": None, "fraction": 12.5, "bool": True, "huge": 10**30,
          "missing": MISSING}
# (server, direct route, the values litellm turns into a reply: on the others its reading of the reply
# fails the call, which is a judge error, not a figure)
ROUTES = {"openai-direct": (OpenAIServer, True, list(VALUES)),
          "openai-litellm": (OpenAIServer, False, ["negative", "string", "null", "bool", "huge", "missing"]),
          "anthropic": (AnthropicServer, False, list(VALUES)),
          "gemini": (GeminiServer, False, ["negative", "bool", "huge", "missing"]),
          "ollama": (OllamaServer, False, ["negative", "bool", "huge", "missing"])}
CASES = [(route, value) for route, (_, _, values) in ROUTES.items() for value in values]


def misreporting(kind: type, value: object, first_good: bool = False) -> type:
    """`kind`'s server, its replies' prompt count set to `value` (or left out), after one good reply
    where `first_good`."""
    where, name, _ = FIELDS[next(k for k in FIELDS if issubclass(kind, k))]

    class Misreporting(kind):  # type: ignore[misc, valid-type]
        def success(self, text, seen):
            body = super().success(text, seen)
            if first_good and len(self.calls) == 1:
                return body
            counts = body[where] if where else body
            if value is MISSING:
                counts.pop(name)
            else:
                counts[name] = value
            return body

    return Misreporting


@pytest.mark.parametrize(("route", "value"), CASES, ids=[f"{r}-{v}" for r, v in CASES])
def test_a_misreported_count_is_unknown_with_a_note_never_a_figure(route, value):
    kind, direct, _ = ROUTES[route]
    with misreporting(kind, VALUES[value])(json.dumps(GOOD)) as server:
        judge = LiteLLMJudge(server.model(FIELDS[kind][2]), api_base=server.api_base, api_key="k", max_retries=1,
                             price=PRICE)
        assert judge.direct == (kind is OpenAIServer)
        judge.direct = direct
        item = Item(id="sign", turns=[TURN])
        [v] = asyncio.run(Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False, swap=False)).grade(item))
    assert isinstance(v, Verdict), v
    usage = v.provenance.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (None, None, None)
    [note] = [n for n in v.provenance.notes if "token usage" in n]
    field = f"{FIELDS[kind][0]}.{FIELDS[kind][1]}".lstrip(".")
    shown = "missing" if VALUES[value] is MISSING else json.dumps(VALUES[value])
    assert f"{field}: {shown}" in note and "tokens and cost are unknown" in note
    again = Verdict.model_validate_json(v.model_dump_json())  # and so it reads back
    assert again.provenance.usage.prompt_tokens is None and again.provenance.usage.cost_usd is None


def test_one_misreported_attempt_makes_the_turns_usage_unknown():
    """The swapped order's call misreports: the turn's counts are not the first call's alone."""
    with misreporting(OpenAIServer, -5, first_good=True)(json.dumps({**GOOD, "response_b": GOOD["response_a"],
                                                                     "preference": "Both",
                                                                     "deciding_criterion": "category"})) as server:
        judge = LiteLLMJudge(server.model("m"), api_base=server.api_base, api_key="k", price=PRICE)
        item = Item(id="sign", turns=[{**TURN, "response_b": "Stop."}])
        [v] = asyncio.run(Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False, swap=True)).grade(item))
    assert len(server.calls) == 2
    assert (v.provenance.usage.prompt_tokens, v.provenance.usage.cost_usd) == (None, None)
    assert v.provenance.usage.attempts == 2


@pytest.mark.parametrize("sent", [{"prompt_tokens": -5}, {"completion_tokens": "12"}, {"prompt_tokens": True},
                                  {"prompt_tokens": 10**30}, {"cost_usd": -2.02}, {"cost_usd": float("nan")}],
                         ids=["negative", "string", "bool", "beyond-any-call", "negative-cost", "nan-cost"])
def test_records_with_misreported_usage_read_back_as_unknown(sent):
    """A verdicts file written before counts were checked: its usage is read as unknown, never as a
    figure that lowers a total."""
    usage = Usage.model_validate({"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.5, **sent})
    assert usage.cost_usd is None
    assert not usage.known or "cost_usd" in sent


def _judges_file(tmp_path, server) -> str:
    path = tmp_path / "judges.yaml"
    path.write_text(f"judges:\n  - spec: litellm:hosted_vllm/m\n    api_base: {server.api_base}\n"
                    f"    price: {{prompt_usd_per_token: {PRICE[0]}, completion_usd_per_token: {PRICE[1]}}}\n")
    return str(path)


def test_the_cli_summary_adds_only_known_usage_and_says_how_many_records_were_unknown(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": k, "turns": [TURN]}) + "\n" for k in ("a", "b", "c")))
    out = tmp_path / "v.jsonl"
    with misreporting(VLLMServer, -5, first_good=True)(json.dumps(GOOD)) as server:
        done = CliRunner().invoke(app, ["grade", str(items), "--out", str(out), "--judge", "litellm:hosted_vllm/m",
                                        "--judges", _judges_file(tmp_path, server), "--concurrency", "1", "--yes"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert summary["usage_unknown"] == 2
    assert (summary["prompt_tokens"], summary["completion_tokens"]) == (2412, 96)
    assert summary["cost_usd"] == pytest.approx(2412 * PRICE[0] + 96 * PRICE[1])  # the known one's, never less
    assert "warning: 2 record(s) with token usage the model server misreported" in done.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(str(r["provenance"]["usage"]["cost_usd"]) for r in records).count("None") == 2


def test_the_python_api_returns_unknown_usage_with_its_note(tmp_path):
    with misreporting(VLLMServer, "12")(json.dumps(GOOD)) as server:
        [v] = grade([{"id": "a", "turns": [TURN]}], judge="litellm:hosted_vllm/m",
                    judges_file=_judges_file(tmp_path, server))
    assert isinstance(v, Verdict)
    assert (v.provenance.usage.prompt_tokens, v.provenance.usage.cost_usd) == (None, None)
    assert any('usage.prompt_tokens: "12"' in n for n in v.provenance.notes)


def test_the_services_metrics_count_unknown_usage_apart_and_never_lower_the_cost(tmp_path):
    with misreporting(VLLMServer, -5, first_good=True)(json.dumps(GOOD)) as server:
        settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", upload_dir=tmp_path / "uploads",
                            judges_file=tmp_path / "judges.yaml")
        _judges_file(tmp_path, server)
        engine = engine_for(settings.database_url)
        key, scraper = create_key(engine, ["grade"]), create_key(engine, ["metrics"])
        auth = {"Authorization": f"Bearer {key}"}
        with TestClient(create_app(settings)) as client:
            for k in ("a", "b"):
                r = client.post("/v1/grade", headers=auth, json={"item": {"id": k, "turns": [TURN]},
                                                                 "judge": "litellm:hosted_vllm/m",
                                                                 "options": {"swap": False, "cache": False}})
                assert r.status_code == 200, r.text
            text = client.get("/metrics", headers={"Authorization": f"Bearer {scraper}"}).text
    figures = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
               if line.startswith("framejudge_") and " " in line}
    assert figures["framejudge_usage_unknown_total"] == 1.0
    assert figures['framejudge_tokens_total{kind="prompt"}'] == 2412.0
    assert figures["framejudge_cost_usd_total"] == pytest.approx(2412 * PRICE[0] + 96 * PRICE[1])


# each batch API's provider: its online server's reply shape (the body a batch line carries) and a model
BATCHES = {"openai": (OpenAIServer, "openai/batch-model"), "anthropic": (AnthropicServer, "anthropic/claude-sonnet-4-5"),
           "gemini": (GeminiServer, "gemini/gemini-2.5-flash"), "vertex_ai": (GeminiServer, "vertex_ai/gemini-2.5-flash")}
BATCH_CASES = [(api, value) for api in BATCHES for value in ("negative", "bool", "huge", "missing")]


@pytest.mark.parametrize(("api", "value"), BATCH_CASES, ids=[f"{a}-{v}" for a, v in BATCH_CASES])
def test_a_batch_reply_that_misreports_its_usage_is_unknown_with_a_note(api, value):
    """A batch's results line is read as the provider wrote it: its counts are checked as an online
    reply's are, whatever each provider's transformation makes of them."""
    from framejudge.runner.batch_api import BATCH_APIS, WAITING, BatchedLiteLLM, answer_row
    from tests.judge.providers import Recorded

    kind, model = BATCHES[api]
    judge = BatchedLiteLLM(LiteLLMJudge(model, api_key="k", price=PRICE), BATCH_APIS[api], {}, {})
    grader = Grader(judge, get_rubric("video-qa"), GradeOptions(cache=False, swap=False))
    item = Item(id="sign", turns=[TURN])

    async def run():
        WAITING.set([])
        return await grader.grade(item)

    asyncio.run(run())  # no reply yet: the request is set aside
    [(key, pending)] = judge.pending.items()
    server = misreporting(kind, VALUES[value])(json.dumps(GOOD))
    body = server.success(json.dumps(GOOD), Recorded("POST", "/", {}, pending.body))
    server.httpd.server_close()
    judge.replies[key] = {**answer_row(key, 200, body), "model": model.partition("/")[2]}
    [v] = asyncio.run(run())
    assert isinstance(v, Verdict), v
    usage = v.provenance.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cost_usd) == (None, None, None)
    assert any("tokens and cost are unknown" in n for n in v.provenance.notes), v.provenance.notes
