"""What one request may have decoded and answered: pixels and response size, bounded before any
decoding, and the encoder's running total for frames that compress worse than the estimate."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for

TURN = {"question": "What number?", "golden": "10", "response_a": "It shows 10.", "response_b": "No."}


def noise(k: int, t: float) -> np.ndarray:
    return np.random.default_rng(k).integers(0, 256, (256, 256, 3), dtype=np.uint8)


@pytest.fixture()
def serve(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    write_video(media / "noise.mkv", noise, cfr_times(1, 10), size=(256, 256), codec="ffv1", pix_fmt="yuv444p")

    def start(**overrides):
        settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=media, **overrides)
        key = create_key(engine_for(settings.database_url), ["grade"])
        return TestClient(create_app(settings)), {"Authorization": f"Bearer {key}"}

    return start


@pytest.mark.parametrize("video", ["c.mp4", "missing.mp4"])  # refused before the file is even looked at
def test_frames_over_the_pixel_limit_are_refused_before_decoding(serve, video):
    client, auth = serve()
    r = client.post("/v1/frames", json={"video": video, "sampler": {"n": 1024}, "quality": 100}, headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Too many pixels", r.text
    assert r.json()["detail"].startswith("1024 frames of up to 768x768 pixels are 604 megapixels; this server "
                                         "decodes at most 64 per request (FRAMEJUDGE_MAX_FRAME_MEGAPIXELS)")
    r = client.post("/v1/frames", json={"video": video, "sampler": {"n": 100}, "contact_sheet": True}, headers=auth)
    assert r.status_code == 422 and "and their contact sheet" in r.json()["detail"]


def test_frames_response_size_is_estimated_before_decoding(serve):
    client, auth = serve(max_frames_response_mb=1)
    ask = {"video": "c.mp4", "sampler": {"n": 16, "max_side": 512}}
    for quality in (100, 85):
        r = client.post("/v1/frames", json={**ask, "quality": quality}, headers=auth)
        assert r.status_code == 422 and r.json()["title"] == "Response too large", r.text
        assert f"quality {quality}; this server answers with at most 1 MiB" in r.json()["detail"]
    r = client.post("/v1/frames", json={**ask, "quality": 85, "sampler": {"n": 16, "max_side": 256}}, headers=auth)
    assert r.status_code == 200 and len(r.json()["frames"]) == 16


def test_frames_that_compress_worse_than_estimated_stop_at_the_limit(serve):
    client, auth = serve(max_frames_response_mb=1)
    r = client.post("/v1/frames", json={"video": "noise.mkv", "sampler": {"n": 8, "max_side": 256}, "quality": 100},
                    headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Response too large", r.text
    assert r.json()["detail"].startswith("these frames would be over 1 MiB of JPEG at quality 100")
    r = client.post("/v1/frames", json={"video": "noise.mkv", "sampler": {"n": 8, "max_side": 256}, "quality": 30},
                    headers=auth)
    assert r.status_code == 200 and len(r.json()["frames"]) == 8


def test_grading_options_over_the_pixel_limit_are_refused(serve):
    client, auth = serve(run_worker=False)
    item = {"id": "a", "video": "c.mp4", "turns": [TURN]}
    big = {"sampler": {"n": 256, "max_side": 2048}}
    r = client.post("/v1/grade", json={"item": item, "options": big}, headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Too many pixels", r.text
    r = client.post("/v1/jobs", json={"items": [item], "options": big}, headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Too many pixels", r.text
    r = client.post("/v1/jobs?n=1024", json=[item], headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Too many pixels", r.text
    assert client.post("/v1/jobs", json=[item], headers=auth).status_code == 202
