"""The numerical pieces of the report, free of records: cluster bootstraps and Kendall tau-b.

A cluster bootstrap is done with multinomial count matrices: a row of
``counts`` says how many times each cluster (a family, or a task) was drawn in
one resample, which is the same distribution as drawing clusters with
replacement and lets one matrix product compute every resample at once. A rate
over resampled clusters is ``(counts @ sums) / (counts @ sizes)``: a drawn
cluster brings all of its tasks.
"""

from __future__ import annotations

import math

import numpy as np

SEED = 20240607
RESAMPLES = 10_000
TIE_DECIMALS = 12  # scores are compared after rounding, so float noise never breaks a tie


def resample_counts(n_clusters: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """A (resamples x n_clusters) matrix of draw counts; each row sums to ``n_clusters``."""
    rng = np.random.default_rng(seed)
    if n_clusters == 0:
        return np.zeros((resamples, 0), dtype=np.int64)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples)


def resampled_rates(counts: np.ndarray, sums: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Rates for every resample (and every column of ``sums``/``sizes`` when they are 2-D).

    ``sums[k]`` is the summed pass share of cluster k's tasks, ``sizes[k]`` its number of tasks.
    A resample that drew no task at all gives NaN.
    """
    num = counts @ np.asarray(sums, dtype=float)
    den = counts @ np.asarray(sizes, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> list[float] | None:
    """The percentile interval of the finite samples (linear interpolation), or None if there are none."""
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return None
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(s, [tail, 100.0 - tail])
    return [clean(lo), clean(hi)]


def clean(x: float) -> float:
    """A plain float, with -0.0 turned into 0.0."""
    x = float(x)
    return 0.0 if x == 0 else x


def kendall_tau_b(x: list[float], y: list[float]) -> float | None:
    """Kendall tau-b (scipy, variant 'b'); None when undefined (fewer than 2 items, or one side all tied).

    scipy.stats is imported here, on the first ranking: it costs about 0.7 s of CPU, which a report of one
    config, an error or a JSON document of records never needs to pay."""
    if len(x) < 2:
        return None
    from scipy import stats as _scipy_stats

    xr = np.round(np.asarray(x, dtype=float), TIE_DECIMALS)
    yr = np.round(np.asarray(y, dtype=float), TIE_DECIMALS)
    res = _scipy_stats.kendalltau(xr, yr, variant="b")
    tau = float(res.statistic)
    # scipy's sqrt can leave 0.9999999999999999 for a perfect agreement: tau is a ratio of pair counts, so
    # nothing real lives below 1e-12 (the tie tolerance), and a tau of exactly 1 stays exactly 1
    return None if math.isnan(tau) else clean(round(tau, TIE_DECIMALS))


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Tau-b for each row of two (resamples x items) arrays, vectorized; NaN where undefined.

    tau_b = (concordant - discordant) / sqrt((n0 - ties_x) * (n0 - ties_y)), n0 = number of pairs,
    ties counted per pair (a pair tied on both sides counts in both), which is scipy's definition.
    Rows holding a NaN give NaN.
    """
    x = np.round(np.asarray(x, dtype=float), TIE_DECIMALS)
    y = np.round(np.asarray(y, dtype=float), TIE_DECIMALS)
    k = x.shape[1]
    i, j = np.triu_indices(k, 1)
    sx = np.sign(x[:, i] - x[:, j])
    sy = np.sign(y[:, i] - y[:, j])
    n0 = i.size
    s = np.sum(sx * sy, axis=1)
    tx = np.sum(sx == 0, axis=1)
    ty = np.sum(sy == 0, axis=1)
    den = np.sqrt((n0 - tx).astype(float) * (n0 - ty).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.round(np.where(den > 0, s / np.where(den > 0, den, 1.0), np.nan), TIE_DECIMALS)
    bad = np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1)
    tau[bad] = np.nan
    return tau


def strict_reversals(labels: list[str], x: list[float], y: list[float]) -> list[list[str]]:
    """Every pair [a, b] with a strictly ahead of b on ``x`` and strictly behind it on ``y``."""
    xr = [round(v, TIE_DECIMALS) for v in x]
    yr = [round(v, TIE_DECIMALS) for v in y]
    out = []
    for a in range(len(labels)):
        for b in range(len(labels)):
            if a != b and xr[a] > xr[b] and yr[a] < yr[b]:
                out.append([labels[a], labels[b]])
    out.sort(key=lambda p: (-xr[labels.index(p[0])], p[0], p[1]))
    return out
