"""Named things: proper names, places and brands found in answers, and whether two answers name the same thing."""

from __future__ import annotations

import pytest

from framejudge.judge.names import is_ordinary_word, names, same_thing
from framejudge.judge.reference import grade_response
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, Item

RUBRIC = get_rubric("video-qa")


@pytest.mark.parametrize("text,expected", [
    ("Sydney is the capital of Australia.", {"sydney", "australia"}),  # a name that starts the sentence
    ("Bananas are one of the best sources of vitamin D.", set()),  # an ordinary word that starts it
    ("Labradors are popular dogs.", {"labradors"}),
    ("This is the Tower of London.", {"tower of london"}),
    ("That's the Golden Gate Bridge in San Francisco.", {"golden gate bridge", "san francisco"}),
    ("Okay, it looks like a bridge.", set()),
    ("Looking at it, I'd say a heron.", set()),
    ("Looks like Rio de Janeiro.", {"rio de janeiro"}),
    ("These are Bose QuietComfort 45 headphones.", {"bose quietcomfort"}),
    ("The Elizabeth Tower, called Big Ben.", {"elizabeth tower", "big ben"}),
    ("It's a Smeg KLF03, their retro kettle.", {"smeg klf03"}),  # a model number is part of the name
    ("Zürich is bigger than Genève.", {"zürich", "genève"}),  # any Latin script
    ("I think that's São Paulo.", {"são paulo"}),
    ("That's an iPhone, sold on eBay.", {"iphone", "ebay"}),  # brands with a capital second letter
])
def test_names_in_a_text(text, expected):
    assert names(text) == expected


def test_ordinary_words_include_their_plurals_and_forms():
    assert is_ordinary_word("Bananas") and is_ordinary_word("Berries") and is_ordinary_word("Sitting")
    assert not is_ordinary_word("Sydney") and not is_ordinary_word("Canberra")


@pytest.mark.parametrize("a,b,same", [
    ({"brooklyn bridge"}, {"golden gate bridge"}, False),  # the kind of thing is shared, the name is not
    ({"new jersey"}, {"new york"}, False),
    ({"sydney"}, {"canberra"}, False),
    ({"big ben"}, {"elizabeth tower", "big ben", "london"}, True),
    ({"golden gate"}, {"golden gate bridge"}, True),
    ({"labradors"}, {"labrador"}, True),
    ({"central station"}, {"station"}, True),  # only generic words: one inside the other
    ({"sony"}, {"sony wh-1000xm4"}, True),
])
def test_same_thing(a, b, same):
    assert same_thing(a, b) is same


@pytest.mark.parametrize("question,golden,response,expected", [
    ("What bridge is this?", "This is the Golden Gate Bridge in San Francisco.", "That's the Brooklyn Bridge.",
     Category.not_successful),
    ("What bridge is this?", "This is the Golden Gate Bridge in San Francisco.", "It's the Golden Gate.",
     Category.successful),
    ("What's the capital of Australia?", "The capital of Australia is Canberra.", "Sydney is the capital of Australia.",
     Category.not_successful),
    ("What's the capital of Australia?", "The capital of Australia is Canberra.", "Canberra is the capital.",
     Category.successful),
    ("Which brand are these headphones?", "These are Sony WH-1000XM4 headphones.", "They're made by Bose.",
     Category.not_successful),
    # doubt about the answer is not a negation of it
    ("What is this building?", "This is the Elizabeth Tower, usually called Big Ben.",
     "I'm not completely sure, but it looks like the Elizabeth Tower, which most people call Big Ben.",
     Category.successful),
    # a question asking for a brand, answered with a description and no name
    ("What brand is this drill?", "It's a DeWalt cordless drill.", "This drill has a yellow and black body.",
     Category.irrelevant),
    ("What brand is this drill?", "It's a DeWalt cordless drill.", "It's a Makita.", Category.not_successful),
    ("What brand is this drill?", "It's a DeWalt cordless drill.", "That's a DeWalt.", Category.successful),
    # naming only the kind of thing the golden response identifies is too generic
    ("What headphones are these?", "These are Sony WH-1000XM4 wireless headphones.", "They are headphones.",
     Category.not_successful),
])
def test_the_reference_judge_compares_named_things(question, golden, response, expected):
    item = Item(id="x", turns=[{"question": question, "golden": golden, "response_a": response}])
    assert grade_response(RUBRIC, item, 0, response)[0] is expected
