"""The data of one RL step as it moves through the loop (docs/architecture.md "The one loop").

Batch        groups of samples: prompts, completions, behaviour log-probs, verifier rewards, diversity
Generation   what producing a step's batch cost (dynamic sampling generates more than it keeps)
Pending      a generated step whose judgment may still run, not yet applied
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from arena_jax import parallel
from arena_jax.train import judging
from arena_jax.train import step as step_lib


@dataclasses.dataclass
class Batch:
  """Groups of samples: group b is prompt b and its G completions, rows b·G … b·G + G − 1.

  A host first builds the batch of its own groups; `gather` then gives every host the arrays of all
  hosts' groups, in host order, without their `examples` and `texts` (those exist on their host only).
  """

  examples: list
  texts: list[str]
  prompt_tokens: np.ndarray  # [n, P] one prompt per group
  prompt_lengths: np.ndarray  # [n]
  tokens: np.ndarray  # [n·G, N]
  logprobs: np.ndarray  # [n·G, N] behaviour log-probs recorded by the sampler (SPEC §2)
  lengths: np.ndarray  # [n·G]
  truncated: np.ndarray  # [n·G]
  completion_step: np.ndarray  # [n·G] the decode step at which the row finished (arrival order, SPEC §5)
  verifier: np.ndarray  # [n, G] verifier rewards
  diverse: np.ndarray  # [n] Var(r_verifier) > 0 (SPEC §1), computed once when verified

  @property
  def num_groups(self) -> int:
    return len(self.verifier)

  def take(self, groups) -> "Batch":
    """The groups at indices `groups` (an index array or a slice)."""
    idx = np.arange(self.num_groups)[groups]
    g = self.verifier.shape[1]
    rows = (idx[:, None] * g + np.arange(g)).reshape(-1)
    return Batch(
      [self.examples[i] for i in idx],
      [self.texts[r] for r in rows],
      self.prompt_tokens[idx],
      self.prompt_lengths[idx],
      self.tokens[rows],
      self.logprobs[rows],
      self.lengths[rows],
      self.truncated[rows],
      self.completion_step[rows],
      self.verifier[idx],
      self.diverse[idx],
    )

  @staticmethod
  def concat(parts: list["Batch"], pad_id: int) -> "Batch":
    """One batch of the groups of `parts`; prompts are right-padded to the widest part."""
    width = max(p.prompt_tokens.shape[1] for p in parts)
    pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=pad_id)
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])
    return Batch(
      [e for p in parts for e in p.examples],
      [t for p in parts for t in p.texts],
      np.concatenate([pad(p.prompt_tokens) for p in parts]),
      *(cat(f) for f in _ARRAYS[1:]),
    )

  def gather(self, pad_id: int) -> "Batch":
    """The arrays of every host's groups; `examples` and `texts` are left empty (they stay with the
    batch of the host that drew them)."""
    prompts = parallel.gather_rows(self.prompt_tokens, pad_id)
    return Batch([], [], prompts, *(parallel.gather_rows(getattr(self, f)) for f in _ARRAYS[1:]))

  def rollout(self) -> step_lib.Rollout:
    """The update's rows; the advantages are computed inside the update from the rewards."""
    g = self.verifier.shape[1]
    return step_lib.rows_to_rollout(
      np.repeat(self.prompt_tokens, g, 0),
      np.repeat(self.prompt_lengths, g),
      self.tokens,
      self.lengths,
      self.logprobs,
      None,
      self.truncated,
    )


_ARRAYS = (
  "prompt_tokens",
  "prompt_lengths",
  "tokens",
  "logprobs",
  "lengths",
  "truncated",
  "completion_step",
  "verifier",
  "diverse",
)


@dataclasses.dataclass
class Generation:
  """What producing one step's batch cost (dynamic sampling generates more than it keeps)."""

  batches: int = 0  # generation batches
  trajectories: int = 0  # samples generated, every host's
  tokens: int = 0  # their completion tokens
  correct: float = 0.0  # the sum of their verifier rewards
  unclosed_thinking: int = 0  # of them, those that ended inside a thinking block (no visible answer)
  sample_s: float = 0.0
  verify_s: float = 0.0
  judged_early: int = 0  # streamed: groups sent to the judge before their batch finished decoding


@dataclasses.dataclass
class Pending:
  """A generated step whose judgment may still be running, not yet applied."""

  step: int
  local: Batch  # this host's groups: what it judges
  batch: Batch  # every host's groups: what the update trains on
  generation: Generation
  iterator_after: Any  # the data iterator's state right after this step's prompts were drawn
  judgment: judging.StepJudgment | None
  generated_at: float = dataclasses.field(default_factory=time.perf_counter)  # when generation ended
