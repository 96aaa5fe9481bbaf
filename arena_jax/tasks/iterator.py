"""A deterministic, sharded, resumable prompt iterator.

Each epoch visits the examples in a permutation fixed by (seed, epoch). A global batch is the next
`batch_size × process_count` indices of that permutation; process p takes its contiguous slice
[p·batch_size, (p+1)·batch_size). An epoch ends when fewer than a global batch remain (the remainder
is dropped, so every step has the same shapes), and the next permutation starts.

The whole state is three integers, `IteratorState(seed, epoch, position)`, identical on every
process (position counts global examples consumed in the epoch), so it is checkpointed with the
train state and a resumed run sees exactly the prompts the uninterrupted run would have seen.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from arena_jax.tasks.base import DataError, Example


@dataclasses.dataclass(frozen=True)
class IteratorState:
  """Where a `PromptIterator` stands: the next global batch starts at `position` of `epoch`."""

  seed: int
  epoch: int = 0
  position: int = 0

  def to_dict(self) -> dict[str, int]:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d) -> "IteratorState":
    try:
      return cls(seed=int(d["seed"]), epoch=int(d["epoch"]), position=int(d["position"]))
    except (KeyError, TypeError, ValueError) as e:
      raise ValueError(f"not an iterator state (want seed, epoch, position): {d!r}") from e


class PromptIterator:
  """Yields this process's batches (lists of `Example`) forever, deterministically.

  Args:
    source: random-access examples (an `ExampleSource`, a list).
    batch_size: examples per process per step (prompts; the sampler repeats each G times).
    seed: the shuffle seed (ignored if `state` is given).
    shuffle: False visits the examples in stored order (evaluation).
    process_index, process_count: this process's shard; default `jax.process_index()` and
      `jax.process_count()`.
    state: where to resume (`IteratorState` or its dict).
  """

  def __init__(
    self,
    source: Sequence[Example],
    batch_size: int,
    seed: int = 0,
    *,
    shuffle: bool = True,
    process_index: int | None = None,
    process_count: int | None = None,
    state: IteratorState | dict | None = None,
  ):
    if process_index is None or process_count is None:
      import jax  # pylint: disable=g-import-not-at-top  (only when the caller does not say)

      process_index = jax.process_index() if process_index is None else process_index
      process_count = jax.process_count() if process_count is None else process_count
    if batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not 0 <= process_index < process_count:
      raise ValueError(f"process_index {process_index} is not in [0, {process_count})")
    self.source = source
    self.batch_size = batch_size
    self.shuffle = shuffle
    self.process_index = process_index
    self.process_count = process_count
    self.global_batch_size = batch_size * process_count
    if len(source) < self.global_batch_size:
      raise DataError(
        f"the split has {len(source)} examples, fewer than one global batch "
        f"({batch_size} per process × {process_count} processes)"
      )
    self._order_epoch = None
    self._order = None
    self.restore(state if state is not None else IteratorState(seed))

  @property
  def state(self) -> IteratorState:
    return IteratorState(self._seed, self._epoch, self._position)

  def restore(self, state: IteratorState | dict):
    """Continues from `state` (as returned by `state`, or its dict from a checkpoint)."""
    if isinstance(state, dict):
      state = IteratorState.from_dict(state)
    if state.epoch < 0 or not 0 <= state.position <= len(self.source) - self.global_batch_size:
      raise ValueError(
        f"{state} does not fit a split of {len(self.source)} examples with global batch {self.global_batch_size}"
      )
    self._seed, self._epoch, self._position = state.seed, state.epoch, state.position

  def _permutation(self) -> np.ndarray:
    if self._order_epoch != (self._seed, self._epoch):
      n = len(self.source)
      self._order = np.random.default_rng([self._seed, self._epoch]).permutation(n) if self.shuffle else np.arange(n)
      self._order_epoch = (self._seed, self._epoch)
    return self._order

  def next_indices(self) -> np.ndarray:
    """The source indices of this process's next batch (advances the state)."""
    start = self._position + self.process_index * self.batch_size
    indices = self._permutation()[start : start + self.batch_size]
    self._position += self.global_batch_size
    if self._position + self.global_batch_size > len(self.source):
      self._epoch, self._position = self._epoch + 1, 0
    return indices

  def __iter__(self):
    return self

  def __next__(self) -> list[Example]:
    return [self.source[int(i)] for i in self.next_indices()]
