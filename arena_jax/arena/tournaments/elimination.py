"""Elimination brackets: ArenaRL's seeded single elimination and the double elimination (SPEC §5).

Both seed the group (by default from the anchor comparisons, ArenaRL's first round), play a standard
seeded bracket (`bracket_order`, byes to the top seeds) and share `_Bracket`'s seeding, points and
tie rules. They rank lexicographically (elimination round, then average points); their native score
is the rank quantile of that order with tied players sharing the average rank, which is ArenaRL's
pre-normalisation reward r_i = 1 − rank_i/(G − 1).
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar, Sequence

import numpy as np

from arena_jax.arena.tournaments.base import Pair, Scheduler, _check_num_players, register_scheduler
from arena_jax.arena.tournaments.ranking import average_ranks, rank_quantile


def bracket_order(size: int) -> list[int]:
  """Seed (0-based) at each slot of a standard bracket of `size` (a power of two) slots.

  Slots 2k and 2k+1 meet in the first round. Built by the usual recursion: each seed s of the bracket
  of n/2 slots is followed by its complement n − 1 − s, so seed 1 meets seed n, 2 meets n − 1, and the
  top two seeds can only meet in the final: size 8 → [0, 7, 3, 4, 1, 6, 2, 5].
  """
  order = [0]
  while len(order) < size:
    n = 2 * len(order)
    order = [s for seed in order for s in (seed, n - 1 - seed)]
  return order


# ──────────────────────────────────────────── the shared bracket ────────────────────────────────────────────


_SEEDINGS = ("anchor", "index", "shuffle")


class _Bracket(Scheduler):
  """Shared seeding, points and tie rules of the elimination topologies.

  Seeding (`seeding`): "anchor" = a first round of the anchor comparisons (i, anchor), seeds ordered
  by the score of each player in them (the anchor's is the mean of 1 − s over its comparisons; 1/2
  without an observed comparison); "index" = seed k is trajectory k; "shuffle" = a permutation drawn
  from `seed`. Equal seeding scores are ordered by index (trajectories of a group are exchangeable).

  Points (ArenaRL's `avg_point`): the list of a player's soft scores, one per bracket match, plus one
  for seeding — its anchor comparison, or for the anchor the mean over its comparisons (so the anchor
  is not weighted G − 1 times). A player with no points averages 1/2.

  A bracket match that is tied (s = 1/2) or failed (None) is won by the better seed
  (`num_seed_decided` counts them); a failure is still dropped from `observed()`.
  """

  default_seeding: ClassVar[str | None] = "anchor"
  needs_anchor = True  # seeding by the anchor comparisons (ArenaRL), when the trainer provides one

  def __init__(self, num_players: int, *, anchor=None, seeding: str | None = None, **kwargs):
    super().__init__(num_players, anchor=anchor, **kwargs)
    self.seeding = self._resolve_seeding(seeding, self.anchor)
    if self.seeding == "anchor" and self.anchor is None:
      raise ValueError(
        f"{self.name} with seeding='anchor' needs anchor=<index of the group's greedy sample> "
        "(SPEC §5); or pass seeding='index' / 'shuffle'"
      )
    self.num_seed_decided = 0
    self._points: list[list[float]] = [[] for _ in range(self.num_players)]
    self._results: dict[Pair, float | None] = {}  # results of the current stage
    self._phase = "init"
    self.seeds: list[int] | None = None  # players from the top seed down
    self._seed_rank: dict[int, int] = {}

  @classmethod
  def _resolve_seeding(cls, seeding, anchor) -> str:
    if seeding is None:
      seeding = cls.default_seeding or ("anchor" if anchor is not None else "shuffle")
    if seeding not in _SEEDINGS:
      raise ValueError(f"seeding must be one of {_SEEDINGS}, got seeding={seeding!r}")
    return seeding

  def _on_result(self, first, second, outcome):
    self._results[(first, second)] = outcome
    if outcome is not None and self._phase == "bracket":
      self._points[first].append(outcome)
      self._points[second].append(1.0 - outcome)

  def _advance(self):
    if self._phase == "init" and self.seeding == "anchor":
      self._phase = "seeding"
      return [(i, self.anchor) for i in range(self.num_players) if i != self.anchor]
    if self._phase in ("init", "seeding"):
      self._make_seeds()
      self._phase = "bracket"
      self._results = {}
      return self._bracket_start()
    results, self._results = self._results, {}
    return self._bracket_advance(results)

  def _make_seeds(self):
    g = self.num_players
    if self.seeding == "anchor":
      score = np.full(g, 0.5)
      anchor_side = []
      for (i, _), s in self._results.items():  # issued as (i, anchor)
        if s is not None:
          self._points[i].append(s)
          score[i] = s
          anchor_side.append(1.0 - s)
      if anchor_side:
        self._points[self.anchor].append(float(np.mean(anchor_side)))
        score[self.anchor] = float(np.mean(anchor_side))
      seeds = sorted(range(g), key=lambda i: (-score[i], i))
    elif self.seeding == "index":
      seeds = list(range(g))
    else:
      seeds = [int(i) for i in np.random.default_rng(self.seed).permutation(g)]
    self.seeds = seeds
    self._seed_rank = {p: r for r, p in enumerate(seeds)}

  def _oriented(self, a: int, b: int) -> Pair:
    """The pair with the better seed first."""
    return (a, b) if self._seed_rank[a] < self._seed_rank[b] else (b, a)

  def _winner_loser(self, pair: Pair, results) -> Pair:
    a, b = pair
    s = results[pair]
    if s is None or s == 0.5:
      self.num_seed_decided += 1
      return self._oriented(a, b)
    return (a, b) if s > 0.5 else (b, a)

  def avg_points(self) -> np.ndarray:
    return np.array([float(np.mean(p)) if p else 0.5 for p in self._points])

  def _rank_scores(self, tier: Sequence[float]) -> np.ndarray:
    avg = self.avg_points()
    return rank_quantile(average_ranks([(float(t), float(a)) for t, a in zip(tier, avg)]))

  @abc.abstractmethod
  def _bracket_start(self) -> list[Pair]: ...

  @abc.abstractmethod
  def _bracket_advance(self, results) -> list[Pair]: ...


@register_scheduler("seeded_single_elimination")
class SeededSingleElimination(_Bracket):
  """ArenaRL's topology (SPEC §5): anchor seeding, then a standard seeded knockout bracket.

  Round 0 (seeding) judges (i, anchor) for every i ≠ anchor. The bracket has P = 2^⌈log₂G⌉ slots in
  `bracket_order` (seed 1 meets seed P, 2 meets P − 1, ...); the P − G missing seeds are byes, which
  therefore go to the top P − G seeds and occur only in the first bracket round. Winners advance; each
  bracket round is one concurrent batch, issued as (better seed, worse seed). Calls: (G − 1) + (G − 1)
  = 2G − 2; rounds: 1 + ⌈log₂G⌉.

  Final order: the champion, then the losers by elimination round (later = better), ties within a
  round broken by average points (see `_Bracket`); exactly equal players share the average rank.
  Native score: the rank quantile of that order. Mid-tournament, players still alive rank above
  every eliminated one.
  """

  calls_formula = "2G−2 (G−1 anchor seeding + G−1 bracket)"

  def __init__(self, num_players: int, **kwargs):
    super().__init__(num_players, **kwargs)
    self.num_bracket_rounds = max(1, math.ceil(math.log2(self.num_players)))
    self._elim_round = np.full(self.num_players, self.num_bracket_rounds + 1, np.float64)
    self._slots: list[int | None] = []
    self._round = 0
    self.champion: int | None = None
    self._start()

  def _bracket_start(self):
    size = 2**self.num_bracket_rounds
    self._slots = [self.seeds[s] if s < self.num_players else None for s in bracket_order(size)]
    return self._play_round()

  def _play_round(self) -> list[Pair]:
    self._round += 1
    return [
      self._oriented(a, b) for a, b in zip(self._slots[::2], self._slots[1::2]) if a is not None and b is not None
    ]

  def _bracket_advance(self, results):
    nxt = []
    for a, b in zip(self._slots[::2], self._slots[1::2]):
      if a is None or b is None:  # a bye: the present player advances without a match
        nxt.append(a if b is None else b)
        continue
      winner, loser = self._winner_loser(self._oriented(a, b), results)
      self._elim_round[loser] = self._round
      nxt.append(winner)
    self._slots = nxt
    if len(nxt) == 1:
      self.champion = nxt[0]
      return []
    return self._play_round()

  def native_scores(self):
    return self._rank_scores(self._elim_round)

  @classmethod
  def expected_calls(cls, num_players, *, anchor=None, seeding=None, **options):
    g = _check_num_players(num_players)
    return (g - 1) * (2 if cls._resolve_seeding(seeding, anchor) == "anchor" else 1)


@register_scheduler("double_elimination")
class DoubleElimination(_Bracket):
  """Winners' bracket + losers' bracket + one grand final (SPEC §5; ArenaRL's structure).

  Seeding (see `_Bracket`): by the anchor comparisons when `anchor` is given, otherwise a permutation
  drawn from `seed` (`seeding=` overrides).

  Winners' bracket (WB): the standard seeded bracket of `SeededSingleElimination` (byes to top seeds).
  Losers' bracket (LB), ArenaRL's pool form: the losers of WB round t join the LB pool one stage
  later; every stage in which the pool holds ≥ 2 players plays one LB round over the whole pool,
  paired by seed fold (best remaining seed vs worst, 2nd vs 2nd-worst, ...; an odd pool gives the best
  seed a bye); LB losers are out. A stage = WB round t and LB round t − 1 judged concurrently. When the
  WB has its champion and the LB pool is down to one player, the grand final (WB champion, LB
  champion) is played once — no bracket reset; a tied or failed final goes to the undefeated WB
  champion. Calls: WB G − 1, LB G − 2, final 1: 2G − 2 (plus G − 1 when seeded by the anchor).

  Final order: final winner, final loser, then LB losers by the stage they went out in (later =
  better), ties by average points; native score = the rank quantile. Mid-tournament, players alive
  in the WB rank above those alive in the LB, who rank above the eliminated.
  """

  default_seeding = None  # anchor if given, else a seeded shuffle
  calls_formula = "3G−3 (G−1 anchor seeding + 2G−2 brackets)"

  def __init__(self, num_players: int, **kwargs):
    super().__init__(num_players, **kwargs)
    self._wb: list[int | None] = []
    self._pool: list[int] = []
    self._drops: list[int] = []
    self._stage = 0
    self._final: Pair | None = None
    self.champion: int | None = None
    alive = float(10 * self.num_players + 10)  # above every stage number a tournament reaches
    self._tier = np.full(self.num_players, alive + 1.0)  # alive in the WB
    self._lb_tier = alive
    self._start()

  def _bracket_start(self):
    size = 2 ** max(1, math.ceil(math.log2(self.num_players)))
    self._wb = [self.seeds[s] if s < self.num_players else None for s in bracket_order(size)]
    return self._play_stage()

  def _play_stage(self) -> list[Pair]:
    self._stage += 1
    matches = (
      [self._oriented(a, b) for a, b in zip(self._wb[::2], self._wb[1::2]) if a is not None and b is not None]
      if len(self._wb) > 1
      else []
    )
    self._pool.extend(self._drops)
    self._drops = []
    if len(self._pool) >= 2:
      pool = sorted(self._pool, key=self._seed_rank.__getitem__)
      playing = pool[len(pool) % 2 :]  # an odd pool's best seed sits this LB round out
      matches += [self._oriented(playing[k], playing[-1 - k]) for k in range(len(playing) // 2)]
    if not matches and len(self._wb) == 1 and self._final is None:
      lb_champion = self._pool[0] if self._pool else None
      if lb_champion is not None:
        self._final = (self._wb[0], lb_champion)
        matches = [self._final]
    return matches

  def _bracket_advance(self, results):
    if self._final is not None and self._final in results:
      wb_champion, lb_champion = self._final
      s = results[self._final]
      if s is None or s == 0.5:
        self.num_seed_decided += 1
        winner, loser = wb_champion, lb_champion
      else:
        winner, loser = (wb_champion, lb_champion) if s > 0.5 else (lb_champion, wb_champion)
      self._tier[loser], self._tier[winner] = self._stage, self._stage + 1
      self.champion = winner
      return []
    # Winners' bracket: advance one round (if it was played this stage).
    if len(self._wb) > 1:
      nxt = []
      for a, b in zip(self._wb[::2], self._wb[1::2]):
        if a is None or b is None:
          nxt.append(a if b is None else b)
          continue
        winner, loser = self._winner_loser(self._oriented(a, b), results)
        nxt.append(winner)
        self._drops.append(loser)
        self._tier[loser] = self._lb_tier
      self._wb = nxt
    # Losers' bracket: the losers of this stage's LB matches are out.
    for pair in results:
      a, b = pair
      if a in self._pool and b in self._pool:
        _, loser = self._winner_loser(pair, results)
        self._pool.remove(loser)
        self._tier[loser] = self._stage
    return self._play_stage()

  def native_scores(self):
    return self._rank_scores(self._tier)

  @classmethod
  def expected_calls(cls, num_players, *, anchor=None, seeding=None, **options):
    g = _check_num_players(num_players)
    seeding_calls = g - 1 if cls._resolve_seeding(seeding, anchor) == "anchor" else 0
    return 2 * g - 2 + seeding_calls
