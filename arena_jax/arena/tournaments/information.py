"""Information-gain pairing: `live_info` (streaming) and `info_budget` (round-based) (SPEC §5–§6; a project
addition, docs/reward_modes.md).

Both choose their pairs by the expected information a judgment buys about the strengths under the
current Bradley–Terry fit and its Laplace covariance (`pair_information`), greedily per batch
(`choose_informative_pairs`); docs/reward_modes.md derives the criterion. Both rank by the BT θ of the
observed matches and spend live's budget by default (`arrival_quota`), so they compare at equal cost.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from arena_jax.arena.bradley_terry import DEFAULT_L2
from arena_jax.arena.tournaments.base import Pair, _FitsBradleyTerry, _check_num_players, register_scheduler
from arena_jax.arena.tournaments.live import Live, arrival_quota


def pair_information(theta: np.ndarray, cov: np.ndarray, first: np.ndarray, second: np.ndarray) -> tuple:
  """(gain, c) of judging each pair (first[k], second[k]) under the Laplace posterior N(θ, Σ) (SPEC §5–§6).

  With u = e_i − e_j, μ = θ_i − θ_j and v = uᵀΣu = Var(θ_i − θ_j), the predictive win probability is
  p = σ(μ / √(1 + πv/8)) (the probit approximation of E σ(θ_i − θ_j)), a judgment adds Fisher
  information c = p(1 − p) along u, and the expected information about θ it buys is

      gain = ½ log det(Σ⁻¹ + c uuᵀ) − ½ log det(Σ⁻¹) = ½ log(1 + c·v)

  (matrix determinant lemma): large for pairs that are close (p ≈ 1/2) *and* uncertain (large v).
  """
  v = cov[first, first] + cov[second, second] - 2.0 * cov[first, second]
  v = np.maximum(v, 0.0)
  mu = theta[first] - theta[second]
  p = 1.0 / (1.0 + np.exp(-mu / np.sqrt(1.0 + math.pi * v / 8.0)))
  c = p * (1.0 - p)
  return 0.5 * np.log1p(c * v), c


def choose_informative_pairs(theta, cov, candidates: Sequence[Pair], count: int, rng) -> list[Pair]:
  """Greedy batch design: `count` distinct pairs of `candidates`, each the one of largest
  `pair_information` given the pairs already chosen (the posterior precision gains c·uuᵀ per chosen
  pair, applied to Σ by Sherman–Morrison), so a batch spreads its calls. Exact ties (e.g. before any
  result) are broken by `rng`."""
  cov = np.array(cov, np.float64)
  pool = list(candidates)
  picks: list[Pair] = []
  while pool and len(picks) < count:
    f = np.asarray([a for a, _ in pool])
    s = np.asarray([b for _, b in pool])
    gain, c = pair_information(theta, cov, f, s)
    k = int(np.argmax(gain + 1e-12 * rng.random(len(pool))))
    picks.append(pool.pop(k))
    cu = cov[:, f[k]] - cov[:, s[k]]  # Σu
    cov -= c[k] * np.outer(cu, cu) / (1.0 + c[k] * (cu[f[k]] - cu[s[k]]))
  return picks


# ────────────────────────────────────────────── the topologies ──────────────────────────────────────────────


@register_scheduler("live_info")
class LiveInfo(Live):
  """The live tournament with information-gain opponents (docs/reward_modes.md).

  Same stream as `live` — arrivals in order, the same number of opponents per arrival
  (`arrival_quota`: min(k, 3), 3G − 6 calls by default; `budget=` spreads another), all among the
  players already arrived, issued as (arrival, opponent) — but the opponents of arrival k are the
  pairs (k, j) of largest expected information about the strengths under the current Bradley–Terry
  fit and its Laplace covariance, chosen greedily (`choose_informative_pairs`, `pair_information`):

      gain(k, j) = ½ log(1 + p̄(1 − p̄)·v),   v = Var(θ_k − θ_j),   p̄ = σ((θ_k − θ_j)/√(1 + πv/8))

  A newcomer (θ_k = 0, the group mean, and a large variance) thus first meets the arrived player
  closest to the middle, then, its variance having shrunk, players that are both uncertain and
  close. Ties are broken by `seed`. `leaderboard` is not used (the criterion needs the BT fit).
  """

  calls_formula = "3G−6"

  def __init__(self, num_players: int, **kwargs):
    self._rng = np.random.default_rng(kwargs.get("seed", 0))
    super().__init__(num_players, **kwargs)

  def _choose_opponents(self, arrival: int) -> list[int]:
    quota = self.quota[len(self._arrived)]
    if quota == 0:
      return []
    theta, cov = self._posterior()
    picks = choose_informative_pairs(theta, cov, [(arrival, j) for j in self._arrived], quota, self._rng)
    return [j for _, j in picks]


@register_scheduler("info_budget")
class InfoBudget(_FitsBradleyTerry):
  """Round-based information-gain pairing until a call budget is spent (no streaming).

  Each round picks `batch_size` (default ⌊G/2⌋) not-yet-judged pairs by the criterion of `live_info`
  (`choose_informative_pairs` on the BT fit of every result so far), judged concurrently; the next
  round is chosen when they are all in. Stops after `budget` calls (default live's 3G − 6, so the two
  are compared at the same cost; capped at G(G − 1)/2, every pair once). The first round, with no
  result yet, is a seeded random spread of disjoint pairs. Pairs are issued (lower index, higher).
  Rounds: ⌈budget / batch_size⌉. Native score: the BT θ of the observed matches.
  """

  calls_formula = "3G−6 (the budget; default live's)"

  def __init__(
    self,
    num_players: int,
    *,
    budget: int | None = None,
    batch_size: int | None = None,
    l2: float = DEFAULT_L2,
    **kwargs,
  ):
    super().__init__(num_players, **kwargs)
    self.budget = self._budget(self.num_players, budget)
    if batch_size is None:
      batch_size = max(1, self.num_players // 2)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
      raise ValueError(f"batch_size must be an int >= 1 (pairs per round), got batch_size={batch_size!r}")
    self.batch_size = int(batch_size)
    self._init_fit(l2)
    self._rng = np.random.default_rng(self.seed)
    self._unjudged = [(i, j) for i in range(self.num_players) for j in range(i + 1, self.num_players)]
    self._start()

  @staticmethod
  def _budget(g: int, budget) -> int:
    return sum(arrival_quota(g, budget))  # validates; the default and the cap as live's

  def _advance(self):
    count = min(self.batch_size, self.budget - self.num_issued - len(self._queue))
    if count <= 0:
      return []
    theta, cov = self._posterior()
    picks = choose_informative_pairs(theta, cov, self._unjudged, count, self._rng)
    chosen = set(picks)
    self._unjudged = [p for p in self._unjudged if p not in chosen]
    return picks

  @classmethod
  def expected_calls(cls, num_players, *, budget=None, **options):
    return cls._budget(_check_num_players(num_players), budget)
