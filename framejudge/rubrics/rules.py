"""Deterministic rules any judge applies before (and after) asking a model.

`error_message_match` decides the Error message category from the response text
alone; `check_judgement` lists every way a judgement breaks the rubric, in words
a model can act on when it is re-asked; `tie_choice` is the rubric's choice for a
pair no criterion separates (its `ties`: Both for two Successful answers, Neither
for two failing ones). The checks that need the rubric (criterion ids, error
strings, the tie convention) run only when it is in the validation context, so a
verdict written under an older convention still reads back.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, Any

from ..schema import Category, Preference, judgement_problems, pair_problems

if TYPE_CHECKING:
    from ..schema import Judgement
    from .model import Rubric

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201b": "'", "\u2032": "'", "`": "'",
                         "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"'})
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Unicode-normalise, straighten quotes, collapse whitespace, drop wrapping quotes."""
    t = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    t = _SPACE.sub(" ", t).strip()
    while len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1].strip()
    return t


def error_message_match(response: str, rubric: Rubric) -> str | None:
    """The error string the response is, or ends with (the cut-off), else None."""
    if rubric.error_messages is None:
        return None
    text = normalize(response).casefold()
    for exact in rubric.error_messages.exact:
        if text == normalize(exact).casefold():
            return exact
    suffix = rubric.error_messages.cutoff_suffix
    if suffix and text.endswith(normalize(suffix).casefold()):
        return suffix
    return None


def tie_choice(rubric: Rubric | None, cat_a: Category, cat_b: Category) -> Preference:
    """The choice for two answers of these categories that no criterion separates: the rubric's
    `ties` (video-qa: Both for two Successful answers, Neither for two that are not); without a
    rubric or `ties`, Both when the categories match, else Neither."""
    if rubric is None or rubric.preference is None:
        return Preference.both if cat_a == cat_b else Preference.neither
    return rubric.preference.tie(cat_a, cat_b)


def _tie_problem(rubric: Rubric, pref: Preference, ca: Category, cb: Category) -> str | None:
    """Why a Both or Neither breaks the rubric's tie convention (None: it keeps it)."""
    section = rubric.preference
    if section is None or section.ties is None or pref not in (Preference.both, Preference.neither):
        return None
    succ = Category.successful
    if (ca == succ) != (cb == succ) or (pref == Preference.both and ca != cb):
        return None  # the category decides, or Both across categories: reported as such
    expected = section.tie(ca, cb)
    if pref == expected:
        return None
    both_ok = ca == succ
    words = section.choice(expected).label
    return (f"{pref.value} is not the choice for two {'Successful' if both_ok else 'failing'} answers (A is "
            f"{ca.value}, B is {cb.value}): when no criterion separates them the preference is {expected.value}"
            + (f" ({words})" if words else "") + "; otherwise give A or B and the criterion that separates them")


def _error_message_problems(categories: dict[str, Category | None], rubric: Rubric | None,
                            responses: dict[str, str | None]) -> list[str]:
    """The rubric's error-string rule for each response whose category and text are known."""
    problems: list[str] = []
    if rubric is None:
        return problems
    for side, category in categories.items():
        text = responses.get(side)
        if category is None or text is None:
            continue
        match = error_message_match(text, rubric)
        label = side.upper()
        if match and category != Category.error_message:
            problems.append(
                f"response {label} is the fixed error string {match!r}, so its category must be "
                "Error message"
            )
        if not match and category == Category.error_message:
            problems.append(
                f"response {label} is not one of the fixed error strings, so it cannot be Error "
                "message (a refusal that shows understanding is Missing)"
            )
    return problems


def check_labels(values: Any, rubric: Rubric | None, responses: dict[str, str | None]) -> list[str]:
    """Every way a set of labels (a LabelValues; a field left empty is not rated) breaks the rubric's
    rules for verdicts, as `check_judgement` words them: an error string and its category, a
    Successful response that must win, Both across categories, the tie convention, and labels for
    a response B the turn does not have. A rule whose fields are not all rated is not checked."""
    problems: list[str] = []
    ca, cb, pref = values.category_a, values.category_b, values.preference
    if "b" in responses and responses["b"] is None:
        given = [f for f in ("category_b", "preference", "integrity_b") if getattr(values, f) is not None]
        if given:
            problems.append(f"there is only one response, so give no {', '.join(given)}")
    if ca is not None and cb is not None and pref is not None:
        problems += pair_problems(ca, cb, pref)
        tie = _tie_problem(rubric, pref, ca, cb) if rubric is not None else None
        if tie:
            problems.append(tie)
    problems += _error_message_problems({"a": ca, "b": cb}, rubric, responses)
    return problems


def rubric_problems(j: Judgement, rubric: Rubric, responses: dict[str, str | None]) -> list[str]:
    """Every way a judgement breaks this rubric's own rules: its tie convention, its criterion ids,
    its error strings (for the responses whose text is given). Run by Judgement's validation when
    the rubric is in its context (Rubric.judgement_problems)."""
    problems: list[str] = []
    a, b = j.response_a, j.response_b
    if b is not None and j.preference is not None:
        tie = _tie_problem(rubric, j.preference, a.category, b.category)
        if tie:
            problems.append(tie)
    if j.deciding_criterion and rubric.preference is not None:
        ids = {c.id for c in rubric.preference.criteria} | {"category"}
        if j.deciding_criterion not in ids:
            problems.append(
                f"unknown deciding criterion {j.deciding_criterion!r}; use one of {sorted(ids)}"
            )
    problems += _error_message_problems({"a": a.category, "b": b.category if b is not None else None}, rubric,
                                        responses)
    return problems


def check_judgement(j: Judgement, context: dict[str, Any]) -> list[str]:
    """Every way a judgement breaks the rules: those of any rubric, and the rubric's own when
    `context` holds one (as Judgement's validation reports them)."""
    rubric = context.get("rubric")
    return judgement_problems(j) + (rubric_problems(j, rubric, context.get("responses") or {})
                                    if rubric is not None else [])
