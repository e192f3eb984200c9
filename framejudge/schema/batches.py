"""A batch run's ledger (`framejudge grade --batch`): the provider batches a run has submitted, kept
beside the verdicts file so that the same command again collects them, and the batches being made,
written before the provider is asked to make them so that a run killed while it waits for the answer
is followed by one that finds the batch instead of paying for the same requests again."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BatchStatus = Literal["submitted", "collected", "failed"]


class SubmittedBatch(BaseModel):
    """One batch sent to the provider's batch API: its id, the requests in it (by key), and where it
    stands for this run."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="the provider's batch id")
    tag: str | None = Field(None, description="the ledger's id for the batch, carried by the batch at the "
                                              "provider (its metadata, name or labels)")
    input_file_id: str | None = Field(None, min_length=1, description="the uploaded requests file (OpenAI); none "
                                      "where the requests go in the create call itself (Anthropic)")
    keys: list[str] = Field(description="the requests in it: each request body's sha256 (its custom_id)")
    submitted_at: str = Field(description="ISO 8601, UTC")
    status: BatchStatus = "submitted"
    provider_status: str | None = Field(None, description="what the provider last said (validating, "
                                                          "in_progress, completed, expired, ...)")
    found: str | None = Field(None, description="how the batch was found at the provider, where the call that "
                                                "made it went unanswered (a run killed or cut off while waiting)")


class BatchIntent(BaseModel):
    """A batch about to be made: written to the ledger before its requests file is uploaded and the
    provider is asked to make it, and replaced by its SubmittedBatch once the provider answers. One
    still here when a run starts was cut off before the answer: that run looks at the provider for a
    batch carrying `tag` and takes it, or sends the requests again only where there is none."""

    model_config = ConfigDict(extra="forbid")

    tag: str = Field(min_length=1, max_length=11, pattern=r"^[a-z0-9]+$",
                     description="the ledger's id for the batch, sent with it to the provider")
    keys: list[str] = Field(description="the requests it carries (their keys)")
    requests_sha256: str = Field(description="sha256 of the request keys, in order, one a line")
    input_file_id: str | None = Field(None, description="the requests file, once uploaded (or where it is written)")
    written_at: str = Field(description="ISO 8601, UTC: before the provider was asked")


class BatchLedger(BaseModel):
    """Every batch of one verdicts file's run, for one judge."""

    model_config = ConfigDict(extra="forbid")

    judge: str = Field(description="the judge spec the batches were made for")
    batches: list[SubmittedBatch] = Field(default_factory=list)
    intents: list[BatchIntent] = Field(default_factory=list, description="batches asked for whose making no "
                                                                         "answer was recorded")
    failures: dict[str, int] = Field(default_factory=dict, description="request key -> times the provider "
                                                                       "failed it (resubmitted until the limit)")
