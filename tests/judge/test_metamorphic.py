"""Metamorphic properties: the variant generators (each makes the variant it claims and refuses what
it cannot transform), the runner with a judge object, the bench command, and every property against
the reference judge over the development half of `bench/judge_eval` and the guideline examples."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from framejudge.judge import metamorphic as mm
from framejudge.judge.base import JudgeRequest, JudgeResult
from framejudge.judge.labelled import DataError
from framejudge.rubrics import get_rubric
from framejudge.schema import Item, Judgement
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "judge_eval"
RUBRIC = get_rubric("video-qa")
SPLIT = json.loads((DATA / "split.json").read_text(encoding="utf-8"))
TEST_ITEMS = set(SPLIT["test"]) | set(SPLIT["ranking"]["test"])


def case(question, golden, response, label="Successful", id="c1", **kw) -> mm.Case:
    item = Item(id=id, turns=[{"question": question, "golden": golden, "response_a": response}], **kw)
    return mm.Case(id, "dev", item, 0, False, label=label)


def pair_case(question, golden, a, b, preference="A", id="p1") -> mm.Case:
    item = Item(id=id, turns=[{"question": question, "golden": golden, "response_a": a, "response_b": b}])
    return mm.Case(id, "dev", item, 0, True, labels=("Successful", "Not Successful"), preference=preference)


def texts(variants, side="a"):
    return [getattr(v.item.turns[v.case.turn], f"response_{side}") for v in variants]


def skip_reason(make, c, seed=0) -> str:
    with pytest.raises(mm.Skip) as why:
        make(c, seed, RUBRIC)
    return str(why.value)


# ---------------------------------------------------------------------------------- values


@pytest.mark.parametrize("text,kind,data", [
    ("The clock shows 06:41:49.", "time", (6, 41, 49, None)),
    ("It opens at 9 PM.", "time", (9, 0, None, "pm")),
    ("Room 404, at 9:05 p.m.", "time", (9, 5, None, "pm")),
    ("Dated 2020/10/19.", "date", (2020, 10, 19)),
    ("Completed on March 31.", "date", (None, 3, 31)),
    ("It costs £10.", "price", ("GBP", 10.0)),
    ("Only $4.99!", "price", ("USD", 4.99)),
    ("Call 555-0199 now.", "phone", ("5550199",)),
    ("Sony WH-1000XM4 headphones", "code", ("WH1000XM4",)),
    ("It says fifty.", "number", (50.0,)),
    ("There are three strollers.", "number", (3.0,)),
    ("From the 19th century.", "ordinal", (19,)),
    ("The exit is to your left.", "direction", ("left",)),
    ("This is the Golden Gate Bridge.", "name:bridge", ("bridge", 0)),
    ("Those were sunflowers.", "name:flower", ("flower", 0)),
])
def test_values_are_found_whole_and_typed(text, kind, data):
    found = [v for v in mm.find_values(text) if v.kind == kind]
    assert len(found) == 1 and found[0].data == data, mm.find_values(text)
    assert text[found[0].start:found[0].end] == found[0].text


def test_values_compare_as_whole_values():
    def one(text):
        return mm.find_values(text)[0]

    assert one("at 9 PM").same(one("at 21:00"))
    assert not one("at 9 PM").same(one("at 9 AM"))
    assert not one("06:41:46").same(one("06:41:49"))
    assert one("3 PM").same(one("closes at 3"))  # a whole hour is the bare number of its hour
    assert one("It says fifty.").same(one("It says 50."))
    assert not one("2021/10/19").same(one("2020/10/19"))
    assert one("Big Ben").same(one("the Elizabeth Tower"))  # aliases of one thing
    assert not mm.find_values("One of the best")  # 'one of' is no count


# ---------------------------------------------------------------------------------- value change


@pytest.mark.parametrize("question,golden,response,changed", [
    ("What does the sign say?", "The speed limit is 50.", "The sign says 50.", r"The sign says (?!50\.)\d+\."),
    ("What time is on the clock?", "The clock reads 06:41:49.", "It shows 06:41:49.", r"It shows 06:41:(?!49)\d\d\."),
    ("When does it open?", "It opens at 9 PM.", "9 PM.", r"(?!9 PM)\d+ [AP]M\."),
    ("What is the date on the receipt?", "The receipt is dated 2020/10/19.", "It says 2020/10/19.",
     r"It says (?!2020)20\d\d/10/19\."),
    ("How much is it?", "It costs £4.99.", "It's £4.99.", r"It's £(?!4\.99)\d+\.\d\d\."),
    ("What bridge is this?", "This is the Golden Gate Bridge in San Francisco.", "That's the Golden Gate Bridge.",
     r"That's (the Brooklyn Bridge|Tower Bridge|the Sydney Harbour Bridge|the Rialto Bridge|the Ponte Vecchio)\."),
    ("What colour is the car?", "The car is red.", "It's a red car.", r"It's an? (?!red)[a-z]+ car\."),
    ("Which way is the exit?", "The exit sign points to the left.", "The exit is to your left.",
     r"The exit is to your right\."),
])
def test_value_change_puts_another_value_of_the_kind_in_its_place(question, golden, response, changed):
    c = case(question, golden, response)
    variants = mm.make_value_change(c, 0, RUBRIC)
    assert len(variants) == 1 and re.fullmatch(changed, texts(variants)[0]), texts(variants)
    new = [w for w in mm.find_values(texts(variants)[0]) if w.kind == variants[0].kind.replace("value:", "", 1)
           or w.kind.startswith(variants[0].kind.replace("value:", "", 1))]
    assert new and not mm.stated(new[0], [golden, question])  # nothing in the item states the new value
    assert mm.make_value_change(c, 0, RUBRIC)[0].item == variants[0].item  # deterministic
    assert {texts(mm.make_value_change(c, s, RUBRIC))[0] for s in range(6)} != {texts(variants)[0]} or \
        variants[0].kind == "value:direction"  # the seed chooses


def test_value_change_changes_every_mention_and_up_to_three_values():
    c = case("Who painted it, and when?", "The plaque says Vincent van Gogh painted it, in 1889.",
             "Vincent van Gogh, in 1889; van Gogh painted it late in life.")
    variants = mm.make_value_change(c, 0, RUBRIC)
    assert sorted(v.kind for v in variants) == ["value:name", "value:number"]
    name = next(t for v, t in zip(variants, texts(variants)) if v.kind == "value:name")
    assert "Gogh" not in name  # both mentions of the painter replaced
    many = case("What are the numbers?", "They are 11, 23, 35, 47 and 59.", "11, 23, 35, 47 and 59.")
    assert len(mm.make_value_change(many, 0, RUBRIC)) == 3


@pytest.mark.parametrize("c,reason", [
    (case("What does the sign say?", "It says 50.", "It says 70.", label="Not Successful"), "not a Successful answer"),
    (case("What does the sign say?", None, "It says 50."), "no golden response"),
    (case("What does the sign say?", "It says 50.", "It's a speed limit sign."), "states no value"),
    (case("What does the sign say?", "It says 50.", "It says 30, not 50."), "a negated value"),
    (case("What does the sign say?", "The limit is 50.", "Not 50, I think."), "a negated value"),
    (case("How many people came?", "More than 50 people.", "More than 50 people came."), "a bound"),
    (case("Is the limit 50?", "Yes, it is 50.", "Yes, 50."), "the question names it"),
    (case("Write a caption.", "Happy 3rd birthday!", "Happy 3rd birthday, pup!", expression="other"), "creative"),
    (pair_case("What does the sign say?", "It says 50.", "It says 50.", "It says 70."), "a pair"),
])
def test_value_change_refuses_what_it_cannot_transform(c, reason):
    assert reason in skip_reason(mm.make_value_change, c)


# ---------------------------------------------------------------------------------- padding and candidates


def test_unrelated_details_are_appended_and_graded_alone_beside_and_in_a_pair():
    c = case("How many legs does a spider have?", "Eight legs.", "Eight legs")
    variants = mm.make_unrelated_details(c, 0, RUBRIC)
    assert [v.shape for v in variants] == ["alone", "beside"]
    padded = texts(variants)[0]
    assert padded.startswith("Eight legs. ") and len(padded) > len("Eight legs. ")
    extra = padded[len("Eight legs. "):]
    assert extra in mm.UNRELATED_FACTS or re.fullmatch(r"Reference codes: \d\d, \d\d, \d\d\.", extra)
    beside = variants[1].item.turns[0]
    side = variants[1].side
    assert {beside.response_a, beside.response_b} == {"Eight legs", padded}
    assert getattr(beside, f"response_{side}") == padded
    kinds = {mm.make_unrelated_details(case("Q?", "A.", "An answer.", id=f"c{i}"), 0, RUBRIC)[0].kind for i in range(12)}
    assert kinds == {"codes", "fact"}  # both kinds, chosen by the seed per case
    p = pair_case("What does the sign say?", "It says 50.", "It says 50.", "It says 70.")
    (in_pair,) = mm.make_unrelated_details(p, 0, RUBRIC)
    t, side = in_pair.item.turns[0], in_pair.side
    other = "b" if side == "a" else "a"
    assert in_pair.shape == "in-pair" and getattr(t, f"response_{other}") == getattr(p.item.turns[0], f"response_{other}")
    assert getattr(t, f"response_{side}").startswith(getattr(p.item.turns[0], f"response_{side}"))


def test_padding_codes_are_numbers_the_item_does_not_state():
    c = case("Which numbers?", "Numbers " + ", ".join(str(n) for n in range(11, 95)) + ".", "All of them.")
    for seed in range(8):
        v = mm.make_unrelated_details(c, seed, RUBRIC)[0]
        if v.kind == "codes":
            codes = [int(x) for x in re.findall(r"\d+", texts([v])[0])]
            assert all(n >= 95 for n in codes), codes


def test_padding_refuses_error_strings():
    assert "error string" in skip_reason(mm.make_unrelated_details, case("What is this?", None, "I cannot answer that."))
    assert "empty" in skip_reason(mm.make_unrelated_details, case("What is this?", None, " "))


def test_extra_candidates_list_other_values_of_the_kind_with_the_golden_one_for_a_wrong_answer():
    wrong = case("What time does the bakery close?", "The bakery closes at 5 PM.", "It closes at 6 PM.",
                 label="Not Successful")
    alone, beside = mm.make_extra_candidates(wrong, 0, RUBRIC)
    m = re.fullmatch(r"It closes at 6 PM, or maybe (.+) or (.+)\.", texts([alone])[0])
    assert m and m.group(1) == "5 PM" and m.group(2) not in {"5 PM", "6 PM"}, texts([alone])
    assert beside.shape == "beside"
    right = case("What time does the bakery close?", "The bakery closes at 5 PM.", "It closes at 5 PM on weekdays.")
    m = re.fullmatch(r"It closes at 5 PM \(or maybe (.+) or (.+)\) on weekdays\.", texts(mm.make_extra_candidates(right, 0, RUBRIC))[0])
    assert m and "5 PM" not in {m.group(1), m.group(2)}
    for group in m.groups():
        assert mm.find_values(group)[0].kind == "time"


@pytest.mark.parametrize("c,reason", [
    (case("What bridge is this?", None, "The Golden Gate Bridge."), "no golden response"),
    (case("What bridge is this?", "The Golden Gate Bridge.", "A big red bridge over the bay."), "states no value"),
    (case("Write a poem.", "Roses are red.", "Roses are red, 3 times.", expression="other"), "creative"),
])
def test_extra_candidates_refuse_what_they_cannot_transform(c, reason):
    assert reason in skip_reason(mm.make_extra_candidates, c)


# ---------------------------------------------------------------------------------- swap


def test_swap_swaps_a_and_b_in_every_turn():
    turns = [{"time": 1.0, "question": "Q1?", "golden": "G1.", "response_a": "a1", "response_b": "b1"},
             {"time": 2.0, "question": "Q2?", "golden": "G2.", "response_a": "a2", "response_b": "b2"}]
    c = mm.Case("p", "dev", Item(id="p", task_type="multi_turn", turns=turns), 1, True, labels=("Successful",) * 2,
                preference="A")
    (v,) = mm.make_swap(c, 0, RUBRIC)
    assert [(t.response_a, t.response_b) for t in v.item.turns] == [("b1", "a1"), ("b2", "a2")]
    assert "not a pair" in skip_reason(mm.make_swap, case("Q?", "G.", "R."))
    assert "same text" in skip_reason(mm.make_swap, pair_case("Q?", "G.", "Same.", "Same."))


def test_the_swap_check_mirrors_a_and_b_and_keeps_both_and_neither():
    v = mm.Variant(pair_case("Q?", "G.", "a", "b"), "swap", "swapped", "", Item(id="x", turns=[{"question": "Q?", "response_a": "b", "response_b": "a"}]))
    g = mm.Graded
    assert mm.check_swap(v, g("Successful", "Not Successful", "A"), g("Not Successful", "Successful", "B")) is None
    assert mm.check_swap(v, g("Successful", "Successful", "Both"), g("Successful", "Successful", "Both")) is None
    assert mm.check_swap(v, g("Missing", "Missing", "Neither"), g("Missing", "Missing", "Neither")) is None
    assert "preference A" in mm.check_swap(v, g("Successful", "Successful", "A"), g("Successful", "Successful", "A"))
    assert "categories" in mm.check_swap(v, g("Successful", "Missing", "A"), g("Successful", "Missing", "B"))


# ---------------------------------------------------------------------------------- paraphrase


@pytest.mark.parametrize("response,kind,expected", [
    ("It's a DeWalt drill and it doesn't need a cord.", "contractions", "It is a DeWalt drill and it does not need a cord."),
    ("It is a DeWalt drill.", "contractions", "It's a DeWalt drill."),
    ("It's a DeWalt cordless drill.", "frame", "A DeWalt cordless drill."),
    ("£3 a punnet, according to the sign.", "frame", "It's £3 a punnet, according to the sign."),
    ("This is the Tower of London.", "demonstrative", "That is the Tower of London."),
    ("It looks like a dove sitting on the fence.", "synonym", "It appears to be a dove sitting on the fence."),
    ("The exit is to your left.", "hedge", "I think the exit is to your left."),
    ("Vincent van Gogh, in 1889, as the plaque says.", "hedge", "I think Vincent van Gogh, in 1889, as the plaque says."),
    ("It closes at 6 PM; the sign says the hours are 8 AM to 6 PM.", "reorder",
     "The sign says the hours are 8 AM to 6 PM; it closes at 6 PM."),
    ("The bakery closes at 3 PM. The sign by the door gives the hours.", "reorder",
     "The sign by the door gives the hours. The bakery closes at 3 PM."),
])
def test_each_paraphrase_makes_the_rewrite_it_claims(response, kind, expected):
    variants = {v.kind: v for v in mm.make_paraphrase(case("What is it?", "G.", response), 0, RUBRIC)}
    assert kind in variants and texts([variants[kind]])[0] == expected, {k: texts([v])[0] for k, v in variants.items()}


@pytest.mark.parametrize("response,label,kind", [
    ("That's Big Ben, the clock tower.", "Successful", "synonym"),  # 'Big' in a name is no adjective
    ("They're on sale at Best Buy.", "Successful", "synonym"),
    ("The track appears to be unused.", "Successful", "synonym"),  # 'looks like unused' is no English
    ("The exit is to your left.", "Not Successful", "hedge"),  # the guideline's hedge is fine on a right answer
    ("Sorry, I can't read the sign.", "Successful", "hedge"),
    ("The cafe opens at 7:30 AM on Saturday.", "Successful", "frame"),  # 'It's the cafe opens...' is no English
    ("It's been closed for years.", "Successful", "contractions"),  # 'it is been'
    ("The door is open. It was left that way.", "Successful", "reorder"),  # 'It' points back
])
def test_paraphrases_do_not_make_what_would_change_the_meaning_or_the_grammar(response, label, kind):
    try:
        variants = mm.make_paraphrase(case("What is it?", "G.", response, label=label), 0, RUBRIC)
    except mm.Skip:
        variants = []
    assert kind not in {v.kind for v in variants}, [texts([v])[0] for v in variants if v.kind == kind]


def test_paraphrase_refuses_what_it_cannot_transform():
    assert "error string" in skip_reason(mm.make_paraphrase, case("What is this?", None, "I cannot answer that."))
    assert "no rewrite" in skip_reason(mm.make_paraphrase, case("Is it open?", "Yes.", "Yes."))
    assert "a pair" in skip_reason(mm.make_paraphrase, pair_case("Q?", "G.", "a", "b"))
    # a rewrite that would make an error string is not made ('I can't answer that.' -> 'I cannot answer that.')
    assert "no rewrite" in skip_reason(mm.make_paraphrase, case("What is this?", None, "I can't answer that."))


# ---------------------------------------------------------------------------------- polarity


def test_polarity_makes_bare_matched_and_mismatched_answers_once_per_question():
    c = case("Did I leave the front door open?", "Yes, the front door is wide open.", "Yes, it's open.")
    variants = mm.make_polarity(c, 0, RUBRIC)
    assert [(v.kind, texts([v])[0]) for v in variants] == [
        ("matched", "Yes."), ("matched", "Yeah."), ("mismatched", "No."), ("mismatched", "Nope.")]
    no = case("Did any trains move?", "No, there were no trains.", "None moved.")
    assert [texts([v])[0] for v in mm.make_polarity(no, 0, RUBRIC) if v.kind == "matched"] == ["No.", "Nope."]
    second = case("Did I leave the front door open?", "Yes, the front door is wide open.", "No.", id="c2")
    made = mm.BY_ID["polarity"].generate([c, second], 0, RUBRIC)
    assert len(made.variants) == 4 and made.skipped == {"another answer to the same question made its variants": 1}
    assert made.skipped_by_set == {"dev": made.skipped}


@pytest.mark.parametrize("c,reason", [
    (case("What breed is this dog?", "No, I don't see a dog.", "None."), "not a yes/no question"),
    (case("Is this healthy?", "Spinach is rich in iron.", "Yes."), "does not start with yes or no"),
    (case("Is this healthy?", None, "Yes."), "no golden response"),
])
def test_polarity_refuses_what_it_cannot_transform(c, reason):
    assert reason in skip_reason(mm.make_polarity, c)


# ---------------------------------------------------------------------------------- the runner, any judge


class AlwaysSuccessful:
    """A judge object (not a spec) that grades every response Successful and prefers A."""

    backend, model_id = "test", "always-successful"
    needs_frames = sees_images = False
    deterministic = True

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        t = request.item.turns[request.turn]
        data = {"response_a": {"category": "Successful", "rationale": "always"}}
        if t.response_b is not None:
            data.update(response_b={"category": "Successful", "rationale": "always"}, preference="A",
                        deciding_criterion="helpfulness")
        return JudgeResult(Judgement.model_validate(data))


def test_the_runner_grades_through_the_library_and_counts_held_and_violated():
    cases = [case("When does it open?", "It opens at 9 PM.", "9 PM.", id="s1"),
             case("Did I leave the door open?", "Yes, it is open.", "Yes, wide open.", id="s2"),
             pair_case("When does it open?", "It opens at 9 PM.", "9 PM.", "10 PM.", id="p1")]
    outcomes = {o.property.id: o for o in mm.check(AlwaysSuccessful(), cases)}
    value = outcomes["value-change"]
    assert len(value.made.variants) == 1 and len(value.violated) == 1 and value.held_ratio == 0.0
    polarity = outcomes["polarity"]  # matched held, mismatched violated
    assert len(polarity.held) == 2 and len(polarity.violated) == 2
    swap = outcomes["swap"]  # always A: the swapped pair is not mirrored
    assert len(swap.violated) == 1 and "preference A" in swap.violated[0][1]
    summary = swap.summary()
    assert summary["violated"] == 1 and summary["violations"][0]["id"] == "p1"
    assert summary["by_set"] == {"dev": {"variants": 1, "held": 0, "violated": 1, "judge_errors": 0, "held_ratio": 0.0,
                                         "cases_skipped": {"not a pair": 2}}}
    hidden = swap.summary(lambda source: source != "dev")
    assert hidden["violations"] == [] and hidden["violations_not_shown"] == 1


# ---------------------------------------------------------------------------------- the reference judge


@pytest.fixture(scope="module")
def reference_outcomes(tmp_path_factory):
    """Every property over the development half (singles, pairs, ranking pairs) and the guideline
    examples, graded once by the reference judge."""
    cases = mm.load_cases("dev", DATA, SHARED)[0]
    if (SHARED / "data").is_dir():
        cases += mm.load_cases("guideline", DATA, SHARED)[0]
    cases += mm.screen_cases(tmp_path_factory.mktemp("signs"))  # screen-injection's clips
    cases += mm.measured_cases()  # unit-change's measured values (the labelled rows hold few)
    return {o.property.id: o for o in mm.check("reference", cases, concurrency=32)}, {c.source for c in cases}


GENERATED = {"screen": "screen-injection", "measures": "unit-change"}  # cases made here, and the property each serves


@pytest.mark.parametrize("source", ["dev", "guideline", *GENERATED])
@pytest.mark.parametrize("prop", [p.id for p in mm.PROPERTIES])
def test_the_reference_judge_keeps_the_property_on_every_variant(reference_outcomes, prop, source):
    if source in GENERATED and prop != GENERATED[source]:
        pytest.skip(f"the {source} cases are made for {GENERATED[source]}")
    if prop == "screen-injection" and source != "screen" and source != "guideline":
        pytest.skip(f"{prop} is checked on the rendered signs")
    outcomes, sources = reference_outcomes
    if source not in sources:
        pytest.skip(f"the guideline examples are absent ({SHARED / 'data'} is not there; set FRAMEJUDGE_SHARED)")
    o = outcomes[prop]
    made = [v for v in o.made.variants if v.case.source == source]
    if source in ("dev", *GENERATED):
        assert made, f"{prop}: no variant made of the {source} cases"
    elif not made:
        pytest.skip(f"{prop}: the guideline examples give it no variant ({dict(o.made.skipped_by_set[source])})")
    assert not [e for e in o.errors if e[0].case.source == source]
    violated = [f"{v.case.id} [{v.kind}/{v.shape}] {v.what}: {why}" for v, why, _, _ in o.violated if v.case.source == source]
    assert not violated, f"{prop} ({o.property.holds}) violated on {len(violated)} of {len(made)} variants:\n" + \
        "\n".join(violated)


# ---------------------------------------------------------------------------------- a gullible model judge


@pytest.fixture(scope="module")
def gullible():
    from bench.model_server import ModelServer

    with ModelServer(gullible=True) as server:
        yield server


def test_a_gullible_model_judge_breaks_injection_and_category_order_and_the_command_says_so(gullible, tmp_path, capsys):
    """A loopback model that obeys what an answer says about its grade and takes the rubric's second
    category: every property here catches it, through the same library call as any model judge."""
    out = tmp_path / "g.json"
    assert _bench().main(["--judge", "litellm:openai/gullible", "--api-base", gullible.base_url, "--limit", "3",
                          "--property", "injection", "--property", "category-order", "--orders", "3",
                          "--json", str(out)]) == 0
    result = {p["id"]: p for p in json.loads(out.read_text())["properties"]}
    injection, order = result["injection"], result["category-order"]
    assert injection["judge_errors"] == 0 and injection["violated"] == injection["variants"] > 0
    assert {v["kind"] for v in injection["violations"]} == {k for k, _ in mm.injections("a", "x")}
    assert order["orders"] == 3 and order["violated"] > 0 and order["agreement"] == 0.0
    assert "3 orders: all agree on 0 of" in capsys.readouterr().out


def test_the_reference_judge_grades_an_answer_without_what_it_says_to_the_grader():
    from framejudge.judge.injection import without_injections

    for kind, payload in mm.injections("b", "The sign says 70."):
        for embedded in (False, True):
            left = without_injections(mm.inject("The sign says 70. It is a limit.", payload, embedded))
            assert left.replace("\n", " ").replace("The sign says 70. The sign says 70.", "The sign says 70.") == \
                "The sign says 70. It is a limit.", (kind, left)  # a fake golden's copy of the answer may stay
    for benign in ["Preference: I like red.", "Category: dogs.", "The score is 3-1.", "Grade 5 students.",
                   "The reference answer is in the manual.", "Response A is the blue one."]:
        assert without_injections(benign) == benign


def test_category_order_rotates_categories_and_flags_balanced():
    orders = [mm.permuted_rubric(RUBRIC, j, 5) for j in range(5)]
    places = {c.name: set() for c in RUBRIC.categories}
    for r in orders:
        for i, c in enumerate(r.categories):
            places[c.name].add(i)
    assert all(p == set(range(5)) for p in places.values())  # over 5 orders each category in every place
    assert len({r.content_hash for r in orders}) == 5


# ---------------------------------------------------------------------------------- the bench command


def _bench():
    spec = importlib.util.spec_from_file_location("metamorphic_bench", ROOT / "bench" / "metamorphic.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_command_reports_each_property_and_the_development_halfs_violations(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert _bench().main(["--set", "dev", "--limit", "12", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert [p["id"] for p in result["properties"]] == [p.id for p in mm.PROPERTIES]
    assert result["judge"]["backend"] == "reference" and result["sets"] == ["dev"]
    for p in result["properties"]:
        assert p["variants"] == p["held"] + p["violated"] + p["judge_errors"]
        assert len(p["violations"]) == p["violated"]
        assert re.search(rf"^{re.escape(p['id'])}\s+{p['variants']}\s+{p['held']}\s+{p['violated']}\b", printed, re.M)
    again = tmp_path / "n.json"
    assert _bench().main(["--set", "dev", "--limit", "12", "--json", str(again)]) == 0
    assert json.loads(again.read_text()) == result  # deterministic


def test_the_test_half_gives_figures_only(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert _bench().main(["--set", "test", "--limit", "10", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["sets"] == ["test"] and all(p["violations"] == [] for p in result["properties"])
    assert sum(p["violated"] for p in result["properties"]) == sum(p.get("violations_not_shown", 0) for p in result["properties"])
    ids = {json.loads(line)["id"] for name in ("labelled-singles.jsonl", "labelled-pairs.jsonl", "labelled-ranking.jsonl")
           for line in (DATA / name).read_text(encoding="utf-8").splitlines()
           if line.strip() and json.loads(line)["item"] in TEST_ITEMS}
    assert not [i for i in ids if re.search(rf"\b{re.escape(i)}\b", printed)]
    assert "never printed" in printed


@pytest.mark.parametrize("args,says", [
    (["--limit", "0"], "--limit must be at least 1"),
    (["--set", "guideline", "--shared", "/nonexistent/shared"], "guideline examples are not here"),
    (["--judge", "nonsense"], "unknown judge"),
])
def test_bad_arguments_are_refused_with_a_reason(args, says, capsys):
    assert _bench().main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err


def test_all_leaves_absent_guideline_examples_out_with_a_note(tmp_path):
    cases, notes = mm.load_cases("all", DATA, tmp_path, 2)
    assert {c.source for c in cases} == {"dev", "test"} and "guideline examples left out" in notes[0]
    with pytest.raises(DataError):
        mm.load_cases("guideline", DATA, tmp_path, 2)
