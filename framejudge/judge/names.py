"""Named things in an answer (proper names, places, brands) and whether two answers name the same thing.

A name is a run of capitalised words, joined by hyphens or by the small words of place names
("Palace of Westminster", "Rio de Janeiro"), with a leading "The"/"This" dropped. A capitalised
word that starts a sentence is a name only when it is not an ordinary English word, which is
looked up in Webster's Second International word list (the `english-words` package, loaded once,
lazily): "Sydney is the capital" names Sydney, "Bananas are rich in potassium" names nothing.

Two sets of names agree when some name of one and some name of the other share a distinctive
word: not a kind of place or thing ("Bridge", "Tower", "Park") nor a word such as "New" or
"North". So "the Brooklyn Bridge" does not agree with "the Golden Gate Bridge", "New Jersey"
does not agree with "New York", and "Big Ben" agrees with "the Elizabeth Tower, called Big Ben".
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

# Kinds of places and things, and words that qualify them: never what tells two names apart.
GENERIC = frozenset(
    "bridge tower building street st road rd avenue ave boulevard lane way park river lake sea ocean bay "
    "beach coast island islands mountain mountains mount mt hill valley canyon falls city town village "
    "state county province country republic kingdom station square plaza palace castle cathedral "
    "church chapel temple mosque abbey museum gallery hall house centre center market mall cafe "
    "restaurant hotel bar pub shop store airport stadium arena theatre theater garden gardens zoo "
    "university college school library hospital gate gates wall monument memorial statue fountain "
    "tunnel harbour harbor port pier lighthouse national royal grand great old new north south east "
    "west northern southern eastern western upper lower central saint san santa the of de du la le "
    "del della da di von van der and company co inc ltd corp "
    # peoples, periods and styles: "the ancient Greek Discobolus" and "the ancient Greek Venus de Milo"
    # are two statues
    "greek roman french italian spanish english british american chinese japanese korean indian "
    "egyptian persian mughal ottoman byzantine gothic baroque renaissance victorian georgian dutch "
    "german russian mexican african european asian ancient modern medieval classical imperial".split()
)
# Small words inside place names.
_JOIN = r"(?:of|de|du|la|le|del|della|da|di|von|van|der)"
# A capitalised word in any Latin script ("Zürich", "São"), or a brand that capitalises its second
# letter ("iPhone", "eBay"); letters and digits after it ("KLF03").
_UPPER = "".join(c for c in map(chr, range(0x250)) if c.isupper() and c.isalpha())
_WORD = rf"(?:[{_UPPER}][^\W_]+|[a-z][{_UPPER}][^\W_]*)"
_NAME = re.compile(rf"\b{_WORD}(?:(?:[- ]|\s{_JOIN}\s(?:the\s)?){_WORD})*\b")
# Leading words that are not part of a name ("The Golden Gate", "This Sony").
_LEADING = frozenset("the a an this that these those it its it's my our your their his her".split())
# Sentence openers missing from a 1934 dictionary.
_OPENERS = frozenset("okay ok yeah yep yup nope nah hmm hm wow hey hi alright uh um oops thanks sorry "
                     "sure nothing definitely absolutely unfortunately basically honestly".split())

_lock = threading.Lock()
_words: frozenset[str] | None = None


def _dictionary() -> frozenset[str]:
    """The word list, cased as printed: 'banana' (ordinary), 'Canberra' (a name)."""
    global _words
    with _lock:
        if _words is None:
            from english_words import get_english_words_set

            _words = frozenset(get_english_words_set(["web2"], alpha=True))
    return _words


@lru_cache(maxsize=8192)
def is_ordinary_word(word: str) -> bool:
    """Whether a word, or its singular or root form, is an ordinary (lower-case) English word."""
    w = word.lower()
    if w in _OPENERS:
        return True
    forms = {w}
    if w.endswith("ies"):
        forms.add(w[:-3] + "y")
    if w.endswith("es"):
        forms.add(w[:-2])
    if w.endswith("s"):
        forms.add(w[:-1])
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            root = w[: -len(suffix)]
            forms |= {root, root + "e", root[:-1] if len(root) > 2 and root[-1] == root[-2] else root}
    if w.endswith("ly") and len(w) > 4:
        forms.add(w[:-2])
    words = _dictionary()
    return any(f in words for f in forms)


def names(text: str) -> set[str]:
    """The names in a text, lower-cased ("the Golden Gate Bridge" -> {"golden gate bridge"})."""
    return {name for _, _, name in spans(text)}


def spans(text: str) -> list[tuple[int, int, str]]:
    """Each name in a text with where it stands: (start, end, the name lower-cased)."""
    out: list[tuple[int, int, str]] = []
    for m in _NAME.finditer(text):
        parts = m.group(0).split()
        before = text[: m.start()].rstrip()
        sentence_start = not before or before[-1] in ".!?:;\"'(" or before.endswith("--")
        while parts and parts[0].lower() in _LEADING:
            parts, sentence_start = parts[1:], False
        if not parts:
            continue
        if len(parts) == 1 and "-" not in parts[0] and (sentence_start or parts[0].lower() in _LEADING):
            if is_ordinary_word(parts[0]):
                continue
        out.append((m.end() - len(" ".join(parts)), m.end(), " ".join(parts).lower()))
    return out


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _parts(name: str) -> tuple[frozenset[str], frozenset[str]]:
    """A name's words and its distinctive words (not a kind of thing or a qualifier), singular."""
    raw = [w for w in re.split(r"[- ]", name) if w]
    return frozenset(map(_singular, raw)), frozenset(_singular(w) for w in raw if w not in GENERIC)


def same_thing(a: set[str], b: set[str]) -> bool:
    """Whether two sets of names share a name: the same name, a distinctive word in common (singular:
    "Labradors" and "Labrador" are one name), or, for a name made only of generic words ("Central
    Station"), all its words in a name of the other set or all of one of those in it. Linear in the
    names but for the generic-only ones."""
    if a & b:
        return True
    parts_a, parts_b = [_parts(x) for x in a], [_parts(y) for y in b]
    if {w for _, d in parts_a for w in d} & {w for _, d in parts_b for w in d}:
        return True
    generic_a = [ws for ws, d in parts_a if not d]
    generic_b = [ws for ws, d in parts_b if not d]
    return (any(wx <= wy or wy <= wx for wx in generic_a for wy, _ in parts_b)
            or any(wx <= wy or wy <= wx for wy in generic_b for wx, _ in parts_a))
