"""Reasoning Arena-Live: the streaming tournament of arrivals against the live leaderboard (SPEC §5).

Trajectories enter in the order they finish decoding; each arrival meets a few of the players already
in, chosen from the current standings, and the group is ranked by the Bradley–Terry fit of everything
observed. `arrival_quota` (how many opponents each arrival gets for a call budget) and
`leaderboard_positions` (which standings positions they are) are the rule's two halves, public because
the fidelity benchmark's budget curve spreads its budgets with them; the information-gain topologies
(`information`) spend `arrival_quota`'s budget too.
"""

from __future__ import annotations

import collections

import numpy as np

from arena_jax.arena.bradley_terry import DEFAULT_L2
from arena_jax.arena.tournaments.base import _FitsBradleyTerry, _check_index, _check_num_players, register_scheduler


def arrival_quota(num_players: int, budget: int | None = None) -> list[int]:
  """Opponents of each arrival position t = 0 … G − 1 of a live tournament spending `budget` calls.

  Arrival t can meet at most the t players already in. The budget is water-filled over the arrivals:
  every arrival with t ≥ 1 gets one opponent, then every arrival with t ≥ 2 a second, …, the last
  level going to the latest arrivals (who have the most players to choose from). The default budget
  Σ_t min(t, 3) = 3G − 6 gives the paper's min(t, 3); a budget ≥ G(G − 1)/2 is a round robin in
  arrival order.
  """
  g = _check_num_players(num_players)
  full = g * (g - 1) // 2
  if budget is None:
    budget = sum(min(t, 3) for t in range(g))
  if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
    raise ValueError(f"budget must be an int >= 1 (judge calls per group), got budget={budget!r}")
  left = min(int(budget), full)
  quota = [0] * g
  level = 1
  while left > 0:
    for t in [t for t in range(g - 1, 0, -1) if t >= level][:left]:
      quota[t] += 1
      left -= 1
    level += 1
  return quota


def leaderboard_positions(n: int, count: int) -> list[int]:
  """Leaderboard positions (0 = best) of the `count` ≤ n opponents the live rule picks among n players.

  The paper's three are the best, the worst and the median (n − 1) // 2, in that order; other counts
  spread the same way: best, worst, then the positions ⌊t·(n − 1)/(count − 1)⌋ between them (distinct
  because count ≤ n); a single opponent is the median.
  """
  if count == 1:
    return [(n - 1) // 2]
  inner = [t * (n - 1) // (count - 1) for t in range(1, count - 1)]
  return list(dict.fromkeys([0, n - 1] + inner))


# ───────────────────────────────────────────── the live topology ─────────────────────────────────────────────


@register_scheduler("live")
class Live(_FitsBradleyTerry):
  """Reasoning Arena-Live (SPEC §5): each arrival meets the current best, worst and median.

  Trajectories enter in arrival order. Arrival k is compared with up to three distinct opponents
  among the k already arrived: the best, the worst and the median of the live leaderboard, issued
  as (arrival, opponent) in that order. Calls: 0 + 1 + 2 + 3(G − 3) = 3G − 6 for G ≥ 3 (1 for G = 2).

  Leaderboard: the arrived players ranked by their current BT strengths θ (`fit_bradley_terry_host`
  on all observed matches, warm-started from the previous fit) or, with `leaderboard="win_rate"`, by
  their running win rate (1/2 with no match yet). Tie-breaking is deterministic: strengths are
  rounded to 1e-9 (so symmetric positions tie exactly despite solver round-off) and equal strengths
  are ordered by arrival (the earlier arrival ranks higher). With n ranked players the best is
  position 0, the worst n − 1 and the median (n − 1) // 2 (the better of the two middles when n is
  even), distinct for n ≥ 3.

  Concurrency: with `wait_for_results=True` (default) arrival k's opponents are chosen only when all
  earlier results are in (num_rounds = G − 1); with False they are chosen at once from the results
  recorded so far, so matches of several arrivals run concurrently on a staler leaderboard.

  Arrivals: by default `arrival_order` (a permutation of range(G); None = range(G)) is known
  upfront. With `streaming=True` (then `arrival_order` must be None) arrivals come only through
  `arrive(i)`; the tournament is done once all G have arrived and every result is in, or, for a
  group where some trajectories never arrive, after `close()`.

  Budget: `budget=` (calls per group) replaces the three opponents by `arrival_quota(G, budget)`
  per arrival, picked at the leaderboard positions of `leaderboard_positions` (best, worst, then
  evenly spread); the default is the paper's min(k, 3). Used by the fidelity benchmark's budget curve.

  Native score: the BT θ of all observed matches.
  """

  uses_arrival_order = True
  calls_formula = "3G−6"

  def __init__(
    self,
    num_players: int,
    *,
    arrival_order=None,
    leaderboard: str = "bt",
    wait_for_results: bool = True,
    streaming: bool = False,
    l2: float = DEFAULT_L2,
    budget: int | None = None,
    **kwargs,
  ):
    super().__init__(num_players, arrival_order=arrival_order, **kwargs)
    self.quota = arrival_quota(self.num_players, budget)
    if leaderboard not in ("bt", "win_rate"):
      raise ValueError(f"leaderboard must be 'bt' or 'win_rate', got leaderboard={leaderboard!r}")
    if streaming and self.arrival_order is not None:
      raise ValueError("streaming=True takes arrivals through arrive(); pass arrival_order=None")
    self.leaderboard = leaderboard
    self.wait_for_results = bool(wait_for_results)
    self.streaming = bool(streaming)
    self._init_fit(l2)
    self._closed = False
    self._seen: set[int] = set()  # arrived, processed or not
    self._arrived: list[int] = []  # processed arrivals, in order
    self._backlog: collections.deque[int] = collections.deque()
    self.opponents: dict[int, list[int]] = {}  # arrival → the opponents it was given
    if not self.streaming:
      order = self.arrival_order if self.arrival_order is not None else list(range(self.num_players))
      self.arrival_order = order
      self._seen.update(order)
      self._backlog.extend(order)
      self._start()

  def arrive(self, index: int) -> None:
    """Streaming entry of trajectory `index` (requires streaming=True)."""
    if not self.streaming:
      raise ValueError("arrive() needs streaming=True; this tournament's arrival_order was fixed upfront")
    if self._closed:
      raise ValueError(f"arrive(index={index}) after close()")
    index = _check_index(index, self.num_players, "index")
    if index in self._seen:
      raise ValueError(f"arrive(index={index}): trajectory {index} has already arrived")
    self._seen.add(index)
    self._backlog.append(index)
    if not self.wait_for_results or (not self._pending and not self._queue):
      self._queue.extend(self._advance())

  def close(self) -> None:
    """Declares that no more trajectories will arrive (streaming groups with missing members)."""
    self._closed = True

  def _awaiting_input(self):
    return self.streaming and not self._closed and len(self._seen) < self.num_players

  def _advance(self):
    batch = []
    while self._backlog:
      if self.wait_for_results and (self._pending or batch):
        break
      k = self._backlog.popleft()
      opponents = self._choose_opponents(k)
      self._arrived.append(k)
      self.opponents[k] = opponents
      batch.extend((k, j) for j in opponents)
    return batch

  def _choose_opponents(self, arrival: int) -> list[int]:
    del arrival  # the paper's rule looks at the leaderboard only
    n, quota = len(self._arrived), self.quota[len(self._arrived)]
    if quota == 0:
      return []
    strength = self._strengths()
    position = {p: t for t, p in enumerate(self._arrived)}
    ranked = sorted(self._arrived, key=lambda p: (-round(float(strength[p]), 9), position[p]))
    return [ranked[t] for t in leaderboard_positions(n, quota)]

  def _strengths(self) -> np.ndarray:
    if self.leaderboard == "win_rate":
      total, count = self._player_points()
      return np.where(count > 0, total / np.maximum(count, 1.0), 0.5)
    return self._bt_theta()

  @classmethod
  def expected_calls(cls, num_players, *, budget=None, **options):
    return sum(arrival_quota(_check_num_players(num_players), budget))
