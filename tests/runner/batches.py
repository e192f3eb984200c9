"""What the batch-run tests of each provider share: the items (a pair of answers about a bird,
two with a barcode video, one without), the judgements a loopback server answers for either order
of the pair, a frame's number read back from the image a provider received, and what a verdict says
without when and how it was sent."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from framejudge.schema import Verdict
from tests.conftest import barcode_frame, read_barcode
from tests.judge.providers import Image

FPS = 10
GOOD = {"response_a": {"category": "Successful", "rationale": "matches the golden response"},
        "response_b": {"category": "Not Successful", "rationale": "names another bird"},
        "preference": "A", "deciding_criterion": "category"}
GOOD_SWAPPED = {"response_a": GOOD["response_b"], "response_b": GOOD["response_a"], "preference": "B",
                "deciding_criterion": "category"}


def judgement_for(prompt: object) -> str:
    """A valid judgement for either order of the pair (the swapped call sees B's answer first), from
    the prompt's messages or contents."""
    return json.dumps(GOOD_SWAPPED if re.search(r"Response A:\\n<<<response_a \w+>>>\\nA blue jay", json.dumps(prompt)) else GOOD)


def write_items(folder: Path) -> Path:
    """Two items with a 3 s barcode video each (every frame carries its number) and one without."""
    from framejudge.examples.synth import cfr_times, write_video

    write_video(folder / "birds.mp4", barcode_frame(320, 180), cfr_times(3, FPS), gop=FPS)
    rows = [{"id": f"bird-{k}", **({"video": "birds.mp4"} if k < 2 else {}),
             "turns": [{"question": f"What bird is in clip {k}?", "golden": "A heron.",
                        "response_a": "A grey heron.", "response_b": "A blue jay."}]} for k in range(3)]
    path = folder / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def frame_number(image: Image) -> int:
    from PIL import Image as PILImage

    return read_barcode(np.asarray(PILImage.open(io.BytesIO(image.data)).convert("RGB")))


def judged(record: Verdict) -> dict:
    """What a verdict says and what it cost in tokens, without when and how it was sent."""
    return {"a": record.response_a.model_dump(), "b": record.response_b.model_dump() if record.response_b else None,
            "preference": record.preference, "criterion": record.deciding_criterion,
            "swap": record.swap.model_dump() if record.swap else None,
            "frames": record.provenance.frame_timestamps, "prompt": record.provenance.prompt_hash,
            "tokens": (record.provenance.usage.prompt_tokens, record.provenance.usage.completion_tokens)}


def assert_collected_as_online(records: list, online: list[Verdict], api: str) -> None:
    """A batch run's records are the online run's verdicts, noted as graded through `api`, at half
    the online cost (litellm's price for the model, halved)."""
    assert len(records) == len(online) and all(isinstance(r, Verdict) for r in records)
    assert [judged(r) for r in records] == [judged(r) for r in online]
    for b, o in zip(records, online):
        assert b.response_a.category.value == "Successful" and b.swap is not None and b.swap.consistent
        assert any(api in n for n in b.provenance.notes)
        assert o.provenance.usage.cost_usd and o.provenance.usage.cost_usd > 0
        assert b.provenance.usage.cost_usd == pytest.approx(o.provenance.usage.cost_usd * 0.5)
