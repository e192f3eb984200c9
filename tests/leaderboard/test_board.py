"""The leaderboard table: win rates against the baseline with intervals clustered by video,
length control, category shares, errors, slices, the bias footnote and bad input."""

from __future__ import annotations

import json

import pytest

from framejudge.leaderboard.board import Board
from framejudge.leaderboard.stats import build_board
from tests.leaderboard.simulated import battle, simulate


def _row(board, model):
    return next(r for r in board.models if r.model == model)


def test_length_control_removes_a_simulated_length_bias():
    # "long" is as good as the baseline but writes 200 more characters, and the judge prefers
    # longer answers; "good" is better and as long as the baseline
    out = simulate({"base": 0.0, "long": 0.0, "good": 0.4}, [("long", "base"), ("good", "base")], 2000, seed=5,
                   length_mean={"long": 500}, length_bias=1.2, videos=2000)
    board = build_board(out, baseline="base", replicates=200)
    long, good = _row(board, "long").vs_baseline, _row(board, "good").vs_baseline
    assert long.win_rate.estimate > 0.65 and long.win_rate.low > 0.6  # the raw rate is fooled
    lc = long.length_controlled
    assert abs(lc.estimate - 0.5) < 0.04 and lc.low < 0.5 < lc.high
    # no length difference to correct: the two rates agree
    assert abs(good.length_controlled.estimate - good.win_rate.estimate) < 0.03
    assert good.length_controlled.low < 1 / (1 + 2.718281828 ** -0.4) < good.length_controlled.high
    bias = board.bias
    assert bias.length_coefficient.low < 1.2 < bias.length_coefficient.high and bias.length_coefficient.low > 0.5
    assert 120 < bias.length_scale < 180
    assert bias.longer_won_share > 0.6 and 3900 < bias.length_decided <= 4000  # ties of length left out


def test_no_length_bias_leaves_the_rate_alone():
    out = simulate({"base": 0.0, "long": 0.3}, [("long", "base")], 1500, seed=6, length_mean={"long": 500})
    board = build_board(out, replicates=100)
    v = _row(board, "long").vs_baseline
    assert abs(v.length_controlled.estimate - v.win_rate.estimate) < 0.05
    assert board.bias.length_coefficient.low < 0 < board.bias.length_coefficient.high


def test_win_rate_bootstrap_resamples_whole_videos():
    # two turns of each video always share their outcome: resampled by video, the interval is
    # that of half as many independent units (about sqrt(2) wider than if the turns were apart)
    def battles(video_of):
        out = []
        for v in range(200):
            for turn in (0, 1):
                out.append(battle("m", "base", "A" if v % 2 else "B", item=video_of(v, turn)[0], turn=turn,
                                  video=video_of(v, turn)[1]))
        return out

    by_video = build_board(battles(lambda v, t: (f"i{v}-{t}", f"v{v}")), baseline="base", replicates=2000)
    by_item = build_board(battles(lambda v, t: (f"i{v}", None)), baseline="base", replicates=2000)
    apart = build_board(battles(lambda v, t: (f"i{v}-{t}", None)), baseline="base", replicates=2000)
    assert (by_video.clusters, by_item.clusters, apart.clusters) == (200, 200, 400)
    width = {name: _row(b, "m").vs_baseline.win_rate.high - _row(b, "m").vs_baseline.win_rate.low
             for name, b in (("video", by_video), ("item", by_item), ("apart", apart))}
    assert _row(by_video, "m").vs_baseline.win_rate.estimate == 0.5
    assert width["video"] == width["item"]  # turns of one item without a video move together too
    assert 1.25 < width["video"] / width["apart"] < 1.6, width


def test_counts_categories_and_errors():
    out = [battle("m", "base", "A", item="i1", video="v1"), battle("base", "m", "A", item="i2", video="v1"),
           battle("m", "base", "Neither", item="i3"), battle("m", "base", None, item="i4"),
           battle("m", "other", "Both", item="i5"), battle("other", "base", "B", item="i6")]
    board = build_board(out, baseline="base", replicates=50)
    m = _row(board, "m")
    assert (m.battles, m.turns, m.errors) == (5, 5, 1)
    v = m.vs_baseline
    assert (v.battles, v.wins, v.both, v.neither, v.losses, v.errors) == (4, 1, 0, 1, 1, 1)
    assert v.win_rate.estimate == pytest.approx(1.5 / 3)
    # its graded answers: Successful (i1), Not Successful (i2, i3), Successful (i5 Both)
    assert m.categories == {"Not Successful": 2, "Successful": 2}
    assert m.category_shares == {"Not Successful": 0.5, "Successful": 0.5}
    assert m.successful.estimate == 0.5 and m.successful.low <= 0.5 <= m.successful.high
    assert _row(board, "base").vs_baseline is None and _row(board, "base").errors == 1
    assert board.errors == 1 and board.battles == 6


def test_a_model_whose_battles_all_failed_has_no_strength():
    out = simulate({"base": 0.0, "m": 0.2}, [("m", "base")], 50, seed=1)
    out += [battle("broken", "base", None, item=f"x{k}") for k in range(3)]
    board = build_board(out, replicates=50)
    broken = _row(board, "broken")
    assert broken.errors == 3 and broken.vs_baseline.errors == 3
    assert broken.strength.estimate is None and broken.rank is None and broken.ranks == []
    assert broken.vs_baseline.win_rate.reason == "no graded battle against the baseline"
    assert any("No graded battle (every one failed): broken" in n for n in board.notes)
    assert board.models[-1].model == "broken"


def test_slices_by_domain_task_type_and_metadata():
    out = []
    strong_in = {"garden": 1.5, "kitchen": -1.5}
    for domain, s in strong_in.items():
        for b in simulate({"base": 0.0, "m": s}, [("m", "base")], 300, seed=len(domain)):
            b.domain = domain
            b.task_type = "single"
            b.metadata["lang"] = "en" if int(b.item_id[1:]) % 3 else "de"
            b.item_id = f"{domain}-{b.item_id}"
            out.append(b)
    out[0].metadata.pop("lang")
    board = build_board(out, baseline="base", replicates=100, by=["domain", "task_type", "lang"])
    assert board.by == ["domain", "task_type", "lang"]
    assert set(board.slices["domain"]) == {"garden", "kitchen"}
    garden = _row(board.slices["domain"]["garden"], "m").vs_baseline
    kitchen = _row(board.slices["domain"]["kitchen"], "m").vs_baseline
    assert garden.win_rate.low > 0.7 and kitchen.win_rate.high < 0.3
    overall = _row(board, "m").vs_baseline
    assert garden.battles + kitchen.battles == overall.battles == 600
    assert garden.wins + kitchen.wins == overall.wins
    assert list(board.slices["task_type"]) == ["single"]
    assert _row(board.slices["task_type"]["single"], "m").vs_baseline.wins == overall.wins
    assert set(board.slices["lang"]) == {"(none)", "de", "en"}
    assert sum(_row(b, "m").vs_baseline.battles for b in board.slices["lang"].values()) == 600
    assert board.slices["lang"]["(none)"].battles == 1
    # every slice keeps the overall baseline and has its own strengths and bias footnote
    assert all(b.baseline == "base" and b.slices == {} for s in board.slices.values() for b in s.values())


def test_a_slice_without_the_baseline_says_so():
    out = [battle("m", "base", "A", item="i1", domain="x"), battle("m", "other", "A", item="i2", domain="y")]
    board = build_board(out, baseline="base", replicates=20, by=["domain"])
    y = board.slices["domain"]["y"]
    assert y.baseline is None
    assert _row(y, "m").vs_baseline.win_rate.reason == "no baseline in these battles"
    assert _row(y, "m").strength.estimate is not None


def test_position_consistency_footnote():
    out = simulate({"base": 0.0, "m": 0.1}, [("m", "base")], 40, seed=0)
    for k, b in enumerate(out):
        b.swap_consistent = None if k < 10 else k % 3 != 0
    bias = build_board(out, replicates=20).bias
    assert bias.swap_graded == 30
    assert bias.swap_consistent == sum(1 for k in range(10, 40) if k % 3 != 0)
    assert bias.position_consistency == pytest.approx(bias.swap_consistent / 30)


def test_board_round_trips_as_json_without_nan():
    out = simulate({"base": 0.0, "m": 0.2}, [("m", "base")], 30, seed=0)
    out += [battle("zero", "base", "B", item=f"z{k}") for k in range(5)] + [battle("solo", "base", None, item="s")]
    board = build_board(out, replicates=30, by=["domain"])
    text = board.model_dump_json()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)
    assert Board.model_validate_json(text) == board


def test_default_baseline_is_the_model_in_most_battles():
    out = simulate({"hub": 0.0, "a": 0.1, "b": 0.2}, [("a", "hub"), ("b", "hub")], 10, seed=0)
    assert build_board(out, replicates=10).baseline == "hub"


def test_bad_input_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="no battles"):
        build_board([])
    with pytest.raises(ValueError, match="baseline 'nobody' is in no battle"):
        build_board([battle("a", "b", "A")], baseline="nobody")
    with pytest.raises(ValueError, match="against itself"):
        build_board([battle("a", "a", "A")])
    with pytest.raises(ValueError, match="replicates"):
        build_board([battle("a", "b", "A")], replicates=0)
    # a slice key no battle has would make one slice, "(none)", of everything; one given twice, the same twice
    with pytest.raises(ValueError, match=r"by: no battle has a field 'lang' \(domain, task_type, or a metadata "
                                         r"field: source\)"):
        build_board([battle("a", "b", "A", metadata={"source": "x"})], by=["lang"])
    with pytest.raises(ValueError, match="by: 'domain' is given twice"):
        build_board([battle("a", "b", "A")], by=["domain", "domain"])


def _lc(board, model):
    return _row(board, model).vs_baseline.length_controlled


def test_no_length_controlled_rate_where_zero_length_difference_lies_outside_the_data():
    # never better than the baseline (3 ties, 3 losses) and every answer longer: the rate at zero difference
    # would be read off a curve where there are no battles, and the fit put it at 1.000 [0.985, 1.000]
    out = [battle("long", "base", "Both" if k < 3 else "B", f"i{k}", length_a=300 + 40 * k, length_b=100)
           for k in range(6)]
    out += [battle("other", "base", "A" if k % 2 else "B", f"j{k}", length_a=100 + 30 * (k - 3), length_b=100)
            for k in range(8)]
    board = build_board(out, baseline="base", replicates=100)
    lc = _lc(board, "long")
    assert lc.estimate is None and lc.low is None
    assert "always longer than the baseline's" in lc.reason and "extrapolation" in lc.reason
    assert _row(board, "long").vs_baseline.win_rate.estimate <= 0.25  # the raw rate stays what it is
    # always shorter, the same
    short = [battle("short", "base", "A", f"k{k}", length_a=50 + k, length_b=100) for k in range(3)]
    short += [battle("short", "base", "B", f"k{k + 3}", length_a=60 + k, length_b=100) for k in range(3)]
    assert "always shorter" in _lc(build_board(short + out, baseline="base", replicates=50), "short").reason


def test_no_length_controlled_rate_where_the_length_difference_separates_the_outcome():
    # every longer answer won, every shorter one lost: the slope runs off to infinity
    out = [battle("m", "base", "A" if k >= 4 else "B", f"i{k}", length_a=100 + 20 * (k - 4) + (5 if k >= 4 else -5),
                  length_b=100) for k in range(8)]
    out += [battle("other", "base", "A" if k % 2 else "B", f"j{k}", length_a=100 + 30 * (k - 3), length_b=100)
            for k in range(8)]
    board = build_board(out, baseline="base", replicates=100)
    lc = _lc(board, "m")
    assert lc.estimate is None and "separated by the length difference" in lc.reason
    # one win among the shorter answers and one loss among the longer: overlap, a finite fit
    out[0] = battle("m", "base", "A", "i0", length_a=20, length_b=100)
    out[7] = battle("m", "base", "B", "i7", length_a=165, length_b=100)
    lc = _lc(build_board(out, baseline="base", replicates=100), "m")
    assert lc.estimate is not None and 0 < lc.low <= lc.estimate <= lc.high < 1
