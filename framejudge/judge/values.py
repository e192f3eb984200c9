"""Whole values in answers, golden responses and text read off the screen, compared value to value.

`values(text)` finds the typed values a text states, each as a whole:

- times: `06:41:49`, `6:41 PM`, `9 PM`, `21:00`, `9 o'clock`, `noon` (to the minute, and to the
  second where seconds are written; `6:41` without am/pm may mean 06:41 or 18:41, `06:41` and
  `21:00` are 24-hour times);
- dates: `2020/10/19`, `19.10.2020`, `10/19/2020`, `October 19, 2020`, `19 Oct`;
- phone numbers (Google's libphonenumber, through `phonenumbers`): `555-0199`, `(212) 555-0143`;
- prices with their currency: `$3.49`, `3,49 €`, `3.49 dollars`;
- codes mixing letters and digits: `B32`, `KLF03`, `AB12 CDE`;
- numbers and counts, with what they count or label: `2 strollers`, `Room 404`, `50 km/h`, `1889`
  (a year), and number words in English to the millions, and in French, Spanish, German, Italian,
  Portuguese and Dutch where the answer is in one of them (`text2num`): `fifty`, `two hundred and
  twelve`, `cinquante`.

Each value knows whether it is stated as not so (`negated`: "30, not 50", "it isn't 50") and whether
it is one of several offered as alternatives (`alternative`: "30, 50 or 70"). `agree(a, b)` says
whether two values mean the same thing (a time with seconds agrees with the same time without
them; a number with a price of that amount; a count of strollers never with a count of dogs), and
`compatible(a, b)` whether they answer the same thing at all (the same kind, and the same noun
where both name one). Every number any judge rule reads comes from here.

`polarity(text)` is the yes/no an answer starts with, in English and a few other languages.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

TIME, DATE, PHONE, PRICE, CODE, NUMBER, PAIR = "time", "date", "phone", "price", "code", "number", "pair"
KINDS = (TIME, DATE, PHONE, PRICE, CODE, NUMBER, PAIR)


@dataclass(frozen=True)
class Value:
    """One value a text states, as a whole."""

    kind: str
    text: str  # as written (number words as digits)
    start: int
    end: int
    meanings: frozenset = field(compare=False)  # what it can mean (see `agree`)
    unit: str | None = None  # number: what it counts or labels ("stroller", "room", "km/h", "year")
    negated: bool = False  # stated as not so
    alternative: bool = False  # offered as one of several ("30, 50 or 70")


# ----------------------------------------------------------------------------- normalising

_DASHES = str.maketrans({"\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2010": "-", "\u2011": "-"})


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_DASHES).replace("\u2019", "'")


_LANG_HINTS = {  # small words, and the words for one to ten, that mark a language
    "fr": re.compile(r"\b(le|la|les|est|il|elle|une|des|c'est|sont|pas|oui|non|heures?|avec|voici|y a|un|deux|trois|"
                     r"quatre|cinq|six|sept|huit|neuf|dix)\b", re.I),
    "es": re.compile(r"\b(el|los|las|está|son|una|hay|sí|pero|horas?|muy|uno|dos|tres|cuatro|cinco|seis|siete|"
                     r"ocho|nueve|diez)\b", re.I),
    "de": re.compile(r"\b(der|die|das|ist|sind|ein|eine|nicht|ja|nein|uhr|und|mit|auf|eins|zwei|drei|vier|fünf|"
                     r"sechs|sieben|acht|neun|zehn)\b", re.I),
    "it": re.compile(r"\b(il|gli|è|sono|una|non|ore|uno|due|tre|quattro|cinque|sei|sette|otto|nove|dieci)\b", re.I),
    "pt": re.compile(r"\b(os|é|são|uma|não|sim|horas?|um|dois|três|quatro|cinco|seis|sete|oito|nove|dez)\b", re.I),
    "nl": re.compile(r"\b(het|zijn|een|niet|uur|twee|drie|vier|vijf|zes|zeven|acht|negen|tien)\b", re.I),
}
_ENGLISH = re.compile(r"\b(the|is|are|it|this|that|and|of|an|says|there|you|they|was|were)\b", re.I)


@lru_cache(maxsize=4096)
def language(text: str) -> str:
    """"en", or the language ("fr", "es", "de", "it", "pt", "nl") whose small words the text has
    clearly more of than English ones."""
    english = len(_ENGLISH.findall(text))
    best = max(_LANG_HINTS, key=lambda k: len(_LANG_HINTS[k].findall(text)))
    theirs = len(_LANG_HINTS[best].findall(text))
    return best if theirs > english and (theirs > 1 or english == 0) else "en"


@lru_cache(maxsize=4096)
def digits_for_words(text: str) -> str:
    """Number words as digits ("fifty" -> "50", "two hundred and twelve" -> "212"); the text's
    language guessed from its small words (English unless another language's are clearly more)."""
    try:
        from text_to_num import alpha2digit
    except ImportError:  # pragma: no cover - a main dependency; kept readable without it
        return text
    lang = language(text)
    try:
        # English small counts ("one stroller") are read with their noun below; elsewhere all are digits
        out = alpha2digit(text, lang) if lang == "en" else alpha2digit(text, lang, threshold=0)
    except Exception:
        return text
    return out


_SMALL = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "single": 1, "dozen": 12,
          "a dozen": 12, "a couple of": 2, "a pair of": 2, "no": 0, "none": 0}
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
             "ninth": 9, "tenth": 10}

# ----------------------------------------------------------------------------- patterns

_MONTHS = {m: i for i, names in enumerate(
    ["jan january", "feb february", "mar march", "apr april", "may", "jun june", "jul july", "aug august",
     "sep sept september", "oct october", "nov november", "dec december"], 1) for m in names.split()}
_MONTH = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_YMD = re.compile(r"(?<![\d.:/-])(?P<y>(?:1[6-9]|2[0-1])\d\d)[/.-](?P<m>\d{1,2})[/.-](?P<d>\d{1,2})(?![\d/.-]\d)")
_DATE_XYZ = re.compile(r"(?<![\d.:/-])(?P<a>\d{1,2})[/.-](?P<b>\d{1,2})[/.-](?P<y>(?:1[6-9]|2[0-1])?\d\d)(?![\d/.-]\d)")
_DATE_MDY = re.compile(rf"\b{_MONTH}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y>(?:1[6-9]|2[0-1])\d\d))?\b", re.I)
_DATE_DMY = re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<y>(?:1[6-9]|2[0-1])\d\d))?\b", re.I)

_CLOCK = re.compile(r"(?<![\d.:/])(?P<h>\d{1,2})\s?[:h.]\s?(?P<m>[0-5]\d)(?::(?P<s>[0-5]\d))?"
                    r"(?:\s*(?P<ap>[ap])\.?\s?m\b\.?)?(?![\d:/]|\.\d)", re.I)
_HOUR_AP = re.compile(r"(?<![\d.:/])(?P<h>\d{1,2})\s*(?P<ap>[ap])\.?\s?m\b\.?", re.I)
_OCLOCK = re.compile(r"(?<![\d.:/])(?P<h>\d{1,2})\s*o'?\s?clock\b", re.I)
_DAYPART = re.compile(r"(?<![\d.:/])(?P<h>\d{1,2})(?:[:.](?P<m>[0-5]\d))?\s+(?:in the (?P<part>morning|afternoon|evening)|"
                      r"(?P<night>at night|tonight))\b", re.I)
_HALF_PAST = re.compile(r"\b(?P<q>half|quarter|\d{1,2}(?=\s+(?:minutes\s+)?(?:past|after)|\s+minutes\s+(?:to|before)))\s+"
                        r"(?:minutes\s+)?(?P<dir>past|after|to|before)\s+(?P<h>\d{1,2})\b"
                        r"(?!\s*(?:%|[a-z]{2,}\b(?<!am)(?<!pm)))", re.I)
# a bare hour where only a time can be meant: "closes at 3", "open 7 to 3", "until 11"
_AT_HOUR = re.compile(r"\b(?:at|until|till|til|by|from|opens?|closes?|opening|closing|open|closed)\s+(?:around\s+|about\s+)?"
                      r"(?P<h>\d{1,2})(?!\d)(?:\s*(?:-|to|till|until)\s*(?P<h2>\d{1,2})(?!\d))?(?!\s*(?:[%$£€.,:]\d|[a-z°]))",
                      re.I)
_NAMED_TIME = re.compile(r"\b(?P<w>noon|midday|midnight)\b", re.I)

_CURRENCY_SIGNS = {"$": "USD", "US$": "USD", "£": "GBP", "€": "EUR", "¥": "JPY", "₹": "INR", "₩": "KRW",
                   "CHF": "CHF", "C$": "CAD", "A$": "AUD", "R$": "BRL", "kr": "SEK"}
_CURRENCY_WORDS = {"dollar": "USD", "dollars": "USD", "usd": "USD", "bucks": "USD", "buck": "USD",
                   "pound": "GBP", "pounds": "GBP", "gbp": "GBP", "quid": "GBP", "euro": "EUR", "euros": "EUR",
                   "eur": "EUR", "yen": "JPY", "jpy": "JPY", "rupees": "INR", "francs": "CHF", "chf": "CHF",
                   "cents": "cent", "cent": "cent", "p": "pence", "pence": "pence"}
_AMOUNT = r"(?P<amt>\d{1,3}(?:[,.\s]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?)"
_DOLLARS_AND_CENTS = re.compile(r"(?<![\d.,])(?P<whole>\d+)\s(?P<cur>dollars?|euros?|pounds?|bucks?)\s(?:and\s)?"
                                r"(?P<cents>\d{1,2})\s(?:cents?|pence|p)\b", re.I)
_PRICE_BEFORE = re.compile(r"(?P<cur>US\$|C\$|A\$|R\$|[$£€¥₹₩]|\b(?:EUR|USD|GBP|CHF|JPY|CAD|AUD)\b)\s?" + _AMOUNT
                           + r"(?!\d|[.,]\d)")
# a multi-buy: "2 FOR €20", "3 for 10 euros", "2FOR20" (read off a tag): the price of several
_DEAL = re.compile(r"(?<![\w.,])(?P<n>\d{1,2}|two|three|four|five|six|ten)\s?for\s?(?P<cur1>US\$|C\$|A\$|R\$|[$£€¥₹₩]|(?:EUR|USD|GBP|CHF)\b)?\s?"
                   + _AMOUNT + r"(?:\s?(?P<cur2>[$£€¥₹₩]|euros?|dollars?|pounds?|bucks|quid|EUR|USD|GBP|CHF)(?!\w))?"
                   r"(?![\d%]|[.,]\d)", re.I)
_PRICE_AFTER = re.compile(r"(?<![\d.,])" + _AMOUNT + r"\s?(?P<cur>[$£€¥₹₩]|"
                          + "|".join(sorted(_CURRENCY_WORDS, key=len, reverse=True)) + r")(?![\w])", re.I)

# codes: letters and digits, joined by hyphens ("B32", "7HX-429", "COVID-19"), and a spoken or printed
# tail of digits or capitals after a space ("7hx 429", "AB12 CDE")
_CODE = re.compile(r"(?<![\w-])(?P<c>[A-Za-z0-9]{1,12}(?:-[A-Za-z0-9]{1,8}){0,3})(?P<tail>\s(?:\d{2,4}|[A-Z]{2,3})(?![\w:-]|[.,]\d))?(?![\w-])")
_PLATE = re.compile(r"(?<![\w])(?P<c>[A-Z]{1,3}\d{1,4}\s[A-Z]{1,3}|[A-Z]{2}\d{2}\s[A-Z]{3}|\d{1,3}\s?[A-Z]{3}\s?\d{1,4})(?![\w])")
_NUMBER = re.compile(r"(?<![\w.,])(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)(?:st|nd|rd|th|'?s)?(?![\w]|[.,]\d)")
# two numbers in an order that matters: a score ("3-1", "3 to 1"), a range ("9-17")
_PAIR = re.compile(r"(?<![\w.,:/-])(?P<a>\d{1,3})\s?(?:-|\sto\s)\s?(?P<b>\d{1,3})(?![\w:/]|[.,-]\d)")
_SMALL_WORD = re.compile(r"\b(?P<w>a dozen|a couple of|a pair of|zero|one|two|three|four|five|six|seven|eight|nine|"
                         r"ten|eleven|twelve|single|dozen|no|none)\b", re.I)
_ORDINAL_WORD = re.compile(r"\b(?P<w>" + "|".join(_ORDINALS) + r")\b", re.I)

# nouns a number labels when they come before it ("Room 404", "Gate 12", "Platform 4")
LABELS = frozenset(
    "room gate platform route exit page floor level bus line track channel aisle row seat table door suite "
    "apartment flat unit building terminal stop bay pump lane station train flight number no chapter verse "
    "episode season model version step car coach carriage locker box lot pier dock berth ward".split())
_UNIT_ALIASES = {
    "km/h": "km/h", "kmh": "km/h", "kph": "km/h", "mph": "mph", "km": "km", "kilometres": "km", "kilometers": "km",
    "kilometre": "km", "kilometer": "km", "m": "metre", "metres": "metre", "meters": "metre", "metre": "metre",
    "meter": "metre", "ft": "foot", "feet": "foot", "foot": "foot", "mi": "mile", "miles": "mile", "mile": "mile",
    "%": "%", "percent": "%", "per": None, "kg": "kg", "kilos": "kg", "kilograms": "kg", "g": "gram", "grams": "gram",
    "mg": "mg", "ml": "ml", "l": "litre", "litres": "litre", "liters": "litre", "cal": "calorie", "kcal": "calorie",
    "calories": "calorie", "calorie": "calorie", "°c": "°c", "°f": "°f", "degrees": "degree", "years": "year-count",
    "year": "year-count", "yrs": "year-count", "ad": "year", "bc": "year-bc", "bce": "year-bc", "ce": "year",
    "hours": "hour", "hour": "hour", "hrs": "hour", "h": "hour", "minutes": "minute", "minute": "minute",
    "mins": "minute", "min": "minute", "seconds": "second", "second": "second", "secs": "second", "s": "second",
    "days": "day", "day": "day", "weeks": "week", "months": "month", "th": None, "st": None, "nd": None, "rd": None,
    "lb": "lb", "lbs": "lb", "oz": "oz", "ounces": "oz", "cm": "cm", "mm": "mm", "centimetres": "cm",
    "centimeters": "cm", "millimetres": "mm", "millimeters": "mm", "inches": "inch", "inch": "inch", "yards": "yard",
    "milliliters": "ml", "millilitres": "ml", "kilometres/hour": "km/h", "celsius": "°c", "fahrenheit": "°f",
    "gallons": "gallon", "gallon": "gallon", "gal": "gallon", "pints": "pint", "pint": "pint", "quarts": "quart",
    "quart": "quart", "litre": "litre", "liter": "litre",
}
# commensurable units: (dimension, how many of the dimension's base unit one of them is)
_DIMENSIONS = {
    "km": ("length", 1000.0), "metre": ("length", 1.0), "cm": ("length", 0.01), "mm": ("length", 0.001),
    "mile": ("length", 1609.344), "foot": ("length", 0.3048), "inch": ("length", 0.0254), "yard": ("length", 0.9144),
    "km/h": ("speed", 1.0), "mph": ("speed", 1.609344),
    "kg": ("mass", 1000.0), "gram": ("mass", 1.0), "mg": ("mass", 0.001), "lb": ("mass", 453.59237),
    "oz": ("mass", 28.349523), "litre": ("volume", 1000.0), "ml": ("volume", 1.0),
    "gallon": ("volume", 3785.411784), "pint": ("volume", 473.176473), "quart": ("volume", 946.352946),  # US
    "second": ("duration", 1.0), "minute": ("duration", 60.0), "hour": ("duration", 3600.0),
    "day": ("duration", 86400.0), "week": ("duration", 604800.0),
    "°c": ("temperature", 1.0), "°f": ("temperature", 1.0), "degree": ("temperature", 1.0),
}
# "at most 6", "no more than 6", "max 6": a statement of 6, not a denial of it
# (spaces optional: OCR drops them, "NO MORETHAN 6")
_BOUND = re.compile(r"\b(?:no|not)\s*(?:more|less|fewer|greater|later|earlier|longer|higher|lower)\s*than\b|"
                    r"\bnot\s+(?:to\s+)?exceed(?:ing)?\b", re.I)
_FILLER = frozenset("of about around roughly approximately nearly almost over under just only some "
                    "more than less fewer exactly at least most big small large little new old other tall "
                    "red orange yellow green blue purple pink brown black white grey gray".split())
_NOT_A_UNIT = frozenset("and or but to from is are was were be it its this that these those in on at by for with as "
                        "so if not no per than then the a an of each every while which who what where when".split())

_NEGATORS = re.compile(r"\b(not|never|no|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|can't|cannot|won't|"
                       r"nor|neither|rather than|instead of|n't)\b|n't\b", re.I)
_CLAUSE = re.compile(r"[.;:!?,()]|\bbut\b|\bhowever\b|\bwhile\b|\bwhereas\b|\bit's\b|\bit is\b|\bit says\b", re.I)
_OR_GLUE = re.compile(r"^(?:\s*[,?.]\s*|\s*/\s*|\s+)?(?:or|either|maybe|perhaps|possibly|probably|even|,|\s)*$", re.I)


# ----------------------------------------------------------------------------- finding

def _minutes(h: int, m: int, ap: str | None, written_h: str) -> frozenset[int] | None:
    if m > 59:
        return None
    if ap:
        if not 1 <= h <= 12:
            return None
        return frozenset({(h % 12 + (12 if ap.lower() == "p" else 0)) * 60 + m})
    if h > 23:
        return None
    if h == 0 or h > 12 or (len(written_h) == 2 and written_h.startswith("0")):
        return frozenset({h * 60 + m})  # 24-hour: "06:41", "21:00"
    return frozenset({h % 12 * 60 + m, (h % 12 + 12) * 60 + m})  # "6:41": morning or evening




def _year(y: str | None) -> int | None:
    if not y:
        return None
    n = int(y)
    return n + 2000 if len(y) == 2 and n < 70 else n + 1900 if len(y) == 2 else n


def _date_meanings(y: int | None, m: int | None, d: int | None) -> set[tuple]:
    if m is not None and not 1 <= m <= 12:
        return set()
    if d is not None and not 1 <= d <= 31:
        return set()
    return {(y, m, d)}


def _unit_after(text: str, end: int) -> str | None:
    """The noun right after a number ("2 strollers" -> "stroller", "50 km/h" -> "km/h")."""
    m = re.match(r"\s?(%|°\s?[cf]\b|km/h|(?:kilomet(?:er|re)s?|miles?)\s+(?:per|an|a)\s+hour\b|"
                 r"degrees?\s+(?:celsius|centigrade|fahrenheit|c|f)\b|[a-z][a-z'-]*)", text[end:end + 40], re.I)
    if not m:
        return None
    word = m.group(1).lower().replace(" ", "")
    if re.match(r"(?:kilomet|miles?)", word) and word.endswith("hour"):
        return "km/h" if word.startswith("kilo") else "mph"
    if word.startswith("degree") and len(word) > 7:
        return "°f" if word.rstrip("s").endswith(("f", "fahrenheit")) else "°c"
    if word in _UNIT_ALIASES:
        return _UNIT_ALIASES[word]
    if word in _FILLER:  # "3 red cars": one adjective, then the noun
        nxt = re.match(r"\s?[a-z'-]+\s+([a-z][a-z'-]*)", text[end:end + 40], re.I)
        word = nxt.group(1).lower() if nxt else ""
        if not word or word in _FILLER:
            return None
    if word in _NOT_A_UNIT or len(word) < 2:
        return None
    return _singular(word)


def _label_before(text: str, start: int) -> str | None:
    m = re.search(r"\b([a-z]+)\.?\s?#?\s?$", text[max(0, start - 16):start], re.I)
    if m and m.group(1).lower() in LABELS:
        return _singular(m.group(1).lower())
    return None


def _singular(word: str) -> str:
    for suffix, repl in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("xes", "x"), ("s", "")):
        if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)] + repl
    return word


def _amount(text: str) -> float | None:
    t = text.replace(" ", "")
    if re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+", t):  # thousands separators only
        return float(re.sub(r"[.,]", "", t))
    m = re.fullmatch(r"(\d{1,3}(?:[.,]\d{3})*|\d+)(?:[.,](\d{1,2}))?", t)
    if not m:
        return None
    whole = float(re.sub(r"[.,]", "", m.group(1)))
    frac = m.group(2)
    return round(whole + (int(frac) / 10 ** len(frac) if frac else 0.0), 2)


def _number_value(text: str) -> float | str:
    if re.fullmatch(r"\d+,\d{1,2}", text):  # a decimal comma: "12,50", "2,5"
        text = text.replace(",", ".")
    t = text.replace(",", "")
    if len(t) > 30:
        return t  # thousands of digits stand for themselves
    try:
        return float(t)
    except ValueError:
        return t


def canonical(text: str) -> str:
    """The text as `values` reads it (number words as digits, dashes plain): the values' `start` and
    `end` are positions in it."""
    return digits_for_words(_plain(text))


@lru_cache(maxsize=8192)
def values(text: str) -> tuple[Value, ...]:
    """Every typed value the text states, in order, each marked negated or alternative; positions are
    in `canonical(text)`."""
    t = canonical(text)
    found: list[Value] = []
    taken = bytearray(len(t) + 1)  # characters already part of a value: each value is found once, whole

    def add(kind: str, m_start: int, m_end: int, meanings: Iterable, unit: str | None = None) -> None:
        meanings = frozenset(meanings)
        if not meanings or any(taken[m_start:m_end]):
            return
        taken[m_start:m_end] = b"\x01" * (m_end - m_start)
        found.append(Value(kind, t[m_start:m_end].strip(), m_start, m_end, meanings, unit))

    for m in _DATE_YMD.finditer(t):
        add(DATE, m.start(), m.end(), _date_meanings(int(m["y"]), int(m["m"]), int(m["d"])))
    for m in _DATE_XYZ.finditer(t):
        y, a, b = _year(m["y"]), int(m["a"]), int(m["b"])
        add(DATE, m.start(), m.end(), _date_meanings(y, b, a) | _date_meanings(y, a, b))  # d/m/y or m/d/y
    for rx in (_DATE_MDY, _DATE_DMY):
        for m in rx.finditer(t):
            month = _MONTHS[m["mon"].lower().rstrip(".")]
            if m["mon"].lower() == "may" and not m["y"] and rx is _DATE_MDY and not m["mon"][0].isupper():
                continue  # "may 3" in running text is a verb
            add(DATE, m.start(), m.end(), _date_meanings(_year(m["y"]), month, int(m["d"])))
    for m in _CLOCK.finditer(t):
        if m.group(0).count(".") and not m["ap"] and not re.search(r"\b(at|until|till|from|to|by)\s*$", t[:m.start()], re.I):
            continue  # "3.49" is a number, "at 9.30" a time
        minutes = _minutes(int(m["h"]), int(m["m"]), m["ap"], m["h"])
        if minutes:
            sec = int(m["s"]) if m["s"] else None
            add(TIME, m.start(), m.end(), {(x, sec) for x in minutes})
    for rx in (_HOUR_AP, _OCLOCK):
        for m in rx.finditer(t):
            ap = m.groupdict().get("ap")
            minutes = _minutes(int(m["h"]), 0, ap, m["h"]) if ap else _minutes(int(m["h"]), 0, None, "x")
            if minutes:
                add(TIME, m.start(), m.end(), {(x, None) for x in minutes})
    for m in _DAYPART.finditer(t):
        h, mins = int(m["h"]), int(m["m"] or 0)
        if 1 <= h <= 12:
            pm = m["night"] and h != 12 and h >= 6 or m["part"] and m["part"].lower() != "morning" and h != 12
            add(TIME, m.start(), m.end(), {((h % 12 + (12 if pm else 0)) * 60 + mins, None)})
    for m in _HALF_PAST.finditer(t):
        h = int(m["h"])
        q = {"half": 30, "quarter": 15}.get(m["q"].lower()) or int(m["q"])
        back = m["dir"].lower() in ("to", "before")
        if 1 <= h <= 12 and q < 60 and not (back and q == 30):
            base = (h % 12) * 60 + (-q if back else q)
            add(TIME, m.start(), m.end(), {(base % 720, None), ((base % 720) + 720, None)})
    for m in _AT_HOUR.finditer(t):
        for g in ("h", "h2"):
            if m[g] and 1 <= int(m[g]) <= 24:
                minutes = _minutes(int(m[g]), 0, None, "x" if int(m[g]) <= 12 else m[g])
                if minutes:
                    add(TIME, m.start(g), m.end(g), {(x, None) for x in minutes}, BARE_HOUR)
    for m in _NAMED_TIME.finditer(t):
        add(TIME, m.start(), m.end(), {(0 if m["w"].lower() == "midnight" else 720, None)})
    for m in _DEAL.finditer(t):
        amount, cur = _amount(m["amt"]), m["cur1"] or m["cur2"]
        n = int(m["n"]) if m["n"].isdigit() else _SMALL[m["n"].lower()]
        if amount is None or not 2 <= n <= 20 or (cur is None and re.match(r"\s?[a-z]", t[m.end():], re.I)):
            continue  # "2 for 20 minutes" is no price
        code = (_CURRENCY_SIGNS.get(cur.strip()) or _CURRENCY_WORDS.get(cur.strip().lower())) if cur else None
        add(PRICE, m.start(), m.end(), {(code, amount)}, f"{DEAL} {n}")
    for m in _DOLLARS_AND_CENTS.finditer(t):
        code = _CURRENCY_WORDS.get(m["cur"].lower())
        add(PRICE, m.start(), m.end(), {(code, round(int(m["whole"]) + int(m["cents"]) / 100, 2))})
    for m in _PRICE_BEFORE.finditer(t):
        amount = _amount(m["amt"])
        if amount is not None:
            add(PRICE, m.start(), m.end(), {(_CURRENCY_SIGNS.get(m["cur"], m["cur"]), amount)})
    for m in _PRICE_AFTER.finditer(t):
        amount = _amount(m["amt"])
        cur = m["cur"]
        code = _CURRENCY_SIGNS.get(cur) or _CURRENCY_WORDS.get(cur.lower())
        if amount is None or code is None or (code == "pence" and cur == "p" and not re.match(r"\d", m["amt"])):
            continue
        if code in ("cent", "pence"):
            code, amount = None, round(amount / 100, 2)
        add(PRICE, m.start(), m.end(), {(code, amount)})
    for v in _phones(t):
        add(PHONE, v[0], v[1], {v[2]})
    for m in _PLATE.finditer(t):
        add(CODE, m.start("c"), m.end("c"), {re.sub(r"[\s-]", "", m["c"]).upper()})
    for m in _CODE.finditer(t):
        head = m["c"]
        if not (re.search(r"\d", head) and re.search(r"[A-Za-z]", head)):
            continue
        code = re.sub(r"[\s-]", "", head + (m["tail"] or "")).upper()
        if re.fullmatch(r"\d+(ST|ND|RD|TH|AM|PM|H|M|S|K|KM|KG|G|MG|ML|L|P|MPH|KMH|KPH|CM|MM|FT|V|W|X|D|Y|MIN|HR|HRS)", code) \
                or len(code) > 16:
            continue  # "50kg", "3pm", "4x" are amounts, not codes
        add(CODE, m.start("c"), m.end("tail") if m["tail"] else m.end("c"), {code})
    for m in _PAIR.finditer(t):
        a, b = int(m["a"]), int(m["b"])
        add(PAIR, m.start(), m.end(), {(a, b)}, _unit_after(t, m.end()))
    for m in _NUMBER.finditer(t):
        unit = _unit_after(t, m.end()) or _label_before(t, m.start())
        value = _number_value(m["n"])
        start = m.start()
        if unit == "version":  # "2.10" is not "2.1": a version is its digits as written
            add(NUMBER, m.start(), m.end(), {m["n"]}, unit)
            continue
        sign = re.search(r"(?:(?<![\w.,)])[-]|\bminus\s+|\bnegative\s+)$", t[max(0, start - 10):start], re.I)
        if sign and isinstance(value, float):
            value, start = -value, start - len(sign.group(0))
        if isinstance(value, float) and re.fullmatch(r"\d+\.\d*0", m["n"]):
            add(NUMBER, start, m.end(), {value, m["n"]}, unit)  # "3.10" may be a version's "3.10"
            continue
        if unit is None and isinstance(value, float) and value.is_integer() and 1000 <= value <= 2100 \
                and "," not in m["n"]:
            unit = "year"
        add(NUMBER, start, m.end(), {value}, unit)
    for m in _SMALL_WORD.finditer(t):
        unit = _unit_after(t, m.end())
        word = m["w"].lower()
        if unit is None or (word in ("no", "none") and unit in ("year", "year-count")):
            continue  # "one of the best", "no idea": only a word counting a noun is a count
        if word in ("no", "none") and not re.match(r"\s?(?:of the\s+)?[a-z]+s\b", t[m.end():], re.I):
            continue  # "no trains" counts none; "no parking" is not a count
        add(NUMBER, m.start(), m.end(), {float(_SMALL[word])}, unit)
    for m in _ORDINAL_WORD.finditer(t):
        unit = _unit_after(t, m.end())
        if unit in ("floor", "platform", "gate", "level", "row", "place", "chapter", "step", "exit"):
            add(NUMBER, m.start(), m.end(), {float(_ORDINALS[m["w"].lower()])}, unit)
    found.sort(key=lambda v: v.start)
    return tuple(_marked(t, found))


def _phones(t: str) -> list[tuple[int, int, str]]:
    if sum(c.isdigit() for c in t) < 7:
        return []
    try:
        import phonenumbers
    except ImportError:  # pragma: no cover - a main dependency
        return []
    out: list[tuple[int, int, str]] = []
    for region in ("US", "GB"):
        try:
            matches = list(phonenumbers.PhoneNumberMatcher(t, region, leniency=phonenumbers.Leniency.POSSIBLE))
        except Exception:
            continue
        for m in matches:
            if re.search(r"\d[/.]\d{1,2}[/.]\d", m.raw_string) or re.fullmatch(r"[\d.,]+", m.raw_string.strip()) \
                    and not re.search(r"\d[-\s]\d", m.raw_string):
                continue  # dates, and bare digit runs (a number, not a phone number)
            if not any(s < m.end and m.start < e for s, e, _ in out):
                out.append((m.start, m.end, str(m.number.national_number)))
    return out


def _marked(t: str, found: list[Value]) -> list[Value]:
    """Negated and alternative marks: a negation in the value's own clause before it ("30, not 50",
    "it isn't 50"); values of a kind joined by "or" ("30, 50, 70 or 12345", "either 9 or 10")."""
    out = []
    boundaries = [m.end() for m in _CLAUSE.finditer(t)]
    for i, v in enumerate(found):
        k = bisect.bisect_right(boundaries, v.start) - 1
        clause_start = boundaries[k] if k >= 0 else 0
        if i and found[i - 1].end > clause_start:
            clause_start = found[i - 1].end
        negated = bool(_NEGATORS.search(_BOUND.sub(" ", t[clause_start:v.start])))
        out.append(Value(v.kind, v.text, v.start, v.end, v.meanings, v.unit, negated, False))
    # alternatives: runs of values of compatible kinds separated only by commas, slashes and "or"
    i = 0
    while i < len(out):
        j = i
        has_or = False
        while j + 1 < len(out) and compatible(out[j], out[j + 1]) and _OR_GLUE.match(t[out[j].end:out[j + 1].start]):
            has_or = has_or or bool(re.search(r"\bor\b", t[out[j].end:out[j + 1].start], re.I))
            j += 1
        if has_or and j > i:
            for k in range(i, j + 1):
                v = out[k]
                out[k] = Value(v.kind, v.text, v.start, v.end, v.meanings, v.unit, v.negated, True)
        i = j + 1
    return out


# ----------------------------------------------------------------------------- comparing

_CROSS = {frozenset({NUMBER, PRICE}), frozenset({NUMBER, CODE}), frozenset({NUMBER, TIME})}
BARE_HOUR = "bare hour"  # the unit of a time read from a bare number ("at 3"), which may be a count
DEAL = "for"  # the unit of a multi-buy price: "for 2" is the price of two


def compatible(a: Value, b: Value) -> bool:
    """Both answer the same thing: the same kind (a bare number and a price or code may be the same
    thing too), and the same noun where both name one."""
    if a.kind != b.kind and frozenset({a.kind, b.kind}) not in _CROSS:
        return False
    if a.kind == b.kind == PRICE:  # the price of one and a multi-buy's price answer the same thing
        return True
    if {a.kind, b.kind} == {NUMBER, CODE}:
        return (a.unit or b.unit) is None or (a.unit or b.unit) in LABELS
    if {a.kind, b.kind} == {NUMBER, TIME}:  # "ended at 1" and "the last number was 1"
        n, tm = (a, b) if a.kind == NUMBER else (b, a)
        return tm.unit == BARE_HOUR and n.unit is None
    if {a.kind, b.kind} == {NUMBER, PRICE}:  # "2 pounds" of weight against "2 kg" answers the same thing
        n = a if a.kind == NUMBER else b
        return n.unit is None or n.unit in _DIMENSIONS
    if a.kind == TIME:
        return True
    if a.unit in _DIMENSIONS and b.unit in _DIMENSIONS:
        return True  # a distance in miles answers a question about a distance in km (and disagrees)
    return a.unit is None or b.unit is None or a.unit == b.unit


def agree(a: Value, b: Value) -> bool:
    """The two values mean the same thing (as whole values: 06:41:46 is not 06:41:49, 555 is not
    555-0199, 2021/10/19 is not 2020/10/19)."""
    if not compatible(a, b):
        return False
    if per(a) != per(b):  # "2 FOR €20" is not €20 each
        return False
    if a.kind == b.kind == TIME:
        return any(ma == mb and (sa is None or sb is None or sa == sb)
                   for ma, sa in a.meanings for mb, sb in b.meanings)
    if a.kind == b.kind == DATE:
        return any(_same_date(x, y) for x in a.meanings for y in b.meanings)
    if a.kind == b.kind == PHONE:
        return any(x == y or (min(len(x), len(y)) >= 7 and (x.endswith(y) or y.endswith(x)))
                   for x in a.meanings for y in b.meanings)
    if a.kind == b.kind == PRICE:
        return _price_agree(a, b)
    if a.kind == b.kind == CODE:
        return bool(a.meanings & b.meanings)
    if a.kind == b.kind == PAIR:
        return bool(a.meanings & b.meanings)
    if TIME in (a.kind, b.kind):  # a bare hour and a number: the number is the hour
        n, tm = (a, b) if a.kind == NUMBER else (b, a)
        return any(isinstance(x, float) and x.is_integer() and 0 <= x <= 24 and int(x) % 12 * 60 == mins % 720
                   for x in n.meanings for mins, _ in tm.meanings)
    if PRICE in (a.kind, b.kind) and (a.unit or b.unit) in _DIMENSIONS:
        return False  # pounds of money are no weight
    if a.unit != b.unit and a.unit in _DIMENSIONS and b.unit in _DIMENSIONS:
        return _same_measure(a, b)
    return bool(_amounts(a) & _amounts(b))


def per(v: Value) -> int:
    """How many things a price is for: 2 for a multi-buy's "2 FOR €20", else 1."""
    if v.kind == PRICE and v.unit and v.unit.startswith(DEAL + " "):
        return int(v.unit.split()[1])
    return 1


def _same_measure(a: Value, b: Value) -> bool:
    """Two measures in commensurable units: the same within 2 % once converted (5 km and 5000 m;
    50 km/h and 31 mph); another dimension (5 km and 5 kg) never."""
    (da, fa), (db, fb) = _DIMENSIONS[a.unit or ""], _DIMENSIONS[b.unit or ""]
    if da != db:
        return False

    def base(x: float, unit: str | None, f: float) -> float:
        if unit == "°f":
            return (x - 32) * 5 / 9
        return x * f

    for x in a.meanings:
        for y in b.meanings:
            if isinstance(x, float) and isinstance(y, float):
                if "degree" in (a.unit, b.unit):  # "degrees" is the other side's scale
                    if x == y:
                        return True
                    continue
                p, q = base(x, a.unit, fa), base(y, b.unit, fb)
                if abs(p - q) <= 0.02 * max(abs(p), abs(q)) + 1e-9:
                    return True
    return False


def _amounts(v: Value) -> set:
    if v.kind == PRICE:
        return {amount for _, amount in v.meanings}
    if v.kind == CODE:
        return {float(c) for c in v.meanings if c.isdigit()}
    return {round(x, 2) if isinstance(x, float) else x for x in v.meanings}


def _same_date(x: tuple, y: tuple) -> bool:
    shared = [(p, q) for p, q in zip(x, y, strict=True) if p is not None and q is not None]
    return bool(shared) and all(p == q for p, q in shared)


def _price_agree(a: Value, b: Value) -> bool:
    return any(amount_a == amount_b and (ca is None or cb is None or ca == cb)
               for ca, amount_a in a.meanings for cb, amount_b in b.meanings)


def matches(v: Value, others: Sequence[Value]) -> list[Value]:
    """The values among `others` that `v` agrees with."""
    return [o for o in others if agree(v, o)]


def comparable(v: Value, others: Sequence[Value]) -> list[Value]:
    """The values among `others` that answer the same thing as `v`."""
    return [o for o in others if compatible(v, o)]


def without_units(found: Sequence[Value]) -> list[Value]:
    """The values with what they count or label left out (to compare across languages)."""
    return [replace(v, unit=None) for v in found]


def excluding(found: Sequence[Value], given: Sequence[Value]) -> list[Value]:
    """`found` without the values the question itself gives ("Is the limit 50?" does not make 50 an
    answer's claim)."""
    return [v for v in found if not any(v.kind == g.kind and agree(v, g) for g in given)]


# ----------------------------------------------------------------------------- comparisons of claims

@dataclass(frozen=True)
class Comparison:
    """An answer's values against reference values (a golden response's, or the screen's)."""

    agreeing: tuple[Value, ...]  # asserted claims a reference value agrees with
    contradicted: tuple[Value, ...]  # asserted claims that agree with no comparable reference value
    denied: tuple[Value, ...]  # negated claims that a reference value agrees with ("not 50" where it is 50)
    candidates: tuple[Value, ...]  # alternatives offered where at least one disagrees

    @property
    def settles(self) -> bool:
        return bool(self.agreeing or self.contradicted or self.denied or self.candidates)

    @property
    def wrong(self) -> bool:
        return bool(self.contradicted or self.denied or self.candidates)

    def why(self) -> str:
        if self.denied:
            return f'says "{self.denied[0].text}" is not so where it is'
        if self.candidates:
            shown = ", ".join(v.text for v in self.candidates[:5])
            return f"offers several incompatible candidates ({shown}) instead of one answer"
        if self.contradicted:
            return f'states "{self.contradicted[0].text}", which no value it is compared with agrees with'
        return f'states "{self.agreeing[0].text}"'


def compare(claims: Sequence[Value], reference: Sequence[Value], exhaustive: bool = False) -> Comparison:
    """Each of the answer's claims against the comparable reference values: one that agrees, one
    that none agrees with (where some answers the same thing), a negated claim that is in fact so,
    and alternatives of which some are wrong.

    `exhaustive`: the reference holds every value of its kinds there is (the text on screen). A
    golden response is not exhaustive: a further value of a kind the answer also gets right ("opens
    at 9 AM and closes at 2 PM" for "opens at 9 AM") is detail it does not settle."""
    agreeing, contradicted, denied, alternatives = [], [], [], []
    for v in claims:
        near = comparable(v, reference)
        if not near:
            continue
        hit = bool(matches(v, near))
        if v.negated:
            if hit:
                denied.append(v)
        elif v.alternative:
            alternatives.append((v, hit))
        elif hit:
            agreeing.append(v)
        else:
            contradicted.append(v)
    if not exhaustive:  # a further value is detail where every value it answers is already matched
        matched = [r for r in reference if any(agree(a, r) for a in agreeing)]
        contradicted = [v for v in contradicted
                        if not all(any(r is m for m in matched) for r in comparable(v, reference))]
    candidates = [v for v, _ in alternatives] if alternatives and not all(hit for _, hit in alternatives) else []
    if alternatives and not candidates:
        agreeing += [v for v, _ in alternatives]
    return Comparison(tuple(agreeing), tuple(contradicted), tuple(denied), tuple(candidates))


# ----------------------------------------------------------------------------- yes and no

_YES = re.compile(r"^\W*(yes|yeah|yep|yup|yea|sure|indeed|correct|right|absolutely|definitely|of course|certainly|"
                  r"that's right|it is|there is|there are|oui|sí|si|ja|sim|da)\b", re.I)
_NO = re.compile(r"^\W*(no|nope|nah|not really|not at all|none|never|negative|non|nein|não|nee)\b", re.I)


def polarity(text: str) -> str | None:
    """"yes" or "no" where the text starts with one ("Nope.", "Yes, it is."), else None."""
    t = _plain(text).strip()
    if _NO.match(t) and not re.match(r"^\W*no\s+(?:doubt|question|problem|worries)\b", t, re.I):
        return "no"
    if _YES.match(t) and not re.match(r"^\W*(?:it is|there is|there are)\b", t, re.I):
        return "yes"
    return None


def bare_polarity(text: str) -> str | None:
    """The polarity of an answer that is nothing more than a yes or a no ("Yes.", "Nope!", "No, it
    isn't.")."""
    p = polarity(text)
    if p is None:
        return None
    words = re.findall(r"[\w']+", _plain(text).lower())
    return p if len(words) <= 4 else None
