"""The report's numerical pieces at their edges, pinned to exact values (found by mutation testing).

Each test here kills mutants of ``qb_client/report/stats.py`` or ``compute.py`` that the rest of the suite
let live (docs/mutation.md): a boundary moved by one (a resample that drew exactly one task, a sample
of one, two items to rank), a percentile point moved by a hair, a -0.0 left in a JSON number, an order of
reversals that no other test read. Values are computed by hand on samples small enough to check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qb_client.report import stats
from qb_client.report.compute import compute, selection
from test_report import rec


def test_a_resample_that_drew_exactly_one_task_has_that_task_s_rate():
    # 2 clusters: the first holds one task with share 0.5, the second two tasks summing to 1.0
    counts = np.array([[1, 0], [0, 1], [0, 0], [2, 0]])
    rates = stats.resampled_rates(counts, np.array([0.5, 1.0]), np.array([1, 2]))
    assert rates[:2].tolist() == [0.5, 0.5]
    assert math.isnan(rates[2])  # nothing drawn: no rate, not 0
    assert rates[3] == 0.5


def test_no_cluster_gives_an_empty_count_matrix_of_the_right_shape():
    counts = stats.resample_counts(0, resamples=7)
    assert counts.shape == (7, 0)
    assert counts.dtype == np.int64
    assert stats.resampled_rates(counts, np.zeros(0), np.zeros(0)).shape == (7,)


def test_percentile_interval_is_the_2_5_and_97_5_points_exactly():
    # 0, 1, ..., 100: the p-th percentile with linear interpolation is p (up to the float noise of
    # (1 - 0.95) / 2 * 100 = 2.500000000000002); a point off by 0.025 (2.525) must fail
    exact = pytest.approx([2.5, 97.5], abs=1e-12)
    assert stats.percentile_ci(np.arange(101)) == exact
    assert stats.percentile_ci(np.arange(101), level=0.9) == pytest.approx([5.0, 95.0], abs=1e-12)
    # non-finite samples (a resample that drew nothing) are dropped, not counted as 0
    assert stats.percentile_ci(np.array([np.nan, *range(101), np.inf])) == exact


def test_percentile_interval_of_one_sample_is_that_sample():
    assert stats.percentile_ci(np.array([0.25])) == [0.25, 0.25]
    assert stats.percentile_ci(np.array([np.nan])) is None


def test_clean_turns_negative_zero_into_zero():
    assert math.copysign(1.0, stats.clean(-0.0)) == 1.0
    assert stats.clean(np.float64(-0.25)) == -0.25
    assert type(stats.clean(np.float64(0.5))) is float


def test_kendall_tau_b_of_two_items_is_plus_or_minus_one():
    assert stats.kendall_tau_b([0.1, 0.2], [0.3, 0.4]) == 1.0
    assert stats.kendall_tau_b([0.1, 0.2], [0.4, 0.3]) == -1.0
    assert stats.kendall_tau_b([0.1], [0.3]) is None


def test_vectorized_tau_b_of_two_items_and_rows_with_a_nan():
    x = np.array([[0.1, 0.2], [0.1, 0.2], [np.nan, 0.2], [0.3, 0.3], [0.1, 0.2]])
    y = np.array([[0.3, 0.4], [0.4, 0.3], [0.3, 0.4], [0.1, 0.2], [0.3, np.nan]])
    tau = stats.kendall_tau_b_rows(x, y)
    assert tau[:2].tolist() == [1.0, -1.0]
    assert math.isnan(tau[2]) and math.isnan(tau[4])  # only the rows holding a NaN are undefined
    assert math.isnan(tau[3])  # one side all tied


def test_reversals_are_ordered_by_the_leader_s_x_then_by_name():
    # d and e tie on x (0.9), so the name decides between them; b (0.5) comes after both
    labels = ["e", "c", "d", "b"]
    reversals = stats.strict_reversals(labels, [0.9, 0.1, 0.9, 0.5], [0.0, 0.8, 0.0, 0.5])
    assert reversals == [["d", "b"], ["d", "c"], ["e", "b"], ["e", "c"], ["b", "c"]]


def test_selection_ties_within_float_noise_and_names_every_field():
    # 0.1 + 0.2 is 0.30000000000000004 and 0.1 * 7 is 0.7000000000000001: ties at TIE_DECIMALS, not
    # at full precision, and not at a coarser rounding (0.25 would then tie with 0.3, and 0.6 with 0.7)
    out = selection(["a", "b", "c"], [0.3, 0.1 + 0.2, 0.25], [0.6, 0.7, 0.1 * 7])
    assert out == {"rr_leaders": ["a", "b"], "nn_best": ["b", "c"], "picked_nn": pytest.approx(0.65, abs=1e-12),
                   "best_nn": pytest.approx(0.7, abs=1e-12), "regret": pytest.approx(-0.05, abs=1e-12)}


def test_a_cell_s_passed_count_is_an_int_when_whole_else_six_decimals():
    # RR: a/x passes 1 draw of 3 and a/y 2 of 2, so passed = 1/3 + 1 = 1.333333 (6 decimals);
    # RN: a/x passes 2 draws of 2 and a/y 0 of 1: passed = 1, the JSON int 1, not 1.0
    records = [rec("a/x", d == 0, cell="RR", draw=d) for d in range(3)] + [
        rec("a/y", True, cell="RR", draw=d) for d in range(2)] + [
        rec("a/x", True, cell="RN", draw=d) for d in range(2)] + [rec("a/y", False, cell="RN")]
    cells = compute(records, resamples=10)["configs"][0]["cells"]
    assert repr(cells["RR"]["passed"]) == "1.333333"
    assert repr(cells["RN"]["passed"]) == "1"
    assert cells["RN"]["n"] == 2
