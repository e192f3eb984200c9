"""Frames out of a video, fast and safely: strategies, windows, encoders, an on-disk cache."""

from ..schema import FrameInfo, SamplerParams, Strategy, VideoInfo
from .cache import FrameCache
from .clip import MAX_CLIP_BYTES, Clip, ClipTooLarge, cut_clip
from .encode import contact_sheet, format_timestamp, to_data_url, to_jpeg
from .errors import (
    BadDimensions,
    DecodeFailed,
    DecoderDied,
    DecodeTimedOut,
    EmptyFile,
    FileTooLarge,
    FrameSamplerError,
    InvalidRequest,
    NoFrames,
    NotARegularFile,
    NotAVideo,
    NoVideoStream,
    StreamNotFound,
    UnsupportedCodec,
    VideoNotFound,
    WindowOutOfRange,
)
from .isolate import IsolatedSampler, UnguardedScript
from .probe import Limits, check_file
from .sampler import EncodedFrame, SampledFrame, SampleResult, SamplingWarning, make_params, sample_frames, video_duration

__all__ = [
    "MAX_CLIP_BYTES", "BadDimensions", "Clip", "ClipTooLarge", "DecodeFailed", "DecodeTimedOut", "DecoderDied", "EmptyFile", "FileTooLarge", "FrameCache", "FrameInfo",
    "FrameSamplerError", "InvalidRequest", "IsolatedSampler", "Limits", "NoFrames", "NoVideoStream",
    "EncodedFrame", "NotARegularFile", "NotAVideo", "SampleResult", "SampledFrame", "SamplerParams",
    "SamplingWarning", "StreamNotFound", "Strategy", "UnguardedScript", "UnsupportedCodec", "VideoInfo",
    "VideoNotFound", "WindowOutOfRange", "check_file", "contact_sheet", "cut_clip", "format_timestamp", "make_params",
    "sample_frames", "to_data_url", "to_jpeg", "video_duration",
]
