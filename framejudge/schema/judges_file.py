"""A judges file: the judges a CLI run or a service may use, and how to reach and pace each one's
model endpoint."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ..backends import check_spec, clip_refusal, on_vertex_ai
from .numbers import Flag, Number, Whole
from .sampling import VideoInput

DEFAULT_TIMEOUT_S = 120.0
FLEX_TIMEOUT_S = 900.0  # flex calls queue for capacity: minutes, where a default call takes seconds


class ServiceTier(str, Enum):
    """The provider's service tier a judge's calls ask for (OpenAI's and Gemini's `service_tier`):
    flex is slower, may be shed (429, 503) and costs half; priority is faster and costs more."""

    default = "default"
    flex = "flex"
    priority = "priority"


def http_base(value: str | None) -> str | None:
    """An OpenAI-compatible server's address: http:// or https://, a host, an optional port and path
    (a judges file's `api_base`, FRAMEJUDGE_API_BASE, --api-base)."""
    if value is None:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValueError(f"{shown!r} is not a server's address: give http:// or https://, a host and an optional "
                         "port and path (like http://localhost:8000/v1)")
    return value


def gcs_prefix(value: str | None) -> str | None:
    """A Cloud Storage bucket and an optional folder in it, as gs://BUCKET[/PREFIX] (a judges file's
    `batch_bucket`, --batch-bucket, FRAMEJUDGE_BATCH_BUCKET): a bucket name as Cloud Storage names
    them (3 to 222 characters, lowercase letters, digits, dashes, underscores and dots, starting and
    ending with a letter or digit)."""
    if value is None:
        return value
    import re

    found = re.fullmatch(r"gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])(/[^\s]*)?", value)
    if found is None or ".." in found.group(1):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValueError(f"{shown!r} is not a Cloud Storage location: give gs://BUCKET or gs://BUCKET/PREFIX "
                         "(a bucket name is lowercase letters, digits, dashes, underscores and dots)")
    return value.rstrip("/")


class TokenPrice(BaseModel):
    """What a model costs, in place of litellm's price list (0 and 0 for a self-hosted model)."""

    model_config = ConfigDict(extra="forbid")

    prompt_usd_per_token: Number = Field(0.0, ge=0, allow_inf_nan=False)
    completion_usd_per_token: Number = Field(0.0, ge=0, allow_inf_nan=False)


class JudgeConfig(BaseModel):
    """One judge that may be used, and how to reach and pace its model endpoint (an entry of a
    judges file; a judge with no entry gets these defaults)."""

    model_config = ConfigDict(extra="forbid")

    spec: str = Field(min_length=1, max_length=500, description="a judge spec from the table of backends "
                                                                "(framejudge.backends)")
    api_base: Annotated[str | None, AfterValidator(http_base)] = Field(
        None, max_length=2000, description="a self-hosted OpenAI-compatible server (http:// or https://)")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200,
                                    description="name of the environment variable holding the endpoint's key")
    concurrency: Whole = Field(8, ge=1, le=4096, description="calls in flight at the start (then adapted)")
    max_concurrency: Whole = Field(32, ge=1, le=4096, description="calls in flight never above this")
    requests_per_minute: Number | None = Field(None, ge=0.1, le=1e7, allow_inf_nan=False,
                                              description="the provider's request rate limit")
    tokens_per_minute: Number | None = Field(None, ge=100, le=1e10, allow_inf_nan=False,
                                            description="the provider's token rate limit")
    timeout_s: Number | None = Field(None, gt=0, le=3600, allow_inf_nan=False,
                                     description=f"per call; null: {DEFAULT_TIMEOUT_S:g} s, {FLEX_TIMEOUT_S:g} s on "
                                                 "the flex service tier")
    overload_budget_s: Number = Field(600.0, ge=0, le=86400, allow_inf_nan=False,
                                     description="how long 429s, 503s and timeouts are retried before a judge error")
    price: TokenPrice | None = Field(None, description="cost per token instead of litellm's price list")
    logprobs: Flag | None = Field(None, description="ask for the reply's token log-probabilities (label "
                                                    "confidence); null: where litellm says the provider takes them")
    output: Literal["auto", "schema", "json_object"] = Field(
        "auto", description="how the reply is held to JSON: schema (the verdict's JSON schema, constrained "
                            "decoding where the server has it), json_object (JSON mode, the schema in the prompt "
                            "only), auto (schema where the provider takes one); a server that refuses the schema "
                            "is asked in JSON mode instead")
    video_input: VideoInput = Field(VideoInput.frames, description="what of the video this judge is shown unless a "
                                                                   "run says otherwise: frames or clip (judges that "
                                                                   "take video: Gemini, vLLM)")
    service_tier: ServiceTier | None = Field(None, description="the provider's service tier its calls ask for "
                                                               "(default, flex, priority); null: none asked")
    vertex_project: str | None = Field(None, pattern=r"^[a-z][a-z0-9:.-]{4,62}[a-z0-9]$",
                                       description="vertex_ai/ judges: the Google Cloud project their calls go to "
                                                   "(litellm's vertex_project); null: VERTEXAI_PROJECT, else the "
                                                   "credentials' project (GOOGLE_CLOUD_PROJECT, the key file's)")
    vertex_location: str | None = Field(None, pattern=r"^[a-z0-9-]{2,40}$",
                                        description="vertex_ai/ judges: the Vertex AI region their calls go to "
                                                    "(litellm's vertex_location); null: VERTEXAI_LOCATION, else "
                                                    "litellm's default for the model (us-central1)")
    batch_bucket: Annotated[str | None, AfterValidator(gcs_prefix)] = Field(
        None, max_length=1024, description="vertex_ai/ judges with --batch: the Cloud Storage location "
                                           "(gs://BUCKET[/PREFIX]) batch prediction reads its requests from and "
                                           "writes its results to")

    def call_timeout_s(self) -> float:
        """Each call's time limit: timeout_s, else longer on the flex tier (its calls wait for capacity)."""
        if self.timeout_s is not None:
            return self.timeout_s
        return FLEX_TIMEOUT_S if self.service_tier is ServiceTier.flex else DEFAULT_TIMEOUT_S

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        check_spec(self.spec)
        if self.video_input is VideoInput.clip:
            why = clip_refusal(self.spec)
            if why:
                raise ValueError(f"video_input clip: {why}")
        google = [k for k in ("vertex_project", "vertex_location", "batch_bucket") if getattr(self, k) is not None]
        if google and not on_vertex_ai(self.spec):
            raise ValueError(f"{google[0]}: for Vertex AI judges (litellm:vertex_ai/<model>), not {self.spec!r}")
        if self.concurrency > self.max_concurrency:
            raise ValueError(f"concurrency ({self.concurrency}) is above max_concurrency ({self.max_concurrency})")
        return self


class JudgesFile(BaseModel):
    """A judges file: the judges a CLI run or a service may use, each with its endpoint's settings."""

    model_config = ConfigDict(extra="forbid")

    judges: list[JudgeConfig] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _unique(self) -> JudgesFile:
        seen: set[str] = set()
        for judge in self.judges:
            if judge.spec in seen:
                raise ValueError(f"judge {judge.spec!r} is listed twice")
            seen.add(judge.spec)
        return self
