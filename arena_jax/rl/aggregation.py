"""How a group's judgments become judge rewards r_judge [G] (SPEC §5–§7), selected by name.

An aggregation takes the verdicts of the judged groups that got at least one successful judgment and
returns one row of judge rewards per group; NaN marks a member left out of its group's statistics. Groups
with no successful judgment never reach it: the reward mode fills them with a constant row (zero advantage;
SPEC §4: a failure is dropped, never a tie).
Each aggregation reads one judge form's verdicts (its `form`: tournament matches or rubric
scores); `reward.aggregation` may replace a mode's own by any of the same form, independently of the
topology (docs/reward_modes.md). Register a new one with `@register_aggregator("name", form=...)`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from arena_jax import arena
from arena_jax.registry import Registry


@dataclasses.dataclass
class Verdicts:
  """What the judge returned for one group (host data).

  matches: (first int[M], second int[M], s float[M]) of the successful pairwise judgments, s = the
    soft outcome of `first` (SPEC §4).
  native_ranking: float[G], rank 0 = best, by the tournament's own rule (pairwise modes).
  scores: a rubric score per member, None where the judgment failed (pointwise modes).
  copies: int[G] or None: member i is a duplicate of member copies[i] (its representative, which
    played for it: `matches` involve representatives only); None = every member played for itself.
  """

  matches: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
  native_ranking: np.ndarray | None = None
  scores: Sequence[float | None] | None = None
  copies: np.ndarray | None = None

  @property
  def empty(self) -> bool:
    """No successful judgment at all: the group carries no judge signal (a group whose members are all
    one trajectory needs none: it is not empty, its rewards are equal)."""
    if self.scores is not None:
      return all(s is None for s in self.scores)
    if self.copies is not None and len(set(np.asarray(self.copies).tolist())) == 1:
      return False
    return self.matches is None or len(self.matches[0]) == 0

  def expand(self, row: np.ndarray) -> np.ndarray:
    """A per-member row [..., G] with each duplicate given its representative's value."""
    return row if self.copies is None else np.asarray(row)[..., np.asarray(self.copies)]


def expand_rows(verdicts: Sequence[Verdicts], rows: np.ndarray) -> np.ndarray:
  """`Verdicts.expand` of each group's row of `rows` [n, ..., G]."""
  return np.stack([v.expand(r) for v, r in zip(verdicts, np.asarray(rows))])


Aggregation = Callable[..., np.ndarray]  # (verdicts, group_size, *, l2, solver) -> float [n, G]
# Each entry carries `form`: the judge form whose verdicts it reads.
AGGREGATORS: Registry[Aggregation] = Registry("aggregation")


def register_aggregator(name: str, *, form: str = "pairwise"):
  """Function decorator: registers `fn(verdicts, group_size, *, l2, solver) -> [n, G]` under `name`; `form`
  is the judge form it reads ("pairwise": `Verdicts.matches` / `native_ranking`, "pointwise": `scores`),
  kept as `fn.form`."""

  def deco(fn: Aggregation) -> Aggregation:
    if form not in ("pairwise", "pointwise"):
      raise ValueError(f"aggregation {name!r}: form must be 'pairwise' or 'pointwise', got {form!r}")
    fn.form = form
    return AGGREGATORS.register(name)(fn)

  return deco


@register_aggregator("win_rate")
def win_rate(verdicts: Sequence[Verdicts], group_size: int, **_) -> np.ndarray:
  """r_i = mean soft score of i over its observed matches (SPEC §5); 1/2 for a player with none."""
  out = np.empty((len(verdicts), group_size))
  for k, v in enumerate(verdicts):
    f, s, o = v.matches
    score = np.bincount(f, o, group_size) + np.bincount(s, 1.0 - o, group_size)
    games = np.bincount(f, minlength=group_size) + np.bincount(s, minlength=group_size)
    out[k] = v.expand(np.where(games > 0, score / np.maximum(games, 1), 0.5))
  return out


def padded_matches(verdicts: Sequence[Verdicts]) -> tuple[np.ndarray, ...]:
  """(first int32, second int32, outcome, weight) [n, M] of the groups' matches, padded to the longest
  with weight 0: the batched input of one jitted Bradley–Terry fit."""
  m = max(1, max(len(v.matches[0]) for v in verdicts))
  arrays = np.zeros((4, len(verdicts), m))
  for k, v in enumerate(verdicts):
    f, s, o = v.matches
    arrays[:, k, : len(f)] = np.stack([f, s, o, np.ones(len(f))])
  return arrays[0].astype(np.int32), arrays[1].astype(np.int32), arrays[2], arrays[3]


@register_aggregator("bt")
def bradley_terry(verdicts: Sequence[Verdicts], group_size: int, *, l2: float, solver: str, **_) -> np.ndarray:
  """Min–max normalised Bradley–Terry strengths (SPEC §6): one batched jitted fit over the groups,
  their match lists padded to the longest with weight 0. Duplicates take their representative's θ
  before normalising (equal strength, and a member that never played does not set the range)."""
  if all(v.copies is None for v in verdicts):
    return np.asarray(arena.bt_rewards(*padded_matches(verdicts), group_size, l2=l2, solver=solver))
  theta = np.asarray(arena.fit_bradley_terry(*padded_matches(verdicts), group_size, l2=l2, solver=solver))
  return np.asarray(arena.min_max_normalise(expand_rows(verdicts, theta)))


def shrinkage_factors(theta: np.ndarray, se: np.ndarray, shrinkage: float) -> np.ndarray:
  """f_i = z_i² / (z_i² + κ), z_i = (θ_i − θ̄)/SE_i, κ = `shrinkage` (a project addition, docs/reward_modes.md).

  The factor that multiplies a judged trajectory's advantage: ≈ 1 when its strength stands out of the
  group mean by many standard errors, → 0 when it is within noise of it; κ = 0 leaves everything at 1.
  """
  if shrinkage == 0:
    return np.ones_like(theta)
  z2 = np.square((theta - theta.mean(-1, keepdims=True)) / np.maximum(se, 1e-12))
  return z2 / (z2 + shrinkage)


def bt_shrinkage(
  verdicts: Sequence[Verdicts], group_size: int, *, l2: float, solver: str, shrinkage: float
) -> np.ndarray:
  """Advantage factors [n, G] (`shrinkage_factors`) from one batched fit with Laplace standard errors."""
  theta, se = arena.fit_bradley_terry(*padded_matches(verdicts), group_size, l2=l2, solver=solver, errors="laplace")
  theta, se = (expand_rows(verdicts, np.asarray(a, np.float64)) for a in (theta, se))
  return shrinkage_factors(theta, se, shrinkage)


@register_aggregator("rank_quantile")
def rank_quantile(verdicts: Sequence[Verdicts], group_size: int, **_) -> np.ndarray:
  """ArenaRL's rank reward r_i = 1 − rank_i/(G − 1) from the topology's own ranking (SPEC §5): its group
  advantage is `rl.rank_quantile_advantages` of the ranking. Computed here in float64, as ever."""
  return np.stack([arena.tournaments.rank_quantile(v.native_ranking) for v in verdicts]).reshape(-1, group_size)


@register_aggregator("pointwise", form="pointwise")
def pointwise(verdicts: Sequence[Verdicts], group_size: int, **_) -> np.ndarray:
  """The rubric scores (SPEC §7); NaN for a member whose judgment failed: it is left out of its group's
  mean and std and gets zero advantage (`RewardMode.advantages`). Imputing the group's mean instead would
  shrink the std the others are scaled by (SPEC §4: a failure is dropped)."""
  return np.asarray([[np.nan if s is None else s for s in v.scores] for v in verdicts], float).reshape(-1, group_size)
