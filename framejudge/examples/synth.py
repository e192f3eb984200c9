"""Writing video files with PyAV: the bundled example clips and test fixtures are made here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

Render = Callable[[int, float], np.ndarray]  # (frame number, time in s) -> RGB uint8 (h, w, 3)


def write_video(
    path: str | Path,
    render: Render,
    times: Sequence[float],
    *,
    size: tuple[int, int] = (640, 360),
    codec: str = "libx264",
    fmt: str | None = None,
    rate: int = 30,
    gop: int | None = None,
    bframes: int | None = None,
    pix_fmt: str = "yuv420p",
    rotation: int | None = None,
    hflip: bool = False,
    time_base: Fraction | None = None,
    extra_video_streams: Sequence[tuple[tuple[int, int], int]] = (),
    audio_seconds: float = 0.0,
    faststart: bool = False,
) -> Path:
    """Encode one frame per entry of `times` (seconds; any spacing, so VFR is easy).

    `extra_video_streams`: (size, frame count) of further, smaller video streams
    written *before* the main one (thumbnail-first files).
    """
    path = Path(path)
    options = {"movflags": "+faststart"} if faststart else {}
    out = av.open(str(path), "w", format=fmt, options=options)
    try:
        extras = []
        for (w, h), count in extra_video_streams:
            st = out.add_stream("mpeg4", rate=rate)
            st.width, st.height, st.pix_fmt = w, h, "yuv420p"
            extras.append((st, count))
        tb = time_base or Fraction(1, 1000)
        stream = out.add_stream(codec, rate=rate)
        if not isinstance(stream, av.VideoStream):
            raise ValueError(f"{codec} is not a video codec")
        stream.width, stream.height = size
        stream.pix_fmt = pix_fmt
        stream.codec_context.time_base = tb
        opts: dict[str, str] = {}
        if gop is not None:
            stream.codec_context.gop_size = gop
            if codec == "libx264":
                opts["x264-params"] = f"keyint={gop}:min-keyint={gop}:scenecut=0"
        if bframes is not None:
            stream.codec_context.max_b_frames = bframes
            if codec == "libx264":
                opts["bf"] = str(bframes)
        if opts:
            stream.codec_context.options = opts
        if rotation is not None or hflip:
            stream.set_display_rotation(rotation or 0, hflip=hflip)
        audio = None
        if audio_seconds:
            audio = out.add_stream("aac", rate=48000)
            audio.layout = "mono"
        for st, count in extras:
            for k in range(count):
                img = np.full((st.height, st.width, 3), 40 * k % 256, np.uint8)
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                frame.pts = k
                out.mux(st.encode(frame))
            out.mux(st.encode(None))
        for k, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(render(k, t), format="rgb24")
            frame.pts = int(round(t / tb))
            frame.time_base = tb
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
        if not times:
            out.start_encoding()  # header and trailer only: a stream with no frames
        if audio is not None:
            sr, spf = 48000, 1024
            for i in range(int(audio_seconds * sr / spf)):
                tt = (np.arange(spf) + i * spf) / sr
                samples = (0.2 * np.sin(2 * np.pi * 440 * tt)).astype(np.float32)[None, :]
                af = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
                af.sample_rate = sr
                af.pts = i * spf
                out.mux(audio.encode(af))
            out.mux(audio.encode(None))
    finally:
        out.close()
    return path


def cfr_times(seconds: float, rate: float) -> list[float]:
    return [k / rate for k in range(int(round(seconds * rate)))]
