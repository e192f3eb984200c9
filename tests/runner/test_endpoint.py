"""The adaptive gate per model endpoint: on its own, then through the real litellm judge against a
slow OpenAI-compatible server on loopback (bench/model_server.py) that counts what it saw."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from bench.model_server import ModelServer
from framejudge.judge import Grader, load_items
from framejudge.rubrics import get_rubric
from framejudge.runner import RunProgress, run_batch
from framejudge.runner.endpoint import Endpoint, EndpointBusy
from framejudge.runner.judges import Judges
from framejudge.schema import GradeOptions, JudgeConfig, JudgeError, Verdict

pytest.importorskip("litellm")

RUBRIC = get_rubric("video-qa")


async def _use(endpoint: Endpoint, outcome: str = "success", retry_after: float | None = None) -> None:
    async with endpoint.slot() as slot:
        if outcome == "overload":
            slot.overloaded(retry_after)
        elif outcome == "failure":
            slot.failed()


def test_additive_increase_then_multiplicative_decrease_once_per_burst():
    async def scenario() -> list[int]:
        e = Endpoint("e", initial=4, maximum=10, cooldown_s=60)
        seen = [e.limit]
        for _ in range(4):
            await _use(e)
        seen.append(e.limit)  # slow start: +1 per success
        for _ in range(20):
            await _use(e)
        seen.append(e.limit)  # never above the maximum
        for _ in range(5):  # one burst of rejections is one signal
            await _use(e, "overload")
        seen.append(e.limit)
        for _ in range(3):
            await _use(e, "failure")  # says nothing about capacity
        seen.append(e.limit)
        for _ in range(6):  # after an overload: about +1 per limit's worth of successes
            await _use(e)
        seen.append(e.limit)
        return seen

    assert asyncio.run(scenario()) == [4, 8, 10, 5, 5, 6]


def _limits_after_refusals(outage_s: float, refused_for: float) -> list[int]:
    """The limit over successes after an endpoint at 10 calls refused every call for `refused_for` s."""
    async def scenario() -> list[int]:
        e = Endpoint("e", initial=10, maximum=10, cooldown_s=0, outage_s=outage_s)
        await _use(e, "overload")  # the end of the first slow start: cut to 5
        for _ in range(40):
            await _use(e)  # back to 10, by one a round trip's worth of successes
        started = time.monotonic()
        while time.monotonic() - started < refused_for or e.limit > 1:
            await _use(e, "overload")
            await asyncio.sleep(0.01)
        seen = [e.limit]
        for _ in range(8):
            await _use(e)
            seen.append(e.limit)
        return seen

    return asyncio.run(scenario())


def test_after_an_outage_the_limit_doubles_back_to_one_cut_below_where_it_was():
    # refused for longer than outage_s: +1 a success (doubling each round trip) up to 10 x 0.5, then +1/limit
    assert _limits_after_refusals(outage_s=0.2, refused_for=0.3) == [1, 2, 3, 4, 5, 5, 5, 5, 5]
    # a shorter burst of refusals: +1/limit a success, as after any overload
    assert _limits_after_refusals(outage_s=60, refused_for=0.05) == [1, 2, 2, 2, 3, 3, 3, 4, 4]


def test_after_an_outage_a_pace_the_outage_asked_for_is_dropped_and_an_earlier_one_doubles_back():
    async def scenario(before: bool) -> tuple[float | None, float | None, list[float]]:
        e = Endpoint("e", initial=8, maximum=8, cooldown_s=0, outage_s=0.2)
        for _ in range(4):
            await _use(e)
        if before:  # a rate limit found before the outage: paced, then past its slow start
            async with e.slot() as slot:
                slot.overloaded(rate_limited=True)
            for _ in range(3):
                await _use(e)
            async with e.slot() as slot:
                slot.overloaded(rate_limited=True)
            for _ in range(2):
                await _use(e)
        paced = e.pace
        started = time.monotonic()
        while time.monotonic() - started < 0.3:  # every call refused with a 429
            async with e.slot() as slot:
                slot.overloaded(rate_limited=True)
            await asyncio.sleep(0.02)
        low = e.pace
        paces = []
        for _ in range(3):
            await _use(e)
            paces.append(e.pace)
        return paced, low, paces

    paced, low, paces = asyncio.run(scenario(before=False))
    assert paced is None and low is not None and paces == [None, None, None]  # the outage's pace is dropped
    paced, low, paces = asyncio.run(scenario(before=True))
    assert paced is not None and low is not None and low < paced * 0.85 / 2
    # +1 a success (doubling each second) while below 85 % of the pace before the outage
    assert paces[0] == pytest.approx(low + 1) and paces[1] == pytest.approx(min(low + 2, max(paces)))


def test_the_limit_bounds_calls_in_flight():
    async def scenario() -> int:
        e = Endpoint("e", initial=3, maximum=3)
        peak = 0

        async def call() -> None:
            nonlocal peak
            async with e.slot():
                peak = max(peak, e.in_flight)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(call() for _ in range(30)))
        return peak

    assert asyncio.run(scenario()) == 3


def test_retry_after_holds_every_new_call_to_the_endpoint():
    async def scenario() -> tuple[float, bool]:
        e = Endpoint("e", initial=8, maximum=8)
        await _use(e, "overload", retry_after=0.3)
        assert e.paused() and e.state().paused_for_s > 0
        started = time.monotonic()
        await asyncio.gather(*(_use(e) for _ in range(4)))  # other calls, not only the told one
        return time.monotonic() - started, e.paused()

    waited, still = asyncio.run(scenario())
    assert waited >= 0.3 and not still


def test_a_cancelled_call_gives_its_slot_back():
    async def scenario() -> int:
        e = Endpoint("e", initial=1, maximum=1)

        async def stuck() -> None:
            async with e.slot():
                await asyncio.sleep(10)

        task = asyncio.create_task(stuck())
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.wait_for(_use(e), 1)  # the slot came back
        return e.in_flight

    assert asyncio.run(scenario()) == 0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="initial"):
        Endpoint("e", initial=9, maximum=4)


# ------------------------------------------------------------------ against a slow server


def _items(path, n: int, pair: bool = True):
    with path.open("w") as f:
        for k in range(n):
            turn = {"question": f"[item i{k}] How many people?", "golden": "2 people.",
                    "response_a": "There are 2 people."}
            if pair:
                turn["response_b"] = "Three people."
            f.write(json.dumps({"id": f"i{k}", "turns": [turn]}) + "\n")
    return load_items(path)


def _grade(server: ModelServer, items, out, swap: bool = False, trace: list[RunProgress] | None = None,
           **config):
    judges = Judges([JudgeConfig(spec="litellm:openai/bench", api_base=server.base_url, **config)])
    judge = judges.make("litellm:openai/bench")
    grader = Grader(judge, RUBRIC, GradeOptions(swap=swap, cache=False))

    def keep(state: RunProgress) -> None:
        if trace is not None:
            trace.append(RunProgress(**vars(state)))

    summary = asyncio.run(run_batch(grader, items, out, on_progress=keep))
    return summary, judge.gate


def test_calls_in_flight_reach_the_maximum_and_never_pass_it(tmp_path):
    items = _items(tmp_path / "items.jsonl", 60)
    with ModelServer(latency=0.2) as server:
        summary, gate = _grade(server, items, tmp_path / "v.jsonl", concurrency=2, max_concurrency=6)
        stats = server.stats()
    assert summary.turns_graded == 60 and summary.errors == {}
    assert stats["peak_in_flight"] == 6 and stats["completed"] == 60
    assert gate.limit == 6 and gate.state().in_flight == 0


def test_backs_off_on_a_burst_of_429s_and_recovers(tmp_path):
    """A burst of 429 + Retry-After in the middle of a run: new calls wait out the pause, the calls
    are paced from then on (cut at each burst, grown back after), and every item ends with a
    verdict."""
    items = _items(tmp_path / "items.jsonl", 120)
    trace: list[RunProgress] = []
    with ModelServer(latency=0.1) as server:
        def burst() -> None:
            time.sleep(0.6)
            server.configure(overload_for=1.0, overload_retry_after=0.5)

        import threading

        threading.Thread(target=burst, daemon=True).start()
        summary, gate = _grade(server, items, tmp_path / "v.jsonl", trace=trace, concurrency=8, max_concurrency=8)
        stats = server.stats()
    assert summary.turns_graded == 120 and summary.errors == {}
    assert stats["status_counts"].get(429, 0) > 0  # the burst happened during the run
    assert gate.decreases >= 1 and gate.overloads >= 1
    paces = [t.pace for t in trace if t.pace is not None]
    assert paces and paces[-1] > min(paces)  # paced after the burst, and the pace grew back
    assert stats["completed"] == 120  # each item asked once successfully: a 429 is not a second grading


def test_a_429_paces_calls_and_a_503_cuts_the_concurrency():
    async def scenario() -> tuple[float | None, int, float, float | None, int]:
        e = Endpoint("e", initial=8, maximum=8, cooldown_s=0)
        for _ in range(4):
            await _use(e)
        async with e.slot() as slot:
            slot.overloaded(rate_limited=True)
        pace, limit = e.pace, e.limit
        started = time.monotonic()
        for _ in range(4):  # spaced at the pace, not sent in a burst
            await _use(e)
        spaced = time.monotonic() - started
        async with e.slot() as slot:
            slot.overloaded()  # a 503: the concurrency is cut
        return pace, limit, spaced, e.pace, e.limit

    pace, limit, spaced, later, cut = asyncio.run(scenario())
    assert pace is not None and limit == 8  # a 429 moves the pace, not the concurrency
    assert spaced >= 3 / (pace + 4) and later is not None
    assert cut == 4


def test_under_a_rate_limit_nothing_fails(tmp_path):
    items = _items(tmp_path / "items.jsonl", 80, pair=False)
    with ModelServer(latency=0.05, rate_limit=40, rate_burst=2) as server:
        summary, gate = _grade(server, items, tmp_path / "v.jsonl", concurrency=16, max_concurrency=32)
        stats = server.stats()
    assert summary.turns_graded == 80 and summary.errors == {}
    assert stats["status_counts"].get(429, 0) > 0 and gate.decreases >= 1


@pytest.mark.parametrize("fault, kind", [("hang", "timeout"), ("close_connections", "backend_error"),
                                         ("status_error", "rate_limited")])
def test_a_broken_endpoint_ends_in_judge_errors_never_labels(tmp_path, fault, kind):
    items = _items(tmp_path / "items.jsonl", 4, pair=False)
    setting = {"status_error": 429} if fault == "status_error" else {fault: True}
    with ModelServer(**setting) as server:
        summary, gate = _grade(server, items, tmp_path / "v.jsonl", concurrency=4, max_concurrency=4,
                               timeout_s=0.5, overload_budget_s=1.5)
    from framejudge.judge import read_records

    records = read_records(tmp_path / "v.jsonl")
    assert len(records) == 4 and all(isinstance(r, JudgeError) for r in records)
    assert not any(isinstance(r, Verdict) for r in records)
    assert {r.kind.value for r in records} == {kind}, {r.message[:120] for r in records}
    assert gate.state().in_flight == 0


def test_a_retry_after_longer_than_the_budget_ends_items_as_rate_limited_at_once(tmp_path):
    """A quota error's Retry-After of five minutes must not hold a run five minutes past its budget."""
    items = _items(tmp_path / "items.jsonl", 6, pair=False)
    with ModelServer(overload_for=60, overload_retry_after=300) as server:
        started = time.monotonic()
        summary, gate = _grade(server, items, tmp_path / "v.jsonl", concurrency=2, max_concurrency=2,
                               overload_budget_s=1.0)
        spent = time.monotonic() - started
        asked = server.stats()["requests"]
    assert summary.errors == {"rate_limited": 6} and summary.turns_graded == 0
    assert spent < 60 and asked <= 2  # the pause held every other call; nobody waited it out
    from framejudge.judge import read_records

    assert all("Retry-After" in r.message for r in read_records(tmp_path / "v.jsonl"))


def test_a_wait_for_a_place_is_bounded():
    async def scenario() -> None:
        e = Endpoint("e", initial=1, maximum=1)
        async with e.slot():
            with pytest.raises(EndpointBusy):
                async with e.slot(wait_s=0.05):
                    pass
        assert e.in_flight == 0

    asyncio.run(scenario())


def test_tokens_per_minute_is_enforced_for_calls_larger_than_a_seconds_worth():
    async def scenario() -> float:
        e = Endpoint("e", initial=8, maximum=8, tokens_per_minute=6000)
        started = time.monotonic()
        for _ in range(3):  # 3 x 3,000 tokens against 6,000 a minute: the third waits ~30 s
            async with e.slot(tokens=3000, wait_s=1.0):
                pass
        return time.monotonic() - started

    with pytest.raises(EndpointBusy):
        asyncio.run(scenario())
