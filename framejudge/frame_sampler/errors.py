"""Errors the frame sampler raises: one type per kind of bad input, each with a plain message."""

from __future__ import annotations

from ..errors import FramejudgeError


class FrameSamplerError(FramejudgeError):
    """Base class of the sampler's errors. `code` is a stable machine-readable name; str(err) is for
    people (the path, when known, and the message)."""

    code = "frame_sampler_error"

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def __reduce__(self) -> tuple:
        return (type(self), (self.message, self.path))  # crosses process boundaries whole


class InvalidRequest(FrameSamplerError):
    """The sampling parameters themselves are wrong (budget <= 0, absurd size, bad window)."""

    code = "invalid_request"


class VideoNotFound(FrameSamplerError):
    code = "video_not_found"


class NotARegularFile(FrameSamplerError):
    """A directory, a FIFO, a device, a socket: nothing a sampler should open."""

    code = "not_a_regular_file"


class EmptyFile(FrameSamplerError):
    code = "empty_file"


class FileTooLarge(FrameSamplerError):
    code = "file_too_large"


class NotAVideo(FrameSamplerError):
    """The bytes are not a media container FFmpeg recognises (HTML page, random bytes, cut header)."""

    code = "not_a_video"


class NoVideoStream(FrameSamplerError):
    """A media file without a video stream (audio only, subtitles only)."""

    code = "no_video_stream"


class StreamNotFound(FrameSamplerError):
    """The caller asked for a video stream index the file does not have."""

    code = "stream_not_found"


class UnsupportedCodec(FrameSamplerError):
    code = "unsupported_codec"


class BadDimensions(FrameSamplerError):
    """Frame size the header declares is zero, too many pixels, or an absurd aspect ratio."""

    code = "bad_dimensions"


class NoFrames(FrameSamplerError):
    """The video stream holds no frames at all."""

    code = "no_frames"


class DecodeFailed(FrameSamplerError):
    """The stream has frames but none of the ones needed could be decoded."""

    code = "decode_failed"


class WindowOutOfRange(FrameSamplerError):
    """The requested window (or question time) lies outside the clip."""

    code = "window_out_of_range"


class DecodeTimedOut(FrameSamplerError):
    """Sampling ran past the isolated sampler's time limit; its worker process was stopped."""

    code = "decode_timed_out"


class DecoderDied(FrameSamplerError):
    """The isolated sampler's worker process died or ran out of memory while decoding."""

    code = "decoder_died"
