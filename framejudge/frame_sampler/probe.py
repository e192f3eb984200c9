"""Checks made before any decoding: the path, the container, the stream, the declared size."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import av
import av.container

from .errors import (
    BadDimensions,
    EmptyFile,
    FileTooLarge,
    NotARegularFile,
    NotAVideo,
    NoVideoStream,
    StreamNotFound,
    UnsupportedCodec,
    VideoNotFound,
)


@dataclass(frozen=True)
class Limits:
    """Input limits. Defaults admit 8K video and reject pixel bombs before any decoding."""

    max_file_bytes: int = 20 * 1024**3
    max_pixels: int = 7680 * 4320 * 5 // 4
    max_aspect: float = 100.0


def check_path(path: str | os.PathLike[str], limits: Limits) -> Path:
    """Stat the path (never open it blindly: a FIFO would block forever)."""
    p = Path(path)
    size = check_file(p)
    if size > limits.max_file_bytes:
        raise FileTooLarge(
            f"file is {size / 1024**3:.1f} GiB, above the limit of "
            f"{limits.max_file_bytes / 1024**3:.1f} GiB",
            str(p),
        )
    return p


def check_file(path: str | os.PathLike[str]) -> int:
    """That the path is a readable, non-empty regular file, from a stat alone (nothing is
    opened, so a FIFO cannot block); returns its size in bytes."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise VideoNotFound("file not found", str(p)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile("symbolic link loop", str(p)) from None
        raise VideoNotFound(f"cannot read file: {exc.strerror}", str(p)) from None
    except ValueError:  # a NUL character in the name
        raise VideoNotFound("no file name can hold a NUL character", repr(str(p))) from None
    if stat.S_ISDIR(st.st_mode):
        raise NotARegularFile("is a directory, not a video file", str(p))
    if not stat.S_ISREG(st.st_mode):
        kind = "named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "special file"
        raise NotARegularFile(f"is a {kind}, not a regular file", str(p))
    if st.st_size == 0:
        raise EmptyFile("file is empty (0 bytes)", str(p))
    if not os.access(p, os.R_OK):
        raise VideoNotFound("permission denied", str(p))
    return st.st_size


# What FFmpeg may do with a video it is given, set as its allow-lists (AVOptions) on every container
# opened for reading: a video is a local file (protocol `file`: a playlist or concat list that names a
# URL, or any other protocol, is refused), in one of the containers framejudge reads (demuxers by
# FFmpeg's names: MP4/MOV, Matroska/WebM, AVI, FLV, Ogg, ASF/WMV, MPEG-PS, MPEG-TS; not HLS playlists,
# concat lists, image sequences, raw streams or FFmpeg's other few hundred), decoded only by the
# decoders of the video codecs below (and, while FFmpeg probes the streams, those of the usual audio
# and subtitle tracks beside them).
CONTAINERS = ("mov", "matroska", "avi", "flv", "ogg", "asf", "mpeg", "mpegts")
CONTAINER_NAMES = "MP4/MOV, Matroska/WebM, AVI, FLV, Ogg, ASF/WMV, MPEG-PS and MPEG-TS"
VIDEO_DECODERS = ("h264", "hevc", "vp8", "libvpx", "vp9", "libvpx-vp9", "av1", "libdav1d", "mpeg4", "msmpeg4v1",
                  "msmpeg4v2", "msmpeg4", "h263", "h263p", "flv", "mpeg1video", "mpeg2video", "mjpeg", "theora",
                  "wmv1", "wmv2", "wmv3", "vc1", "vp6", "vp6f", "cinepak", "prores", "dnxhd", "ffv1", "png", "qtrle")
OTHER_DECODERS = ("aac", "aac_fixed", "mp3float", "mp3", "mp2float", "mp2", "opus", "libopus", "vorbis", "libvorbis",
                  "ac3", "eac3", "flac", "alac", "wmav1", "wmav2", "pcm_s16le", "pcm_s16be", "pcm_s24le",
                  "pcm_f32le", "pcm_u8", "pcm_mulaw", "pcm_alaw", "mov_text", "subrip", "ass", "ssa", "webvtt")
PROTOCOLS = ("file",)
CONTAINER_OPTIONS = {"format_whitelist": ",".join(CONTAINERS), "protocol_whitelist": ",".join(PROTOCOLS),
                     "codec_whitelist": ",".join(VIDEO_DECODERS + OTHER_DECODERS)}
DECODER_OPTIONS = {"codec_whitelist": ",".join(VIDEO_DECODERS)}


def ffmpeg_version() -> str:
    """The FFmpeg PyAV bundles (as `av.ffmpeg_version_info` gives it, e.g. 8.1.3), for provenance."""
    return str(getattr(av, "ffmpeg_version_info", "") or "unknown")


def open_container(path: Path) -> av.container.InputContainer:
    """`path` opened for reading with FFmpeg's allow-lists set (CONTAINER_OPTIONS), and each video
    stream's decoder held to VIDEO_DECODERS (PyAV opens a stream's decoder with the options of its
    codec context, not the container's)."""
    try:
        container = av.open(str(path), mode="r", metadata_errors="ignore", options=dict(CONTAINER_OPTIONS))
    except av.error.ArgumentError:
        # FFmpeg's answer (EINVAL) to a format or protocol not on the allow-lists
        raise NotAVideo(
            f"not a container framejudge reads: only {CONTAINER_NAMES} files are opened (playlists such as "
            "HLS .m3u8, concat lists, image files and raw streams are refused, and nothing a file names "
            "elsewhere is fetched)",
            str(path),
        ) from None
    except av.error.FFmpegError as exc:
        detail = (exc.strerror or str(exc)).strip()
        raise NotAVideo(
            f"not a readable media file ({detail}); truncated downloads and HTML error pages "
            "saved as video look like this",
            str(path),
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NotAVideo(f"cannot open as media: {exc}", str(path)) from None
    try:
        for stream in container.streams.video:
            stream.codec_context.options = dict(DECODER_OPTIONS)
    except BaseException:
        container.close()
        raise
    return container


def video_streams(container: av.container.InputContainer) -> list[av.video.stream.VideoStream]:
    """Video streams other than attached pictures (cover art, thumbnails)."""
    return [s for s in container.streams.video if not _is_attached_picture(s)]


def _is_attached_picture(stream: av.video.stream.VideoStream) -> bool:
    try:
        return bool(stream.disposition & av.stream.Disposition.attached_pic)
    except (AttributeError, TypeError):
        return False


def candidate_streams(
    container: av.container.InputContainer, path: Path, choice: int | None
) -> list[av.video.stream.VideoStream]:
    """The stream the caller chose, or every candidate (the scan picks the main one)."""
    streams = video_streams(container)
    if not streams:
        kinds = sorted({s.type for s in container.streams})
        if not kinds:
            raise NoVideoStream("no video stream: the container holds no streams at all", str(path))
        raise NoVideoStream(f"no video stream (streams found: {', '.join(kinds)})", str(path))
    if choice is not None:
        if choice >= len(streams):
            raise StreamNotFound(
                f"video stream {choice} requested but the file has {len(streams)} "
                f"(indices 0-{len(streams) - 1})",
                str(path),
            )
        return [streams[choice]]
    return streams


def check_stream(stream: av.video.stream.VideoStream, path: Path, limits: Limits) -> None:
    """Reject what cannot or must not be decoded, from the header alone."""
    ctx = stream.codec_context
    if ctx is None or not ctx.name:
        raise UnsupportedCodec("no decoder for this video stream's codec", str(path))
    if ctx.name not in VIDEO_DECODERS:
        raise UnsupportedCodec(
            f"video codec {ctx.name!r} is not one framejudge decodes ({', '.join(VIDEO_DECODERS)})", str(path))
    w, h = ctx.width, ctx.height
    if w <= 0 or h <= 0:
        raise BadDimensions(f"video stream declares a frame size of {w}x{h}", str(path))
    if w * h > limits.max_pixels:
        raise BadDimensions(
            f"frame size {w}x{h} ({w * h / 1e6:.0f} Mpixel) is above the limit of "
            f"{limits.max_pixels / 1e6:.0f} Mpixel",
            str(path),
        )
    aspect = max(w, h) / min(w, h)
    if aspect > limits.max_aspect:
        raise BadDimensions(
            f"frame size {w}x{h} has an aspect ratio of {aspect:.0f}:1, above the limit of "
            f"{limits.max_aspect:.0f}:1",
            str(path),
        )
