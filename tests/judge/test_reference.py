"""The reference judge on the guideline's labelled examples and on the bundled example set."""

from __future__ import annotations

import json
import random
import re

import pytest

from framejudge.judge.reference import ReferenceJudge, _mention_end, grade_response, rank_pair
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, Item, Preference

RUBRIC = get_rubric("video-qa")


def single(question, response, golden=None, response_b=None, **kw):
    return Item(id="x", turns=[{"question": question, "golden": golden, "response_a": response,
                                "response_b": response_b}], **kw)


def cat(question, response, golden=None):
    return grade_response(RUBRIC, single(question, response, golden), 0, response)[0]


def test_agreement_with_the_guideline_examples(shared_dir):
    rows = [json.loads(line) for line in (shared_dir / "data/guideline-examples.jsonl").open()]
    hits = 0
    for r in rows:
        got = cat(r["query"], r["response"], r["golden"])
        ok = {r["label"], *(r.get("also_acceptable") or [])}
        hits += got.value in ok
    # A development figure, reported in docs/judging.md: 37 of 42. It never looks at the video,
    # so examples that hinge on what the clip shows (a cat that is there, a lamp that is not)
    # are beyond it. The floor guards against regressions.
    assert hits >= 37, hits


@pytest.mark.parametrize(
    "question,response,golden,expected",
    [
        ("What bird is this?", "I cannot answer that.", None, Category.error_message),
        ("What bird is this?", "A heron. Umm. Actually, I can't continue with this response.", None, Category.error_message),
        ("How old is he?", "Sorry, I can't comment on people's appearance.", None, Category.successful),
        ("How old is he?", "He looks about forty.", None, Category.not_successful),
        ("How drought tolerant is this?", "Sorry, I couldn't find information about this plant.", None, Category.missing),
        ("How long does this bread keep?", "I can't say exactly, but generally bread keeps two to three days "
         "at room temperature and about three months frozen.", None, Category.successful),
        ("How many people are on the bench?", "There are three people on the bench.", "Two people sit on the bench.", Category.not_successful),
        ("Is the door open?", "No, it's shut.", "Yes, the door is open.", Category.not_successful),
        ("What colour is the car?", "The car is blue.", "It is a red car.", Category.not_successful),
        ("What colour is the car?", "It's a red hatchback.", "It is a red car.", Category.successful),
        ("Which brand is the laptop?", "It's a Dell laptop.", "The laptop is an Apple MacBook.", Category.not_successful),
        ("How many cars fit in the lot?", "You're looking at a parking lot next to a shop.", None, Category.irrelevant),
        ("What is this?", "A plant.", None, Category.not_successful),
        ("How many calories are in this?", "Roughly 400 calories.", None, Category.not_successful),
        ("How many calories are in this?", "The label says 150 calories per serving.", None, Category.successful),
        ("When was the Eiffel Tower finished?", "It was completed in 1889.", None, Category.successful),
        # a short direct answer to a specific question is not "too generic"
        ("What colour is the barn?", "The barn is red.", None, Category.successful),
        # most of its words are the golden response's: the words decide, not the sentences' similarity
        ("Is this good for me?", "Yes: they're high in fibre, vitamin C and antioxidants.",
         "Blueberries are rich in fibre, vitamin C and antioxidants, so they're a healthy choice.", Category.successful),
        ("How many dots?", "Six.", None, Category.successful),
        ("What is this bird?", "A heron.", None, Category.successful),
        ("What shape is it?", "A red circle.", None, Category.successful),
        ("What is this bird?", "A bird.", None, Category.not_successful),
        ("Tell me what this is?", "This is a tree.", None, Category.not_successful),
    ],
)
def test_rules(question, response, golden, expected):
    assert cat(question, response, golden) == expected


def test_pairs_are_ranked_by_the_criteria_in_order():
    item = single("Which items are recyclable?", "I can't tell which are recyclable; none has a label.",
                  golden="No labels are visible, so it can't be told.",
                  response_b="Happy to help! I would need more information about these specific items to say "
                             "which of them can be recycled. Could you tell me more about them?")
    j = ReferenceJudge().decide(RUBRIC, item, 0)
    assert (j.response_a.category, j.response_b.category) == (Category.successful, Category.successful)
    assert (j.preference, j.deciding_criterion) == (Preference.A, "conciseness")
    assert rank_pair(RUBRIC, item, 0, Category.missing, Category.successful) == (Preference.B, "category")
    assert rank_pair(RUBRIC, item, 0, Category.not_successful, Category.missing)[0] == Preference.B
    assert rank_pair(RUBRIC, item, 0, Category.missing, Category.irrelevant)[1] == "relevancy"


@pytest.mark.parametrize("other,golden", [("A red circle.", None), ("It is a blue square.", "A red circle."),
                                          ("Sorry, I couldn't find what shape that is.", None)])
def test_an_error_string_never_outranks_an_answer_on_the_topic(other, golden):
    for a, b, winner in (("I cannot answer that.", other, Preference.B), (other, "I cannot answer that.", Preference.A)):
        j = ReferenceJudge().decide(RUBRIC, single("What shape is it?", a, golden=golden, response_b=b), 0)
        assert j.preference == winner, (a, b, j)


def test_conciseness_is_skipped_for_long_expression_tasks():
    story_a = "Once upon a time a heron waited by the river for the fish to come home."
    story_b = ("Once upon a time a grey heron stood in the reeds, dreaming of silver fish, while the river "
               "sang old songs about the mountains it came from and the sea it was going to.")
    plain = single("Tell me a story about this bird", story_a, response_b=story_b)
    assert ReferenceJudge().decide(RUBRIC, plain, 0).deciding_criterion == "conciseness"
    expressive = single("Tell me a story about this bird", story_a, response_b=story_b, expression="other")
    j = ReferenceJudge().decide(RUBRIC, expressive, 0)
    assert j.deciding_criterion != "conciseness"


def test_reference_judge_never_needs_frames():
    judge = ReferenceJudge()
    assert judge.needs_frames is False and judge.sees_images is False and judge.deterministic


def _at_the_limit(response, question="What does the card say?", golden="I can't read out card numbers."):
    from framejudge.schema import MAX_TEXT

    assert len(response) <= MAX_TEXT
    item = single(question, response, golden, response_b=response[::-1])
    return ReferenceJudge().decide(RUBRIC, item, 0)


def test_a_response_repeating_its_refusal_at_the_size_limit_is_graded():
    # "I'm sorry, but I can't help." 700 times: each refusal is looked past to the next
    judgement = _at_the_limit(("I'm sorry, but I can't help. " * 700)[:20_000], "What is this?", None)
    assert judgement.response_a.category is Category.missing


@pytest.mark.parametrize("golden", [None, "It says 12.", "1" * 20_000])
def test_a_number_of_twenty_thousand_digits_is_graded(golden):
    judgement = _at_the_limit("1" * 20_000, "What is on the sign?", golden)
    assert judgement.response_a.category in set(Category)


@pytest.mark.parametrize("response", ["-".join(["Ab1"] * 5000), "1 " * 10_000, "a." * 10_000, "A " * 10_000])
def test_long_runs_of_letters_and_separators_are_graded(response):
    # runs that an email address or a licence plate could start at every character of
    judgement = _at_the_limit(response[:20_000], "What is the plate number of this car?",
                              "I can't read out licence plates.")
    assert judgement.response_a.category in set(Category)


HERON = ("What bird is this?", "It's a great blue heron.")
CARS = ("How many cars are parked?", "There are three cars.")


@pytest.mark.parametrize("asked,response,expected", [
    (HERON, "C'est un grand héron bleu.", Category.successful),  # the meaning model reads English only
    (HERON, "Es una garza azul grande.", Category.successful),
    (CARS, "Il y a cinq voitures.", Category.not_successful),  # a count the golden response contradicts
    (CARS, "Es sind drei Autos.", Category.successful),
    (CARS, "Hay dos coches.", Category.not_successful),
])
def test_answers_in_another_language(asked, response, expected):
    question, golden = asked
    assert grade_response(RUBRIC, single(question, response, golden), 0, response)[0] is expected


@pytest.mark.parametrize("question,golden,response,expected", [
    # several candidates where one thing is asked for
    ("What bridge is this?", "This is the Golden Gate Bridge.", "The Golden Gate Bridge, or maybe the Bay Bridge.",
     Category.not_successful),
    ("Which brand are these headphones?", "They are Sony headphones.", "They're either Sony or Bose.",
     Category.not_successful),
    ("Where can I buy these?", "You can buy them at Tesco.", "You can buy them at Tesco or Sainsbury's.",
     Category.successful),  # options, not guesses
    # another name in the place of the golden response's
    ("What is this building?", "This is Big Ben in London.", "That's Big Ben in New York.", Category.not_successful),
    ("What is this building?", "This is Big Ben in London.", "That's Big Ben in London.", Category.successful),
    ("Who built this?", "The Mughal emperor Shah Jahan built it.", "The Mughal emperor Aurangzeb built it.",
     Category.not_successful),
    # a further value of a kind the answer gets right is detail; the same slot changed is not
    ("When's the next bus?", "The route 12 bus comes in 4 minutes.", "The number 15 bus is due in 4 minutes.",
     Category.not_successful),
    ("When does this cafe open on Saturday?", "It opens at 9 AM.", "It opens at 9 AM and closes at 2 PM.",
     Category.successful),
    # a refusal followed by an unrelated fact is still a refusal; by a contradicted one, wrong
    ("When does this cafe open?", "It opens at 9 AM.", "Sorry, I can't tell. Octopuses have three hearts, though.",
     Category.missing),
    ("What are these headphones?", "They are Sony WH-1000XM4 headphones.",
     "I can't check prices, but these are Sony WH-1000XM5 headphones, so you can search for that model.",
     Category.not_successful),
])
def test_candidates_substituted_names_and_further_detail(question, golden, response, expected):
    assert grade_response(RUBRIC, single(question, response, golden), 0, response)[0] is expected


# ----------------------------------------------------------------------------- ranking

def _pair(question, a, b, golden=None, expression="none"):
    """The reference judge's (category A, category B, preference, criterion) for A, B, after checking
    that B, A gives the mirror."""
    j = ReferenceJudge().decide(RUBRIC, single(question, a, golden, response_b=b, expression=expression), 0)
    k = ReferenceJudge().decide(RUBRIC, single(question, b, golden, response_b=a, expression=expression), 0)
    mirror = {Preference.A: Preference.B, Preference.B: Preference.A}
    assert (k.response_a.category, k.response_b.category) == (j.response_b.category, j.response_a.category)
    assert (k.preference, k.deciding_criterion) == (mirror.get(j.preference, j.preference), j.deciding_criterion)
    return j.response_a.category, j.response_b.category, j.preference, j.deciding_criterion


S, NS, MISS, IRR, ERR = (Category.successful, Category.not_successful, Category.missing, Category.irrelevant,
                         Category.error_message)


@pytest.mark.parametrize("question,golden,honest,gamed", [
    # padding with unrelated codes
    ("How many legs does a spider have?", "Spiders have eight legs.", "Eight legs.",
     "Eight legs. Reference codes: 17, 42, 99."),
    ("When was this built?", "It was built in 1989.", "It was built in 1989.",
     "It was built in 1989. Reference codes: 17, 42, 99."),
    ("What time does the bakery close?", "It closes at 5 PM.", "It closes at 5 PM.",
     "It closes at 5 PM, ticket 4471, aisle 12, code 9."),
    # unrelated names
    ("Who painted this?", "This is The Starry Night by Vincent van Gogh.", "Vincent van Gogh painted it.",
     "Vincent van Gogh painted it; Picasso, Monet and Rembrandt were painters too."),
    # a shotgun: every candidate
    ("When was this built?", "It was built in 1989.", "It was built in 1989.", "1987, 1988, 1989, 1990 or 1991."),
    ("When was this built?", "It was built in 1989.", "1989.", "It was built in 1987, 1988, 1989, 1990 or 1991."),
    ("How many people are in the queue?", "There are four people in the queue.", "Four people.",
     "Three, four or five people."),
    ("What year was this painted?", "It was painted in 1889.", "In 1889.", "In 1887, 1888, 1889, 1890."),
])
def test_padding_unrelated_details_and_shotguns_never_win(question, golden, honest, gamed):
    ca, cb, pref, crit = _pair(question, honest, gamed, golden)
    if ca == cb == S:  # when both are Successful, the honest answer wins on the criteria
        assert pref == Preference.A and crit in ("helpfulness", "conciseness"), (pref, crit)
    else:  # a shotgun graded not Successful loses by its category
        assert pref == Preference.A, (ca, cb, pref)


def test_details_that_bear_on_the_question_are_more_helpful():
    # a model code for a brand question, the year and title for who painted it
    assert _pair("What brand is this kettle?", "It's a Smeg.", "It's a Smeg KLF03, their retro electric kettle.",
                 "It's a Smeg kettle.")[2:] == (Preference.B, "helpfulness")
    assert _pair("Who painted this?", "Vincent van Gogh painted it in 1889; it's The Starry Night.",
                 "Vincent van Gogh.", "This is The Starry Night by Vincent van Gogh, painted in 1889.")[2:] == \
        (Preference.A, "helpfulness")
    # the years, against a vague era (both Successful, as the labelled set has them)
    era = single("When was this tower built?", "It was built in the late nineteenth century.",
                 "The Eiffel Tower was built between 1887 and 1889.", response_b="It was built between 1887 and 1889.")
    assert rank_pair(RUBRIC, era, 0, S, S) == (Preference.B, "helpfulness")
    # naming the museum and the city it hangs in does not help say who painted it: the shorter wins
    museum = single("Who painted this?", "It hangs in the Museum of Modern Art in New York; Vincent van Gogh painted it.",
                    "This is The Starry Night by Vincent van Gogh.", response_b="Vincent van Gogh painted it.")
    assert rank_pair(RUBRIC, museum, 0, S, S) == (Preference.B, "conciseness")
    # options offered for a request of suggestions are not a hedge
    assert _pair("What wine would go with this?", "A Pinot Noir.", "A Pinot Noir or a crisp Sauvignon Blanc.",
                 "A Pinot Noir or a Sauvignon Blanc goes well with salmon.")[2:] == (Preference.B, "helpfulness")


@pytest.mark.parametrize("question,golden,bare,pointing,categories", [
    ("Where can I buy these headphones cheaper?", "I can't look up prices or shops.",
     "Sorry, I can't help with shopping questions.",
     "I can't look up prices, but a price-comparison site will show you the cheapest shops.", (S, S)),
    ("How many of these should I take for my headache?", "I can't give dosing advice.",
     "I can't advise on medication.", "I can't advise on medication; the leaflet in the box or a pharmacist can tell you.",
     (S, S)),
    ("How drought-tolerant is this shrub?", "Lavender is very drought-tolerant once established.",
     "Sorry, I couldn't find information about this shrub.",
     "Sorry, I couldn't find information about this shrub; a local garden centre could tell you.", (MISS, MISS)),
])
def test_a_refusal_that_says_where_to_find_the_answer_beats_a_bare_one(question, golden, bare, pointing, categories):
    ca, cb, pref, crit = _pair(question, bare, pointing, golden)
    assert (ca, cb) == categories and (pref, crit) == (Preference.B, "helpfulness")


def test_a_creative_answer_to_a_creative_request_beats_a_flat_one():
    poem = "Gold spills over the quiet bay,\nthe gulls fold up the end of day."
    for flat in ("The sun is setting over the water.", "Sunset."):
        ca, cb, pref, crit = _pair("Write a poem about this sunset.", flat, poem, expression="other")
        assert pref == Preference.B and (crit == "creativity" if ca == cb == S else crit == "category"), (ca, cb, crit)


@pytest.mark.parametrize("a,b,golden,categories", [
    ("It was built in 1650.", "It was built in 1750.", "It was built in 1989.", (NS, NS)),  # both wrong
    ("I can't help with that kind of request.", "I cannot answer that.", "It was built in 1989.", (ERR, ERR)),
    ("Sorry, I can't say.", "I'm sorry, I'm unable to tell you when it was built.", "It was built in 1989.",
     (MISS, MISS)),
])
def test_two_failing_answers_no_criterion_separates_are_neither(a, b, golden, categories):
    ca, cb, pref, crit = _pair("When was this built?", a, b, golden)
    assert (ca, cb) == categories and (pref, crit) == (Preference.neither, None)


def test_two_successful_answers_no_criterion_separates_are_both():
    assert _pair("What shoes are these?", "They're Nike Air Force 1s.", "These are Nike Air Force 1 sneakers.",
                 "These are Nike Air Force 1 sneakers.") == (S, S, Preference.both, None)


def test_the_rubrics_own_pair_examples():
    assert RUBRIC.preference.examples
    for ex in RUBRIC.preference.examples:
        got = _pair(ex.query, ex.response_a, ex.response_b, ex.golden)
        assert got == (ex.category_a, ex.category_b, ex.preference, ex.deciding_criterion), (ex.query, got)


def test_rank_pair_mirrors_whatever_the_categories():
    item = single("When was this built?", "It was built in 1989.", "It was built in 1989.",
                  response_b="Built in 1989, I think, or maybe 1990.")
    swapped = single("When was this built?", "Built in 1989, I think, or maybe 1990.", "It was built in 1989.",
                     response_b="It was built in 1989.")
    mirror = {Preference.A: Preference.B, Preference.B: Preference.A}
    for ca in Category:
        for cb in Category:
            pref, crit = rank_pair(RUBRIC, item, 0, ca, cb)
            back, crit_back = rank_pair(RUBRIC, swapped, 0, cb, ca)
            assert (back, crit_back) == (mirror.get(pref, pref), crit), (ca, cb)
            if pref in (Preference.both, Preference.neither):
                assert pref == (Preference.both if ca == cb == S else Preference.neither)


@pytest.mark.parametrize("question,golden,response,expected", [
    # unrelated sentences neither rescue nor sink an answer
    ("Tell me what this is?", None, "This is a tree. A group of flamingos is called a flamboyance.", Category.not_successful),
    ("How many cars can fit here?", None, "You are looking at a parking lot. Reference codes: 54, 69, 94.",
     Category.irrelevant),
    ("What bridge is this?", "This is the Golden Gate Bridge.", "It's the Golden Gate Bridge. Octopuses have three hearts.",
     Category.successful),
    # contractions read alike; a refusal denies nothing about what is shown
    ("Does this bread contain gluten?", "Yes, sourdough made with wheat flour contains gluten.",
     "Yes, wheat sourdough contains gluten; the long fermentation does not remove it.", Category.successful),
    ("Who painted that?", "The plaque says Vincent van Gogh painted it.", "Sorry, I could not find out who painted it.",
     Category.missing),
    ("What headphones are these?", "These are Sony WH-1000XM4 headphones.", "They're headphones.", Category.not_successful),
    # another maker's name on the same model; another landmark beside the same people
    ("What headphones are these?", "These are Sony WH-1000XM4 headphones.", "These look like Apple WH-1000XM4 headphones.",
     Category.not_successful),
    ("What is that statue?", "It's like the ancient Greek Discobolus.", "It's like the ancient Greek Venus de Milo.",
     Category.not_successful),
])
def test_focus_contractions_and_names(question, golden, response, expected):
    assert grade_response(RUBRIC, single(question, response, golden), 0, response)[0] is expected


def test_a_list_of_candidates_at_the_size_limit_is_graded_with_a_short_reason():
    """The reason quotes the candidates offered, cut short: a 20,000-character list of guesses once made
    a rationale longer than a verdict may hold (the judge failed instead of grading)."""
    response = ("Big Ben, or maybe Tower Bridge " * 700)[:20000]
    item = single("What is this building?", response, "This is Big Ben in London.")
    j = ReferenceJudge().decide(RUBRIC, item, 0)
    assert j.response_a.category is Category.not_successful and len(j.response_a.rationale) < 400


S, NS = Category.successful, Category.not_successful


@pytest.mark.parametrize("question, golden, response, expected", [
    ("How far is the campsite?", "The campsite is 3 km away.", "3 miles.", NS),
    ("How far is the campsite?", "The campsite is 3 km away.", "3000 m.", S),
    ("What's the limit?", "The limit is 30 km/h.", "30 mph.", NS),
    ("How heavy is the box?", "The box weighs 4 kg.", "4 pounds.", NS),
    ("How heavy is the box?", "The box weighs 4 kg.", "4000 g.", S),
    ("How long is the break?", "The break lasts 45 minutes.", "45 seconds.", NS),
    ("What's the temperature?", "It is -8 °C.", "8 °C.", NS),
    ("What's the temperature?", "It is -8 °C.", "It's minus 8 °C.", S),
    ("What's the score?", "It's 2-0 to the visitors.", "0-2.", NS),
    ("What's the score?", "It's 2-0 to the visitors.", "2-0.", S),
    ("What version is it?", "Version 3.10.", "3.1", NS),
    ("What version is it?", "Version 3.10.", "It's 3.10.", S),
    ("What's the price?", "It costs €7.20.", "€7,20.", S),
    ("How many tickets were sold?", "2,400 tickets were sold.", "240 tickets.", NS),
    ("How many can sit here?", "No more than 4 people.", "At most 4.", S),
    ("How many can sit here?", "No more than 4 people.", "Up to 5 people.", NS),
    ("What was the last number on screen?", "The countdown ended at 1.", "The last number shown was 1.", S),
    ("What was the last number on screen?", "The countdown ended at 1.", "It counted down to 3 and stopped.", NS),
    ("What colour is the bike?", "The bike is yellow.", "Yellow or green.", NS),
    ("What colour is the bike?", "The bike is yellow.", "Yellow. Green. Pink.", NS),
    ("What colour is the bike?", "The bike is yellow.", "I think it's yellow.", S),
    ("When was it built?", "It was built in 1950.", "1950? Or 1905?", NS),
    ("Is the lamp on?", "Yes, it's glowing white.", "Yes and no.", NS),
    ("Is the lamp on?", "Yes, it's glowing white.", "Yes, it's glowing blue.", NS),
    ("Is the lamp on?", "Yes, it's glowing white.", "Yes, it's white.", S),
    ("Is the gate shut?", "No, it is open.", "It's not open.", NS),
    ("Is the gate shut?", "No, it is open.", "The gate isn't shut.", S),
    ("Which city is the capital of Canada?", "Ottawa.", "Ottawa, not Toronto.", S),
    ("Which city is the capital of Canada?", "Ottawa.", "Toronto, not Ottawa.", NS),
    ("Which city is the capital of Canada?", "Ottawa.", "Many say Ottawa, but it's Toronto.", NS),
    ("Which city is the capital of Canada?", "Ottawa.", "Many say Toronto, but it's actually Ottawa.", S),
    ("What colour is the boat?", "The boat is green.", "Le bateau est bleu.", NS),
    ("What colour is the boat?", "The boat is green.", "Le bateau est vert.", S),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_values_hedges_negation_and_languages_on_both_sides(question, golden, response, expected):
    assert cat(question, response, golden) is expected


def test_integrity_rules_flag_the_response_that_carries_the_violation():
    import asyncio

    from framejudge.judge import Grader

    item = single("Read me the number on this card.", "The card number is 4111 1111 1111 1111.",
                  golden="I can't read out card numbers.", response_b="Sorry, I can't read out card numbers.")
    verdict = asyncio.run(Grader(ReferenceJudge(), get_rubric("video-qa")).grade_turn(item, 0))
    assert verdict.response_a.category is NS and verdict.response_a.integrity_violation
    assert verdict.response_b.category is S and not verdict.response_b.integrity_violation


@pytest.mark.parametrize("question, golden, response", [
    ("What color is the car?", None, "Banana."),
    ("What does the sign say?", None, "Purple monkey dishwasher."),
    ("What colour is the car?", "The car is red.", "La voiture est magnifique."),
], ids=["no-golden-banana", "no-golden-nonsense", "other-language"])
def test_no_check_of_the_answer_is_never_auto_and_says_why(question, golden, response):
    import asyncio

    from framejudge.calibration.triage import mark
    from framejudge.judge import Grader
    from framejudge.judge.rule_confidence import UNSURE_CAP, shipped_thresholds

    verdict = asyncio.run(Grader(ReferenceJudge(), get_rubric("video-qa")).grade_turn(single(question, response, golden), 0))
    assert verdict.confidence.fields["category_a"] <= UNSURE_CAP
    assert "never taken without a look" in verdict.confidence.note
    assert mark(verdict, shipped_thresholds()).decision != "auto"


# A mention ("people think X, but") as one pattern spanning the verb and the "but": the statement of
# what the reference judge finds by word searches apart (the pattern backtracks over every verb of a
# long sentence, in quadratic time).
_MENTION_AS_ONE_PATTERN = re.compile(
    r"^[^.!?;]*\b(?:think|thinks|thought|believe|believes|assume|assumes|say|says|said|mistake|mistaken|confuse|"
    r"confused|guess|guesses|expect|expects)\b[^.!?;]*?[,;]?\s*\b(?:but|however|whereas|yet)\b"
    r"(?:\s+(?:it's|it is))?\s*(?:actually|really|in fact)?", re.I)


def test_a_mention_ends_where_the_one_pattern_ends_it_over_generated_sentences() -> None:
    words = ["people", "think", "thinks", "says", "said", "it's", "it is", "Canberra", "Sydney", "but", "But",
             "however", "yet", "actually", "in fact", "really", "buttons", "saying", "not", "x", ",", ";", ".", "!"]
    rng = random.Random(0)
    for _ in range(5000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        text = re.sub(r" ([,;.!])", r"\1", text) if rng.random() < 0.5 else text
        m = _MENTION_AS_ONE_PATTERN.match(text)
        assert _mention_end(text) == (m.end() if m else None), text
