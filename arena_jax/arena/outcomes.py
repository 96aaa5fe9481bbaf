"""Judge verdicts, soft outcomes and match mirroring (SPEC §4).

A pairwise judge returns a categorical verdict about an ordered pair (first, second): the first wins,
a tie, or the second wins. The soft outcome of the first trajectory is

    s = 1/2 + m   (first wins),   1/2   (tie),   1/2 − m   (second wins)

with soft margin m ∈ [0, 1/2]. Antisymmetry s(B, A) = 1 − s(A, B) holds *exactly* in floating point
because the "second wins" outcome is computed as 1 − (1/2 + m), never as 1/2 − m.

Every function here works on Python scalars and NumPy arrays; `mirror_matches` also works on jax arrays.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

DEFAULT_MARGIN = 0.4


class Verdict(enum.IntEnum):
  """A pairwise verdict in the canonical (first, second) order."""

  SECOND_WINS = -1
  TIE = 0
  FIRST_WINS = 1

  def flipped(self) -> "Verdict":
    """The same judgment seen from the other side (A ≻ B becomes B ≻ A)."""
    return Verdict(-int(self))


class Match(NamedTuple):
  """One observed comparison: `outcome` is the soft score of `first` against `second` (SPEC §4)."""

  first: int
  second: int
  outcome: float
  weight: float = 1.0


def check_margin(margin: float) -> float:
  """Returns `margin` as a float, or raises naming the field when it is outside [0, 1/2]."""
  m = float(margin)
  if not (0.0 <= m <= 0.5):  # also rejects NaN
    raise ValueError(f"soft margin m must lie in [0, 0.5] (SPEC §4), got margin={margin!r}")
  return m


def verdict_to_outcome(verdict, margin: float = DEFAULT_MARGIN):
  """Soft outcome of the first trajectory for a verdict (or an int array of verdicts in {-1, 0, 1})."""
  m = check_margin(margin)
  win = 0.5 + m
  lose = 1.0 - win  # computed from `win` so that s(B, A) == 1 - s(A, B) bit for bit
  if isinstance(verdict, (Verdict, int, np.integer)):
    v = int(verdict)
    if v not in (-1, 0, 1):
      raise ValueError(f"verdict must be -1, 0 or 1, got {verdict!r}")
    return win if v == 1 else (0.5 if v == 0 else lose)
  v = np.asarray(verdict)
  if not np.isin(v, (-1, 0, 1)).all():
    raise ValueError(f"verdicts must be -1, 0 or 1, got values {np.unique(v)}")
  return np.where(v == 1, win, np.where(v == 0, 0.5, lose))


def outcome_to_verdict(outcome) -> Verdict:
  """The categorical verdict implied by a soft outcome (> 1/2 first wins, < 1/2 second wins)."""
  s = float(outcome)
  if not (0.0 <= s <= 1.0):
    raise ValueError(f"a soft outcome lies in [0, 1], got {outcome!r}")
  return Verdict.FIRST_WINS if s > 0.5 else (Verdict.SECOND_WINS if s < 0.5 else Verdict.TIE)


def flip_outcome(outcome):
  """s(second, first) = 1 − s(first, second)."""
  return 1.0 - outcome


def mirror_matches(first, second, outcome, weight):
  """Appends every match (i, j, s, w) mirrored as (j, i, 1 − s, w) along the last axis (SPEC §4 (2)).

  Works for NumPy and jax arrays (the concatenation follows the array type of `first`).
  """
  xp = _array_module(first)
  cat = lambda a, b: xp.concatenate([a, b], axis=-1)
  return cat(first, second), cat(second, first), cat(outcome, 1.0 - outcome), cat(weight, weight)


def _array_module(x):
  if isinstance(x, np.ndarray) or np.isscalar(x):
    return np
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  return jnp
