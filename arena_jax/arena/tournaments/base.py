"""The scheduler interface, its registry and the entry points of the tournaments (SPEC §5).

Host-side state machines (pure Python + NumPy). A scheduler hands out the matches that may be judged
*now* (`next_matches`), takes their results (`record`), and exposes both its topology's native
ranking and the observed matches, so that any schedule can be aggregated by its native rule or by
Bradley–Terry (SPEC §6):

    sched = make_scheduler("seeded_single_elimination", G, anchor=greedy_index)
    while not sched.done:
      pairs = sched.next_matches()          # concurrent within a batch; [] while results are pending
      ...judge them (asynchronously)..., then for each: sched.record(i, j, s_or_None)
    first, second, outcome = sched.observed()

`outcome` is the soft score of `first` against `second` in [0, 1] (SPEC §4), in the orientation the
pair was issued; `None` marks a failed or unparseable judgment, which is dropped and counted
(`num_failed`), never turned into a tie.

Batches are *stages*: a topology's next stage is computed once every result of the current one is in
(so `num_rounds`, the number of non-empty batches, is the number of sequential judge rounds), except the
live tournaments with `wait_for_results=False`, which issue an arrival's matches as soon as it arrives.

This module holds what the topologies share: `Scheduler`, the registry `SCHEDULERS` and its decorator,
the argument checks, the warm-started Bradley–Terry fit of the BT-ranked topologies (`_FitsBradleyTerry`),
and the entry points `make_scheduler`, `expected_calls` and `play`. The topologies live one family per
module beside it and register themselves when the package is imported (see the package docstring).
"""

from __future__ import annotations

import abc
from typing import Callable, ClassVar, Sequence

import numpy as np

from arena_jax.registry import Registry
from arena_jax.arena.bradley_terry import fit_bradley_terry_host, laplace_covariance_host
from arena_jax.arena.tournaments.ranking import average_ranks

Pair = tuple[int, int]
# A judgment for one pair: the soft score of `first`, or None when the judge failed.
Judge = Callable[[list[Pair]], Sequence["float | None"]]

SCHEDULERS: Registry[type["Scheduler"]] = Registry("topology")


def register_scheduler(name: str):
  """Class decorator: registers a `Scheduler` subclass under `name` (`reward.topology` selects it)."""
  return SCHEDULERS.register(name)


# ──────────────────────────────────────────── validation helpers ────────────────────────────────────────────


def _check_num_players(num_players) -> int:
  if isinstance(num_players, bool) or not isinstance(num_players, (int, np.integer)):
    raise ValueError(f"num_players must be an int, got {num_players!r}")
  if num_players < 2:
    raise ValueError(f"a tournament needs num_players >= 2 trajectories, got num_players={num_players}")
  return int(num_players)


def _check_index(value, num_players: int, arg: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{arg} must be an int index into the group, got {arg}={value!r}")
  if not 0 <= value < num_players:
    raise ValueError(f"{arg} must lie in [0, {num_players}) (num_players={num_players}), got {arg}={value}")
  return int(value)


def _check_permutation(order, num_players: int, arg: str) -> list[int]:
  try:
    values = [int(v) for v in np.asarray(order).reshape(-1)]
  except (TypeError, ValueError) as e:
    raise ValueError(f"{arg} must be a permutation of range({num_players}), got {order!r}") from e
  if sorted(values) != list(range(num_players)) or np.ndim(order) != 1:
    raise ValueError(f"{arg} must be a permutation of range({num_players}), got {arg}={list(values)}")
  return values


def _check_outcome(outcome) -> float | None:
  if outcome is None:
    return None
  try:
    s = float(outcome)
  except (TypeError, ValueError) as e:
    raise ValueError(f"outcome must be a float in [0, 1] or None (failed judgment), got outcome={outcome!r}") from e
  if not 0.0 <= s <= 1.0:  # also rejects NaN
    raise ValueError(f"outcome must be a soft score in [0, 1] (SPEC §4) or None, got outcome={outcome!r}")
  return s


# ──────────────────────────────────────────────── the interface ────────────────────────────────────────────────


class Scheduler(abc.ABC):
  """A tournament among the G trajectories of one group, as a state machine (SPEC §5).

  Subclasses implement `_advance` (the next stage's matches, called whenever nothing is pending or
  queued), optionally `_on_result`, and `native_scores`.
  """

  name: ClassVar[str] = ""
  # What the topology needs from the sampler and the trainer (asked, never inferred from the name):
  # an anchor = the group's greedy sample (SPEC §5: anchor comparisons, seeding), and the arrival
  # order = the order in which trajectories finished decoding (the live tournament).
  needs_anchor: ClassVar[bool] = False
  uses_arrival_order: ClassVar[bool] = False
  # `expected_calls` in closed form, as the trainer runs the topology (with an anchor if it needs
  # one), for docs/judges.md's cost table, which prints it beside `expected_calls` at G = 4, 8, 16.
  calls_formula: ClassVar[str] = ""

  def __init__(self, num_players: int, *, arrival_order=None, anchor=None, seed: int = 0):
    self.num_players = _check_num_players(num_players)
    # Validated for every topology (a bad value is a caller bug), used only by those that need them.
    self.arrival_order = (
      None if arrival_order is None else _check_permutation(arrival_order, self.num_players, "arrival_order")
    )
    self.anchor = None if anchor is None else _check_index(anchor, self.num_players, "anchor")
    self.seed = int(seed)
    self.num_issued = 0
    self.num_failed = 0
    self.num_rounds = 0
    self._pending: dict[Pair, None] = {}  # issued, result not yet recorded (insertion-ordered)
    self._queue: list[Pair] = []  # decided, not yet handed out by next_matches()
    self._first: list[int] = []
    self._second: list[int] = []
    self._outcome: list[float] = []

  # ── public API ──

  def next_matches(self) -> list[Pair]:
    """The (first, second) pairs that may be judged now; each issued pair is returned exactly once."""
    batch, self._queue = self._queue, []
    for pair in batch:
      self._pending[pair] = None
    if batch:
      self.num_rounds += 1
      self.num_issued += len(batch)
    return list(batch)

  def record(self, first: int, second: int, outcome: float | None) -> None:
    """Stores the result of an issued pair: `outcome` = s(first, second) ∈ [0, 1], None = failed (SPEC §4)."""
    first = _check_index(first, self.num_players, "first")
    second = _check_index(second, self.num_players, "second")
    outcome = _check_outcome(outcome)
    if (first, second) not in self._pending:
      if (second, first) in self._pending:
        raise ValueError(
          f"record(first={first}, second={second}): the pair was issued as ({second}, {first}); "
          f"record it in that order, with the outcome of {second}"
        )
      raise ValueError(
        f"record(first={first}, second={second}): no such pair is pending — it was never "
        "issued by next_matches() or its result was already recorded"
      )
    del self._pending[(first, second)]
    if outcome is None:
      self.num_failed += 1
    else:
      self._first.append(first)
      self._second.append(second)
      self._outcome.append(outcome)
    self._on_result(first, second, outcome)
    if not self._pending and not self._queue:
      self._queue.extend(self._advance())

  @property
  def done(self) -> bool:
    """Nothing pending, nothing left to issue (and, when streaming, no arrival left to wait for)."""
    return not self._pending and not self._queue and not self._awaiting_input()

  def observed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """first int32[M], second int32[M], outcome float64[M] of the successful matches, in recording order."""
    return (
      np.asarray(self._first, np.int32),
      np.asarray(self._second, np.int32),
      np.asarray(self._outcome, np.float64),
    )

  @abc.abstractmethod
  def native_scores(self) -> np.ndarray:
    """float64 [G], higher = better, by the topology's own rule (from the results so far)."""

  def native_ranking(self) -> np.ndarray:
    """float64 [G], rank 0 = best; tied players share the average rank."""
    return average_ranks(list(self.native_scores()))

  @classmethod
  @abc.abstractmethod
  def expected_calls(cls, num_players: int, **options) -> int:
    """Judge calls of a full tournament with no failures."""

  # ── hooks ──

  def _start(self) -> None:
    """Queues the first stage; subclasses call it at the end of __init__."""
    self._queue.extend(self._advance())

  @abc.abstractmethod
  def _advance(self) -> list[Pair]:
    """The next batch, called when nothing is pending or queued; [] when finished (or waiting)."""

  def _on_result(self, first: int, second: int, outcome: float | None) -> None:
    del first, second, outcome

  def _awaiting_input(self) -> bool:
    return False

  # ── shared statistics ──

  def _player_points(self) -> tuple[np.ndarray, np.ndarray]:
    """(Σ soft outcome from each player's side, number of observed matches) over the observed matches."""
    f, s, o = self.observed()
    g = self.num_players
    total = np.bincount(f, o, g) + np.bincount(s, 1.0 - o, g)
    count = np.bincount(f, minlength=g) + np.bincount(s, minlength=g)
    return total, count.astype(np.float64)

  def __repr__(self) -> str:
    return (
      f"{type(self).__name__}(name={self.name!r}, num_players={self.num_players}, issued={self.num_issued}, "
      f"failed={self.num_failed}, rounds={self.num_rounds}, pending={len(self._pending)}, done={self.done})"
    )


# ────────────────────────────────── shared by the Bradley–Terry topologies ──────────────────────────────────


class _FitsBradleyTerry(Scheduler):
  """A scheduler that keeps a Bradley–Terry fit of its observed matches (host, float64, warm-started),
  refitted only when new results are in; its native score is that fit's θ."""

  def _init_fit(self, l2: float) -> None:
    self.l2 = float(l2)
    self._theta = np.zeros(self.num_players)
    self._theta_at = 0  # number of observed matches that `_theta` was fitted on

  def _bt_theta(self) -> np.ndarray:
    if self._theta_at != len(self._outcome):
      f, s, o = self.observed()
      self._theta = fit_bradley_terry_host(f, s, o, None, self.num_players, l2=self.l2, init=self._theta)
      self._theta_at = len(self._outcome)
    return self._theta

  def _posterior(self) -> tuple[np.ndarray, np.ndarray]:
    """(θ, Σ): the current fit and its Laplace covariance (`laplace_covariance_host`)."""
    theta = self._bt_theta()
    f, s, o = self.observed()
    return theta, laplace_covariance_host(f, s, o, None, self.num_players, theta, l2=self.l2)

  def native_scores(self):
    return self._bt_theta().copy()


# ──────────────────────────────────────────────── entry points ────────────────────────────────────────────────


def _lookup(name: str) -> type[Scheduler]:
  return SCHEDULERS.get_or_raise(name)


def make_scheduler(
  name: str, num_players: int, *, arrival_order=None, anchor=None, seed: int = 0, **options
) -> Scheduler:
  """A fresh scheduler of topology `name` for a group of `num_players` trajectories (SPEC §5).

  `arrival_order` (live) and `anchor` (anchor, seeded_single_elimination; seeding of
  double_elimination) are validated for every topology and ignored by those that don't use them;
  `options` are the topology's own keyword arguments (e.g. `leaderboard=`, `seeding=`).
  """
  return _lookup(name)(num_players, arrival_order=arrival_order, anchor=anchor, seed=seed, **options)


def expected_calls(name: str, num_players: int, **options) -> int:
  """Judge calls of a full tournament with no failures (`options` as for `make_scheduler`)."""
  options.pop("arrival_order", None)
  options.pop("seed", None)
  return _lookup(name).expected_calls(num_players, **options)


def play(scheduler: Scheduler, judge: Judge) -> Scheduler:
  """Synchronous driver: judges each batch with `judge(pairs) -> [outcome | None, ...]` until done."""
  while not scheduler.done:
    batch = scheduler.next_matches()
    if not batch:
      raise RuntimeError(
        f"{scheduler!r} is not done but has nothing to issue (a streaming live "
        "tournament waiting for arrive()/close()?)"
      )
    outcomes = list(judge(batch))
    if len(outcomes) != len(batch):
      raise ValueError(f"judge returned {len(outcomes)} outcomes for {len(batch)} pairs")
    for (first, second), outcome in zip(batch, outcomes):
      scheduler.record(first, second, outcome)
  return scheduler
