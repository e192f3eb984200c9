"""The table of judge backends: what a `--judge` spec may name.

Every place that reads a judge spec (the CLI's `--judge`, a judges file's `spec`, the service's
allowed judges, `make_judge`) reads this table, so a backend is added in one place. An entry knows
its spec prefix, its judge class (imported only when a judge is made), the extra that installs what
it needs, and what it can do.

Packages outside framejudge add backends through the `framejudge.judges` entry-point group: the
entry point's name is the spec prefix and its value a `Backend`:

    [project.entry-points."framejudge.judges"]
    myjudge = "my_package.judge:BACKEND"

This module imports nothing heavy and nothing else from framejudge, so the schema and the settings
can check specs with it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from .errors import FramejudgeError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "framejudge.judges"


class JudgeSpecError(FramejudgeError, ValueError):
    """A judge spec that names no available backend, or a backend that cannot be used here."""

    code = "judge_unavailable"


@dataclass(frozen=True)
class Capabilities:
    """What a backend's judges can do (a model behind it may do less: a text-only model behind an
    image-capable backend sees timestamps instead of frames, as its judge's `sees_images` says)."""

    sees_images: bool = False  # can show the model the sampled frames
    takes_video: bool = False  # can send a clip of the video itself
    logprobs: bool = False  # can report the label tokens' probabilities
    deterministic: bool = False  # the same input always gets the same verdict (samples and swaps add nothing)
    spends: bool = False  # its calls cost money (runs ask before calling)
    calls_server: bool = False  # calls a model server: a judges file's endpoint, key, pace and price apply


@dataclass(frozen=True)
class Backend:
    """One kind of judge.

    `name` is the spec's prefix. `target` names what follows `name:` in a spec (`"<model>"`), or is
    None for a backend whose spec is its bare name. `judge` is `"module:Class"`: a class with
    `from_spec(target, config=None, api_base=None)` (framejudge.judge.base.JudgeBase gives one), made
    only when a judge is. `needs` are the modules that must be importable first, installed by
    `pip install '.[<extra>]'` (in the framejudge checkout) (or by `install`, for a backend from another package)."""

    name: str
    target: str | None
    judge: str
    summary: str
    capabilities: Capabilities = field(default_factory=Capabilities)
    extra: str | None = None
    needs: tuple[str, ...] = ()
    install: str | None = None  # how to install `needs` when no framejudge extra does

    @property
    def form(self) -> str:
        """How a spec for this backend is written: `reference`, `litellm:<model>`."""
        return f"{self.name}:{self.target}" if self.target else self.name

    def missing(self) -> str | None:
        """The first module this backend needs that is not installed, with how to install it; None
        when all are there."""
        for module in self.needs:
            if importlib.util.find_spec(module) is None:
                how = self.install or (f"pip install '.[{self.extra}]'" if self.extra else "install it")
                return f"the {self.name} judge needs {module}: {how}"
        return None

    def load(self) -> type:
        """The judge class (imports the backend's module, and so its libraries)."""
        why = self.missing()
        if why:
            raise JudgeSpecError(why)
        module, _, attribute = self.judge.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise JudgeSpecError(f"the {self.name} judge cannot be loaded from {self.judge!r}: {exc}") from None


BUILTIN: tuple[Backend, ...] = (
    Backend("reference", None, "framejudge.judge.reference:ReferenceJudge",
            "the offline reference judge: the rubric's rules, sentence meaning and on-screen text (no model server)",
            Capabilities(deterministic=True)),
    Backend("litellm", "<model>", "framejudge.judge.litellm_backend:LiteLLMJudge",
            "a hosted model (OpenAI, Gemini, Anthropic, ...) or a self-hosted OpenAI-compatible server "
            "(vLLM, Ollama) through litellm",
            Capabilities(sees_images=True, takes_video=True, logprobs=True, spends=True, calls_server=True), extra="api",
            needs=("litellm", "tenacity")),
    Backend("transformers", "<path>", "framejudge.judge.transformers_backend:TransformersJudge",
            "a local model folder or GGUF file run in this process with transformers",
            Capabilities(sees_images=True, logprobs=True), extra="models",
            needs=("torch", "transformers", "xgrammar")),
)


@cache
def backends() -> dict[str, Backend]:
    """Every backend by its spec prefix: framejudge's own, then those other installed packages add
    through the entry-point group (one that cannot be loaded, or that takes a name already taken, is
    left out with a warning in the log)."""
    table = {b.name: b for b in BUILTIN}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            backend = point.load()
        except Exception as exc:  # a broken plugin must not take the built-in judges down with it
            log.warning("judge backend %r (%s) cannot be loaded: %s", point.name, point.value, exc)
            continue
        if not isinstance(backend, Backend) or backend.name != point.name:
            log.warning("judge backend %r (%s) is not a framejudge.backends.Backend named %r; left out",
                        point.name, point.value, point.name)
            continue
        if point.name in table:
            log.warning("judge backend %r (%s) takes a name already used; left out", point.name, point.value)
            continue
        table[point.name] = backend
    return table


def forms() -> str:
    """The spec forms, for messages: `'reference', 'litellm:<model>' or 'transformers:<path>'`."""
    quoted = [f"'{b.form}'" for b in backends().values()]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def help_text() -> str:
    """The spec forms, for a CLI option's help: `reference | litellm:<model> | transformers:<path>`."""
    return " | ".join(b.form for b in backends().values())


def parse(spec: str) -> tuple[Backend, str]:
    """The backend a spec names, and its target (empty for a bare-name backend). Raises
    JudgeSpecError (a ValueError) for a spec that names none."""
    kind, colon, target = spec.partition(":")
    backend = backends().get(kind)
    if backend is None or (backend.target is None) != (not colon) or (backend.target is not None and not target):
        raise JudgeSpecError(f"unknown judge {spec!r}: use {forms()}")
    return backend, target


def calls_server(spec: str) -> bool:
    """Whether a spec's judge calls a model server (False for one that names no backend)."""
    try:
        return parse(spec)[0].capabilities.calls_server
    except JudgeSpecError:
        return False


# litellm providers whose chat models take a video clip (a `file` part, video/mp4): Gemini, through
# Google AI Studio (gemini/) or Vertex AI (vertex_ai/gemini-...), and vLLM (hosted_vllm/: litellm
# turns the part into vLLM's `video_url`). OpenAI, Anthropic and Ollama take images only; an
# OpenAI-compatible server named with openai/ gets the `file` part as it is, which vLLM does not read.
LITELLM_VIDEO_PROVIDERS = ("gemini", "hosted_vllm")
LITELLM_GEMINI_HOSTS = ("vertex_ai", "vertex_ai_beta")


# The largest request with a clip inline that a provider takes, where it is larger than the default
# (frame_sampler.clip's INLINE_REQUEST_BYTES, 20 MB: Vertex AI's bound). The Gemini API takes inline
# data up to 100 MB a request (base64-encoded) since January 2026
# (https://blog.google/innovation-and-ai/technology/developers-tools/gemini-api-new-file-limits).
CLIP_REQUEST_BYTES = {"gemini": 100 * 1000 * 1000}


def clip_request_bytes(model: str) -> int | None:
    """The request size a litellm model's provider takes with a clip inline; None: the default."""
    provider, slash, _ = model.partition("/")
    return CLIP_REQUEST_BYTES.get(provider) if slash else None


def on_vertex_ai(spec: str) -> bool:
    """Whether a spec names a litellm judge on Vertex AI (vertex_ai/<model>, vertex_ai_beta/<model>)."""
    try:
        backend, target = parse(spec)
    except JudgeSpecError:
        return False
    return backend.name == "litellm" and target.partition("/")[0] in LITELLM_GEMINI_HOSTS


def litellm_takes_video(model: str) -> bool:
    """Whether a litellm model name's provider takes a video clip, from its provider prefix (a bare
    `gemini-...` name is litellm's Vertex AI Gemini)."""
    provider, slash, name = model.partition("/")
    if not slash:
        return model.startswith("gemini")
    if provider in LITELLM_VIDEO_PROVIDERS:
        return True
    return provider in LITELLM_GEMINI_HOSTS and name.startswith("gemini")


def clip_refusal(spec: str) -> str | None:
    """Why a spec's judge cannot be shown a video clip (video_input clip); None when it can. The
    table says which backends send video; of litellm's providers, Gemini and vLLM take it."""
    try:
        backend, target = parse(spec)
    except JudgeSpecError as exc:
        return str(exc)
    if not backend.capabilities.takes_video:
        return f"the {spec} judge sends frames only (the {backend.name} backend takes no video)"
    if backend.name == "litellm" and not litellm_takes_video(target):
        return (f"the {spec} judge's provider takes images, not video (clips go to gemini/, vertex_ai/gemini-... "
                "and hosted_vllm/ models)")
    return None


def check_spec(spec: str) -> str:
    """`spec`, when it names a backend (for validators); raises JudgeSpecError otherwise."""
    parse(spec)
    return spec


def describe() -> list[dict[str, Any]]:
    """The table as data (for documentation and `framejudge judges`-style listings)."""
    return [{"form": b.form, "summary": b.summary, "extra": b.extra, **vars(b.capabilities)}
            for b in backends().values()]
