"""A batch run's ledger (`framejudge grade --batch`): the provider batches a run has submitted, kept
beside the verdicts file so that the same command again collects them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BatchStatus = Literal["submitted", "collected", "failed"]


class SubmittedBatch(BaseModel):
    """One batch sent to the provider's batch API: its id, the requests in it (by key), and where it
    stands for this run."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="the provider's batch id")
    input_file_id: str | None = Field(None, min_length=1, description="the uploaded requests file (OpenAI); none "
                                      "where the requests go in the create call itself (Anthropic)")
    keys: list[str] = Field(description="the requests in it: each request body's sha256 (its custom_id)")
    submitted_at: str = Field(description="ISO 8601, UTC")
    status: BatchStatus = "submitted"
    provider_status: str | None = Field(None, description="what the provider last said (validating, "
                                                          "in_progress, completed, expired, ...)")


class BatchLedger(BaseModel):
    """Every batch of one verdicts file's run, for one judge."""

    model_config = ConfigDict(extra="forbid")

    judge: str = Field(description="the judge spec the batches were made for")
    batches: list[SubmittedBatch] = Field(default_factory=list)
    failures: dict[str, int] = Field(default_factory=dict, description="request key -> times the provider "
                                                                       "failed it (resubmitted until the limit)")
