"""The Swiss system: ⌈log₂G⌉ rounds of rematch-free pairings of players with equal points (SPEC §5).

Like the brackets it ranks lexicographically (points, then Buchholz) and scores by the rank quantile
of that order, ArenaRL's r_i = 1 − rank_i/(G − 1).
"""

from __future__ import annotations

import math

import numpy as np

from arena_jax.arena.outcomes import Verdict, outcome_to_verdict
from arena_jax.arena.tournaments.base import Pair, Scheduler, _check_num_players, register_scheduler
from arena_jax.arena.tournaments.ranking import average_ranks, rank_quantile


@register_scheduler("swiss")
class Swiss(Scheduler):
  """Swiss system (SPEC §5): ⌈log₂G⌉ rounds (`num_rounds_max` caps it; never more than G − 1).

  Points per match from the verdict (win 1, tie 1/2, loss 0); a failed judgment gives neither player
  points, but the two count as having met. Each round: the standings are ordered by points, equal
  points in an order drawn afresh each round from `seed` (round 1 is thus a seeded random pairing);
  with an odd count the lowest-ranked player who has not had a bye gets one (+1 point); the rest are
  paired top-down, each with the highest-ranked available player it has not met — searched with
  backtracking so that there are never rematches (if no complete pairing exists — not met in 4,000
  random tournaments with G ≤ 32 — the next bye candidate is tried; failing all, a greedy partial
  pairing is used and the unpaired sit the round out without points). Pairs are issued (higher-ranked, lower).

  Final order: points, then Buchholz (sum of the current points of the opponents actually judged;
  byes are no opponent); exactly equal players share the average rank. Native score: its rank
  quantile. Calls: ⌈log₂G⌉·⌊G/2⌋.
  """

  calls_formula = "⌈log₂G⌉·⌊G/2⌋"

  _SEARCH_BUDGET = 20_000  # backtracking nodes per round before giving up on a complete pairing

  def __init__(self, num_players: int, *, num_rounds_max: int | None = None, **kwargs):
    super().__init__(num_players, **kwargs)
    self.total_rounds = self._total_rounds(self.num_players, num_rounds_max)
    self._rng = np.random.default_rng(self.seed)
    self.points = np.zeros(self.num_players)
    self.had_bye = np.zeros(self.num_players, bool)
    self._met: list[set[int]] = [set() for _ in range(self.num_players)]
    self._opponents: list[list[int]] = [[] for _ in range(self.num_players)]
    self._round = 0
    self.byes: list[int | None] = []
    self._start()

  @staticmethod
  def _total_rounds(g: int, num_rounds_max) -> int:
    rounds = math.ceil(math.log2(g))
    if num_rounds_max is not None:
      if int(num_rounds_max) < 1:
        raise ValueError(f"num_rounds_max must be >= 1, got num_rounds_max={num_rounds_max!r}")
      rounds = min(rounds, int(num_rounds_max))
    return min(rounds, g - 1)

  def _on_result(self, first, second, outcome):
    self._met[first].add(second)
    self._met[second].add(first)
    if outcome is None:
      return
    self._opponents[first].append(second)
    self._opponents[second].append(first)
    verdict = outcome_to_verdict(outcome)
    gain = {Verdict.FIRST_WINS: 1.0, Verdict.TIE: 0.5, Verdict.SECOND_WINS: 0.0}[verdict]
    self.points[first] += gain
    self.points[second] += 1.0 - gain

  def _advance(self):
    while self._round < self.total_rounds:
      self._round += 1
      shuffle = self._rng.permutation(self.num_players)
      standing = sorted(range(self.num_players), key=lambda i: (-self.points[i], shuffle[i]))
      pairs, bye = self._pairing(standing)
      self.byes.append(bye)
      if bye is not None:
        self.points[bye] += 1.0
        self.had_bye[bye] = True
      if pairs:
        return pairs
    return []

  def _pairing(self, standing: list[int]) -> tuple[list[Pair], int | None]:
    if len(standing) % 2:
      lowest_first = standing[::-1]
      candidates = [p for p in lowest_first if not self.had_bye[p]] + [p for p in lowest_first if self.had_bye[p]]
    else:
      candidates = [None]
    budget = [self._SEARCH_BUDGET]
    for bye in candidates:
      rest = [p for p in standing if p != bye]
      pairs = self._search(rest, budget)
      if pairs is not None:
        return pairs, bye
      if budget[0] <= 0:
        break
    bye = candidates[0]
    return self._greedy([p for p in standing if p != bye]), bye

  def _search(self, rest: list[int], budget: list[int]) -> list[Pair] | None:
    """A rematch-free perfect pairing of `rest`, each top player taking the best legal opponent first."""
    if not rest:
      return []
    budget[0] -= 1
    if budget[0] <= 0:
      return None
    top = rest[0]
    for k in range(1, len(rest)):
      if rest[k] in self._met[top]:
        continue
      tail = self._search(rest[1:k] + rest[k + 1 :], budget)
      if tail is not None:
        return [(top, rest[k])] + tail
    return None

  def _greedy(self, rest: list[int]) -> list[Pair]:
    pairs, free = [], list(rest)
    while free:
      top = free.pop(0)
      for k, other in enumerate(free):
        if other not in self._met[top]:
          pairs.append((top, free.pop(k)))
          break
    return pairs

  def buchholz(self) -> np.ndarray:
    return np.array([sum(self.points[j] for j in opps) for opps in self._opponents], np.float64)

  def native_scores(self):
    keys = [(float(p), float(b)) for p, b in zip(self.points, self.buchholz())]
    return rank_quantile(average_ranks(keys))

  @classmethod
  def expected_calls(cls, num_players, *, num_rounds_max=None, **options):
    g = _check_num_players(num_players)
    return cls._total_rounds(g, num_rounds_max) * (g // 2)
