"""The graders a long-running process keeps: made once, judges shared, endpoints attached."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from framejudge.frame_sampler import sample_frames
from framejudge.rubrics import get_rubric
from framejudge.runner.endpoint import Endpoint
from framejudge.runner.graders import GraderCache
from framejudge.runner.judges import Judges
from framejudge.schema import GradeOptions, JudgeConfig, SamplerParams


def test_graders_are_made_once_per_judge_rubric_and_options():
    cache = GraderCache(sample_frames)
    rubric = get_rubric("video-qa")
    options = GradeOptions(sampler=SamplerParams(n=8))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: cache.get("reference", rubric, options), range(32)))
    assert len({id(g) for g in got}) == 1
    other = cache.get("reference", rubric, GradeOptions(sampler=SamplerParams(n=4)))
    assert other is not got[0] and other.options.sampler.n == 4
    assert cache.get("reference", rubric, GradeOptions(swap=True)) is not got[0]


def test_a_model_judge_is_made_once_and_paced_by_its_endpoint():
    judges = Judges([JudgeConfig(spec="litellm:openai/m", api_base="http://127.0.0.1:9/v1", concurrency=3,
                                 max_concurrency=7)])
    cache = GraderCache(sample_frames, judges)
    rubric = get_rubric("video-qa")
    a = cache.get("litellm:openai/m", rubric, GradeOptions())
    b = cache.get("litellm:openai/m", rubric, GradeOptions(samples=3))
    assert a is not b and a.judge is b.judge  # one judge, one gate, whatever the options
    assert isinstance(a.judge.gate, Endpoint) and a.judge.gate.limit == 3 and a.judge.gate.maximum == 7
    assert [s.limit for s in judges.states()] == [3]
