"""Ranking utilities shared by the schedulers and the reward aggregations (SPEC §5).

Pure NumPy; nothing here knows about matches. `average_ranks` turns any comparable keys into ranks with
ties sharing the average rank (every scheduler's `native_ranking`, the bracket and Swiss orders), and
`rank_quantile` maps ranks to ArenaRL's rank reward (also used by `rl.aggregation`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def average_ranks(keys: Sequence) -> np.ndarray:
  """Rank 0 = best for comparable `keys` (higher = better); exactly equal keys share the average rank."""
  n = len(keys)
  order = sorted(range(n), key=lambda i: keys[i], reverse=True)
  ranks = np.empty(n, np.float64)
  start = 0
  while start < n:
    stop = start
    while stop + 1 < n and keys[order[stop + 1]] == keys[order[start]]:
      stop += 1
    ranks[order[start : stop + 1]] = 0.5 * (start + stop)
    start = stop + 1
  return ranks


def rank_quantile(ranks: np.ndarray) -> np.ndarray:
  """ArenaRL's rank reward r_i = 1 − rank_i/(G − 1) (SPEC §5): 1 for the best, 0 for the worst."""
  return 1.0 - np.asarray(ranks, np.float64) / (len(ranks) - 1)
