"""Corrected examples as a judge may see them: never those of the item being graded.

Every judge goes through `corrections_for` (the prompt's "Corrected examples" section, the
reference judge's precedents), so grading an item that is itself a corrected example never
shows that item its own answer, whichever turn of it is graded.
"""

from __future__ import annotations

from .model import Correction, Rubric
from .rules import normalize


def corrections_for(rubric: Rubric, item_id: str | None) -> list[Correction]:
    """The rubric's corrected examples that may be shown when grading `item_id` (all of them for
    None: the rubric on its own, as `framejudge rubrics show` prints it)."""
    return [c for c in rubric.corrections if c.item_id != item_id]


def _key(text: str) -> str:
    return normalize(text).casefold()


def precedent(rubric: Rubric, item_id: str, question: str, response: str) -> tuple[Correction, str] | None:
    """A corrected example from another item with the same question and this response (after
    normalising case, quotes and spaces), and which of its responses matched ("a" or "b"), where
    the correction gives that response's category."""
    q, r = _key(question), _key(response)
    for c in corrections_for(rubric, item_id):
        if _key(c.question) != q:
            continue
        if c.category_a is not None and _key(c.response_a) == r:
            return c, "a"
        if c.category_b is not None and c.response_b is not None and _key(c.response_b) == r:
            return c, "b"
    return None

