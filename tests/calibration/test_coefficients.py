"""Agreement coefficients: published worked examples, independent implementations, edge cases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framejudge.calibration import (
    Ratings,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
    percent_agreement,
)


@pytest.fixture(scope="module")
def examples(shared_dir):
    data = json.loads((shared_dir / "research-data/agreement-worked-examples/examples.json").read_text())
    return {e["id"]: e for e in data["examples"]}


def v(c):
    assert c.undefined is None, c.undefined
    return c.value


def test_krippendorff_2011_examples(examples):
    a = Ratings.from_columns(examples["krippendorff2011_A_binary_2obs"]["data"])
    assert v(krippendorff_alpha(a)) == pytest.approx(0.095, abs=5e-4)
    b = Ratings.from_columns(examples["krippendorff2011_B_nominal_2obs"]["data"])
    assert v(krippendorff_alpha(b)) == pytest.approx(0.692, abs=5e-4)
    c = Ratings.from_columns(examples["krippendorff2011_C_4obs_missing"]["data"])
    published = examples["krippendorff2011_C_4obs_missing"]["published"]
    for level in ("nominal", "ordinal", "interval", "ratio"):
        assert v(krippendorff_alpha(c, level)) == pytest.approx(published[f"alpha_{level}"], abs=5e-4)
    assert krippendorff_alpha(c).units == 11  # unit 12's lone value is not pairable


@pytest.mark.parametrize("name", ["gwet_irrCAC_raw_4raters", "gwet_irrCAC_raw_ben_gerry", "gwet_irrCAC_raw_5observers"])
def test_gwet_handbook_sets_with_missing_ratings(examples, name):
    e = examples[name]
    r = Ratings.from_columns(e["data"])
    want = e["computed_here"]
    assert v(fleiss_kappa(r)) == pytest.approx(want["fleiss"], abs=1e-5)
    assert v(gwet_ac1(r)) == pytest.approx(want["gwet"], abs=1e-5)
    assert v(krippendorff_alpha(r)) == pytest.approx(want["krippendorff"], abs=1e-5)
    if "bp" in want:
        assert v(pabak(r)) == pytest.approx(want["bp"], abs=1e-5)
    if "percent_agreement_pa" in want:
        assert v(percent_agreement(r)) == pytest.approx(want["percent_agreement_pa"], abs=1e-5)
    if "cohen_kappa_sklearn_complete_cases_n11" in want:
        k = cohen_kappa(r)
        assert v(k) == pytest.approx(want["cohen_kappa_sklearn_complete_cases_n11"], abs=1e-5) and k.units == 11


@pytest.mark.parametrize("name", ["gwet_irrCAC_table_cont3x3abstractors", "gwet_irrCAC_table_cont4x4diagnosis"])
def test_two_rater_tables(examples, name):
    e = examples[name]
    r = Ratings.from_table(e["table"], e["categories"])
    want = e["computed_here"]
    assert v(cohen_kappa(r)) == pytest.approx(want["cohen"], abs=1e-5)
    assert v(gwet_ac1(r)) == pytest.approx(want["gwet"], abs=1e-5)
    assert v(pabak(r)) == pytest.approx(want["bp"], abs=1e-5)
    assert v(krippendorff_alpha(r)) == pytest.approx(want["krippendorff"], abs=1e-5)
    assert v(percent_agreement(r)) == pytest.approx(want["pa2"], abs=1e-5)


def test_cohen_textbook_2x2(examples):
    k = cohen_kappa(Ratings.from_table(examples["cohen_2x2_textbook"]["table"]))
    assert (v(k), k.observed, k.expected) == (pytest.approx(0.4), pytest.approx(0.7), pytest.approx(0.5))


def test_fleiss_1971_and_wikipedia(examples):
    sub = Ratings.from_counts(examples["irrCAC_distrib_6raters_fleiss1971_subset"]["counts"])
    assert v(fleiss_kappa(sub)) == pytest.approx(0.41393, abs=1e-5)
    wiki = fleiss_kappa(Ratings.from_counts(examples["wikipedia_fleiss_kappa_worked_example"]["counts"]))
    assert v(wiki) == pytest.approx(0.21, abs=5e-3)
    assert wiki.observed == pytest.approx(0.378, abs=5e-4) and wiki.expected == pytest.approx(0.213, abs=5e-4)


def random_ratings(seed: int, units: int, raters: int, q: int, missing: float) -> Ratings:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, q, units)
    cols = {}
    for j in range(raters):
        noisy = np.where(rng.random(units) < 0.3, rng.integers(0, q, units), truth)
        cols[f"r{j}"] = [int(x) if rng.random() > missing else None for x in noisy]
    return Ratings.from_columns(cols, list(range(q)))


@pytest.mark.parametrize("seed", range(5))
def test_against_the_krippendorff_package(seed):
    krippendorff = pytest.importorskip("krippendorff")
    r = random_ratings(seed, 40, 4, 4, 0.25)
    matrix = np.array([[u.get(rater, np.nan) for u in r.units] for rater in r.raters], dtype=float)
    for level in ("nominal", "ordinal", "interval", "ratio"):
        theirs = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=[0, 1, 2, 3])
        assert v(krippendorff_alpha(r, level)) == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_against_scikit_learn_and_statsmodels(seed):
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    inter = pytest.importorskip("statsmodels.stats.inter_rater")
    two = random_ratings(seed, 60, 2, 4, 0.0)
    a = [u["r0"] for u in two.units]
    b = [u["r1"] for u in two.units]
    for w, sk in (("none", None), ("linear", "linear"), ("quadratic", "quadratic")):
        assert v(cohen_kappa(two, weights=w)) == pytest.approx(sklearn_metrics.cohen_kappa_score(a, b, weights=sk), abs=1e-9)
    many = random_ratings(seed, 50, 5, 3, 0.0)
    table, _ = inter.aggregate_raters(np.array([[u[r] for r in many.raters] for u in many.units]))
    assert v(fleiss_kappa(many)) == pytest.approx(inter.fleiss_kappa(table, method="fleiss"), abs=1e-9)


def test_undefined_is_a_result_with_a_reason():
    unanimous = Ratings.from_columns({"a": ["S", "S", "S"], "b": ["S", "S", "S"]}, ["S", "N"])
    for c in (krippendorff_alpha(unanimous), cohen_kappa(unanimous), fleiss_kappa(unanimous)):
        assert c.value is None and "'S'" in c.undefined
    assert v(percent_agreement(unanimous)) == 1.0
    assert v(gwet_ac1(unanimous)) == 1.0 and v(pabak(unanimous)) == 1.0  # the prevalence paradox
    empty = Ratings([], ["S", "N"])
    assert krippendorff_alpha(empty).undefined == "no unit has two or more ratings"
    assert percent_agreement(empty).value is None
    single = Ratings.from_columns({"a": ["S", "N", "S"]}, ["S", "N"])
    assert krippendorff_alpha(single).value is None and fleiss_kappa(single).value is None
    assert "two raters" in cohen_kappa(single).undefined
    disjoint = Ratings([{"a": "S"}, {"b": "N"}], ["S", "N"])
    assert "no unit was rated by both" in cohen_kappa(disjoint).undefined
    one_unit = Ratings([{"a": "S", "b": "N"}], ["S", "N"])
    assert krippendorff_alpha(one_unit).value == pytest.approx(0.0)  # one disagreeing pair: Do = De


def test_a_label_named_missing_is_a_label():
    r = Ratings.from_columns({"a": ["Missing", "Successful", "Missing", None],
                              "b": ["Missing", "Successful", "Successful", "Missing"]},
                             ["Successful", "Missing"])
    assert krippendorff_alpha(r).units == 3  # the absent rating is absent; "Missing" counts
    assert cohen_kappa(r).units == 3
    with pytest.raises(ValueError, match="not in the codebook"):
        Ratings.from_columns({"a": ["Maybe"]}, ["Successful", "Missing"])


def test_prevalence_paradox_is_visible():
    # 48 of 50 units both raters call Successful; they never agree on anything else.
    a = ["S"] * 48 + ["N", "S"]
    b = ["S"] * 48 + ["S", "N"]
    r = Ratings.from_columns({"a": a, "b": b}, ["S", "N"])
    assert v(percent_agreement(r)) == pytest.approx(0.96)
    assert v(cohen_kappa(r)) < 0 and v(krippendorff_alpha(r)) < 0.05
    assert v(gwet_ac1(r)) > 0.9 and v(pabak(r)) == pytest.approx(0.92)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from("ABC")), min_size=2, max_size=30))
def test_alpha_and_kappa_bounds(pairs):
    r = Ratings.from_columns({"x": [p[0] for p in pairs], "y": [p[1] for p in pairs]}, ["A", "B", "C"])
    for c in (krippendorff_alpha(r), cohen_kappa(r), fleiss_kappa(r)):
        assert (c.value is None) != (c.undefined is None)
        if c.value is not None:
            assert -1.0 - 1e-9 <= c.value <= 1.0 + 1e-9


def test_mixed_int_and_float_labels_are_ordered_by_value():
    krippendorff = pytest.importorskip("krippendorff")
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    a = [1, 1, 2.5, 2.5, 3, 3, 1, 2.5, 3, 1, 3, 2.5]
    b = [1, 2.5, 2.5, 3, 3, 2.5, 1, 2.5, 3, 2.5, 3, 1]
    r = Ratings.from_columns({"a": a, "b": b})
    assert r.categories == [1, 2.5, 3]
    theirs = krippendorff.alpha(reliability_data=np.array([a, b], dtype=float), level_of_measurement="ordinal",
                                value_domain=[1, 2.5, 3])
    assert v(krippendorff_alpha(r, "ordinal")) == pytest.approx(theirs, abs=1e-9)
    assert theirs == pytest.approx(0.684, abs=5e-4)  # 0.368 with the codebook [2.5, 1, 3]
    rank = {x: i for i, x in enumerate(sorted({*a, *b}))}  # scikit-learn wants discrete labels
    for w in ("linear", "quadratic"):
        want = sklearn_metrics.cohen_kappa_score([rank[x] for x in a], [rank[x] for x in b], weights=w)
        assert v(cohen_kappa(r, weights=w)) == pytest.approx(want, abs=1e-9)


def test_default_codebook_order():
    r = Ratings.from_columns({"a": ["b", 10, True, 2.5, None, (1, 2)],
                              "b": ["a", np.int64(-1), False, float("nan"), 3, None]})
    assert r.categories[:7] == [False, True, -1, 2.5, 3, 10, r.categories[6]]
    assert r.categories[6] != r.categories[6]  # NaN after the other numbers
    assert r.categories[7:] == ["a", "b", (1, 2)]
    assert [type(c) for c in r.categories[:2]] == [bool, bool]  # true/false kept apart from 0 and 1
    with pytest.raises(ValueError, match="mix 1 and True, which are one label"):
        Ratings.from_columns({"a": [1, 2], "b": [True, 2]})
    with pytest.raises(ValueError, match="mix False and 0.0"):
        Ratings.from_columns({"a": [False, 0.0]})
