"""The report's 95% intervals, pinned against an exact computation on hand-sized samples.

The family bootstrap (SPEC, "Statistics") draws the families with replacement, a drawn family bringing
all of its tasks; rank agreement draws tasks. On 4 families (or 5 tasks) every one of the n**n equally
likely ordered draws can be listed, so the test knows the bootstrap distribution exactly and reads its
2.5th and 97.5th percentiles off it, with none of the report's code (no multinomial counts, no matrix
product, no vectorized tau). The report's 10,000 seeded resamples must land on exactly those values: the
samples are built so that no atom of the distribution sits within ``MARGIN`` of the 2.5% or 97.5% point
(at 10,000 resamples the empirical CDF there has a standard deviation of 0.0016), and so that a 90%
interval would give other values. An interval at another level, a mean of family rates instead of a
pooled rate, or a resample that drops a family's tasks each fail here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from test_report import rec

from qb_client.report import compute

MARGIN = 0.005

# family -> cell -> pass (1) or fail (0) of each of its tasks; families of 1..4 tasks, so pooling
# the drawn families' tasks differs from averaging their rates
FAMILIES: dict[str, dict[str, list[int]]] = {
    "fa": {"RR": [1], "RN": [0], "NR": [1], "NN": [1]},
    "fb": {"RR": [1, 1], "RN": [1, 0], "NR": [0, 0], "NN": [1, 1]},
    "fc": {"RR": [1, 1, 1], "RN": [0, 0, 0], "NR": [1, 1, 0], "NN": [1, 0, 0]},
    "fd": {"RR": [1, 1, 1, 0], "RN": [1, 1, 0, 0], "NR": [1, 1, 1, 0], "NN": [1, 1, 1, 1]},
}
STATISTICS = {"damage": ("RN", "RR"), "compensation": ("NN", "RN"), "matched_gap": ("NN", "RR"),
              "boundary_cost": ("NR", "RR")}

# config -> cell -> pass of each of 5 tasks (each task its own family), for rank agreement
CONFIGS: dict[str, dict[str, list[int]]] = {
    "a": {"RR": [0, 1, 0, 0, 1], "NN": [0, 1, 1, 1, 0]},
    "b": {"RR": [1, 1, 1, 0, 1], "NN": [0, 1, 0, 0, 1]},
    "c": {"RR": [1, 0, 1, 1, 0], "NN": [1, 1, 1, 1, 1]},
}


def exact_quantile(values: list[float], p: float) -> float:
    """The smallest atom whose cumulative probability reaches ``p``, after checking that no atom's
    cumulative probability is within MARGIN of ``p`` (so 10,000 resamples cannot land elsewhere)."""
    v = np.sort(np.round(np.asarray(values, dtype=float), 12))
    atoms = np.unique(v)
    cdf = np.array([(v <= a).mean() for a in atoms])
    assert np.min(np.abs(cdf - p)) > MARGIN, f"an atom sits too near the {p} point; pick another sample"
    return float(atoms[np.argmax(cdf >= p)])


def interval(values: list[float], level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    return exact_quantile(values, tail), exact_quantile(values, 1 - tail)


def family_records() -> list[dict]:
    return [rec(f"{fam}/t{k}", bool(ok), cell=cell)
            for fam, cells in FAMILIES.items() for cell, passes in cells.items() for k, ok in enumerate(passes)]


def pooled(draw: tuple[str, ...], cell: str) -> float:
    """The rate of one resample: every task of every drawn family, pooled."""
    tasks = [ok for fam in draw for ok in FAMILIES[fam][cell]]
    return sum(tasks) / len(tasks)


def family_bootstrap(first: str, second: str) -> list[float]:
    """Every ordered draw of len(FAMILIES) families with replacement, each equally likely."""
    return [pooled(d, first) - pooled(d, second) for d in itertools.product(FAMILIES, repeat=len(FAMILIES))]


@pytest.fixture(scope="module")
def family_doc() -> dict:
    return compute(family_records())["configs"][0]


@pytest.mark.parametrize("name", list(STATISTICS))
def test_family_bootstrap_intervals_are_the_exact_95_percent_percentiles(family_doc: dict, name: str) -> None:
    first, second = STATISTICS[name]
    values = family_bootstrap(first, second)
    everything = tuple(FAMILIES)
    assert family_doc[name]["value"] == pytest.approx(pooled(everything, first) - pooled(everything, second),
                                                      abs=1e-12)
    expected = interval(values, 0.95)
    assert family_doc[name]["ci95"] == pytest.approx(list(expected), abs=1e-12)
    # the sample can tell the level apart: a 90% interval (or a 99% one) is another pair of numbers
    assert interval(values, 0.90) != expected
    assert (min(values), max(values)) != expected or name == "boundary_cost"


def test_the_samples_pin_the_values_by_hand(family_doc: dict) -> None:
    """The same numbers written out, so the enumeration above is checked too."""
    assert family_doc["damage"] == {"value": pytest.approx(-0.6), "ci95": pytest.approx([-1.0, -4 / 13])}
    assert family_doc["compensation"] == {"value": pytest.approx(0.5), "ci95": pytest.approx([5 / 13, 5 / 7])}
    assert family_doc["matched_gap"] == {"value": pytest.approx(-0.1), "ci95": pytest.approx([-6 / 11, 3 / 14])}
    assert family_doc["boundary_cost"] == {"value": pytest.approx(-0.3), "ci95": pytest.approx([-7 / 9, 0.0])}


def tau_b(draw: tuple[int, ...]) -> float:
    rr = [sum(c["RR"][k] for k in draw) / len(draw) for c in CONFIGS.values()]
    nn = [sum(c["NN"][k] for k in draw) / len(draw) for c in CONFIGS.values()]
    return float(scipy_stats.kendalltau(np.round(rr, 12), np.round(nn, 12), variant="b").statistic)


def test_rank_agreement_interval_is_the_exact_95_percent_task_bootstrap() -> None:
    records = [rec(f"f{k}/t", bool(ok), cell=cell, model=model)
               for model, cells in CONFIGS.items() for cell, passes in cells.items() for k, ok in enumerate(passes)]
    agreement = compute(records)["rank_agreement"]
    n = len(CONFIGS["a"]["RR"])
    taus = [tau_b(d) for d in itertools.product(range(n), repeat=n)]
    finite = [t for t in taus if not math.isnan(t)]  # a resample where one side is all tied has no tau
    assert len(taus) - len(finite) == 1
    assert agreement["kendall_tau_b"] == pytest.approx(tau_b(tuple(range(n))), abs=1e-12)
    assert agreement["kendall_tau_b"] == pytest.approx(-1 / 3)
    expected = interval(finite, 0.95)
    assert expected == pytest.approx((-1.0, 0.5), abs=1e-12)
    assert agreement["ci95"] == pytest.approx(list(expected), abs=1e-12)
    assert interval(finite, 0.90)[1] == pytest.approx(1 / 3)  # a 90% interval would end elsewhere
