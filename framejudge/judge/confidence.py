"""How sure a judge is of each label of a verdict, from what the pipeline already measures.

Four methods, each giving a confidence in [0, 1] per label field (schema.LABEL_FIELDS):

- swap: 1.0 where grading B/A (mapped back) gave the same label, 0.5 where the orders disagreed;
- samples: the share of k samples that give the verdict's label;
- logprobs: the probability of the verdict's label among the field's options, from the
  probabilities of the label tokens (`label_probabilities`), averaged over the samples;
- blind: 1.0 where grading without the video gave another label (the frames mattered), 0.5 where
  it gave the same one.

A field's confidence is the lowest over the methods that measured it. A verdict the rubric's rules
decided, or one from a deterministic judge without token probabilities, has no informative
confidence (never 1.0).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import Category, Confidence, Judgement, Preference, judge_values

# where each label field's value sits in a judge's JSON reply
LABEL_PATHS: dict[str, tuple[str, ...]] = {
    "category_a": ("response_a", "category"),
    "category_b": ("response_b", "category"),
    "preference": ("preference",),
    "integrity_a": ("response_a", "integrity_violation"),
    "integrity_b": ("response_b", "integrity_violation"),
    "transcription_error": ("transcription_error",),
    "multiturn": ("multiturn",),
}
CATEGORY_OPTIONS = [c.value for c in Category]
PREFERENCE_OPTIONS = [p.value for p in Preference]
FLAG_OPTIONS = ["true", "false"]

LabelProbs = dict[str, dict[str, float]]  # label field -> option -> probability


def option_key(value: Any) -> str:
    """A label value as the option names of LabelProbs: a category or preference as itself, a flag
    as true or false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(getattr(value, "value", value))


def label_keys(judgement: Judgement) -> dict[str, str]:
    """The judgement's label fields that have a value, as option keys."""
    values = judge_values(judgement).model_dump()
    return {name: option_key(v) for name, v in values.items() if v is not None}


def field_options(reply: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every option of each label field a parsed reply holds (all categories, all preferences,
    true/false): the options a model without a grammar could have chosen."""
    out: dict[str, list[str]] = {}
    for name, path in LABEL_PATHS.items():
        node: Any = reply
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is None:
            continue
        out[name] = FLAG_OPTIONS if isinstance(node, bool) else (
            CATEGORY_OPTIONS if path[-1] == "category" else PREFERENCE_OPTIONS)
    return out


# ------------------------------------------------------------------ methods

def swap_confidence(first: Judgement, swapped: Judgement) -> dict[str, float]:
    """Per field: 1.0 where both orders gave the same label, 0.5 where they disagreed."""
    one, two = label_keys(first), label_keys(swapped)
    return {name: 1.0 if two.get(name) == value else 0.5 for name, value in one.items()}


def sample_confidence(samples: Sequence[Judgement], verdict: Judgement) -> dict[str, float]:
    """Per field: the share of the samples that give the verdict's label."""
    keys = [label_keys(s) for s in samples]
    return {name: sum(k.get(name) == value for k in keys) / len(keys)
            for name, value in label_keys(verdict).items()}


def blind_confidence(blind: Judgement, verdict: Judgement) -> dict[str, float]:
    """Per field: 1.0 where the answer without the video differs from the verdict, 0.5 where it is
    the same (the label did not need the video: it may be a guess from the text)."""
    without = label_keys(blind)
    return {name: 1.0 if without.get(name) != value else 0.5 for name, value in label_keys(verdict).items()}


def logprob_confidence(probs: Sequence[LabelProbs], verdict: Judgement) -> dict[str, float]:
    """Per field: the probability of the verdict's label, averaged over the calls that gave
    probabilities for that field."""
    out: dict[str, float] = {}
    for name, value in label_keys(verdict).items():
        seen = [p[name].get(value, 0.0) for p in probs if p.get(name)]
        if seen:
            out[name] = sum(seen) / len(seen)
    return out


def combine(methods: Mapping[str, Mapping[str, float]], note: str | None = None) -> Confidence:
    """Each field's confidence: the lowest over the methods that measured it. No method at all:
    not informative."""
    kept = {m: {f: round(min(1.0, max(0.0, c)), 6) for f, c in by.items()} for m, by in methods.items() if by}
    if not kept:
        return not_informative(note or "no method measured a confidence")
    fields: dict[str, float] = {}
    for by in kept.values():
        for name, c in by.items():
            fields[name] = min(c, fields.get(name, 1.0))
    return Confidence(informative=True, fields=fields, methods=kept, note=note)


def not_informative(why: str) -> Confidence:
    return Confidence(informative=False, note=why)


# ------------------------------------------------------------------ label token probabilities

@dataclass(frozen=True)
class TokenStep:
    """One generated token: its text and the probabilities of the candidates at its position
    (the chosen token among them)."""

    text: str
    top: Mapping[str, float]


def steps_from_logprobs(content: Sequence[Any]) -> list[TokenStep]:
    """OpenAI-style `choices[0].logprobs.content` (token, logprob, top_logprobs) as steps."""
    out = []
    for entry in content:
        get = entry.get if isinstance(entry, Mapping) else lambda k, e=entry: getattr(e, k, None)
        token = get("token")
        if token is None:
            return []
        top: dict[str, float] = {}
        for alt in get("top_logprobs") or []:
            alt_get = alt.get if isinstance(alt, Mapping) else lambda k, a=alt: getattr(a, k, None)
            alt_token, alt_logprob = alt_get("token"), alt_get("logprob")
            if alt_token is not None and alt_logprob is not None:
                top[alt_token] = math.exp(float(alt_logprob))
        logprob = get("logprob")
        if logprob is not None:
            top.setdefault(token, math.exp(float(logprob)))
        out.append(TokenStep(token, top))
    return out


def value_offsets(text: str) -> dict[tuple[str, ...], int]:
    """Where each value of the first JSON object in `text` begins (its path of keys -> the
    offset of its first character, the opening quote of a string); empty if it is not JSON."""
    decoder = json.JSONDecoder()
    out: dict[tuple[str, ...], int] = {}

    def ws(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def walk(i: int, path: tuple[str, ...]) -> int:
        i = ws(i)
        out[path] = i
        if text[i] == "{":
            i = ws(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                key, i = json.decoder.scanstring(text, ws(i) + 1)  # type: ignore[attr-defined]
                i = ws(i)
                if text[i] != ":":
                    raise ValueError("expected ':'")
                i = ws(walk(i + 1, (*path, key)))
                if text[i] == "}":
                    return i + 1
                if text[i] != ",":
                    raise ValueError("expected ','")
                i += 1
        if text[i] == "[":
            i, k = ws(i + 1), 0
            if text[i] == "]":
                return i + 1
            while True:
                i = ws(walk(i, (*path, str(k))))
                k += 1
                if text[i] == "]":
                    return i + 1
                if text[i] != ",":
                    raise ValueError("expected ','")
                i += 1
        _, end = decoder.raw_decode(text, i)
        return end

    start = text.find("{")
    if start < 0:
        return {}
    try:
        walk(start, ())
    except (ValueError, IndexError):
        return {}
    return out


def _fits(token: str, rest: str) -> bool:
    return rest.startswith(token) or token.startswith(rest)


def _option_probs(steps: Sequence[TokenStep], at: int, prefix: str, targets: dict[str, str]) -> dict[str, float]:
    """The probability of each option's text (`targets`, each after `prefix`) from the token at
    `at` on: along the generated tokens, every candidate that departs from them towards an option
    adds its probability to that option (a candidate that fits several options, such as "B" for B
    and Both, counts for the shortest: tokenizers spell the longer one with its own token), and
    the option the tokens spell gets what is left; normalised over the options."""
    full = {o: prefix + t for o, t in targets.items()}
    mass = dict.fromkeys(full, 0.0)
    alive = set(full)
    done, reach = "", 1.0
    for step in steps[at:]:
        for token, p in step.top.items():
            if token == step.text:
                continue
            fits = [o for o in alive if _fits(token, full[o][len(done):])]
            if fits:
                mass[min(fits, key=lambda o: len(full[o]))] += reach * p
        alive = {o for o in alive if _fits(step.text, full[o][len(done):])}
        done += step.text
        reach *= step.top.get(step.text, 0.0)
        for o in [o for o in alive if len(done) >= len(full[o])]:
            mass[o] += reach
            alive.discard(o)
        if not alive:
            break
    total = sum(mass.values())
    return {o: m / total for o, m in mass.items()} if total > 0 else {}


def label_probabilities(reply: str, steps: Sequence[TokenStep], options: Mapping[str, Sequence[str]]) -> LabelProbs:
    """Per label field of a JSON reply, the probability of each of its options (`options`: field
    -> option keys as `option_key` writes them), from the tokens that spelled the reply. Empty
    where the tokens do not spell the reply or it is not JSON."""
    if "".join(s.text for s in steps) != reply:
        return {}
    offsets = value_offsets(reply)
    starts, pos = [], 0
    for s in steps:
        starts.append(pos)
        pos += len(s.text)
    out: LabelProbs = {}
    for name, opts in options.items():
        where = offsets.get(LABEL_PATHS[name])
        if where is None or not opts:
            continue
        at = max(i for i, s in enumerate(starts) if s <= where)
        is_string = reply[where] == '"'
        targets = {o: json.dumps(o) if is_string else o for o in opts}
        probs = _option_probs(steps, at, reply[starts[at]:where], targets)
        if probs:
            out[name] = probs
    return out
