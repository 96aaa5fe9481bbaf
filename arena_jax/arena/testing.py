"""Simulated judges for tests and benchmarks, kept out of the tournament code (SPEC §4).

`strength_judge` answers pairs from latent strengths, so a schedule's ranking can be checked against a
known truth without a model or a judge server. Nothing in the library proper uses this module (without
a real model the trainer talks to the embedded judge server, which has a simulated judge of its own).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from arena_jax.arena.tournaments.base import Judge


def strength_judge(
  strengths: Iterable[float], *, margin: float = 0.4, noise: float = 0.0, fail_rate: float = 0.0, seed: int = 0
) -> Judge:
  """A synthetic judge for tests and benchmarks: verdicts from latent strengths (SPEC §4 soft outcomes).

  Noiseless (`noise=0`): the stronger wins, equal strengths tie. Otherwise i beats j with probability
  σ((θ_i − θ_j)/noise). `fail_rate` returns None (a failed judgment) with that probability.
  """
  theta = np.asarray(list(strengths), np.float64)
  rng = np.random.default_rng(seed)
  win, lose = 0.5 + margin, 1.0 - (0.5 + margin)

  def judge(pairs):
    out = []
    for i, j in pairs:
      if fail_rate and rng.random() < fail_rate:
        out.append(None)
        continue
      d = theta[i] - theta[j]
      if noise > 0:
        first_wins = rng.random() < 1.0 / (1.0 + math.exp(-d / noise))
      elif d == 0:
        out.append(0.5)
        continue
      else:
        first_wins = d > 0
      out.append(win if first_wins else lose)
    return out

  return judge
