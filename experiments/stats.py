"""The study's statistics: mean ± std over seeds and paired bootstrap intervals of differences.

Two runs of the study that share a seed share everything but their reward mode: the SFT policy, the prompt
order (`data_seed`) and the sampling key. Their difference on a metric is one paired observation, and
comparing modes by these differences removes what the seeds have in common. `paired_bootstrap` resamples
the seeds' differences with replacement and reports the mean difference with a percentile interval.

With the study's 5 seeds the percentile bootstrap is an approximation that tends to be narrow (it cannot
see more spread than the few differences show); the interval is what the data support, not a test at an
exact level. Below `MIN_PAIRS` pairs it is not even that: over two pairs the resampled means take three
values, and with two near-equal differences the "interval" is one point that seems to exclude 0. So fewer
than `min_pairs` differences get no interval at all (the mean only). Pure numpy, seeded: the same
inputs give the same interval.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


# The fewest paired differences that get a bootstrap interval (`paired_bootstrap`, `study.bootstrap.min_pairs`).
MIN_PAIRS = 5


def mean_std(values: Sequence[float | None]) -> tuple[float, float, int]:
  """(mean, sample std (ddof 1; 0 for one value), n) of the values that are not None; NaNs when none are."""
  v = np.asarray([x for x in values if x is not None], np.float64)
  if not len(v):
    return float("nan"), float("nan"), 0
  return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v)


def paired_bootstrap(
  differences: Sequence[float],
  *,
  num_resamples: int = 10_000,
  level: float = 0.95,
  seed: int = 0,
  min_pairs: int = MIN_PAIRS,
) -> tuple[float, float, float]:
  """(mean, low, high): the mean of paired differences and its percentile bootstrap interval at `level`.

  Each resample draws len(differences) of them with replacement (numpy's PCG64 keyed by `seed`); the
  interval is the (1 − level)/2 and (1 + level)/2 quantiles of the resampled means. Fewer than `min_pairs`
  (≥ 2) differences have no interval: (mean, nan, nan) (module docstring).
  """
  if not 0 < level < 1:
    raise ValueError(f"paired_bootstrap: level must be in (0, 1), got {level}")
  if min_pairs < 2:
    raise ValueError(f"paired_bootstrap: min_pairs must be at least 2, got {min_pairs}")
  d = np.asarray(differences, np.float64).ravel()
  if not len(d):
    raise ValueError("paired_bootstrap: no differences")
  if len(d) < min_pairs:
    return float(d.mean()), float("nan"), float("nan")
  rng = np.random.default_rng(seed)
  means = d[rng.integers(0, len(d), size=(num_resamples, len(d)))].mean(axis=1)
  lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
  return float(d.mean()), float(lo), float(hi)


def paired_differences(runs: Mapping[int, float | None], base: Mapping[int, float | None]) -> list[float]:
  """runs[seed] − base[seed] over the seeds both have a value for, in seed order."""
  return [runs[s] - base[s] for s in sorted(set(runs) & set(base)) if runs[s] is not None and base[s] is not None]
