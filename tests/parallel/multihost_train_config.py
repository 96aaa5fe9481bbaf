"""The run of `test_multihost_train.py`, shared by the test and its worker processes (importing it
starts no JAX backend: `jax.distributed.initialize()` must come first in the workers)."""

import zlib

from arena_jax import tasks
from configs.common import mode_config


def coin_verify(self, example, completion):
  """A random policy never solves arithmetic; score a completion by a hash of its text instead, so the
  groups are diverse, all-correct and all-wrong in realistic proportions (as tests/train/conftest.py)."""
  del self, example
  return float(zlib.crc32(completion.encode()) % 2)


def patch_verifier():
  tasks.ArithmeticTask.verify = coin_verify


def config(data_dir: str, *, steps: int, resume: bool = False, distributed: bool = True, max_staleness: int = 0):
  # Reasoning Arena-Live: routed groups, live tournaments against the embedded judge (one server per
  # host; deterministic verdicts), Bradley–Terry rewards, judging one step behind generation.
  c = mode_config("arena_live", "smoke")
  c.tasks.data_dir = data_dir
  c.num_steps, c.resume = steps, resume
  c.rollout.prompts_per_step = 4  # 2 per host
  c.checkpoint.every = 2
  c.mesh.distributed = distributed
  c.rollout.max_staleness = max_staleness  # ≥ 1: the asynchronous loop (`train.async_loop`)
  c.async_loop.push_every = 4
  return c
