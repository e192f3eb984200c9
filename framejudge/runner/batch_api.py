"""Batch runs (`framejudge grade ... --batch`): a run's judge calls sent through the provider's batch
API (half price, answered within 24 hours), resumable by running the same command again.

Each run of the command does three things, in this order:

1. **Collect.** Every batch in the ledger (`<out>.batches.json`) that is not collected yet is asked
   for its status; a completed one's output (and error) file is read into the replies file
   (`<out>.batch-replies.jsonl`, one line per request: its key and the provider's answer). A batch
   that failed, expired or was cancelled gives its requests back to be submitted again.
2. **Grade.** The turns still to grade (the same resume rules as an online run: `runner/resume.py`)
   go through the same pipeline as an online run, with `BatchedLiteLLM` as the judge: where the
   call it would make has a reply, the reply is used exactly as an online reply would be (usage,
   cost, the re-ask loop, log-probabilities); where it has none, the request is set aside and the
   turn waits (no record). A reply that breaks the rubric makes its re-ask the next request, so
   re-asks go in the next batch. A request the provider failed is submitted again, at most
   `MAX_FAILURES` times, then the turn is recorded as a JudgeError. Turns that finish are appended to
   the verdicts file as records, as an online run writes them.
3. **Submit.** The requests set aside that no open batch carries are written as the batch API's JSONL
   (one chat-completions body each, its key as `custom_id`), uploaded and submitted as one batch,
   recorded in the ledger before anything else happens.

A request's key is the sha256 of its body (model, messages, response format, temperature, seed,
token limit), so the same call in a later run finds its reply, and a call that changed (another
rubric, other frames) is a new request. Cost: litellm's price for each reply, halved
(`BATCH_PRICE`: OpenAI's batch API is billed at 50 % of the synchronous price), or the judges file's
price halved.

The batch API spoken is OpenAI's (files + batches, `/v1/chat/completions` lines): OpenAI itself and
servers that implement it (`openai/` judges, with or without `api_base`). Other providers are refused
with the reason before anything is sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..endpoint import UnlimitedGate
from ..errors import FramejudgeError
from ..judge.base import JudgeRequest, JudgeResult
from ..judge.litellm_backend import LiteLLMJudge
from ..judge.pipeline import Grader
from ..records import Record
from ..schema import Item, JudgeError
from ..schema.batches import BatchLedger, SubmittedBatch
from .resume import ResumePlan, apply_plan

BATCH_PRICE = 0.5  # OpenAI's Batch API: "50% cost discount compared to synchronous APIs"
MAX_FAILURES = 3  # times a request the provider failed is submitted again before the turn is an error
ENDPOINT = "/v1/chat/completions"
PROVIDERS = ("openai",)  # litellm providers whose batch API framejudge speaks
CLOSED = {"failed", "expired", "cancelled"}  # batch states that will never produce an output


class BatchUnsupported(FramejudgeError, ValueError):
    """A batch run asked of a judge whose provider has no batch API framejudge speaks."""

    code = "batch_unsupported"


class BatchError(FramejudgeError, RuntimeError):
    """The provider's batch API refused an upload or a batch, or its files could not be read."""

    code = "batch_failed"


class Deferred(BaseException):  # a signal, not an error: it passes every `except Exception`
    """Raised by `BatchedLiteLLM` for a call whose reply is not in yet: the turn waits for a later run."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


# the requests one turn set aside (inside BatchRun.run, per turn: each turn is its own task)
WAITING: ContextVar[list[str] | None] = ContextVar("framejudge_batch_waiting", default=None)


def _placeholder(request: JudgeRequest) -> Any:
    """A stand-in judgement for a call with no reply yet, so that the turn's other calls (the swapped
    order, more samples, the blind control) are set aside in the same batch instead of the next one.
    The turn's record is never written while it waits: BatchRun drops it."""
    from ..schema import Judgement

    has_b = request.item.turns[request.turn].response_b is not None
    grade = {"category": "Successful", "rationale": "waiting for the batch reply"}
    return Judgement.model_validate({"response_a": grade, "response_b": grade if has_b else None,
                                     "preference": "Both" if has_b else None,
                                     "deciding_criterion": "category" if has_b else None})


def ledger_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".batches.json")


def replies_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".batch-replies.jsonl")


def request_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_batchable(judge: Any, spec: str) -> None:
    """Refuse, before anything is sent, a judge whose provider has no batch API framejudge speaks."""
    if not isinstance(judge, LiteLLMJudge):
        raise BatchUnsupported(f"--batch sends a run's calls through a provider's batch API; judge {spec!r} "
                               "calls no provider (batch runs are for litellm judges)")
    import litellm

    try:
        _, provider, _, _ = litellm.get_llm_provider(judge.model, api_base=judge.api_base)
    except Exception as exc:  # a model litellm cannot place
        raise BatchUnsupported(f"--batch: litellm cannot place {judge.model!r}: {exc}") from None
    if provider not in PROVIDERS:
        raise BatchUnsupported(f"--batch speaks OpenAI's batch API (files and batches), for openai/ judges and "
                               f"servers that implement it; {spec!r} goes to {provider!r}, which it does not speak "
                               "yet: grade it online (without --batch)")


class BatchedLiteLLM(LiteLLMJudge):
    """The litellm judge answered from batch replies: `_complete` returns the reply a batch gave to
    exactly this request, or raises Deferred after setting the request aside."""

    def __init__(self, inner: LiteLLMJudge, replies: dict[str, dict[str, Any]], failures: dict[str, int]) -> None:
        self.__dict__.update(inner.__dict__)
        self.replies = replies  # key -> the provider's answer line ({"status_code", "body"} or {"error"})
        self.failures = failures
        self.pending: dict[str, dict[str, Any]] = {}  # key -> body, for the next batch
        self.logprobs = False  # a batch line's reply carries none unless asked; asked for none
        self.gate = UnlimitedGate()  # no call is made: nothing to pace

    def body(self, messages: list[dict[str, Any]], temperature: float, seed: int) -> dict[str, Any]:
        """The chat-completions body an online call would send (the model without its provider prefix),
        with the reply's schema or JSON mode as the judge's output mode says."""
        from ..judge.litellm_backend import response_format

        body = {"model": self.model.split("/", 1)[1] if self.model.startswith("openai/") else self.model,
                "messages": messages, "response_format": response_format(self.output, "openai"),
                "temperature": temperature, "max_tokens": self.max_tokens}
        if self.takes_seed:
            body["seed"] = seed
        return body

    async def _complete(self, messages: list[dict[str, Any]], temperature: float, seed: int,
                        notes: list[str], direct: bool = False) -> tuple[Any, str]:
        import litellm

        body = self.body(messages, temperature, seed)
        key = request_key(body)
        answer = self.replies.get(key)
        if (answer is not None and answer.get("error") is not None and self.output == "schema"
                and answer.get("status_code") in (400, 422)):
            # the provider refused the schema in a batch line, as it would online: JSON mode from now on
            self.output = "json_object"
            notes.append(f"the batch API refused the reply's JSON schema ({json.dumps(answer['error'])[:200]}); "
                         "JSON mode (json_object) from now on")
            return await self._complete(messages, temperature, seed, notes)
        if answer is None or (answer.get("error") is not None and self.failures.get(key, 0) < MAX_FAILURES):
            self.pending[key] = body
            raise Deferred(key)
        if answer.get("error") is not None:
            raise BatchError(f"the batch API failed this request {self.failures.get(key, 0)} times: "
                             f"{json.dumps(answer['error'])[:500]}")
        return litellm.ModelResponse(**answer["body"]), ("schema" if body["response_format"]["type"] == "json_schema"
                                                          else "json_object")

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        try:
            result = await super().judge(request)
        except Deferred as waiting:
            asked = WAITING.get()
            if asked is None:  # not inside a batch run's turn: nothing can wait
                raise
            asked.append(waiting.key)
            return JudgeResult(_placeholder(request), None, None, None, ["waiting for the batch reply"])
        if result.usage is not None and result.usage.cost_usd is not None:
            result.usage.cost_usd *= BATCH_PRICE
        result.notes = [*result.notes, "graded through the batch API (billed at half the synchronous price)"]
        return result

    def _failure(self, exc: BaseException, raws: list[str], usage: Any, tries: int) -> Any:
        from ..judge.base import JudgeFailure
        from ..schema import JudgeErrorKind

        if isinstance(exc, BatchError):
            return JudgeFailure(JudgeErrorKind.backend_error, str(exc), "\n---\n".join(raws) or None, usage)
        return super()._failure(exc, raws, usage, tries)


@dataclass
class BatchReport:
    """What one batch run did: records written, turns waiting, batches submitted or still open."""

    written: list[Record] = field(default_factory=list)
    waiting: int = 0  # turns with a request in a batch
    submitted: list[str] = field(default_factory=list)  # batch ids submitted by this run
    open: list[str] = field(default_factory=list)  # batch ids still being processed
    collected: list[str] = field(default_factory=list)  # batch ids read by this run
    resubmitted: int = 0  # requests given back by a failed or expired batch, or failed by the provider


class BatchRun:
    """One `grade --batch` run over a verdicts file (see the module's description)."""

    def __init__(self, grader: Grader, spec: str, out: Path) -> None:
        check_batchable(grader.judge, spec)
        assert isinstance(grader.judge, LiteLLMJudge)  # what check_batchable checked first
        self.grader = grader
        self.spec = spec
        self.out = out
        self.inner: LiteLLMJudge = grader.judge
        self.ledger = self._read_ledger()
        self.replies = self._read_replies()

    # ------------------------------------------------------------------ files
    def _read_ledger(self) -> BatchLedger:
        path = ledger_path(self.out)
        if not path.exists():
            return BatchLedger(judge=self.spec)
        try:
            ledger = BatchLedger.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BatchError(f"{path}: not a batch ledger ({str(exc).splitlines()[0]}); move it aside to start "
                             "the batches again") from None
        if ledger.judge != self.spec:
            raise BatchError(f"{path} holds batches of judge {ledger.judge!r}, not {self.spec!r}: give another "
                             "--out, or move the ledger aside")
        return ledger

    def _write_ledger(self) -> None:
        path = ledger_path(self.out)
        scratch = path.with_name(path.name + ".tmp")
        scratch.write_text(self.ledger.model_dump_json(indent=1), encoding="utf-8")
        scratch.replace(path)  # whole or not at all: the ids are what a later run collects

    def _read_replies(self) -> dict[str, dict[str, Any]]:
        replies: dict[str, dict[str, Any]] = {}
        path = replies_path(self.out)
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    replies[row["key"]] = row
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line of an interrupted run: that batch's lines are read again
        return replies

    def _keep_replies(self, rows: list[dict[str, Any]]) -> None:
        with open(replies_path(self.out), "a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
            f.flush()
        for row in rows:
            self.replies[row["key"]] = row

    # ------------------------------------------------------------------ the provider
    def _kwargs(self) -> dict[str, Any]:
        return {"custom_llm_provider": "openai", "api_base": self.inner.api_base, "api_key": self.inner.api_key}

    async def _collect(self, report: BatchReport) -> None:
        import litellm

        for batch in self.ledger.batches:
            if batch.status != "submitted":
                continue
            try:
                state = await litellm.aretrieve_batch(batch_id=batch.id, **self._kwargs())
            except Exception as exc:
                raise BatchError(f"batch {batch.id}: the provider could not say where it stands: {exc}"[:800]) from None
            batch.provider_status = str(state.status)
            if state.status == "completed" or (state.status in CLOSED and (state.output_file_id or state.error_file_id)):
                rows = []
                for file_id in (state.output_file_id, state.error_file_id):
                    if file_id:
                        rows += self._lines(batch, await self._file(file_id))
                self._keep_replies(rows)
                answered = {r["key"] for r in rows}
                for key in batch.keys:
                    row = self.replies.get(key)
                    if key not in answered and (row is None or row.get("error") is not None):
                        report.resubmitted += 1  # in the batch, but with no answer: asked again
                batch.status = "collected"
                report.collected.append(batch.id)
            elif state.status in CLOSED:
                batch.status = "failed"  # its requests have no reply: the grading pass sets them aside again
                report.resubmitted += len(batch.keys)
            else:
                report.open.append(batch.id)
            self._write_ledger()

    async def _file(self, file_id: str) -> bytes:
        import litellm

        try:
            content = await litellm.afile_content(file_id=file_id, **self._kwargs())
        except Exception as exc:
            raise BatchError(f"file {file_id}: could not be read: {exc}"[:800]) from None
        return content.content if hasattr(content, "content") else bytes(content)

    def _lines(self, batch: SubmittedBatch, data: bytes) -> list[dict[str, Any]]:
        rows = []
        known = set(batch.keys)
        for line in data.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key = row["custom_id"]
            except (ValueError, KeyError, TypeError):
                continue
            if key not in known:
                continue
            response = row.get("response") or {}
            status = response.get("status_code")
            if row.get("error") is None and status == 200 and isinstance(response.get("body"), dict):
                rows.append({"key": key, "batch": batch.id, "status_code": 200, "body": response["body"]})
            else:
                self.ledger.failures[key] = self.ledger.failures.get(key, 0) + 1
                rows.append({"key": key, "batch": batch.id, "status_code": status,
                             "error": row.get("error") or response.get("body") or {"status_code": status}})
        return rows

    async def _submit(self, bodies: dict[str, dict[str, Any]], report: BatchReport) -> None:
        import litellm

        lines = "".join(json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}) + "\n"
                        for key, body in bodies.items())
        name = f"framejudge-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.jsonl"
        try:
            uploaded = await litellm.acreate_file(file=(name, lines.encode("utf-8"), "application/jsonl"),
                                                  purpose="batch", **self._kwargs())
            batch = await litellm.acreate_batch(completion_window="24h", endpoint=ENDPOINT,
                                                input_file_id=uploaded.id, **self._kwargs())
        except Exception as exc:
            raise BatchError(f"the batch of {len(bodies)} request(s) was not accepted: {exc}"[:800]) from None
        self.ledger.batches.append(SubmittedBatch(id=batch.id, input_file_id=uploaded.id, keys=list(bodies),
                                                  submitted_at=datetime.now(timezone.utc).isoformat(),
                                                  provider_status=str(batch.status)))
        self._write_ledger()
        report.submitted.append(batch.id)

    # ------------------------------------------------------------------ the run
    async def run(self, items: list[Item], plan: ResumePlan,
                  mark: Callable[[Record], Record] | None = None, concurrency: int = 4) -> BatchReport:
        """Collect, grade what has its replies, submit what has none (see the module's description)."""
        report = BatchReport()
        await self._collect(report)
        judge = BatchedLiteLLM(self.inner, self.replies, self.ledger.failures)
        # the verdict cache would keep a waiting turn's stand-in judgements: the replies file is this
        # run's cache instead
        cache, self.grader._cache = self.grader._cache, None
        self.grader.judge = judge
        in_batches = {k for b in self.ledger.batches if b.status == "submitted" for k in b.keys}
        self.out.parent.mkdir(parents=True, exist_ok=True)
        apply_plan(plan, self.out)
        room = asyncio.Semaphore(max(1, concurrency))
        with open(self.out, "a", encoding="utf-8") as f:

            async def one(item: Item, turn: int) -> None:
                async with room:
                    asked: list[str] = []
                    WAITING.set(asked)  # this turn's task only
                    try:
                        record = await self.grader.grade_turn(item, turn)
                    except Exception:
                        if not asked:
                            raise
                        # a stand-in judgement went where a real one was needed: the turn waits
                    if asked:
                        report.waiting += 1
                        return
                if mark is not None:
                    record = mark(record)
                f.write(record.model_dump_json() + "\n")
                f.flush()
                report.written.append(record)

            await asyncio.gather(*(one(item, t) for item, skip in plan.work
                                   for t in range(len(item.turns)) if t not in skip))
        self.grader.judge, self.grader._cache = self.inner, cache
        fresh = {k: b for k, b in judge.pending.items() if k not in in_batches}
        if fresh:
            await self._submit(fresh, report)
        report.open = sorted(set(report.open) | set(report.submitted))
        return report


def errors_of(report: BatchReport) -> int:
    return sum(isinstance(r, JudgeError) for r in report.written)
