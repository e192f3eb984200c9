"""FFmpeg's allow-lists on every video framejudge opens: a local file (protocol `file`), in a container
framejudge reads, decoded by the decoder of a codec it reads. A playlist or concat list that names a
URL or another file is refused before anything is fetched or read; so are other containers and other
codecs; the clips framejudge reads still decode."""

from __future__ import annotations

from fractions import Fraction

import av
import pytest

from framejudge.examples.synth import cfr_times, write_video
from framejudge.frame_sampler import NotAVideo, UnsupportedCodec, sample_frames
from framejudge.frame_sampler.probe import open_container
from tests.conftest import barcode_frame
from tests.loopback import listener  # noqa: F401 (a fixture)

REFUSED = "not a container framejudge reads: only MP4/MOV, Matroska/WebM, AVI, FLV, Ogg, ASF/WMV, MPEG-PS and MPEG-TS"


def sample(path):
    return sample_frames(path, n=2, cache=None)


def test_an_hls_playlist_that_names_a_url_is_refused_unfetched(tmp_path, listener):
    playlist = tmp_path / "clip.m3u8"
    playlist.write_text("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:0\n"
                        f"#EXTINF:4.0,\nhttp://127.0.0.1:{listener.port}/segment0.ts\n#EXT-X-ENDLIST\n")
    with pytest.raises(NotAVideo, match=REFUSED):
        sample(playlist)
    assert listener.everything() == []


def test_an_hls_playlist_that_names_another_local_file_is_refused(tmp_path):
    segment = write_video(tmp_path / "segment0.ts", barcode_frame(160, 96), cfr_times(1, 10), size=(160, 96),
                          fmt="mpegts", rate=10)
    playlist = tmp_path / "clip.m3u8"
    playlist.write_text("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:0\n"
                        f"#EXTINF:1.0,\n{segment}\n#EXT-X-ENDLIST\n")
    with pytest.raises(NotAVideo, match=REFUSED):
        sample(playlist)
    assert len(sample(segment).frames) == 2  # the file itself is a video framejudge reads


def test_an_hls_playlist_disguised_as_mp4_is_refused_unfetched(tmp_path, listener):
    playlist = tmp_path / "clip.mp4"
    playlist.write_text(f"#EXTM3U\n#EXTINF:4.0,\nhttp://127.0.0.1:{listener.port}/segment0.ts\n#EXT-X-ENDLIST\n")
    with pytest.raises(NotAVideo):
        sample(playlist)
    assert listener.everything() == []


def test_a_concat_list_that_names_a_url_or_another_file_is_refused(tmp_path, listener, clips):
    for name, target in (("url.ffconcat", f"http://127.0.0.1:{listener.port}/a.mp4"), ("file.ffconcat", clips["h264"])):
        listing = tmp_path / name
        listing.write_text(f"ffconcat version 1.0\nfile '{target}'\n")
        with pytest.raises(NotAVideo, match=REFUSED):
            sample(listing)
    assert listener.everything() == []


def test_another_container_is_refused(tmp_path):
    """H.264 (a codec framejudge reads) in NUT and as a raw stream: containers it does not read."""
    r = barcode_frame(160, 96)
    for name, fmt in (("clip.nut", "nut"), ("clip.h264", "h264")):
        path = write_video(tmp_path / name, r, cfr_times(1, 10), size=(160, 96), rate=10, fmt=fmt)
        with pytest.raises(NotAVideo, match=REFUSED):
            sample(path)


def test_another_codec_is_refused(tmp_path):
    """HuffYUV in AVI, a container framejudge reads: refused by name before decoding, and the
    decoder itself held to the allow-list."""
    path = write_video(tmp_path / "huffyuv.avi", barcode_frame(160, 96), cfr_times(1, 10), size=(160, 96),
                       codec="huffyuv", pix_fmt="yuv422p", rate=10, time_base=Fraction(1, 10))
    with pytest.raises(UnsupportedCodec, match="video codec 'huffyuv' is not one framejudge decodes"):
        sample(path)
    container = open_container(path)
    try:
        with pytest.raises(av.error.ArgumentError):
            next(container.decode(video=0))
    finally:
        container.close()


@pytest.mark.parametrize("kind", ["h264", "mpeg4", "multi", "with_audio", "vfr", "rot90"])
def test_the_generated_clips_still_decode(clips, kind):
    assert len(sample(clips[kind]).frames) == 2


def test_every_container_and_codec_framejudge_writes_for_its_tests_decodes(tmp_path):
    r = barcode_frame(160, 96)
    made = [
        write_video(tmp_path / "vp9.webm", r, cfr_times(1, 10), size=(160, 96), codec="libvpx-vp9", fmt="webm", rate=10),
        write_video(tmp_path / "mjpeg.avi", r, cfr_times(1, 10), size=(160, 96), codec="mjpeg", pix_fmt="yuvj420p",
                    rate=10, time_base=Fraction(1, 10)),
        write_video(tmp_path / "h264.ts", r, cfr_times(1, 10), size=(160, 96), fmt="mpegts", rate=10),
        write_video(tmp_path / "ffv1.mkv", r, cfr_times(1, 10), size=(160, 96), codec="ffv1", rate=10),
    ]
    for path in made:
        assert len(sample(path).frames) == 2, path
