"""Shared pieces of the mesh tests: a toy model whose every sharded dimension divides 8, a train batch, and
which rows of a global array each process holds (what the tests assert about a mesh's host layout)."""

from typing import Sequence

import jax
import ml_collections
import numpy as np
import pytest

from arena_jax import models
from arena_jax.train import step as step_lib

# vocab, heads, KV heads and MLP split over `tensor` (up to 8), embed over `fsdp`; grouped-query (2 per KV head).
CONFIG = models.ModelConfig(
  vocab_size=128, d_model=64, num_layers=2, num_heads=16, num_kv_heads=8, head_dim=4, mlp_dim=128, init_std=1.0
)
# The meshes an equivalence check runs on: 2×2×2 splits every axis at once (`make test`); the two 8-way ones, each
# axis alone, are the slow tier's (`make test-all`).
MESHES = [
  (2, 2, 2),
  pytest.param((8, 1, 1), marks=pytest.mark.slow),
  pytest.param((1, 1, 8), marks=pytest.mark.slow),
]
# Stop steps (`sampling.ForcedStops`) of the multi-host compacting sampler's 8 rows: 8 rows → 4 at step 5.
FORCED_STOPS = (0, 11, 3, 7, 1, 5, 2, 9)
# The mesh tests need 8 (fake) devices; `make test` runs them in a process of their own (tests/conftest.py).
NEEDS_8 = pytest.mark.mesh


def loss_config(kl_coef=0.01):
  return ml_collections.ConfigDict(
    dict(eps_low=1.0, eps_high=4.0, aggregation="token_mean", mask_truncated=False, kl_coef=kl_coef)
  )


def optim_config(lr=1e-4):
  return ml_collections.ConfigDict(
    dict(lr=lr, warmup_steps=0, b1=0.9, b2=0.99, eps=1e-8, weight_decay=0.01, max_grad_norm=1.0)
  )


def rollout(rows=16, prompt_len=8, new_tokens=8, seed=0):
  """A random but well-formed batch: right-padded prompts, completions of random lengths."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, prompt_len + 1, rows)
  prompts = np.where(np.arange(prompt_len)[None] < lengths[:, None], rng.integers(1, 128, (rows, prompt_len)), 0)
  tokens = rng.integers(1, 128, (rows, new_tokens))
  done = rng.integers(1, new_tokens + 1, rows)
  old = rng.normal(size=(rows, new_tokens)) * 0.1 - np.log(128)
  return step_lib.rows_to_rollout(prompts, lengths, tokens, done, old, rng.normal(size=rows), done == new_tokens)


# ─── rows of a global array per process: the layout the trainer's `parallel.host_block` relies on ───


def process_rows(sharding: jax.sharding.Sharding, shape: int | Sequence[int]) -> np.ndarray:
  """Sorted indices of the rows (dimension 0) of an array of `shape` (or [shape]) laid out by `sharding`
  that this process's devices hold."""
  shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
  rows: set[int] = set()
  for index in sharding.addressable_devices_indices_map(shape).values():
    rows.update(range(shape[0])[index[0]])
  return np.asarray(sorted(rows), dtype=np.int64)


def local_rows(x: jax.Array) -> tuple[np.ndarray, np.ndarray]:
  """(row indices, host array) of the rows of global `x` that live on this process."""
  rows = process_rows(x.sharding, x.shape)
  out = np.empty((len(rows),) + x.shape[1:], x.dtype)
  where = {r: i for i, r in enumerate(rows)}
  for shard in x.addressable_shards:
    sl = range(x.shape[0])[shard.index[0]]
    out[(slice(where[sl[0]], where[sl[0]] + len(sl)),) + tuple(shard.index[1:])] = np.asarray(shard.data)
  return rows, out


def global_array(local: np.ndarray, sharding: jax.sharding.Sharding, num_rows: int) -> jax.Array:
  """The global [num_rows, …] array whose rows `process_rows(sharding, num_rows)` are `local` here."""
  return jax.make_array_from_process_local_data(sharding, np.asarray(local), (num_rows,) + np.shape(local)[1:])


def local_groups(sharding: jax.sharding.Sharding, shape: int | Sequence[int], group_size: int) -> np.ndarray:
  """Groups (rows g·G … g·G+G−1) whose rows this process's devices hold; raises if one straddles hosts."""
  rows = process_rows(sharding, shape)
  groups = np.unique(rows // group_size)
  owned = np.asarray([np.isin(np.arange(g * group_size, (g + 1) * group_size), rows).all() for g in groups], bool)
  if not owned.all():
    raise ValueError(f"groups of {group_size} rows straddle processes; the batch sharding must keep groups whole")
  return groups
