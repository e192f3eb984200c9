"""Request and response envelopes of the HTTP API. They wrap the library's own models (Item,
Verdict, JudgeError, HumanLabel, VideoInfo, AuditResult); none of those is copied here."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..calibration.audit import AuditResult
from ..calibration.inputs import unique_labels
from ..schema import (Flag, FrameInfo, GradeOptions, HumanLabel, Item, JudgeError, RecordIn, SamplerParams, Verdict,
                      VideoInfo, Whole)


class GradeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not a default

    item: Item
    judge: str = Field("reference", max_length=500)
    rubric: str = Field("video-qa", max_length=200)
    options: GradeOptions | None = Field(None, description="swap, samples, blind control, sampler ... "
                                                           "(the same options as `framejudge grade` and jobs)")
    sampler: SamplerParams | None = Field(None, description="shorthand for options.sampler")

    @model_validator(mode="after")
    def _one_sampler(self) -> GradeRequest:
        if self.sampler is not None and self.options is not None:
            raise ValueError("give the sampler inside options, not beside it")
        return self

    def grade_options(self) -> GradeOptions:
        if self.options is not None:
            return self.options
        return GradeOptions(sampler=self.sampler) if self.sampler is not None else GradeOptions()


class GradeResponse(BaseModel):
    records: list[Verdict | JudgeError]


class FramesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    video: str = Field(max_length=4096, description="'upload:<id>', a path inside the media root, or an allowed URL")
    sampler: SamplerParams = Field(default_factory=lambda: SamplerParams(n=8))
    contact_sheet: Flag = Field(False, description="one grid image with timestamps instead of one image per frame")
    quality: Whole = Field(85, ge=1, le=100)

    @field_validator("video")
    @classmethod
    def _named(cls, video: str) -> str:
        if not video.strip():
            raise ValueError("video is empty: name an upload ('upload:<id>'), a path inside the media root or an "
                             "allowed URL")
        return video


class FramePayload(BaseModel):
    info: FrameInfo
    data_url: str


class FramesResponse(BaseModel):
    video: VideoInfo
    window: tuple[float, float]
    frames: list[FramePayload]
    contact_sheet: str | None = None
    warnings: list[str]


class CalibrateRequest(BaseModel):
    """Human labels against verdicts given in the body, or against the records of a job."""

    model_config = ConfigDict(extra="forbid")

    labels: list[HumanLabel] = Field(min_length=1, max_length=200_000)
    verdicts: list[RecordIn] | None = Field(None, min_length=1, max_length=100_000)
    job_id: str | None = Field(None, max_length=32, description="use this job's verdicts instead of `verdicts`")
    items: list[Item] | None = Field(None, max_length=100_000,
                                     description="the graded items, for the review page (questions, responses, "
                                                 "frames); with job_id the job's own items are used")
    reviewers: list[str] = Field(default_factory=list, max_length=1000,
                                 description="ids of other API keys (with the review scope) that may review it")
    replicates: Whole = Field(1000, ge=1, le=5000)
    seed: Whole = Field(0, ge=0, le=2**32 - 1)

    @field_validator("labels")
    @classmethod
    def _unique(cls, labels: list[HumanLabel]) -> list[HumanLabel]:
        return unique_labels(((f"label {i}", label) for i, label in enumerate(labels)), ValueError)

    @model_validator(mode="after")
    def _one_source(self) -> CalibrateRequest:
        if (self.verdicts is None) == (self.job_id is None):
            raise ValueError("give exactly one of `verdicts` and `job_id`")
        if self.items is not None and self.job_id is not None:
            raise ValueError("give `items` with `verdicts`; a job's own items are used with `job_id`")
        seen: set[str] = set()
        for i, item in enumerate(self.items or []):
            if item.id in seen:
                raise ValueError(f"items.{i}: duplicate item id {item.id!r}")
            seen.add(item.id)
        return self


class CalibrateResponse(BaseModel):
    id: str
    result: AuditResult


class RubricSummary(BaseModel):
    id: str
    kind: str
    version: str
    hash: str
    title: str


class VideoFile(BaseModel):
    id: str = Field(description="'upload:<hex>'")
    filename: str = Field(description="the client's file name, for display only")
    bytes: int
    sha256: str
    container: str


class UploadedVideo(VideoFile):
    """A stored upload. Refer to it as `id` wherever a video is expected (items, frames)."""

    video: VideoInfo
    duplicate: bool = Field(False, description="this API key already kept the same content (the same sha256): "
                                               "`id` is that upload's, and nothing more was stored")


class UploadResponse(BaseModel):
    videos: list[UploadedVideo]


class StoredVideo(VideoFile):
    created_at: datetime


class VideoPage(BaseModel):
    offset: int
    limit: int
    videos: list[StoredVideo] = Field(description="this key's uploaded and fetched videos, newest first")


class CalibrationSummary(BaseModel):
    id: str
    created_at: datetime
    reviewers: list[str] = Field(description="the other keys that may review it")


class CalibrationPage(BaseModel):
    offset: int
    limit: int
    calibrations: list[CalibrationSummary] = Field(description="this key's calibrations, newest first")


class LeaderboardSummary(BaseModel):
    id: str
    job_id: str
    created_at: datetime


class LeaderboardPage(BaseModel):
    offset: int
    limit: int
    leaderboards: list[LeaderboardSummary] = Field(description="this key's leaderboards, newest first")
