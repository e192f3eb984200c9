"""Videos in object storage (frame_sampler/objects.py): s3:// and gs:// URLs against moto's S3 and
gcp-storage-emulator on loopback (tests/object_storage.py), read by the decoding process into a
node-local copy and graded exactly as the same bytes given as a path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from framejudge.frame_sampler import IsolatedSampler, VideoNotFound, sample_frames
from framejudge.frame_sampler.cache import FrameCache, file_sha256
from framejudge.frame_sampler.objects import ObjectCache, local_copy, object_cache_dir, stat_object
from framejudge.schema import JudgeError, Verdict

pytest.importorskip("pyarrow", reason="videos in object storage need the storage extra")
ROOT = Path(__file__).resolve().parents[2]
SPEC = "litellm:openai/bench"
TURN = {"question": "How many people?", "golden": "2 people.", "response_a": "There are 2 people.",
        "response_b": "Three people."}


def _key(name: str) -> str:
    return f"{uuid.uuid4().hex[:8]}/{name}"


def _items(path: Path, videos: dict[str, str]) -> Path:
    """One item per video (id -> path or URL), a multi-turn one among them."""
    with path.open("w") as f:
        for k, (item_id, video) in enumerate(videos.items()):
            item = {"id": item_id, "video": video, "turns": [TURN]}
            if k == 0:
                item["task_type"] = "multi_turn"
                item["turns"] = [{**TURN, "time": 1.0}, {**TURN, "question": "And now?", "time": 2.0}]
            f.write(json.dumps(item) + "\n")
    return path


def _comparable(record) -> dict:
    """A record without its video's name (and what follows from it) or when it was made."""
    data = record.model_dump(mode="json")
    for name in ("created_at", "video", "turn_hash"):
        (data.get("provenance") or {}).pop(name, None)
    return data


def _grade(items: Path, out: Path, server, media_root: Path | None = None) -> list:
    from framejudge import grade

    return grade(items, judge=SPEC, api_base=server.base_url, out=out, options={"cache": False, "sampler": {"n": 4}},
                 media_root=media_root)


@pytest.fixture(scope="module")
def model_server():
    pytest.importorskip("litellm")
    from bench.model_server import ModelServer

    with ModelServer(latency=0.0) as server:
        yield server


def test_an_object_gives_the_frames_and_hash_of_the_same_bytes_as_a_file(s3, gcs, clips, tmp_path):
    local = sample_frames(clips["vfr"], n=6, cache=FrameCache(tmp_path / "frames-local"))
    for store in (s3, gcs):
        url = store.put(_key("vfr.mp4"), clips["vfr"].read_bytes())
        got = sample_frames(url, n=6, cache=FrameCache(tmp_path / f"frames-{type(store).__name__}"))
        assert got.video.sha256 == local.video.sha256 == file_sha256(clips["vfr"])
        assert got.video.path == url
        assert got.video.model_dump(exclude={"path"}) == local.video.model_dump(exclude={"path"})
        assert [f.info for f in got.frames] == [f.info for f in local.frames]
        assert all((a.image == b.image).all() for a, b in zip(got.frames, local.frames))


def test_grading_urls_gives_the_verdicts_of_the_same_videos_as_paths(s3, gcs, clips, model_server, tmp_path):
    """The Python API over s3:// and gs:// items, against the same videos as paths (relative ones under
    the media root): the same records, frames and prompts (the frames are in the prompt's hash)."""
    media = tmp_path / "media"
    media.mkdir()
    (media / "h264.mp4").write_bytes(clips["h264"].read_bytes())
    paths = {"a": "h264.mp4", "b": str(clips["vfr"]), "c": "h264.mp4"}
    urls = {"a": s3.put(_key("h264.mp4"), clips["h264"].read_bytes()), "b": gcs.put(_key("vfr.mp4"), clips["vfr"].read_bytes()),
            "c": gcs.put(_key("h264.mp4"), clips["h264"].read_bytes())}
    by_path = _grade(_items(tmp_path / "paths.jsonl", paths), tmp_path / "paths.out.jsonl", model_server, media)
    # the media root is for paths: a URL is never joined to it
    by_url = _grade(_items(tmp_path / "urls.jsonl", urls), tmp_path / "urls.out.jsonl", model_server, media)
    assert len(by_url) == len(by_path) == 4 and all(isinstance(r, Verdict) for r in by_url)
    assert [_comparable(r) for r in by_url] == [_comparable(r) for r in by_path]
    assert all(r.provenance.prompt_hash and len(r.provenance.frame_timestamps) == 4 for r in by_url)
    assert [r.provenance.video for r in by_url] == [urls["a"], urls["a"], urls["b"], urls["c"]]


def test_a_second_run_reads_the_node_local_copy_not_the_object(s3, clips, model_server, tmp_path):
    key = _key("h264.mp4")
    url = s3.put(key, clips["h264"].read_bytes())
    items = _items(tmp_path / "items.jsonl", {"a": url, "b": url})
    first = _grade(items, tmp_path / "one.jsonl", model_server)
    assert len(s3.reads(key)) == 1  # four turns of one object: read once
    again = _grade(items, tmp_path / "two.jsonl", model_server)  # a fresh verdicts file: every turn decoded again
    assert len(s3.reads(key)) == 1
    assert [_comparable(r) for r in again] == [_comparable(r) for r in first]
    copies = list(object_cache_dir().glob("*.video"))
    assert file_sha256(clips["h264"]) in {p.with_suffix(".sha256").read_text() for p in copies}


def test_the_command_line_grades_urls_and_a_missing_object_is_an_error_record(s3, clips, model_server, tmp_path):
    """As a missing file is: the turn's record is a bad_input error naming the video, the others graded."""
    url = s3.put(_key("h264.mp4"), clips["h264"].read_bytes())
    videos = {"a": url, "gone": s3.url(_key("missing.mp4")), "no-bucket": s3.url("x.mp4", bucket="no-such-bucket"),
              "file": str(tmp_path / "missing.mp4")}
    items = _items(tmp_path / "items.jsonl", videos)
    out = tmp_path / "v.jsonl"
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out), "--judge",
                           SPEC, "--api-base", model_server.base_url, "--no-cache", "--yes", "-n", "4"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stderr  # some turns could not be graded
    assert "error: 3 turn(s) could not be graded" in proc.stderr and "bad_input: 3 turn(s)" in proc.stderr
    from framejudge.records import read_records

    records = {r.item_id: r for r in read_records(out)}
    assert isinstance(records["a"], Verdict)
    for item_id in ("gone", "no-bucket", "file"):
        assert isinstance(records[item_id], JudgeError) and records[item_id].kind.value == "bad_input"
    assert records["gone"].message == f"{videos['gone']}: no such object (or no such bucket)"
    assert records["no-bucket"].message == f"{videos['no-bucket']}: no such object (or no such bucket)"
    assert records["file"].message == f"{videos['file']}: file not found"


def test_a_broken_object_is_a_decode_error_record_as_the_same_bytes_in_a_file_are(s3, clips, model_server, tmp_path):
    data = clips["h264"].read_bytes()
    cut = data[: len(data) // 2]  # cut before its index (moov at the end)
    (tmp_path / "cut.mp4").write_bytes(cut)
    (tmp_path / "noise.mp4").write_bytes(os.urandom(50_000))
    urls = {"cut": s3.put(_key("cut.mp4"), cut), "noise": s3.put(_key("noise.mp4"), (tmp_path / "noise.mp4").read_bytes())}
    by_url = _grade(_items(tmp_path / "urls.jsonl", urls), tmp_path / "u.jsonl", model_server)
    files = {"cut": str(tmp_path / "cut.mp4"), "noise": str(tmp_path / "noise.mp4")}
    by_path = _grade(_items(tmp_path / "paths.jsonl", files), tmp_path / "p.jsonl", model_server)
    assert len(by_url) == 3 and all(isinstance(r, JudgeError) and r.kind.value == "bad_input" for r in by_url)
    for u, p in zip(by_url, by_path):
        video = urls[u.item_id]
        assert u.message.startswith(video + ": not a readable media file")
        assert u.message.removeprefix(video) == p.message.removeprefix(files[p.item_id])


def test_two_decoding_processes_reading_one_object_at_once_read_it_once(s3, clips, tmp_path):
    """Two killable decoding processes ask for the same object together: one reads it in, the other
    waits for that copy (a lock per name; the copy is renamed into place whole)."""
    key = _key("long.mp4")
    url = s3.put(key, clips["long_gop"].read_bytes())
    from concurrent.futures import ThreadPoolExecutor

    with IsolatedSampler(workers=2, timeout_s=120, cache_dir=None) as sampler:
        sampler.sample(clips["h264"], n=1)  # both processes started
        sampler.sample(clips["h264"], n=1)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda n: sampler.sample(url, n=n), (3, 5)))
    assert len(s3.reads(key)) == 1
    assert len({r.video.sha256 for r in results}) == 1 and results[0].video.sha256 is None  # no frame cache
    copies = [p for p in object_cache_dir().iterdir() if p.name.endswith(".part")]
    assert copies == []


def test_the_object_cache_keeps_to_its_size_removing_the_least_recently_used(s3, clips, tmp_path):
    cache = ObjectCache(tmp_path / "objects", size_limit=int(2.5 * clips["h264"].stat().st_size))
    urls = [s3.put(_key(f"{k}.mp4"), clips["h264"].read_bytes()) for k in range(3)]
    paths = []
    for k, url in enumerate(urls[:2]):
        path, digest = cache.fetch(url, stat_object(url))
        assert digest == file_sha256(clips["h264"])
        past = time.time() - 3600 + k  # used an hour ago: the first one longest ago
        os.utime(path, (past, past))
        paths.append(path)
    third, _ = cache.fetch(urls[2], stat_object(urls[2]))
    assert not paths[0].exists() and paths[1].exists() and third.exists()
    assert not paths[0].with_suffix(".sha256").exists()


def test_object_copies_without_the_cache_are_temporary(s3, clips, monkeypatch):
    monkeypatch.setenv("FRAMEJUDGE_NO_CACHE", "1")
    url = s3.put(_key("h264.mp4"), clips["h264"].read_bytes())
    with local_copy(url, 1 << 30) as (path, digest):
        assert path.read_bytes() == clips["h264"].read_bytes() and digest == file_sha256(clips["h264"])
    assert not path.exists() and not path.parent.exists()


def test_an_object_above_the_file_limit_is_refused_from_its_metadata(s3, clips):
    key = _key("h264.mp4")
    url = s3.put(key, clips["h264"].read_bytes())
    with pytest.raises(Exception, match="above the limit") as info:
        with local_copy(url, 1000):
            pass
    assert info.value.code == "file_too_large" and s3.reads(key) == []
    with pytest.raises(VideoNotFound, match="no such object"):
        stat_object(s3.url(_key("nothing.mp4")))


@pytest.mark.parametrize("video, words", [
    ("ftp://example.com/v.mp4", "ftp:// URLs are not read"),
    ("https://example.com/v.mp4", "https:// URLs are not read"),
    ("s3://AKIA:secret@bucket/v.mp4", "credentials do not belong in a video URL"),
    ("s3://bucket/v.mp4?secret_key=abc", "query options (secret_key) refused"),
    ("s3://bucket/v.mp4?endpoint_override=127.0.0.1:9&scheme=http", "query options (endpoint_override, scheme) refused"),
    ("gs://bucket/v.mp4#x", "a query or fragment refused"),
    ("s3://bucket:9000/v.mp4", "'bucket:9000' is not a bucket name"),
    ("gs://bucket", "name the object: gs://bucket/key"),
])
def test_urls_that_are_not_read_are_refused_before_anything_is_graded(tmp_path, video, words):
    items = _items(tmp_path / "items.jsonl", {"a": video})
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                           str(tmp_path / "v.jsonl")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "secret" not in proc.stderr.replace("secret_key", "")
    assert not (tmp_path / "v.jsonl").exists()


HIDE_PYARROW = "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.fs'] = None; "


def test_without_pyarrow_a_url_is_refused_saying_how_to_install_it(tmp_path):
    items = _items(tmp_path / "items.jsonl", {"a": "s3://bucket/v.mp4", "b": "gs://bucket/v.mp4"})
    cli = HIDE_PYARROW + "from framejudge.cli import main; sys.argv[0] = 'framejudge'; main()"
    proc = subprocess.run([sys.executable, "-c", cli, "grade", str(items), "--out", str(tmp_path / "v.jsonl")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and proc.stderr.startswith("error:"), proc.stderr
    assert "pip install '.[storage]'" in proc.stderr and "items.jsonl:1" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "v.jsonl").exists()
    api = HIDE_PYARROW + (
        "import framejudge\n"
        "try:\n"
        "    framejudge.grade([{'id': 'a', 'video': 'gs://b/v.mp4', 'turns': [{'question': 'q', 'response_a': 'r'}]}])\n"
        "except framejudge.FramejudgeError as exc:\n"
        "    print(exc.code, exc)\n")
    proc = subprocess.run([sys.executable, "-c", api], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("storage_unavailable items[0]: ") and "pip install '.[storage]'" in proc.stdout
