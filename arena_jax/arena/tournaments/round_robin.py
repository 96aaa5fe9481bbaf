"""The one-round topologies: the full round robin and the anchor comparisons (SPEC §5).

Both issue their whole schedule as a single concurrent batch, and their native scores are read straight
off the observed soft outcomes (the win rate; the score against the anchor), without a fit.
"""

from __future__ import annotations

import numpy as np

from arena_jax.arena.tournaments.base import Scheduler, _check_num_players, register_scheduler


class _OneRound(Scheduler):
  """A schedule issued whole as its first and only round: `_pairs()`."""

  def __init__(self, num_players: int, **kwargs):
    super().__init__(num_players, **kwargs)
    self._issued_all = False
    self._start()

  def _pairs(self) -> list[tuple[int, int]]:
    raise NotImplementedError

  def _advance(self):
    if self._issued_all:
      return []
    self._issued_all = True
    return self._pairs()


# ──────────────────────────────────────────────── round robin ────────────────────────────────────────────────


@register_scheduler("round_robin")
class RoundRobin(_OneRound):
  """All G(G−1)/2 pairs (i, j), i < j, in one concurrent round (SPEC §5).

  Native score: the win rate r_i = Σ_j s(τ_i, τ_j) / n_i over the n_i matches of i actually observed
  (n_i = G − 1 without failures, SPEC §5's formula); 1/2 for a player with no observed match.
  """

  calls_formula = "G(G−1)/2"

  def _pairs(self):
    g = self.num_players
    return [(i, j) for i in range(g) for j in range(i + 1, g)]

  def native_scores(self):
    total, count = self._player_points()
    return np.where(count > 0, total / np.maximum(count, 1.0), 0.5)

  @classmethod
  def expected_calls(cls, num_players, **options):
    g = _check_num_players(num_players)
    return g * (g - 1) // 2


# ──────────────────────────────────────────────── anchor ────────────────────────────────────────────────


@register_scheduler("anchor")
class Anchor(_OneRound):
  """Every trajectory against the anchor (the group's greedy sample): G − 1 pairs (i, anchor), one round.

  Native score: s(τ_i, anchor) for i ≠ anchor; 1/2 for the anchor itself and for a player whose
  judgment failed (no evidence either way: level with the anchor) (SPEC §5).
  """

  needs_anchor = True
  calls_formula = "G−1"

  def __init__(self, num_players: int, *, anchor=None, **kwargs):
    if anchor is None:
      raise ValueError("the anchor topology needs anchor=<index of the group's greedy sample> (SPEC §5)")
    super().__init__(num_players, anchor=anchor, **kwargs)

  def _pairs(self):
    return [(i, self.anchor) for i in range(self.num_players) if i != self.anchor]

  def native_scores(self):
    scores = np.full(self.num_players, 0.5)
    scores[np.asarray(self._first, np.int64)] = self._outcome  # issued as (i, anchor): `o` is i's score
    return scores

  @classmethod
  def expected_calls(cls, num_players, **options):
    return _check_num_players(num_players) - 1
