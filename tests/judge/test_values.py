"""Whole values: found in text as wholes, compared value to value, negated and offered as candidates."""

from __future__ import annotations

import pytest

from framejudge.judge import values
from framejudge.judge.values import compare, polarity, bare_polarity


def one(text: str, kind: str | None = None) -> values.Value:
    found = [v for v in values.values(text) if kind is None or v.kind == kind]
    assert len(found) == 1, (text, found)
    return found[0]


def same(a: str, b: str) -> bool:
    return values.agree(one(a), one(b))


@pytest.mark.parametrize("a,b,expected", [
    # times: seconds, 12/24-hour, leading zeros
    ("06:41:49", "The clock shows 06:41:49.", True),
    ("06:41:46", "06:41:49", False),
    ("06:41", "06:41:49", True),  # to the minute: the same time
    ("9:50", "09:05", False),
    ("9:05", "09:05", True),
    ("6:41 PM", "06:41 AM", False),
    ("6:41 PM", "18:41", True),
    ("21:00", "9 PM", True),
    ("21:00", "9 AM", False),
    ("at 9 in the evening", "21:00", True),
    ("half past nine", "9:30", True),
    ("five past nine", "09:05", True),
    ("noon", "12:00", True),
    ("It closes at 3.", "15:00", True),
    # dates
    ("2021/10/19", "2020/10/19", False),
    ("2020/10/19", "October 19, 2020", True),
    ("19/10/2020", "2020-10-19", True),
    ("the 19th of October", "2020/10/19", True),
    ("2020/10/18", "October 19, 2020", False),
    # phone numbers whole
    ("Call 555-0199", "555-0199", True),
    ("Call 555-0199", "555-0123", False),
    ("(212) 555-0143", "555-0143", True),
    # prices with their currency
    ("$3.49", "3.49 dollars", True),
    ("$3.49", "€3.49", False),
    ("3,49 €", "€3.49", True),
    ("$3.49", "$2.99", False),
    # codes
    ("Gate B32", "gate B32", True),
    ("Gate B32", "Gate B23", False),
    ("AB12 CDE", "AB12CDE", True),
    # numbers and number words, to the thousands
    ("It says fifty.", "50", True),
    ("two hundred and twelve", "212", True),
    ("one thousand two hundred", "1,200", True),
    ("It says fifty.", "15", False),
    ("Il y a cinquante voitures.", "The sign says 50.", True),
])
def test_values_are_compared_whole(a, b, expected):
    assert same(a, b) is expected


def test_a_part_of_a_value_is_not_the_value():
    room, phone = one("Room 555"), one("Call 555-0199")
    assert room.kind == values.NUMBER and phone.kind == values.PHONE
    assert not values.agree(room, phone) and not values.compatible(room, phone)
    assert values.agree(one("Room 404"), one("It's room 404."))
    assert not values.agree(one("Room 404"), one("Room 555"))


def test_what_a_number_counts_keeps_it_apart():
    assert not values.compatible(one("3 dogs"), one("2 cats"))
    assert values.compatible(one("2 strollers"), one("only one stroller"))
    assert not values.agree(one("2 strollers"), one("only one stroller"))
    assert not values.compatible(one("built in 1889"), one("330 metres tall"))
    assert one("no trains").meanings == frozenset({0.0})
    assert not [v for v in values.values("next to a No parking sign") if v.kind == values.NUMBER]
    assert not values.values("It is one of the best.")


def test_negated_values_and_candidates_are_marked():
    said = values.values("The sign says 30, not 50.")
    assert [(v.text, v.negated) for v in said] == [("30", False), ("50", True)]
    shotgun = values.values("It could be 30, 50, 70 or 12345.")
    assert len(shotgun) == 4 and all(v.alternative for v in shotgun)
    assert not any(v.alternative for v in values.values("Open 9 AM to 5 PM, between 70 and 80 people."))
    flip = values.values("It doesn't say 30, it says 50.")
    assert [(v.text, v.negated) for v in flip] == [("30", True), ("50", False)]


@pytest.mark.parametrize("answer,reference,exhaustive,wrong,agrees", [
    ("It's 50.", "50", True, False, True),
    ("The sign says 30, not 50.", "50", True, True, False),
    ("It could be 30, 50, 70 or 12345.", "50", True, True, False),
    ("It's 50 or 50 km/h.", "50", True, False, True),  # candidates that all agree
    ("It says 50 and 12345.", "50", True, True, True),  # a value the screen never showed
    ("It opens at 9 AM and closes at 2 PM.", "It opens at 9 AM.", False, False, True),  # detail beyond a golden response
    ("It opens at 8 AM.", "It opens at 9 AM.", False, True, False),
])
def test_claims_against_a_reference(answer, reference, exhaustive, wrong, agrees):
    result = compare(values.values(answer), values.values(reference), exhaustive=exhaustive)
    assert result.wrong is wrong and bool(result.agreeing) is agrees


@pytest.mark.parametrize("text,expected,bare", [
    ("Yes.", "yes", "yes"), ("Yep!", "yes", "yes"), ("No.", "no", "no"), ("Nope.", "no", "no"),
    ("No, it isn't.", "no", "no"), ("Yes, there is a trash can by the path.", "yes", None),
    ("No doubt it's red.", None, None), ("It is red.", None, None), ("Oui.", "yes", "yes"), ("Nein.", "no", "no"),
])
def test_yes_and_no(text, expected, bare):
    assert polarity(text) == expected and bare_polarity(text) == bare


def test_a_response_at_the_size_limit_of_values_is_read_whole():
    """20,000 characters of numbers, a number of 5,000 digits, codes and clock times: every value is
    found once (each scan is linear: the marks of negation and candidates look clauses up by
    bisection, the characters taken by a value are a mask)."""
    text = ("1 " * 3000) + "9" * 5000 + " or " + ("AB12 " * 1000) + ("5:55 " * 1000)
    found = values.values(text)
    kinds = [v.kind for v in found]
    assert kinds.count(values.CODE) == 1000 and kinds.count(values.TIME) == 1000
    assert any(v.text == "9" * 5000 for v in found)


@pytest.mark.parametrize("text,lang,count", [
    ("Es sind drei Autos.", "de", 3.0), ("Hay tres coches.", "es", 3.0), ("Il y a cinq voitures.", "fr", 5.0),
    ("There are three cars.", "en", 3.0), ("Ci sono tre macchine.", "it", 3.0),
])
def test_counts_in_other_languages(text, lang, count):
    assert values.language(text) == lang
    assert [v.meanings for v in values.values(text)] == [frozenset({count})]


def test_plural_numerals_and_articles():
    assert [v.meanings for v in values.values("They're Nike Air Force 1s.")] == [frozenset({1.0})]
    assert [v.meanings for v in values.values("the 1950s")] == [frozenset({1950.0})]
    # "a pair of the Nike ..." counts no Nikes
    assert not [v for v in values.values("a pair of the Nike Air Force 1 model") if v.meanings == frozenset({2.0})]


# units, signs, ordered pairs, versions, decimal commas and bounds: each with a case on both sides
@pytest.mark.parametrize("golden, answer, same", [
    ("The exit is 5 km away.", "It's 5000 metres away.", True),
    ("The exit is 5 km away.", "5 miles.", False),
    ("The limit is 50 km/h.", "31 miles per hour.", True),
    ("The limit is 50 km/h.", "50 mph.", False),
    ("The bag weighs 2 kg.", "2000 grams.", True),
    ("The bag weighs 2 kg.", "2 pounds.", False),
    ("The timer is set to 90 seconds.", "1.5 minutes.", True),
    ("The timer is set to 90 seconds.", "90 minutes.", False),
    ("It shows -5 °C.", "Minus 5 °C.", True),
    ("It shows -5 °C.", "5 °C.", False),
    ("The score is 3-1.", "3 to 1.", True),
    ("The score is 3-1.", "1-3.", False),
    ("Version 2.10.", "It's 2.10.", True),
    ("Version 2.10.", "Version 2.1.", False),
    ("The tag says 12.50.", "12,50.", True),
    ("The counter shows 1,250.", "1250.", True),
    ("The counter shows 1,250.", "125.", False),
    ("The countdown ended at 1.", "The last number was 1.", True),
    ("The countdown ended at 1.", "It stopped at 3 and no lower.", False),
], ids=lambda v: v if isinstance(v, bool) else v[:24])
def test_values_compare_whole_with_unit_sign_and_order(golden, answer, same):
    from framejudge.judge import values as V

    got = V.compare(V.values(answer), V.values(golden))
    assert got.settles and (not got.wrong) is same, (got, V.values(answer), V.values(golden))


@pytest.mark.parametrize("text, negated", [
    ("No more than 6 people.", False), ("At most 6.", False), ("Not to exceed 6 people.", False),
    ("It is not 6.", True), ("There aren't 6 seats.", True),
    ("NO MORETHAN 6 PEOPLE", False), ("NOT MORETHAN 6", False),  # read off a sign that lost its spaces
], ids=["no-more-than", "at-most", "not-to-exceed", "not", "aren't", "ocr-no-morethan", "ocr-not-morethan"])
def test_a_bound_states_its_number_and_a_negation_denies_it(text, negated):
    from framejudge.judge import values as V

    (v,) = V.values(text)
    assert v.negated is negated and 6.0 in v.meanings


def test_alternatives_across_question_marks_are_candidates():
    from framejudge.judge import values as V

    found = V.values("1932? Or 1923?")
    assert [v.alternative for v in found] == [True, True]
    assert V.compare(found, V.values("It opened in 1932.")).candidates
    assert not any(v.alternative for v in V.values("1932. It opened then."))
