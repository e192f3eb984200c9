"""Prometheus metrics: requests and latency, jobs by state, verdicts, judge errors, tokens, cost, and the
records whose token usage is unknown."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ..schema import JudgeError, Verdict


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("framejudge_http_requests", "HTTP requests", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram("framejudge_http_request_seconds", "HTTP request latency", ["route"],
                                 registry=self.registry)
        self.verdicts = Counter("framejudge_verdicts", "verdicts produced", registry=self.registry)
        self.judge_errors = Counter("framejudge_judge_errors", "judge errors by kind", ["kind"], registry=self.registry)
        self.tokens = Counter("framejudge_tokens", "model tokens", ["kind"], registry=self.registry)
        self.cost = Counter("framejudge_cost_usd", "model cost in US dollars where known", registry=self.registry)
        self.usage_unknown = Counter("framejudge_usage_unknown", "records whose token counts the model server "
                                     "misreported (their tokens and cost unknown, in no other figure)",
                                     registry=self.registry)
        self.job_items = Gauge("framejudge_job_items", "job items by state", ["state"], registry=self.registry)

    def record(self, records: list[Verdict | JudgeError]) -> None:
        for r in records:
            if isinstance(r, Verdict):
                self.verdicts.inc()
            else:
                self.judge_errors.labels(kind=r.kind.value).inc()
            usage = r.provenance.usage if r.provenance else None
            if usage is None:
                continue
            if usage.prompt_tokens is None or usage.completion_tokens is None:
                self.usage_unknown.inc()
                continue
            self.tokens.labels(kind="prompt").inc(usage.prompt_tokens)
            self.tokens.labels(kind="completion").inc(usage.completion_tokens)
            if usage.cost_usd:  # never negative (schema.Usage): a counter only adds
                self.cost.inc(usage.cost_usd)

    def render(self, engine: Engine) -> bytes:
        from ..runner.queue import JobItem

        with Session(engine) as s:
            counts = dict(s.execute(select(JobItem.status, func.count()).group_by(JobItem.status)).all())
        for state in ("pending", "running", "done", "cancelled"):
            self.job_items.labels(state=state).set(counts.get(state, 0))
        return generate_latest(self.registry)
