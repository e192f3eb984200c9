"""Shared fixtures: real video files generated with PyAV, each frame carrying its own number.

Every generated frame shows a 16-cell barcode of its frame number in the top
quarter (in stored orientation), so a test can tell exactly which frame the
sampler returned, not just that it returned something.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from framejudge.examples.synth import cfr_times, write_video

# Some test modules import litellm before framejudge does; it must not try the network either.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Real third-party clips, labelled sets and tools live beside the repository (never inside it).
SHARED = Path(os.environ.get("FRAMEJUDGE_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
BITS = 16


def barcode_frame(width: int, height: int) -> "callable":
    def render(k: int, t: float) -> np.ndarray:
        img = np.full((height, width, 3), 96, np.uint8)
        band = height // 4
        cell = width / BITS
        for b in range(BITS):
            if (k >> b) & 1:
                img[:band, int(b * cell) : int((b + 1) * cell)] = 255
            else:
                img[:band, int(b * cell) : int((b + 1) * cell)] = 0
        x = int((k * 5) % max(1, width - 20))
        img[band + 10 : band + 30, x : x + 20] = (220, 40, 40)  # moving block
        return img

    return render


def read_barcode(img: np.ndarray) -> int:
    """Frame number from an RGB image in stored orientation (any size)."""
    h, w = img.shape[:2]
    y = max(0, int(h / 8))
    value = 0
    for b in range(BITS):
        x = int((b + 0.5) * w / BITS)
        patch = img[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2].astype(float)
        if patch.mean() > 128:
            value |= 1 << b
    return value


def vfr_schedule() -> list[float]:
    """10, 15, 24, 30 and 60 fps for a second each, a 2 s freeze, then jittered 30 fps."""
    times: list[float] = []
    t = 0.0
    for rate in (10, 15, 24, 30, 60):
        for _ in range(rate):
            times.append(round(t, 3))
            t += 1 / rate
    t += 2.0
    rng = np.random.default_rng(7)
    for _ in range(45):
        times.append(round(t, 3))
        t += 1 / 30 + float(rng.uniform(-0.008, 0.008))
    return times


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["FRAMEJUDGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("frame-cache"))


@pytest.fixture(scope="session", autouse=True)
def _object_storage_credentials(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Credentials for the object storage servers on loopback, set before any decoding process or Ray
    cluster starts (tests/object_storage.py)."""
    set_credentials(tmp_path_factory.mktemp("storage-credentials"))


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clips")
    r = barcode_frame(320, 180)
    out: dict[str, Path] = {}
    out["h264"] = write_video(d / "h264.mp4", r, cfr_times(12, 30), size=(320, 180), gop=30, bframes=2)
    out["long_gop"] = write_video(d / "long_gop.mp4", r, cfr_times(20, 30), size=(320, 180), gop=250)
    out["mpeg4"] = write_video(
        d / "mpeg4.avi", r, cfr_times(4, 25), size=(320, 180), codec="mpeg4", rate=25,
        time_base=Fraction(1, 25),
    )
    out["vfr"] = write_video(d / "vfr.mp4", r, vfr_schedule(), size=(320, 180), gop=40)
    out["rot90"] = write_video(d / "rot90.mp4", r, cfr_times(2, 30), size=(320, 180), rotation=90)
    out["rot270"] = write_video(d / "rot270.mp4", r, cfr_times(2, 30), size=(320, 180), rotation=270)
    out["rot180"] = write_video(d / "rot180.mp4", r, cfr_times(2, 30), size=(320, 180), rotation=180)
    out["multi"] = write_video(
        d / "multi.mkv", r, cfr_times(3, 30), size=(320, 180),
        extra_video_streams=[((64, 64), 1)],
    )
    out["with_audio"] = write_video(
        d / "with_audio.mp4", r, cfr_times(2, 30), size=(320, 180), audio_seconds=6.0
    )
    out["ntsc"] = write_video(
        d / "ntsc.mp4", r, [k * 1001 / 30000 for k in range(120)], size=(320, 180),
        rate=Fraction(30000, 1001), time_base=Fraction(1001, 30000),
    )
    out["odd"] = write_video(
        d / "odd.mkv", r, [k / 26.777 for k in range(100)], size=(320, 180), rate=27,
    )
    out["fifty"] = write_video(
        d / "fifty.mp4", r, cfr_times(3, 50), size=(320, 180), rate=50, time_base=Fraction(1, 50)
    )
    full = write_video(d / "full.mp4", r, cfr_times(10, 30), size=(320, 180), gop=30, faststart=True)
    data = full.read_bytes()
    out["truncated"] = d / "truncated.mp4"
    out["truncated"].write_bytes(data[: len(data) // 2])
    # A portrait-stored clip with non-square pixels would need SAR support in the writer; the
    # real-clip tests cover anamorphic-free phones. A wide one checks aspect handling:
    out["wide"] = write_video(d / "wide.mp4", r, cfr_times(1, 30), size=(1280, 160))
    return out


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"the shared research data folder is absent ({SHARED}; set FRAMEJUDGE_SHARED)")
    return SHARED


# A real PostgreSQL server (started only by tests that ask for it) and a database URL fixture that
# runs a test on SQLite and on PostgreSQL.
from tests.postgres import database_url, postgres  # noqa: E402,F401

# S3 (moto) and Google Cloud Storage (gcp-storage-emulator) on loopback, started by the tests that ask
from tests.object_storage import gcs, s3, set_credentials  # noqa: E402,F401


@pytest.fixture(scope="session")
def bundled_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled items file beside its clips, made as `framejudge examples make` makes them
    (a fresh clone has no clips: a named video that is missing is a bad_input error)."""
    import shutil

    from framejudge.examples.clips import make_examples

    folder = tmp_path_factory.mktemp("examples")
    shutil.copy(Path(__file__).parents[1] / "examples" / "items.jsonl", folder / "items.jsonl")
    make_examples(folder / "videos")
    return folder / "items.jsonl"


# Tests are marked by what they drive, so that `./run test --fast` can leave those out: a real model
# (`model`), the PostgreSQL server (`postgres`), headless Chromium (`browser`), and the tests that
# took a second or more in a full run (`slow`, listed in tests/slow.txt).
MODEL_MODULES = {"test_transformers_backend.py", "test_litellm_real_server.py", "test_model_server.py"}
SLOW = {line.strip() for line in (Path(__file__).parent / "slow.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    browser_modules: dict[str, bool] = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.name in MODEL_MODULES:
            item.add_marker(pytest.mark.model)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "postgres" in getattr(item, "fixturenames", ()) or params.get("database_url") in ("postgresql", "postgres"):
            item.add_marker(pytest.mark.postgres)
        if path not in browser_modules:
            browser_modules[path] = "tests.chromium" in path.read_text(encoding="utf-8")
        if browser_modules[path]:
            item.add_marker(pytest.mark.browser)
        if item.nodeid in SLOW or item.nodeid.split("[")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
