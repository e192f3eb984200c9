"""Grading on a Ray cluster (runner/ray_engine.py): one real local cluster for the session (two
CPUs, loopback only), the litellm judge against the slow model server on loopback
(bench/model_server.py), which counts the calls it saw per item and the most it had in flight."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.model_server import ModelServer
from framejudge.judge import Grader, load_items
from framejudge.records import latest, read_records
from framejudge.rubrics import get_rubric
from framejudge.runner import run_batch
from framejudge.runner.judges import Judges
from framejudge.runner.ray_engine import RaySettings, loopback_only, run_on_ray, setup_of
from framejudge.runner.resume import plan_resume
from framejudge.schema import DecodeLimits, GradeOptions, JudgeConfig

pytest.importorskip("litellm")
loopback_only()  # before ray is imported: the session's cluster listens on 127.0.0.1 only
ray = pytest.importorskip("ray", reason="the ray engine's tests need the framejudge[ray] extra")

# every test here in one worker of a parallel run (./run test: --dist loadgroup), so that the
# session starts one cluster (about 1.5 GB and 10 s each), not one per worker
pytestmark = pytest.mark.xdist_group("ray")
RUBRIC = get_rubric("video-qa")
SPEC = "litellm:openai/bench"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster():
    """One local Ray cluster for the session: two CPUs, on loopback."""
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", configure_logging=False,
             log_to_driver=False)
    yield ray
    ray.shutdown()


def _items(path: Path, clips: dict[str, Path | str], n: int) -> list:
    """`n` items: most with a video (two clips in turn), a pair of responses each; one two-turn
    item; one whose video does not exist (its turn is an error record)."""
    with path.open("w") as f:
        for k in range(n):
            turn = {"question": f"[item i{k}] How many people?", "golden": "2 people.",
                    "response_a": "There are 2 people.", "response_b": "Three people."}
            item = {"id": f"i{k}", "video": str(clips["h264" if k % 2 else "vfr"]), "turns": [turn]}
            if k == 1:
                item["task_type"] = "multi_turn"
                item["turns"] = [{**turn, "time": 1.0}, {**turn, "question": "[item i1] And now?", "time": 2.0}]
            if k == 2:
                item["video"] = str(path.parent / "missing.mp4")
            f.write(json.dumps(item) + "\n")
    return load_items(path)


def _grader(server: ModelServer, **config) -> tuple[Grader, Judges]:
    judges = Judges([JudgeConfig(spec=SPEC, api_base=server.base_url, **config)])
    grader = Grader(judges.make(SPEC), RUBRIC, GradeOptions(cache=False, sampler={"n": 4}))
    return grader, judges


def _on_ray(server: ModelServer, items, out: Path, graders: int = 2, on_progress=None, on_actors=None, **config):
    grader, judges = _grader(server, **config)
    plan = plan_resume(grader, items, out)
    return asyncio.run(run_on_ray(grader, items, out, spec=SPEC, setup=setup_of(grader, judges, SPEC), plan=plan,
                                  settings=RaySettings(graders=graders, decoders=2), decoding=DecodeLimits(),
                                  on_progress=on_progress, on_actors=on_actors))


def _turns(items) -> set[tuple[str, int]]:
    return {(it.id, t) for it in items for t in range(len(it.turns))}


def _keys(out: Path) -> list[tuple[str, int]]:
    return [(r.item_id, r.turn) for r in read_records(out)]


def _comparable(r) -> dict:
    """A record without what differs between any two runs (when and how long it took)."""
    data = r.model_dump(mode="json")
    for name in ("created_at",):
        (data.get("provenance") or {}).pop(name, None)
    return data


def test_one_record_per_turn_and_the_same_verdicts_as_the_local_engine(cluster, clips, tmp_path):
    items = _items(tmp_path / "items.jsonl", clips, 10)
    with ModelServer(latency=0.05) as server:
        summary = _on_ray(server, items, tmp_path / "ray.jsonl")
        on_ray = server.stats()
        server.reset()
        grader, _ = _grader(server)
        asyncio.run(run_batch(grader, items, tmp_path / "local.jsonl"))
        local = server.stats()
    keys = _keys(tmp_path / "ray.jsonl")
    assert sorted(keys) == sorted(_turns(items)) and len(keys) == len(set(keys)) == 11
    assert summary.turns_graded == 10 and summary.errors == {"bad_input": 1}
    # every item was asked about exactly as often as locally: a call per order of each pair
    assert on_ray["by_tag"] == local["by_tag"] and on_ray["by_tag"]["i5"] == 2 and "i2" not in on_ray["by_tag"]
    ray_records = {(r.item_id, r.turn): _comparable(r) for r in read_records(tmp_path / "ray.jsonl")}
    local_records = {(r.item_id, r.turn): _comparable(r) for r in read_records(tmp_path / "local.jsonl")}
    assert ray_records == local_records
    framed = ray_records[("i4", 0)]["provenance"]
    assert len(framed["frame_timestamps"]) == 4  # frames were decoded on the decoding actors and shown


def test_a_rerun_grades_only_what_has_no_standing_verdict(cluster, clips, tmp_path):
    items = _items(tmp_path / "items.jsonl", clips, 8)
    out = tmp_path / "v.jsonl"
    with ModelServer(latency=0.02) as server:
        grader, _ = _grader(server)
        asyncio.run(run_batch(grader, items[:5], out))  # a partial output, as a killed driver leaves it
        with out.open("a") as f:
            f.write('{"record": "verdict", "item_id": "i6"')  # torn by the kill
        server.reset()
        summary = _on_ray(server, items, out)
        calls = server.stats()["by_tag"]
    assert sorted(calls) == ["i5", "i6", "i7"]  # the error of i2 (a missing video) is graded again: no call
    keys = _keys(out)
    assert sorted(keys) == sorted(_turns(items)) and len(keys) == len(set(keys))
    assert summary.turns_graded == 8 and summary.errors == {"bad_input": 1}


def test_calls_in_flight_never_pass_the_judges_file_maximum_across_actors(cluster, clips, tmp_path):
    items = _items(tmp_path / "items.jsonl", clips, 24)
    with ModelServer(latency=0.3) as server:
        summary = _on_ray(server, items, tmp_path / "v.jsonl", graders=3, concurrency=2, max_concurrency=3)
        stats = server.stats()
    assert summary.turns_graded == 24
    assert stats["peak_in_flight"] == 3  # reached with three actors asking, never passed
    assert stats["completed"] == 2 * 24  # a call per order of each pair: none for i2, two turns of i1


def test_a_killed_grading_actor_leaves_one_record_per_turn(cluster, clips, tmp_path):
    items = _items(tmp_path / "items.jsonl", clips, 16)
    seen: dict[str, list] = {}
    killed = []

    def kill_once(state) -> None:
        if state.done >= 3 and not killed:
            ray.kill(seen["graders"][0])
            killed.append(state.done)

    with ModelServer(latency=0.2) as server:
        summary = _on_ray(server, items, tmp_path / "v.jsonl", on_progress=kill_once, on_actors=seen.update,
                          concurrency=4, max_concurrency=4)
    keys = _keys(tmp_path / "v.jsonl")
    assert killed and sorted(keys) == sorted(_turns(items)) and len(keys) == len(set(keys))
    assert summary.turns_graded == 16 and summary.errors == {"bad_input": 1}
    verdicts, errors = latest(read_records(tmp_path / "v.jsonl"))
    assert len(verdicts) == 16 and list(errors) == [("i2", 0)]


def test_the_command_line_grades_on_ray(cluster, clips, tmp_path):
    """`framejudge grade --engine ray --address` joins the session's cluster from another process."""
    items = _items(tmp_path / "items.jsonl", clips, 4)
    address = ray.get_runtime_context().gcs_address
    with ModelServer(latency=0.02) as server:
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(tmp_path / "items.jsonl"),
                               "--out", str(tmp_path / "v.jsonl"), "--judge", SPEC, "--api-base", server.base_url,
                               "--engine", "ray", "--address", address, "--no-cache", "--yes", "-n", "4"],
                              capture_output=True, text=True, timeout=300, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stderr  # the missing video's turn could not be graded
    summary = json.loads(proc.stdout)
    assert summary["turns_graded"] == 4 and summary["errors"] == {"bad_input": 1}
    assert sorted(_keys(tmp_path / "v.jsonl")) == sorted(_turns(items))
    done = len(_turns(items))  # its stderr is a pipe: plain progress lines, the last one when it is done
    assert f"progress: done: {done}/{done} turn(s) (100%), " in proc.stderr and "1 error(s)" in proc.stderr, proc.stderr


def _cli(tmp_path: Path, server: ModelServer, *more: str) -> list[str]:
    return [sys.executable, "-m", "framejudge.cli", "grade", str(tmp_path / "items.jsonl"), "--out",
            str(tmp_path / "v.jsonl"), "--judge", SPEC, "--api-base", server.base_url, "--engine", "ray", "--address",
            ray.get_runtime_context().gcs_address, "--no-cache", "--yes", "-n", "4", *more]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed driver"])
def test_a_stopped_or_killed_driver_keeps_what_is_written_and_the_same_command_grades_the_rest(
        cluster, clips, tmp_path, how):
    """Ctrl-C stops the run (exit 130, with what to do); a driver killed outright (SIGKILL: no
    handler runs, its actors go with its job) leaves what it wrote. Either way a rerun grades only
    the rest, and every turn ends with one record."""
    items = _items(tmp_path / "items.jsonl", clips, 24)
    out = tmp_path / "v.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ModelServer(latency=0.3) as server:
        proc = subprocess.Popen(_cli(tmp_path, server, "--concurrency", "2", "--max-concurrency", "2"), cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
            time.sleep(0.1)
        proc.send_signal(how)
        _, stderr = proc.communicate(timeout=120)
        if how is signal.SIGINT:
            assert proc.returncode == 130, stderr
            assert "stopped:" in stderr and "the same command grades the rest" in stderr
        else:
            assert proc.returncode == -signal.SIGKILL
        kept = _keys(out)
        assert len(kept) == len(set(kept)) and 3 <= len(kept) < 25
        server.reset()
        again = subprocess.run(_cli(tmp_path, server), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        calls = server.stats()["by_tag"]
    assert again.returncode == 1, again.stderr  # every turn has its record; the missing video's is an error
    assert "bad_input: 1 turn(s)" in again.stderr
    keys = _keys(out)
    assert sorted(keys) == sorted(_turns(items)) and len(keys) == len(set(keys))
    graded_before = {item for item, _ in kept if (item, 0) in kept and item != "i1"}
    assert not graded_before & set(calls)  # what the interrupted run wrote was not graded again


def test_a_killed_decoding_actor_is_restarted_and_its_decode_asked_again(cluster, clips, tmp_path):
    items = _items(tmp_path / "items.jsonl", clips, 12)
    seen: dict[str, list] = {}
    killed = []

    def kill_once(state) -> None:
        if state.done >= 2 and not killed:
            ray.kill(seen["decoders"][0], no_restart=False)  # as a crash: Ray starts it again
            killed.append(state.done)

    with ModelServer(latency=0.1) as server:
        summary = _on_ray(server, items, tmp_path / "v.jsonl", on_progress=kill_once, on_actors=seen.update)
    keys = _keys(tmp_path / "v.jsonl")
    assert killed and sorted(keys) == sorted(_turns(items)) and len(keys) == len(set(keys))
    assert summary.turns_graded == 12 and summary.errors == {"bad_input": 1}  # the missing video alone


def test_a_burst_of_429s_is_waited_out_by_the_whole_cluster(cluster, clips, tmp_path):
    """The endpoint refuses everything for two seconds (429, Retry-After 1 s): the controller pauses
    and paces every actor's calls, and every turn still ends with a verdict."""
    items = _items(tmp_path / "items.jsonl", clips, 12)
    with ModelServer(latency=0.1, overload_for=600, overload_retry_after=1.0) as server:

        def lift() -> None:  # two seconds after the first refusal, the endpoint answers again
            while not server.stats()["status_counts"].get(429):
                time.sleep(0.05)
            time.sleep(2.0)
            server.configure(overload_until=None)

        lifting = threading.Thread(target=lift, daemon=True)
        lifting.start()
        summary = _on_ray(server, items, tmp_path / "v.jsonl", graders=2, concurrency=4, max_concurrency=4)
        stats = server.stats()
    assert stats["status_counts"].get(429, 0) > 0
    assert stats["completed"] == 2 * 12 and stats["peak_in_flight"] <= 4
    assert summary.turns_graded == 12 and summary.errors == {"bad_input": 1}


def test_an_address_where_no_cluster_answers_is_refused_at_once(tmp_path):
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "a", "turns": [
        {"question": "q", "golden": "g", "response_a": "r"}]}) + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]  # closed again: nothing listens there
    for address, why in ((f"127.0.0.1:{free}", "no Ray cluster answers there"),
                         ("ray://nowhere", "not auto, HOST:PORT or ray://HOST:PORT")):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(tmp_path / "items.jsonl"), "--out",
                               str(tmp_path / "v.jsonl"), "--engine", "ray", "--address", address],
                              capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 2 and f"error: --address {address}: {why}" in proc.stderr, proc.stderr
        assert time.monotonic() - started < 60 and not (tmp_path / "v.jsonl").exists()


def test_clips_are_cut_on_the_decoding_actors_as_locally(cluster, clips, tmp_path):
    """video_input clip: each turn's window is cut on a decoding actor, within the judge's limit, and
    reaches the model server as a video part; the records are those of the local engine."""
    spec = "litellm:hosted_vllm/bench"
    items = _items(tmp_path / "items.jsonl", clips, 4)
    with ModelServer(latency=0.01) as server:
        judges = Judges([JudgeConfig(spec=spec, api_base=server.base_url)])
        options = GradeOptions(cache=False, video_input="clip", sampler={"lookback": 1.0})
        grader = Grader(judges.make(spec), RUBRIC, options)
        out = tmp_path / "ray.jsonl"
        asyncio.run(run_on_ray(grader, items, out, spec=spec, setup=setup_of(grader, judges, spec),
                               plan=plan_resume(grader, items, out), settings=RaySettings(graders=2, decoders=2),
                               decoding=DecodeLimits()))
        local_grader = Grader(judges.make(spec), RUBRIC, options)
        asyncio.run(run_batch(local_grader, items, tmp_path / "local.jsonl"))
    ray_records = {(r.item_id, r.turn): _comparable(r) for r in read_records(out)}
    local_records = {(r.item_id, r.turn): _comparable(r) for r in read_records(tmp_path / "local.jsonl")}
    assert ray_records == local_records and len(ray_records) == 5
    clipped = [r["provenance"]["clip"] for r in ray_records.values() if r["record"] == "verdict"]
    assert len(clipped) == 4 and all(c["sha256"] and c["bytes"] > 0 for c in clipped)
    assert ray_records[("i2", 0)]["kind"] == "bad_input"  # the missing video


def test_an_object_in_s3_is_read_by_the_decoding_actors_never_by_the_driver(cluster, clips, s3, tmp_path):
    """Items naming an s3:// object: the records are those of the same video as a path (graded by the
    local engine), and the object's bytes are read only by the decoding actors' decoding processes (the
    server notes each request's process): the driver sends no request at all, the grading actors only
    ask for the object's metadata."""
    key = f"ray-{os.getpid()}-{time.monotonic_ns()}/h264.mp4"
    url = s3.put(key, clips["h264"].read_bytes())
    by_url = _items(tmp_path / "urls.jsonl", {"h264": url, "vfr": url}, 6)
    by_path = _items(tmp_path / "paths.jsonl", {"h264": clips["h264"], "vfr": clips["h264"]}, 6)
    pids: dict[str, list[int]] = {}

    def actors(found: dict) -> None:
        pids["decoders"] = ray.get([d.pid.remote() for d in found["decoders"]])
        pids["graders"] = ray.get([g.pid.remote() for g in found["graders"]])

    with ModelServer(latency=0.02) as server:
        summary = _on_ray(server, by_url, tmp_path / "ray.jsonl", on_actors=actors)
        grader, _ = _grader(server)
        asyncio.run(run_batch(grader, by_path, tmp_path / "local.jsonl"))
    assert summary.turns_graded == 6 and summary.errors == {"bad_input": 1}  # i2: a missing file, as before

    def comparable(r) -> dict:
        data = _comparable(r)
        for name in ("video", "turn_hash"):
            (data.get("provenance") or {}).pop(name, None)
        return data

    ray_records = {(r.item_id, r.turn): comparable(r) for r in read_records(tmp_path / "ray.jsonl")}
    local_records = {(r.item_id, r.turn): comparable(r) for r in read_records(tmp_path / "local.jsonl")}
    assert ray_records == local_records and len(ray_records[("i3", 0)]["provenance"]["frame_timestamps"]) == 4
    reads = s3.reads(key)
    assert reads and all(r.parent in pids["decoders"] for r in reads), (reads, pids)
    mine = [r for r in s3.requests if key in r.path and r.method != "PUT"]  # the test's own upload left out
    assert all(r.pid != os.getpid() for r in mine), (mine, os.getpid(), pids)
    # metadata: the grading actors check that the object is there, a decoding process before it reads its copy
    assert all(r.pid in pids["graders"] or r.parent in pids["decoders"] for r in mine if r.method == "HEAD")


def test_the_actors_read_objects_with_the_drivers_storage_settings(cluster, clips, s3, tmp_path, monkeypatch):
    """The object storage endpoint is the driver's, whatever the nodes' processes have: items loaded
    with moto's endpoint, then the driver's FRAMEJUDGE_S3_ENDPOINT set to one on a private address
    (not allowed): every turn of an object is an error record naming the variable, and no request
    for the object reaches the storage."""
    key = f"ray-settings-{os.getpid()}-{time.monotonic_ns()}/h264.mp4"
    url = s3.put(key, clips["h264"].read_bytes())
    items = _items(tmp_path / "urls.jsonl", {"h264": url, "vfr": url}, 4)
    monkeypatch.setenv("FRAMEJUDGE_S3_ENDPOINT", "https://10.0.0.8:9000")
    with ModelServer(latency=0.02) as server:
        _on_ray(server, items, tmp_path / "ray.jsonl")
    records = {(r.item_id, r.turn): r for r in read_records(tmp_path / "ray.jsonl")}
    objects = [r for (item_id, _), r in records.items() if item_id != "i2"]  # i2: a missing file
    assert len(objects) == 4 and all(r.record == "judge_error" and r.kind.value == "bad_input" for r in objects), records
    assert all(r.message.startswith(f"{url}: FRAMEJUDGE_S3_ENDPOINT='https://10.0.0.8:9000': 10.0.0.8 resolves "
                                    "to a non-public address") for r in objects), [r.message for r in objects]
    assert [r for r in s3.requests if key in r.path and r.method != "PUT"] == []


def test_frames_cross_from_decoding_to_grading_actors_as_the_jpeg_a_model_call_sends(cluster, clips):
    from framejudge.frame_sampler import EncodedFrame, SampledFrame, sample_frames
    from framejudge.runner.ray_engine import DecodeWorker, GradeWorker
    from framejudge.schema import SamplerParams

    decoder = ray.remote(DecodeWorker).remote(DecodeLimits())
    params = SamplerParams(n=4)
    try:
        carried = ray.get(decoder.sample.remote(str(clips["h264"]), params, 85))
        local = sample_frames(clips["h264"], params, cache=None)
        assert all(isinstance(f, EncodedFrame) for f in carried.frames)
        assert [f.data_url(85) for f in carried.frames] == [f.data_url(85) for f in local.frames]
        pixels = ray.get(decoder.sample.remote(str(clips["h264"]), params))
        assert all(isinstance(f, SampledFrame) for f in pixels.frames)
        # a grading actor asks for JPEG at the run's quality for a model judge, pixels for the
        # reference judge (its OCR reads them)
        for spec, options, quality in ((SPEC, GradeOptions(jpeg_quality=70), 70), ("reference", GradeOptions(), None)):
            judges = Judges([JudgeConfig(spec=SPEC, api_base="http://127.0.0.1:9/v1")])
            grader = Grader(judges.make(spec), RUBRIC, options)
            worker = GradeWorker(setup_of(grader, judges, spec), [decoder], None, "test", 1, 2)
            assert worker.decodes.jpeg_quality == quality
    finally:
        ray.kill(decoder)
