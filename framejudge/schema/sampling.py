"""What decides which frames come out of a video, and what the sampler reports about them."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .numbers import Number, Whole


class Strategy(str, Enum):
    """How frames are chosen inside the sampling window."""

    uniform = "uniform"
    fps = "fps"
    keyframes = "keyframes"
    scene = "scene"


class VideoInput(str, Enum):
    """What of the video a model judge is shown: sampled frames, or a clip of the turn's window."""

    frames = "frames"
    clip = "clip"


MAX_CLIP_FPS = 30.0
MAX_BUDGET = 1024
MIN_SIDE, MAX_SIDE = 16, 4096


class SamplerParams(BaseModel):
    """Everything that decides which frames come out of a video, and how big they are.

    These parameters (with the file's content hash) key the frame cache and are
    recorded in every verdict's provenance.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy = Strategy.uniform
    n: Whole = Field(16, description="frame budget: the most frames returned")
    fps: Number | None = Field(None, description="frames per second for the fps strategy")
    start: Number | None = Field(None, description="window start, seconds from the first frame")
    end: Number | None = Field(None, description="window end, seconds from the first frame")
    end_at: Number | None = Field(
        None, description="time (s) the question was asked; the window ends here and looks back"
    )
    lookback: Number = Field(30.0, description="seconds before end_at that the window covers")
    max_side: Whole = Field(768, description="longest side of returned images, in pixels")
    stream: Whole | None = Field(
        None, description="index of the video stream among the file's video streams"
    )
    scene_threshold: Number = Field(
        0.12, description="mean absolute luma change (0-1) between frames that counts as a cut"
    )

    @model_validator(mode="after")
    def _check(self) -> SamplerParams:
        # Plain ValueErrors: the frame sampler turns them into InvalidRequest.
        if self.n <= 0:
            raise ValueError(f"frame budget must be at least 1, got {self.n}")
        if self.n > MAX_BUDGET:
            raise ValueError(f"frame budget {self.n} is above the limit of {MAX_BUDGET}")
        if not MIN_SIDE <= self.max_side <= MAX_SIDE:
            raise ValueError(
                f"max_side must be between {MIN_SIDE} and {MAX_SIDE} pixels, got {self.max_side}"
            )
        if self.strategy is Strategy.fps:
            if self.fps is None:
                raise ValueError("the fps strategy needs fps (frames per second)")
            if not 0 < self.fps <= 240:
                raise ValueError(f"fps must be in (0, 240], got {self.fps}")
        elif self.fps is not None:
            raise ValueError("fps is only used by the fps strategy")
        if self.end_at is not None and (self.start is not None or self.end is not None):
            raise ValueError("give either end_at (with lookback) or start/end, not both")
        for name in ("start", "end", "end_at"):
            value = getattr(self, name)
            if value is not None and (value != value or value < 0 or value == float("inf")):
                raise ValueError(f"{name} must be a finite time >= 0 seconds, got {value}")
        if not 0 < self.lookback < float("inf"):
            raise ValueError(f"lookback must be a positive number of seconds, got {self.lookback}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"window end {self.end} s must be after its start {self.start} s")
        if not 0 < self.scene_threshold < 1:
            raise ValueError(f"scene_threshold must be in (0, 1), got {self.scene_threshold}")
        if self.stream is not None and self.stream < 0:
            raise ValueError(f"stream index must be >= 0, got {self.stream}")
        return self


class FrameInfo(BaseModel):
    """One sampled frame, without its pixels."""

    model_config = ConfigDict(extra="forbid")

    timestamp: float = Field(description="presentation time in seconds from the first frame")
    pts: int = Field(description="raw presentation timestamp in the stream's time base")
    index: int | None = Field(
        None, description="position of the frame in presentation order, where known"
    )
    keyframe: bool
    width: int
    height: int
    reason: str = Field(description="why the frame was picked: uniform, fps, keyframe, scene, end_at")


class VideoInfo(BaseModel):
    """What the sampler learnt about a video from its container and a demux scan."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: str | None = Field(
        None, description="SHA-256 of the file; computed when the frame cache is on (its key)"
    )
    container: str
    codec: str
    stream_index: int = Field(description="index among the file's video streams")
    width: int = Field(description="stored width in pixels")
    height: int = Field(description="stored height in pixels")
    display_width: int = Field(description="width after rotation and pixel aspect")
    display_height: int
    rotation: int = Field(description="display rotation in degrees counter-clockwise")
    duration: float = Field(description="seconds from the first frame to the end of the last")
    frame_count: int = Field(description="frames found by the demux scan")
    keyframe_count: int
    average_fps: float | None
    start_pts: int
    time_base: str


class ClipInfo(BaseModel):
    """The clip of a turn's window a judge was shown (video_input clip): exactly which bytes, which
    seconds of the video, and the rate the judge was asked to sample them at."""

    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(description="SHA-256 of the MP4 sent")
    start: float = Field(description="seconds of the video at the clip's time 0 (a stream copy starts at the key "
                                     "frame at or before the window)")
    end: float = Field(description="seconds of the video where the clip ends")
    fps: float = Field(description="frames per second the judge was asked to sample the clip at")
    bytes: int = Field(description="size of the MP4")
    method: str = Field(description="remux: the video's own packets, copied; encode: re-encoded as H.264 at fps")
