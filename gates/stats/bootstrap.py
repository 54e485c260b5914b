"""Vectorised two-level cluster bootstrap of paired metrics.

Scheme: draw as many cases as there are, with replacement; within each drawn case draw as many
variants as the case has, with replacement. Each resample's statistic per metric is, for a
"difference" metric, the mean of (candidate - incumbent) over the drawn pairs; for a "ratio"
metric, sum(candidate) / sum(incumbent) over the drawn pairs (a ratio of means).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCHEME = ("two-level cluster bootstrap: cases drawn with replacement, then within each drawn case "
          "its variants drawn with replacement; percentile bounds")
# Elements of the per-block (resamples x cases x max variants) draw array: bounds memory (~32 MiB).
BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class PairedData:
    """Error-free pairs grouped by case: rows of a case are contiguous, in case order."""

    case_sizes: np.ndarray   # (K,) int, variants per case, all >= 1
    candidate: np.ndarray    # (N, M) float
    incumbent: np.ndarray    # (N, M) float
    is_ratio: np.ndarray     # (M,) bool

    def design(self) -> np.ndarray:
        """Columns summed by each resample: differences, then ratio numerators, then denominators."""
        diff = self.candidate[:, ~self.is_ratio] - self.incumbent[:, ~self.is_ratio]
        return np.hstack([diff, self.candidate[:, self.is_ratio], self.incumbent[:, self.is_ratio]])

    def statistic(self, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Per-metric statistic from design-column sums (..., C) and pair counts (...)."""
        n_diff, n_ratio = int((~self.is_ratio).sum()), int(self.is_ratio.sum())
        out = np.empty(sums.shape[:-1] + (len(self.is_ratio),))
        with np.errstate(divide="ignore", invalid="ignore"):
            out[..., ~self.is_ratio] = sums[..., :n_diff] / counts[..., None]
            out[..., self.is_ratio] = sums[..., n_diff:n_diff + n_ratio] / sums[..., n_diff + n_ratio:]
        return out


def point_estimate(data: PairedData) -> np.ndarray:
    return data.statistic(data.design().sum(axis=0), np.asarray(float(data.candidate.shape[0])))


def block_size(case_sizes: np.ndarray) -> int:
    return max(1, BLOCK_ELEMENTS // (len(case_sizes) * int(case_sizes.max())))


def resample_statistics(data: PairedData, resamples: int, seed: int) -> np.ndarray:
    """(resamples, M) statistics; the same (data, resamples, seed) always gives the same array."""
    sizes = np.asarray(data.case_sizes, dtype=np.intp)
    k, m_max, n = len(sizes), int(sizes.max()), int(sizes.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    uniform = bool((sizes == m_max).all())
    x = data.design()
    rng = np.random.default_rng(seed)
    block = block_size(sizes)
    out = np.empty((resamples, len(data.is_ratio)))
    slot = np.arange(m_max)
    for b0 in range(0, resamples, block):
        b = min(block, resamples - b0)
        drawn = rng.integers(0, k, size=(b, k))
        m = sizes[drawn]
        base = (starts[drawn] + (np.arange(b) * n)[:, None])[..., None]
        if uniform:
            flat = base + rng.integers(0, m_max, size=(b, k, m_max))
        else:
            # floor(u * m) draws a variant uniformly (bias ~2**-53); the clip guards u*m rounding up to m.
            offs = np.minimum((rng.random((b, k, m_max)) * m[..., None]).astype(np.intp), m[..., None] - 1)
            flat = (base + offs)[slot < m[..., None]]
        counts = np.bincount(flat.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        out[b0:b0 + b] = data.statistic(counts @ x, m.sum(axis=1).astype(np.float64))
    return out


def one_sided_bounds(stats: np.ndarray, confidence: float, lower: np.ndarray) -> np.ndarray:
    """Percentile bound per metric: the (1-confidence) quantile where lower, else the confidence quantile."""
    with np.errstate(invalid="ignore"):  # a non-finite statistic yields a non-finite bound, checked by callers
        lo = np.quantile(stats, 1.0 - confidence, axis=0)
        hi = np.quantile(stats, confidence, axis=0)
    return np.where(lower, lo, hi)
