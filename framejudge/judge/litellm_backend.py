"""Any model litellm can reach (hosted APIs, or a self-hosted OpenAI-compatible server via
api_base), with validated JSON replies and retries through tenacity.

- temperature 0 and a fixed seed by default (k > 1 samples: the request's temperature and seed;
  no seed to a provider that takes none); the model id the server reports is recorded;
- the reply held to its JSON schema (`response_format` json_schema, stripped of the keywords the
  provider refuses) where the provider takes one, JSON mode (json_object) elsewhere or when the
  judges file says so; a server that refuses the schema (400, 422) is asked again in JSON mode, and
  no more with the schema after that; the verdict's notes say which mode its reply came in;
- the reply's token log-probabilities (`logprobs`, 5 candidates a token) where the provider takes
  them, mapped to the probability of each option of each label field; a server that refuses the
  parameter is asked again without it, and no more after that;
- a reply that breaks the rubric is re-asked with the validator's reason (bounded; reask.py);
- tenacity retries 429, 5xx, timeouts and dropped connections with exponential backoff
  and jitter, waiting as long as a Retry-After header asks when there is one; signs of
  overload (429, 503, timeouts) are retried for up to `overload_budget_s` (a Retry-After pause
  longer than what is left of it ends the item as rate_limited at once), other failures
  (5xx, dropped connections) `max_retries` times;
- every attempt passes through the judge's `gate` (the runner's Endpoint: adaptive
  concurrency, endpoint-wide Retry-After pauses, rate limits) and reports its outcome there;
- token usage and cost of every attempt, re-asks included, from litellm (or from a price
  override, for self-hosted models); the video tokens where the provider counts them; a reply
  whose counts are not counts of tokens (negative, a string, null, ...: judge/usage.py) makes the
  turn's tokens and cost unknown, with a note;
- video_input clip: the turn's window as an MP4 `file` part (`clip_parts`) for the providers that
  take video (gemini/, vertex_ai/gemini-..., hosted_vllm/); a reply whose usage counts no video
  tokens, where the provider counts them, is a judge error, never a verdict on frames it never saw;
  vLLM is told the clip's sampling rate in the request's `media_io_kwargs` (`clip_sampling`: litellm
  passes Gemini's `video_metadata` fps on, but not vLLM's), and the verdict's notes say so;
- `service_tier` (flex, priority, default) sent with every call: flex calls get a longer time
  limit, are shed with 429s and 503s (retried under the overload budget), and cost half.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from ..backends import JudgeSpecError, clip_request_bytes, litellm_takes_video
from ..endpoint import EndpointBusy, Gate, UnlimitedGate
from ..rubrics.model import Rubric
from ..rubrics.prompt import IMAGE_TOKENS, PromptClip, PromptFrame, RenderedPrompt, render_prompt
from ..schema import JudgeConfig, Judgement, JudgeErrorKind, ServiceTier, Usage, VideoInput
from ..schema.judges_file import DEFAULT_TIMEOUT_S
from .base import JudgeBase, JudgeFailure, JudgeRequest, JudgeResult, PlannedTurn
from .confidence import LabelProbs, field_options, label_probabilities, steps_from_logprobs
from .model_http import bound_litellm, limit_of, max_reply_bytes, reply_bodies
from .openai_wire import (WireConnectionError, WireError, WireReplyRefused, WireStatusError, WireTimeout,
                          chat_completion, direct_route, wire_model)
from .reask import InvalidReply, json_text, parse_judgement, problems, reask_messages, reply_schema
from .usage import keep_reply, raw_reply, reply_tokens, token_count

TOP_LOGPROBS = 5
ESTIMATE_SAMPLE = 200  # planned turns whose prompts are rendered for a cost estimate
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
OVERLOAD_STATUS = {408, 429, 503, 529}  # the server is over capacity, or did not answer in time
FLEX_PRICE = 0.5  # OpenAI's and Gemini's flex tier: half the standard price per token


def _litellm() -> Any:
    """litellm if this process has imported it, else None: an error can only be one of litellm's
    when litellm made the call, and a judge that sends straight to its server never imports it."""
    return sys.modules.get("litellm")


class VideoNotSeen(Exception):
    """A reply to a call that sent a clip, whose usage counts no video tokens."""


def video_tokens(usage: Any) -> int | None:
    """The prompt's video tokens as the provider reports them (litellm's
    `usage.prompt_tokens_details.video_tokens`): 0 where it counts the prompt by modality without
    any video (Gemini's promptTokensDetails lists a VIDEO entry for a clip it read); None where it
    gives no count by modality (an OpenAI-compatible server's cached_tokens alone)."""
    details = getattr(usage, "prompt_tokens_details", None)
    if details is None:
        return None

    def get(name: str) -> Any:
        return details.get(name) if isinstance(details, dict) else getattr(details, name, None)

    count = get("video_tokens")
    if count is not None:
        return token_count(count)
    return 0 if get("text_tokens") is not None else None


def clip_parts(request: JudgeRequest, images: bool) -> tuple[list[PromptFrame], PromptClip | None]:
    """What of the video a request shows: the clip of its window (as render_prompt's PromptClip),
    else its frames (timestamps only for a model that sees no images)."""
    clip = request.clip
    if clip is not None and images:
        return [], PromptClip(clip.start, clip.end, clip.fps, clip.data_url())
    return (request.frames if images else [PromptFrame(f.timestamp) for f in request.frames]), None

# providers whose chat API carries a message's images as one list beside its text (Ollama's
# /api/chat): a frame's time label stays beside its image only where each frame is a message of its own
IMAGES_PER_MESSAGE = frozenset({"ollama_chat"})


def images_per_message(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user message split where each image part starts a new one: the text before the first image
    is a message, each image with the label just before it another (label, then image, in that
    order), and the text after the last image the last one. For chat APIs that keep a message's
    text and images apart (Ollama), so that each `[t = ... s]` label arrives in the same message as
    its frame, in order. A message without images is left whole."""
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = message.get("content")
        if message.get("role") != "user" or not isinstance(parts, list) or not any(
                p.get("type") == "image_url" for p in parts):
            out.append(message)
            continue
        groups: list[list[dict[str, Any]]] = [[]]
        for k, part in enumerate(parts):
            labels_next = (part.get("type") == "text" and k + 1 < len(parts)
                           and parts[k + 1].get("type") == "image_url")
            if labels_next and groups[-1]:
                groups.append([])
            groups[-1].append(part)
            if part.get("type") == "image_url":
                groups.append([])
        out.extend({"role": "user", "content": g} for g in groups if g)
    return out


def clip_sampling(provider: str | None, clip: PromptClip | None) -> dict[str, Any]:
    """The request fields that pin how the server samples a clip: for vLLM (hosted_vllm/), its
    `media_io_kwargs` with the clip's rate (`num_frames` -1: no cap on the count, which is 32 frames
    uniformly spread unless a request or the server's --media-io-kwargs says otherwise); none
    elsewhere (Gemini gets the rate as the part's `video_metadata`)."""
    if clip is None or provider != "hosted_vllm":
        return {}
    return {"media_io_kwargs": {"video": {"fps": clip.fps, "num_frames": -1}}}


OUTPUT_MODES = ("auto", "schema", "json_object")
# the OpenAI parameters an OpenAI-compatible server sent its calls directly is asked (litellm's list
# for openai/ and hosted_vllm/ models includes each)
LITELLM_ONLY = ("timeout", "api_base", "api_key", "num_retries", "vertex_project", "vertex_location")  # call_kwargs litellm reads, not the server
DIRECT_PARAMS = ("temperature", "max_tokens", "seed", "logprobs", "top_logprobs", "response_format", "service_tier")


def _quiet_litellm() -> None:
    import litellm

    # litellm prints banners and "Give Feedback" notes to stdout on errors and unknown prices;
    # stdout is the command's output (a summary piped on), and the errors are recorded anyway
    litellm.suppress_debug_info = True
    bound_litellm()  # no redirects followed, replies read up to the cap (model_http)
# Providers whose route in litellm carries a reply schema for any model: OpenAI and OpenAI-compatible
# servers (response_format json_schema), vLLM (guided decoding), Anthropic (output_format, or a forced
# tool for older models), Ollama (format). Gemini 2 and later get generationConfig.response_json_schema
# (litellm tells them by name, as GEMINI_2_ON does); elsewhere, older Gemini models included (litellm
# turns the schema into prompt text for those its model list does not mark), `auto` asks that list.
SCHEMA_PROVIDERS = frozenset({"openai", "hosted_vllm", "anthropic", "ollama", "ollama_chat"})
GEMINI_2_ON = re.compile(r"gemini-(?:[2-9]|[1-9]\d+)[.-]")
# JSON-schema keywords a provider answers 400 to in a reply schema, left out of what it is sent (the
# validator still holds the reply to them). OpenAI's strict mode takes no string lengths; Gemini's
# response_json_schema refuses these (litellm passes the schema to Gemini as it is, and itself
# filters what Anthropic refuses).
SCHEMA_REFUSED: dict[str, frozenset[str]] = {
    "openai": frozenset({"minLength", "maxLength"}),
    "gemini": frozenset({"$schema", "title", "const", "exclusiveMinimum", "exclusiveMaximum", "propertyNames"}),
}


def without_keywords(schema: Any, refused: frozenset[str]) -> Any:
    """`schema` without the keywords in `refused`, at any depth; property names (the keys of
    `properties`) and definition names (of `$defs`) are names, not keywords, and stay."""
    if isinstance(schema, list):
        return [without_keywords(s, refused) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in refused:
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: without_keywords(sub, refused) for name, sub in value.items()}
        else:
            out[key] = without_keywords(value, refused)
    return out


def response_format(mode: str, provider: str) -> dict[str, Any]:
    """What a call asks the provider for: the reply's JSON schema, without what the provider
    refuses (`schema`), or any JSON object (`json_object`). A fresh copy each call (litellm's
    routes may edit what they are given)."""
    if mode == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "judgement", "schema": json.loads(_schema_for(provider)),
                                                    "strict": True}}


@functools.lru_cache(maxsize=None)
def _schema_for(provider: str) -> str:
    return json.dumps(without_keywords(reply_schema(), SCHEMA_REFUSED.get(provider, frozenset())))


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's Retry-After (seconds or an HTTP date), if the error carries one."""
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    if not headers:
        return None
    millis = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime
        from datetime import datetime, timezone

        try:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
        except (TypeError, ValueError):
            return None


def api_error(exc: BaseException) -> BaseException | None:
    """The provider error inside an exception chain, or None when the failure was the reply
    itself (InvalidReply)."""
    litellm = _litellm()
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, WireError) or _status(seen) is not None or (litellm is not None and isinstance(
                seen, (litellm.exceptions.APIError, litellm.RateLimitError, litellm.Timeout,
                       litellm.APIConnectionError))):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _is(exc: BaseException, name: str) -> bool:
    """Whether `exc` is litellm's exception class `name` (never, where litellm is not imported)."""
    litellm = _litellm()
    return litellm is not None and isinstance(exc, getattr(litellm, name))


def is_retryable(exc: BaseException) -> bool:
    if limit_of(exc) is not None or isinstance(api_error(exc), WireReplyRefused):
        return False  # a redirect, or a reply over the cap: the same server would answer the same
    litellm = _litellm()
    exc = api_error(exc) or exc
    if isinstance(exc, (WireTimeout, WireConnectionError)):
        return True
    if litellm is not None and isinstance(exc, (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
                                                litellm.InternalServerError, litellm.ServiceUnavailableError)):
        return True
    status = _status(exc)
    return status in RETRYABLE_STATUS


def is_overload(exc: BaseException) -> bool:
    """A sign that the endpoint has no room now: a 429, a 503 or 529, a timeout."""
    if limit_of(exc) is not None:
        return False
    litellm = _litellm()
    exc = api_error(exc) or exc
    if isinstance(exc, WireTimeout):
        return True
    if litellm is not None and isinstance(exc, (litellm.RateLimitError, litellm.Timeout,
                                                litellm.ServiceUnavailableError)):
        return True
    return _status(exc) in OVERLOAD_STATUS


class LiteLLMJudge(JudgeBase):
    backend = "litellm"
    needs_frames = True
    deterministic = False
    spends = True

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, seed: int = 1234, timeout: float = DEFAULT_TIMEOUT_S, max_retries: int = 5,
                 max_reasks: int = 2, images: bool = True, max_wait: float = 60.0,
                 max_tokens: int = 1024, overload_budget_s: float = 600.0,
                 price: tuple[float, float] | None = None, gate: Gate | None = None,
                 logprobs: bool | None = None, output: str = "auto", video_input: VideoInput = VideoInput.frames,
                 service_tier: ServiceTier | None = None, vertex_project: str | None = None,
                 vertex_location: str | None = None, batch_bucket: str | None = None) -> None:
        """`price`: (USD per prompt token, per completion token) on the standard tier, instead of
        litellm's price list (0, 0 for a self-hosted model). `gate`: the runner's Endpoint for this
        model server. `logprobs`: ask for token log-probabilities (None: where litellm says the
        provider takes them). `output`: `schema` (the reply's JSON schema), `json_object` (JSON mode),
        or `auto` (the schema where the provider takes one). `video_input`: what of the video it is
        shown unless a run says otherwise. `service_tier`: sent with every call (flex: half the price).
        `vertex_project`, `vertex_location`: a vertex_ai/ model's project and region (litellm's
        params; None: litellm's environment variables and credentials); `batch_bucket`: where its
        batch runs put their files (gs://BUCKET[/PREFIX]).
        An OpenAI-compatible server named by `api_base` (openai/, hosted_vllm/) is sent its calls
        directly (openai_wire), frames; everything else, and clips, through litellm."""
        try:
            max_reply_bytes()  # FRAMEJUDGE_MAX_REPLY_MB, refused before anything is sent
        except ValueError as exc:
            raise JudgeSpecError(str(exc)) from None
        self.direct = direct_route(model, api_base)
        if not self.direct:
            _quiet_litellm()
        self.model = model
        self.model_id = model
        self.api_base = api_base
        if api_key is None and api_base and not os.environ.get("OPENAI_API_KEY"):
            api_key = "none"  # a self-hosted server usually wants no key, but the OpenAI client insists on one
        self.api_key = api_key
        self.temperature = temperature
        self.seed = seed
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_reasks = max_reasks
        self.sees_images = images
        self.max_wait = max_wait
        self.max_tokens = max_tokens
        self.overload_budget_s = overload_budget_s
        self.price = price
        self.free = price is not None and price[0] == 0 and price[1] == 0  # a self-hosted model: asks no --yes
        self.takes_video = litellm_takes_video(model)
        self.clip_request_bytes = clip_request_bytes(model)  # None: frame_sampler.clip's default
        self.video_input = video_input
        self.service_tier = service_tier
        self.vertex_project = vertex_project
        self.vertex_location = vertex_location
        self.batch_bucket = batch_bucket
        self.gate: Gate = gate or UnlimitedGate()
        self._priced: bool | None = None  # whether litellm knows this model's price (None: not asked yet)
        if output not in OUTPUT_MODES:
            raise JudgeSpecError(f"output {output!r}: use {', '.join(OUTPUT_MODES)}")
        self.provider, params = self._provider_params()
        self.logprobs = logprobs if logprobs is not None else "logprobs" in params
        self.takes_seed = "seed" in params
        self.output = output if output != "auto" else "schema" if self._takes_schema() else "json_object"
        # the mode it was made with, for the verdict cache's key: `output` moves to json_object in a
        # run whose server refuses the schema, and every run starts from this one again
        self.output_mode = self.output

    @classmethod
    def from_spec(cls, target: str, config: JudgeConfig | None = None, api_base: str | None = None) -> LiteLLMJudge:
        """`litellm:<model>`; a judges file's entry gives the API base, the key's variable, the
        timeout, the retry budget, the price, whether to ask for log-probabilities, what of the
        video to show and the service tier."""
        if config is None:
            return cls(target, api_base=api_base)
        api_key = None
        if config.api_key_env:
            api_key = os.environ.get(config.api_key_env)
            if not api_key:
                raise JudgeSpecError(f"judge {config.spec!r} takes its API key from ${config.api_key_env}, "
                                     "which is not set")
        price = (config.price.prompt_usd_per_token, config.price.completion_usd_per_token) if config.price else None
        return cls(target, api_base=config.api_base or api_base, api_key=api_key, timeout=config.call_timeout_s(),
                   overload_budget_s=config.overload_budget_s, price=price, logprobs=config.logprobs,
                   output=config.output, video_input=config.video_input, service_tier=config.service_tier,
                   vertex_project=config.vertex_project, vertex_location=config.vertex_location,
                   batch_bucket=config.batch_bucket)

    def _provider_params(self) -> tuple[str | None, list[str]]:
        """The provider litellm routes this model to, and the OpenAI parameters it takes there
        (None and none for a model litellm cannot place: nothing optional is asked of it). A server
        sent its calls directly is OpenAI-compatible: it takes the seed, log-probabilities and a
        reply format (as litellm lists for these providers; tests/judge hold the two lists equal)."""
        if self.direct:
            return self.model.partition("/")[0], list(DIRECT_PARAMS)
        import litellm

        try:
            _, provider, _, _ = litellm.get_llm_provider(self.model, api_base=self.api_base)
            params = litellm.get_supported_openai_params(model=self.model, custom_llm_provider=provider)
        except Exception:
            return None, []
        return provider, list(params or [])

    def _takes_schema(self) -> bool:
        if self.provider in SCHEMA_PROVIDERS or (self.provider == "gemini" and GEMINI_2_ON.search(self.model.lower())):
            return True
        import litellm

        try:
            return bool(litellm.supports_response_schema(model=self.model, custom_llm_provider=self.provider))
        except Exception:  # a model litellm does not know
            return False

    def server(self) -> str | None:
        """The base URL of the self-hosted server this judge calls (vLLM, Ollama, an
        OpenAI-compatible endpoint), or None for a hosted provider."""
        if self.direct:
            return self.api_base
        import litellm

        _, provider, _, base = litellm.get_llm_provider(self.model, api_base=self.api_base)
        if base:
            return str(base)
        if provider == "openai":
            return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        return None

    async def ready(self, timeout: float = 3.0) -> str | None:
        """None when this judge can be called, else why not. A self-hosted server must answer
        (any HTTP status: it is up); a hosted provider needs its credentials in the environment
        (it is not called: a call could cost)."""
        import httpx

        base = self.server()
        if base is None:
            import litellm

            env = litellm.validate_environment(model=self.model)
            if not env.get("keys_in_environment", True) and not self.api_key:
                return "missing " + ", ".join(env.get("missing_keys") or ["credentials"])
            return None
        try:  # the answer's status is enough: its body is not read (and no redirect is followed)
            async with httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False) as client:
                async with client.stream("GET", base.rstrip("/") + "/models"):
                    pass
        except httpx.HTTPError as exc:
            return f"{base} does not answer ({type(exc).__name__})"
        return None

    def _wait(self, attempt: int, exc: BaseException | None) -> float:
        hinted = retry_after_seconds(api_error(exc) or exc) if exc is not None else None
        if hinted is not None:
            return min(self.max_wait, hinted + random.uniform(0, 0.25))
        return min(self.max_wait, (2 ** attempt) * 0.5 + random.uniform(0, 0.5))

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        from tenacity import AsyncRetrying, retry_if_exception

        item, turn, rubric = request.item, request.turn, request.rubric
        frames, clip = clip_parts(request, self.sees_images)
        rendered: RenderedPrompt = render_prompt(rubric, item, frames, turn, clip=clip)
        messages = rendered.messages
        if not self.sees_images:
            messages = [messages[0], {"role": "user", "content": "\n".join(
                p["text"] for p in messages[1]["content"] if p["type"] == "text")}]
        elif self.provider in IMAGES_PER_MESSAGE:
            messages = images_per_message(messages)
        t = item.turns[turn]
        usage = Usage(prompt_tokens=0, completion_tokens=0, cost_usd=None, attempts=0)
        raws: list[str] = []
        served: list[str] = []
        notes: list[str] = []
        temperature = self.temperature if request.temperature is None else request.temperature
        seed = self.seed if request.seed is None else request.seed

        def on_response(response: Any) -> None:
            usage.attempts += 1
            u = getattr(response, "usage", None)
            seen = video_tokens(u) if clip is not None else None
            tokens_in, tokens_out, misreported = reply_tokens(response, raw_reply(response))
            if misreported is not None:
                notes.append(misreported)
            if seen is not None:
                usage.video_tokens = (usage.video_tokens or 0) + seen
            if tokens_in is None or tokens_out is None or not usage.known:
                # a count unknown: the turn's counts and cost are unknown, never a guess
                usage.prompt_tokens = usage.completion_tokens = usage.cost_usd = None
            else:
                usage.prompt_tokens = (usage.prompt_tokens or 0) + tokens_in
                usage.completion_tokens = (usage.completion_tokens or 0) + tokens_out
                if self.price is not None:
                    prompt, completion = self.price
                    share = FLEX_PRICE if self.service_tier is ServiceTier.flex else 1.0
                    usage.cost_usd = (usage.cost_usd or 0.0) + (tokens_in * prompt + tokens_out * completion) * share
                elif self._priced is not False:
                    try:
                        usage.cost_usd = (usage.cost_usd or 0.0) + self._cost(response, tokens_in, tokens_out,
                                                                              notes)
                        self._priced = True
                    except Exception:  # unknown price: cost stays unknown, never guessed (nor asked again)
                        self._priced = False
            model = getattr(response, "model", None)
            if model and model not in served:
                served.append(model)
            try:
                raws.append(response.choices[0].message.content or "")
            except (AttributeError, IndexError):
                pass
            if clip is not None and seen == 0:
                raise VideoNotSeen(f"the provider counted no video tokens for the clip of {clip.start:.2f}-"
                                   f"{clip.end:.2f} s (prompt tokens {getattr(u, 'prompt_tokens', None)}): the model "
                                   "did not see the video, so its reply is not a verdict")

        other_failures = 0
        tries = 0
        started = time.monotonic()

        def wait(state: Any) -> float:
            if self.gate.paused():  # the endpoint's pause holds the retry at the gate
                return random.uniform(0, 0.05)
            return self._wait(state.attempt_number, state.outcome.exception() if state.outcome else None)

        def stop(state: Any) -> bool:
            nonlocal other_failures
            exc = state.outcome.exception() if state.outcome else None
            if exc is not None and is_overload(exc):
                return state.seconds_since_start >= self.overload_budget_s
            other_failures += 1
            return other_failures >= self.max_retries

        tokens = rendered.estimated_tokens + (len(frames) * IMAGE_TOKENS if self.sees_images else 0)
        direct = self.direct and clip is None  # a clip goes through litellm (vLLM's video_url part)
        sampling = clip_sampling(self.provider, clip)
        if sampling:
            notes.append(f"clip sampling pinned: media_io_kwargs {json.dumps(sampling['media_io_kwargs'])} "
                         "(read by vLLM releases that take media_io_kwargs in a request; ignored by older ones)")
        try:
            async for attempt in AsyncRetrying(retry=retry_if_exception(is_retryable), wait=wait, stop=stop,
                                               reraise=True):
                with attempt:
                    tries += 1
                    left = self.overload_budget_s - (time.monotonic() - started)
                    async with self.gate.slot(tokens, wait_s=max(left, 0.0)) as slot:
                        try:
                            judgement, probs = await self._ask(messages, rubric, t, on_response,
                                                               temperature, seed, notes, direct, sampling)
                        except Exception as exc:
                            if is_overload(exc):
                                cause = api_error(exc) or exc
                                limited = _status(cause) == 429 or _is(cause, "RateLimitError")
                                slot.overloaded(retry_after_seconds(cause), rate_limited=limited)
                            elif api_error(exc) is not None:
                                slot.failed()
                            # else the server answered, with a reply that broke the rubric: not its capacity
                            raise
        except EndpointBusy as exc:
            kind = JudgeErrorKind.rate_limited if exc.limited else JudgeErrorKind.timeout
            raise JudgeFailure(kind, f"not sent within the overload budget of "
                               f"{self.overload_budget_s:g} s after {tries} attempt(s): {exc}", None, usage) from None
        except Exception as exc:  # every failure becomes a record, never a crash or a label
            raise self._failure(exc, raws, usage, tries) from None
        notes += [f"served by {m}" for m in served]
        if not self.takes_seed:
            notes.append(f"{self.provider or 'the provider'} takes no seed: none sent")
        return JudgeResult(judgement, usage, rendered.hash, raws[-1] if raws else None, notes, label_probs=probs)

    def _cost(self, response: Any, tokens_in: int, tokens_out: int, notes: list[str]) -> float:
        """A reply's cost by litellm's price list, on the tier asked for; on the flex tier, half the
        standard price where the list has no flex price for the model. A reply read straight from
        the server (openai_wire) is priced by its token counts (checked: judge/usage.py). A price
        that is not a cost (negative, not finite) is no price."""
        import litellm

        tier = self.service_tier.value if self.service_tier is not None else None
        if isinstance(response, SimpleNamespace):
            prompt, completion = litellm.cost_per_token(model=self.model, prompt_tokens=tokens_in,
                                                        completion_tokens=tokens_out, service_tier=tier)
            cost = float(prompt) + float(completion)
        else:
            cost = float(litellm.completion_cost(completion_response=response, service_tier=tier))
        if not (cost >= 0 and math.isfinite(cost)):
            raise ValueError(f"litellm priced the reply at {cost}")
        if self.service_tier is ServiceTier.flex and not self._flex_listed():
            cost *= FLEX_PRICE
            note = "flex tier: litellm lists no flex price for this model; its standard price halved"
            if note not in notes:
                notes.append(note)
        return cost

    def _flex_listed(self) -> bool:
        import litellm

        try:
            info = litellm.get_model_info(self.model)
        except Exception:
            return False
        return info.get("input_cost_per_token_flex") is not None

    def call_kwargs(self, messages: list[dict[str, Any]], temperature: float, seed: int) -> dict[str, Any]:
        """litellm.acompletion's arguments for one call, but for logprobs and the reply's format (which
        `_complete` adds as the server takes them); a batch run builds its requests from the same."""
        kwargs: dict[str, Any] = dict(
            model=self.model, messages=messages, temperature=temperature, max_tokens=self.max_tokens,
            timeout=self.timeout, api_base=self.api_base, api_key=self.api_key, num_retries=0)
        if self.takes_seed:
            kwargs["seed"] = seed
        if self.service_tier is not None:
            kwargs["service_tier"] = self.service_tier.value
        for name in ("vertex_project", "vertex_location"):  # litellm's own params for vertex_ai/ models
            if getattr(self, name, None) is not None:
                kwargs[name] = getattr(self, name)
        return kwargs

    def _wire_key(self) -> str | None:
        """The key a call sent directly carries: litellm's choice on the same route (the judge's own,
        else the provider's variable; vLLM's route always sends one)."""
        if self.api_key is not None:
            return self.api_key
        if self.provider == "hosted_vllm":
            return os.environ.get("HOSTED_VLLM_API_KEY") or "fake-api-key"
        return os.environ.get("OPENAI_API_KEY")

    def wire_body(self, messages: list[dict[str, Any]], temperature: float, seed: int,
                  mode: str | None = None) -> dict[str, Any]:
        """The chat-completions body an OpenAI-compatible server is sent for this call: litellm's
        arguments without what only litellm reads, the model without its provider prefix; with the
        reply's format when `mode` is given (a batch line; a call adds it as the server takes it)."""
        body = {key: value for key, value in self.call_kwargs(messages, temperature, seed).items()
                if key not in LITELLM_ONLY}
        body["model"] = wire_model(self.model)
        if mode is not None:
            body["response_format"] = response_format(mode, self.provider or "openai")
        return body

    async def _complete(self, messages: list[dict[str, Any]], temperature: float, seed: int,
                        notes: list[str], direct: bool = False,
                        fields: dict[str, Any] | None = None) -> tuple[Any, str]:
        """One call, and the output mode its reply came in; with logprobs where they are asked for,
        and the reply's schema in `schema` mode. A server that refuses either (400, 422) is asked
        again without it (logprobs first when the error names them, else the schema), and not asked
        for it again once that works; when nothing is left to leave out, the error stands. `direct`:
        sent straight to the OpenAI-compatible server (openai_wire), the same body litellm sends.
        `fields`: more of the request body, as the server reads it (litellm sends them as they are,
        in `extra_body`)."""
        if direct:
            body = {**self.wire_body(messages, temperature, seed), **(fields or {})}
            refusals: tuple[type[BaseException], ...] = (WireStatusError,)
        else:
            body = self.call_kwargs(messages, temperature, seed)
            _quiet_litellm()
            import litellm

            if fields:
                body["extra_body"] = dict(fields)
            refusals = (litellm.BadRequestError, litellm.UnprocessableEntityError)
        logprobs, mode = self.logprobs, self.output
        refused: list[tuple[str, BaseException]] = []
        while True:
            extra: dict[str, Any] = dict(logprobs=True, top_logprobs=TOP_LOGPROBS) if logprobs else {}
            sent = {**body, **extra, "response_format": response_format(mode, self.provider or "")}
            try:
                if direct:
                    response = await chat_completion(self.api_base or "", self._wire_key(), sent, self.timeout)
                else:
                    kept: list[Any] = []  # the answers read (httpx responses)
                    keeping = reply_bodies.set(kept)
                    try:
                        response = await litellm.acompletion(**sent)
                    finally:
                        reply_bodies.reset(keeping)
                    keep_reply(response, kept)
                break
            except refusals as exc:
                if direct and (_status(exc) not in (400, 422) or getattr(exc, "about_prompt", False)):
                    raise  # not a refusal of what is asked of the reply
                if _is(exc, "ContentPolicyViolationError") or _is(exc, "ContextWindowExceededError"):
                    raise  # about the prompt, whatever is asked of the reply
                if logprobs and (mode != "schema" or "logprob" in str(exc).lower()):
                    logprobs = False
                    refused.append(("logprobs", exc))
                elif mode == "schema":
                    mode = "json_object"
                    refused.append(("schema", exc))
                else:
                    raise
        for what, why in refused:
            if what == "logprobs" and self.logprobs:
                self.logprobs = False
                notes.append(f"the server refused logprobs ({str(why)[:200]}); asked without them from now on")
            elif what == "schema" and self.output == "schema":
                self.output = "json_object"
                notes.append(f"the server refused the reply's JSON schema ({str(why)[:200]}); JSON mode "
                             "(json_object) from now on")
        return response, mode

    async def _ask(self, messages: list[dict[str, Any]], rubric: Rubric, t: Any, on_response: Any,
                   temperature: float, seed: int, notes: list[str], direct: bool = False,
                   fields: dict[str, Any] | None = None) -> tuple[Judgement, LabelProbs | None]:
        """One attempt: a call, and up to `max_reasks` more when the reply breaks the rubric; the
        judgement and, where the server gave log-probabilities, its labels' option probabilities."""

        from pydantic import ValidationError

        for asked in range(self.max_reasks + 1):
            response, mode = await self._complete(messages, temperature, seed, notes, direct, fields)
            on_response(response)
            reply = response.choices[0].message.content or ""
            try:
                judgement = parse_judgement(reply, rubric, t)
            except (ValidationError, json.JSONDecodeError) as exc:
                why = problems(exc)
                if asked == self.max_reasks:
                    raise InvalidReply(why) from None
                messages = reask_messages(messages, reply, why)
                continue
            notes.append(f"output mode: {mode}")
            return judgement, self._label_probs(response, reply)
        raise AssertionError("unreachable")

    @staticmethod
    def _label_probs(response: Any, reply: str) -> LabelProbs | None:
        logprobs = getattr(response.choices[0], "logprobs", None)
        content = getattr(logprobs, "content", None) if not isinstance(logprobs, dict) else logprobs.get("content")
        if not content:
            return None
        try:
            data = json.loads(json_text(reply))
        except json.JSONDecodeError:
            return None
        return label_probabilities(reply, steps_from_logprobs(content), field_options(data)) or None

    def _failure(self, exc: BaseException, raws: list[str], usage: Usage, tries: int) -> JudgeFailure:
        raw = "\n---\n".join(raws) or None
        if isinstance(exc, VideoNotSeen):
            return JudgeFailure(JudgeErrorKind.backend_error, str(exc), raw, usage)
        limit = limit_of(exc)
        if limit is not None:  # a redirect not followed, a reply over the cap (litellm's route)
            return JudgeFailure(JudgeErrorKind.backend_error, str(limit), raw, usage)
        cause = api_error(exc)
        if isinstance(cause, WireReplyRefused):  # the same, on the direct route
            return JudgeFailure(JudgeErrorKind.backend_error, str(cause), raw, usage)
        if cause is None:
            return JudgeFailure(JudgeErrorKind.invalid_after_retries,
                                f"no valid verdict after {self.max_reasks + 1} attempt(s): {str(exc)[:500]}", raw, usage)
        if _is(cause, "RateLimitError") or _status(cause) == 429:
            return JudgeFailure(JudgeErrorKind.rate_limited, f"still rate limited after {tries} attempt(s) "
                                f"over {self.overload_budget_s:g} s: {cause}"[:1000], raw, usage)
        if isinstance(cause, WireTimeout) or _is(cause, "Timeout") or _status(cause) == 408:
            return JudgeFailure(JudgeErrorKind.timeout, f"timed out (each attempt limited to {self.timeout:g} s; "
                                f"retried for {self.overload_budget_s:g} s): {cause}"[:1000], raw, usage)
        if _is(cause, "ContentPolicyViolationError") or (isinstance(cause, WireStatusError) and cause.content_policy):
            return JudgeFailure(JudgeErrorKind.refused, str(cause)[:1000], raw, usage)
        return JudgeFailure(JudgeErrorKind.backend_error, f"{type(cause).__name__}: {cause}"[:1000], raw, usage)

    def estimate(self, rubric: Rubric, planned: Sequence[PlannedTurn], frames_per_call: int,
                 batch: tuple[str, float] | None = None) -> str:
        """Rough tokens and cost before spending: each call's text (the rendered prompts of up to
        ESTIMATE_SAMPLE of the planned turns, spread over them) and the frames of the calls that
        send frames, only those (a text-only item's calls send none). The cost is priced as the calls
        will be: on the judge's service tier (flex: litellm's flex price, or half the standard one,
        or half the judges file's price), or, for a batch run (a tier of its own), at the share of
        the standard price its batch API bills (`batch`: the API's title and share)."""
        calls = sum(p.calls for p in planned)
        if not calls:
            return "nothing to do"
        sample = [p for p in planned[::max(1, len(planned) // ESTIMATE_SAMPLE)] if p.calls]
        text = sum(render_prompt(rubric, p.item, [], p.turn).estimated_tokens * p.calls for p in sample)
        per_frame = IMAGE_TOKENS if self.sees_images else 10  # a text-only model reads timestamps
        tokens = round(text / sum(p.calls for p in sample) * calls +
                       sum(p.with_frames for p in planned) * frames_per_call * per_frame)
        tier = self.service_tier if batch is None else None  # a batch is a tier of its own (batch_api)
        flex = tier is ServiceTier.flex
        how: list[str] = []
        share = 1.0  # of the prices below, as the calls are billed
        if self.price is not None:
            prompt, completion = self.price[0], self.price[1]
            how.append("the judges file's price" + (", halved on the flex tier" if flex else ""))
            share = FLEX_PRICE if flex else 1.0
        else:
            import litellm

            price = litellm.model_cost.get(self.model) or litellm.model_cost.get(self.model.split("/", 1)[-1])
            if not (price and price.get("input_cost_per_token")):
                return f"about {tokens:,} prompt tokens (price of {self.model} unknown)"
            prompt, completion = price["input_cost_per_token"], price.get("output_cost_per_token", 0)
            named = tier.value if tier is not None else None
            if named and price.get(f"input_cost_per_token_{named}") is not None:
                prompt = price[f"input_cost_per_token_{named}"]
                completion = price.get(f"output_cost_per_token_{named}", completion)
                how.append(f"{named} tier")
            elif flex:  # as `_cost` prices a flex reply litellm lists no flex price for
                how.append("flex tier: the standard price halved")
                share = FLEX_PRICE
        if batch is not None:
            title, batch_share = batch
            share *= batch_share
            how.append(f"{title}: {batch_share:.0%} of the synchronous price")
        cost = (tokens * prompt + calls * 200 * completion) * share
        return f"about {tokens:,} prompt tokens, about ${cost:.2f}" + (f" ({'; '.join(how)})" if how else "")
