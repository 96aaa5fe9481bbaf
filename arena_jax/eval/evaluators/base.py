"""The evaluator interface: one benchmark's measurement of one policy."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from arena_jax.registry import Registry

EVALUATORS: Registry[type] = Registry("evaluator")


@dataclasses.dataclass(frozen=True)
class EvalPolicy:
  """What an evaluator samples from: parameters of `model_config`, its tokenizer and prompt convention, and
  where to run (`mesh` and logical-axis `rules`; None = the default device)."""

  params: Any
  model_config: Any
  tokenizer: Any
  add_bos: bool = True
  mesh: Any = None
  rules: Any = None


class Evaluator:
  """Measures one benchmark (`benchmarks.Benchmark`) under the evaluation config's shared settings.

  `run` returns flat metrics ({name: float}); it may add `watch.SAMPLES` (a list of completion rows), which
  the watcher takes out before the metrics are written.
  """

  def __init__(self, bench, config, *, progress: bool = True):
    self.bench = bench
    self.config = config
    self.progress = progress  # a progress bar per benchmark

  def run(self, policy: EvalPolicy, task, examples: Sequence[Any], rng) -> dict:
    raise NotImplementedError
