"""Token counts as a model server reports them, taken only where they are counts.

A reply's token usage is what its cost is computed from, and what the records, the run's summary and
the service's /metrics add up. A server that misreports it (a negative count, a count as a string, a
null, a fraction, `true`, a count no call could reach) would otherwise become a wrong figure: a
negative cost that lowers a total, a null read as 0. So every count a reply carries is held to
being an integer from 0 to `schema.verdicts.MAX_TOKENS`; a reply with any other is recorded with its tokens and cost
unknown (null), never a guess, and a note that names what the server sent.

Both what the server sent and what litellm made of it are checked: litellm reads `"12"` as 12 and a
null as 0 (OpenAI's route), or a string as 0 (Anthropic's), so its counts alone cannot show a
misreport. The server's reply is read where it is at hand: the direct route's reply (openai_wire) is
the server's JSON itself, a litellm call's reply body is kept by the bounded transport while the call
runs (model_http.reply_bodies: its counts are kept, `counts_of`), and a batch's reply line is the
provider's own body.
"""

from __future__ import annotations

import json
from typing import Any

from ..schema.verdicts import token_count  # the one definition, with MAX_TOKENS

_MISSING = object()

# each provider's reply shape: a key only its replies carry, where their counts are (the reply itself
# where empty), the counts every reply carries and those it may carry (null or absent)
SHAPES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("choices", "usage", ("prompt_tokens", "completion_tokens"), ("total_tokens",)),  # OpenAI's chat completions
    ("stop_reason", "usage", ("input_tokens", "output_tokens"),  # Anthropic's messages
     ("cache_creation_input_tokens", "cache_read_input_tokens")),
    ("candidates", "usageMetadata", ("promptTokenCount", "candidatesTokenCount"),  # Gemini's generateContent
     ("totalTokenCount", "cachedContentTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount")),
    ("done", "", ("prompt_eval_count", "eval_count"), ()),  # Ollama's chat
)


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, _MISSING)
    return getattr(obj, name, _MISSING)


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "missing"
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError):
        return repr(value)[:40]


def raw_problems(body: Any) -> list[str]:
    """The counts of a server's reply body (a dict, or the direct route's namespaces) that are not
    token counts, each as `field: what was sent`; [] where they all are, or where the body is in no
    shape known here (litellm's counts are then the only ones checked)."""
    for marker, where, required, optional in SHAPES:
        if _get(body, marker) is _MISSING:
            continue
        counts = _get(body, where) if where else body
        prefix = f"{where}." if where else ""
        if counts is _MISSING or counts is None:
            return [f"{where}: {_shown(counts)}"]
        out = []
        for name in required:
            value = _get(counts, name)
            if token_count(value) is None:
                out.append(f"{prefix}{name}: {_shown(value)}")
        for name in optional:
            value = _get(counts, name)
            if value is not _MISSING and value is not None and token_count(value) is None:
                out.append(f"{prefix}{name}: {_shown(value)}")
        return out
    return []


def reply_tokens(response: Any, raw: Any = None) -> tuple[int | None, int | None, str | None]:
    """The prompt and completion tokens of one reply (as litellm's replies carry them,
    `response.usage`), each None where unknown, and a note saying why where they are: the server's
    reply body `raw` (where at hand) and litellm's counts both checked."""
    usage = _get(response, "usage")
    found = raw_problems(raw) if raw is not None else []
    if usage is _MISSING or usage is None:
        found = found or ["usage: missing"]
        prompt: int | None = None
        completion: int | None = None
    else:
        prompt, completion = token_count(_get(usage, "prompt_tokens")), token_count(_get(usage, "completion_tokens"))
        if not found:
            found += [f"usage.{name}: {_shown(_get(usage, name))}" for name, count in
                      (("prompt_tokens", prompt), ("completion_tokens", completion)) if count is None]
    if not found:
        return prompt, completion, None
    return None, None, (f"the server's token usage is not a count of tokens ({'; '.join(found)[:300]}): this reply's "
                        "tokens and cost are unknown")


RAW_REPLY = "framejudge_reply"  # where a litellm reply carries the server's body (its `_hidden_params`)


def keep_reply(response: Any, answers: list[Any]) -> None:
    """Puts on a litellm reply what the usage check reads (`counts_of`) of the last answer its call
    read (httpx responses, `model_http.reply_bodies`) whose body is a JSON object: the reply's own
    (an error answer before it is not)."""
    import httpx

    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, dict):
        return
    for answer in reversed(answers):
        try:
            data = json.loads(answer.content)
        except (httpx.ResponseNotRead, ValueError):
            continue
        if isinstance(data, dict):
            hidden[RAW_REPLY] = counts_of(data)
            return


def counts_of(body: dict[str, Any]) -> dict[str, Any]:
    """Of a reply body, only what `raw_problems` reads: its shape's marker and its counts (a reply
    may be megabytes; its counts are a few numbers)."""
    for marker, where, required, optional in SHAPES:
        if marker in body:
            names = (where,) if where else required + optional
            return {marker: True, **{name: body[name] for name in names if name in body}}
    return {}


def raw_reply(response: Any) -> Any:
    """The server's reply body behind a reply, where at hand: the direct route's reply is the
    server's JSON itself (namespaces), a litellm reply's is kept in its `_hidden_params`."""
    from types import SimpleNamespace

    if isinstance(response, SimpleNamespace):
        return response
    hidden = getattr(response, "_hidden_params", None)
    return hidden.get(RAW_REPLY) if isinstance(hidden, dict) else None
