"""The built-in rubric carries the whole guideline; rubric files load with line-numbered errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from framejudge.cli import app
from framejudge.rubrics import RubricError, all_rubrics, get_rubric, load_rubric, parse_rubric
from framejudge.schema import Category, Preference

GUIDELINE = "reference/grading-guidelines.txt"


@pytest.fixture(scope="module")
def rubric():
    return get_rubric("video-qa")


@pytest.fixture(scope="module")
def guideline(shared_dir) -> str:
    return (shared_dir / GUIDELINE).read_text(encoding="utf-8")


def words(text: str) -> set[str]:
    stop = {"and", "the", "content", "behavior", "identity", "topics", "polarizing", "racist", "biased"}
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3 and w not in stop}


def matches(name: str, candidates: list[str]) -> list[str]:
    """The rubric entries sharing the most significant words with a guideline heading."""
    scores = {c: len(words(name) & words(c)) for c in candidates}
    best = max(scores.values(), default=0)
    return [c for c, v in scores.items() if v == best and v > 0]


def test_every_category_is_defined_with_its_inclusions(rubric, guideline):
    block = guideline[guideline.index("EVALUATION OPTIONS"):guideline.index("EVALUATION DETAIL")]
    for name in ["Successful", "Not Successful", "Irrelevant", "Missing", "Error message"]:
        assert name in block
        assert rubric.category(Category(name)).definition
    inclusions = {i.id for c in rubric.categories for i in c.includes}
    # The guideline's lists of what belongs in Successful and Not Successful.
    assert {
        "accurate_hedge", "no_video_needed", "non_central_items", "cannot_but_useful",
        "buildings_artworks", "speculation", "integrity_refusal", "generic_but_useful",
        "rejects_false_presupposition",
    } <= {i.id for i in rubric.category(Category.successful).includes}
    assert {
        "hallucinated_content", "misses_what_is_there", "too_generic", "wrong_facts",
        "engages_with_violating_content", "answers_about_people", "unsupported_health_answer",
    } <= {i.id for i in rubric.category(Category.not_successful).includes}
    assert len(inclusions) >= 20
    examples = sum(len(i.examples) for c in rubric.categories for i in c.includes)
    assert examples >= 12


def test_error_strings_are_the_guidelines(rubric, guideline):
    block = guideline[guideline.index("Error Message * Use if"):guideline.index("DO NOT MARK")]
    listed = re.findall(r"\* (I can[^*]*?[.!])(?= \*)", block)
    assert len(listed) == 4
    assert [s.replace("\u2019", "'") for s in listed] == rubric.error_messages.exact
    assert rubric.error_messages.cutoff_suffix in block.replace("\u2019", "'")


def test_every_ranked_criterion_in_order(rubric, guideline):
    block = guideline[guideline.index("CRITERIA Criteria to consider"):]
    found = re.findall(r"(\d) (Factual accuracy|Relevancy|Not missing|Helpfulness|Conciseness|Creativity)", block)
    names = [n for _, n in found[:6]]
    assert names == [c.name for c in rubric.preference.criteria]
    conciseness = rubric.criterion("conciseness")
    assert conciseness.applies_to == "all_but_long_expression"
    assert rubric.criterion("creativity").applies_to == "expression"
    assert any("always" in r and "Successful" in r for r in rubric.preference.rules)


def test_preference_choices(rubric, guideline):
    for choice in ["Response A", "Response B", "Both", "Neither"]:
        assert choice in guideline
    assert {c.id for c in rubric.preference.choices} == set(Preference)
    # the guideline's Both (equally preferable) and Neither (neither preferred), as ties: two
    # Successful answers are equally good, two failing ones are both bad
    assert "equally preferable" in guideline and "neither option is preferred" in guideline
    ties = rubric.preference.ties
    assert (ties.successful, ties.not_successful) == (Preference.both, Preference.neither)
    assert rubric.preference.choice(Preference.both).label == "both good"
    assert rubric.preference.choice(Preference.neither).label == "both bad"
    tie_rule = next(r for r in rubric.preference.rules if "tie" in r)
    assert "Both" in tie_rule and "Neither" in tie_rule and not any("same category" in r for r in rubric.preference.rules)
    # the worked examples include a tie of each kind
    assert {ex.preference for ex in rubric.preference.examples} >= {Preference.both, Preference.neither}


def test_a_rubrics_ties_are_both_or_neither_and_its_tied_examples_follow_them(rubric):
    text = (Path(__file__).parents[2] / "framejudge/rubrics/builtin/video-qa.yaml").read_text()
    with pytest.raises(RubricError, match="ties.successful is Both or Neither, got A"):
        parse_rubric(text.replace("    successful: Both\n", "    successful: A\n"), "t.yaml")
    with pytest.raises(RubricError, match="a tie between Not Successful and Not Successful answers is Neither"):
        parse_rubric(text.replace("      preference: Neither\n", "      preference: Both\n"), "t.yaml")
    with pytest.raises(RubricError, match="is a tie: no deciding criterion"):
        parse_rubric(text.replace("      preference: Neither\n", "      preference: Neither\n      deciding_criterion: "
                                  "helpfulness\n"), "t.yaml")


def test_every_flag(rubric, guideline):
    block = guideline[guideline.index("Flag integrity violating content"):]
    headings = re.findall(r"\d\. (Integrity violating content|Transcription Error|Multiturn)\.", block)
    assert len(set(headings)) == 3
    ids = {f.id for f in rubric.flags}
    assert ids == {"integrity_violation", "transcription_error", "multiturn"}
    assert next(f for f in rubric.flags if f.id == "integrity_violation").scope == "response"


def test_every_domain_with_its_support(rubric, guideline):
    block = guideline[guideline.index("Feature Supported? Description"):guideline.index("HEALTH DOMAIN")]
    rows = re.findall(r"([A-Z][A-Za-z &/]+?) (Yes|No) ", block)
    assert len(rows) == 9
    names = [d.name for d in rubric.domains]
    for name, supported in rows:
        hit = matches(name, names)
        assert len(hit) == 1, (name, hit)
        domain = next(d for d in rubric.domains if d.name == hit[0])
        assert domain.supported == (supported == "Yes"), name


def test_every_integrity_topic(rubric, guideline):
    block = guideline[guideline.index("Integrity and Sensitive Topics"):]
    headings = re.findall(
        r"\d\. (Personal Identifiable Identity \(PII\)|Offensive[^.]*?behavior|Violence and self-harm|"
        r"Sexual or flirtatious behavior|Controversial and Polarizing Topics)", block)
    assert len(headings) == 5
    names = [t.name for t in rubric.integrity_topics]
    for h in headings:
        assert len(matches(h, names)) == 1, h
    pii = next(t for t in rubric.integrity_topics if t.id == "pii")
    assert any("public" in i for i in pii.items) and any("Email" in i for i in pii.items)


def test_task_types_special_cases_and_golden(rubric, guideline):
    assert {t.id for t in rubric.task_types} == {"single_turn", "multi_turn"}
    multi = next(t for t in rubric.task_types if t.id == "multi_turn")
    assert "before" in multi.description and "10 seconds" in multi.description
    assert {s.id for s in rubric.special_cases} == {"health", "presupposition"}
    assert len(next(s for s in rubric.special_cases if s.id == "health").cases) == 4
    assert "not as the truth" in rubric.golden_response
    assert "Presupposition" in guideline and "golden response" in guideline.lower()


def test_rubric_is_versioned_and_hashed(rubric):
    assert rubric.version == rubric.changelog[0].version == "1.1.0"
    assert [c.version for c in rubric.changelog] == ["1.1.0", "1.0.0"]
    assert re.fullmatch(r"[0-9a-f]{16}", rubric.content_hash)
    edited = rubric.model_copy(update={"summary": rubric.summary + " More."})
    assert edited.content_hash != rubric.content_hash


def test_builtin_set_includes_mcq():
    found = all_rubrics()
    assert {"video-qa", "mcq-letter"} <= set(found)
    assert found["mcq-letter"].kind == "mcq"


def test_bad_rubric_file_errors_name_the_line(tmp_path):
    good = (Path(__file__).parents[2] / "framejudge/rubrics/builtin/mcq-letter.yaml").read_text()
    bad = good.replace("version: 1.0.0\ntitle", "version: one\ntitle")
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    line = bad.splitlines().index("version: one") + 1
    assert f"bad.yaml:{line}: version:" in str(info.value)

    with pytest.raises(RubricError, match=r":3: not valid YAML"):
        parse_rubric("id: x\nkind: mcq\n  broken: [", "x.yaml")
    with pytest.raises(RubricError, match=r"z.yaml:2: not valid YAML \('2020-13-45' cannot be read: month must be"):
        parse_rubric("id: x\nversion: 2020-13-45\n", "z.yaml")  # well-formed YAML, but no such date
    with pytest.raises(RubricError, match="changelog entry is 0.9.0 but the rubric version is 1.0.0"):
        parse_rubric(good.replace("  - version: 1.0.0", "  - version: 0.9.0"), "y.yaml")
    with pytest.raises(RubricError, match=r"z.yaml:\d+: colour: Extra inputs are not permitted"):
        parse_rubric(good + "colour: red\n", "z.yaml")
    with pytest.raises(RubricError, match="no such rubric file"):
        load_rubric(tmp_path / "nope.yaml")


def test_video_qa_rubric_must_define_all_categories(rubric):
    import yaml

    data = rubric.model_dump(mode="json")
    data["categories"] = data["categories"][:4]
    with pytest.raises(RubricError, match="each of the five categories"):
        parse_rubric(yaml.safe_dump(data), "cut.yaml")


def test_user_rubric_loads_and_lists(tmp_path, rubric):
    import yaml

    data = rubric.model_dump(mode="json")
    data.update(id="house-style", version="2.1.0")
    data["changelog"] = [{"version": "2.1.0", "date": "2026-11-29", "changes": "House style."}] + data["changelog"]
    (tmp_path / "house.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert get_rubric("house-style", [tmp_path]).version == "2.1.0"
    assert get_rubric(str(tmp_path / "house.yaml")).id == "house-style"
    with pytest.raises(RubricError, match="no rubric with id 'nope'"):
        get_rubric("nope")

    runner = CliRunner()
    res = runner.invoke(app, ["rubrics", "list", "--dir", str(tmp_path)])
    assert res.exit_code == 0 and "house-style" in res.output and "video-qa" in res.output
    res = runner.invoke(app, ["rubrics", "show", "video-qa"])
    assert res.exit_code == 0 and "Factual accuracy" in res.output and "I cannot answer that." in res.output
    res = runner.invoke(app, ["rubrics", "show", "nope"])
    assert res.exit_code == 2 and "no rubric with id" in res.output
