"""One of two CPU processes of `test_multihost.py` (4 fake devices each, one global mesh of 8).

Run as `python -m tests.parallel.multihost_worker OUT_JSON CKPT_DIR` with JAX_COORDINATOR_ADDRESS,
JAX_NUM_PROCESSES and JAX_PROCESS_ID set; writes what it saw as JSON.
"""

import dataclasses
import json
import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from arena_jax import models, parallel, sampling  # noqa: E402
from arena_jax.train import sharding as train_sharding  # noqa: E402
from arena_jax.train import step as step_lib  # noqa: E402
from arena_jax.train.checkpoint import Checkpointer  # noqa: E402


def main(out_path: str, ckpt_dir: str):
  assert parallel.initialize(True)  # before anything starts a JAX backend
  from tests.parallel.conftest import (  # pylint: disable=g-import-not-at-top
    CONFIG,
    FORCED_STOPS,
    global_array,
    local_groups,
    local_rows,
    loss_config,
    optim_config,
    process_rows,
    rollout,
  )

  out = {
    "process": jax.process_index(),
    "processes": jax.process_count(),
    "devices": jax.device_count(),
    "local_devices": jax.local_device_count(),
  }
  mesh = parallel.make_mesh(parallel.mesh_config(2, 2, 2))

  # ── per-host rows: this host's block of a batch, and the global array assembled from the blocks ──
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
  mine = process_rows(rows, 16)
  out["rows"] = mine.tolist()
  out["groups"] = local_groups(rows, 16, group_size=4).tolist()
  x = global_array(np.arange(16)[mine] * 10, rows, 16)
  out["gathered"] = np.asarray(multihost_utils.process_allgather(x, tiled=True)).tolist()
  idx, local = local_rows(x)
  out["local_rows_ok"] = bool((idx == mine).all() and (local == mine * 10).all())
  out["host_sum"] = int(parallel.host_sum(np.asarray(jax.process_index() + 1)))
  # The recommended flow: each host draws its own prompts (block h of the global batch) and gathers.
  block = parallel.host_block(8)
  out["block"] = [block.start, block.stop]
  out["gather"] = parallel.gather(np.arange(8)[block] + 100).tolist()

  # ── the sharded RL update: every host passes the same batch ──
  optimizer = step_lib.make_optimizer(optim_config())
  shardings = train_sharding.train_shardings(CONFIG, optimizer, mesh)
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  ref = jax.tree.map(lambda p: p * 1.01, params)
  update = train_sharding.train_step_fn(
    CONFIG, optimizer, loss_config(), mesh, temperature=1.0, micro_batches=2, use_reference=True
  )
  state = train_sharding.init_train_state(params, optimizer, shardings)
  state, metrics = update(
    state, jax.device_put(rollout(), shardings.rollout), jax.device_put(ref, shardings.state.params)
  )
  out["metrics"] = {k: float(np.asarray(v.addressable_data(0))) for k, v in metrics.items()}

  # ── orbax: every process writes its shards; restore resharded onto (1, 1, 8) ──
  ckpt = Checkpointer(ckpt_dir, keep=1)
  ckpt.save(1, state, {"step": 1})
  sh_b = train_sharding.train_shardings(CONFIG, optimizer, parallel.make_mesh(parallel.mesh_config(1, 1, 8)))
  restored, _ = ckpt.restore(1, train_sharding.abstract_train_state(CONFIG, optimizer, sh_b))
  ckpt.close()
  same = [
    bool(
      np.array_equal(multihost_utils.process_allgather(a, tiled=True), multihost_utils.process_allgather(b, tiled=True))
    )
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state))
  ]
  out["restored_equal"] = all(same)

  # ── the sampler: the same prompts on every host; outputs gathered, each host owns its groups ──
  sampler = sampling.Sampler(
    config=CONFIG,
    max_new_tokens=12,
    num_samples=2,
    stop_tokens=(3,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
    mesh=mesh,
  )
  rng = np.random.default_rng(2)
  prompts = [list(rng.integers(4, 128, n)) for n in (5, 9, 3, 7)]
  # Every host passes the same prompts; the call places them as global arrays itself.
  params = sampler.shard_params(models.init_model(CONFIG, seed=1))
  samples = sampler(params, prompts, jax.random.key(7))
  out["tokens"] = parallel.gather(samples.tokens).tolist()
  out["sample_groups"] = local_groups(samples.tokens.sharding, samples.tokens.shape, 2).tolist()
  # Compaction across hosts: every host reads the same finished rows and gathers the same live ones.
  compacting = dataclasses.replace(sampler, compact_every=2, logits_processor=sampling.ForcedStops(FORCED_STOPS, 3))
  compact = compacting(params, prompts, jax.random.key(7))
  out["compact_tokens"] = parallel.gather(compact.tokens).tolist()
  out["compact_lengths"] = parallel.gather(compact.lengths).tolist()
  out["compactions"] = compacting._compact_fn._cache_size()  # pylint: disable=protected-access
  # The growing cache across hosts: chunks appended and rows regrouped alike on every host; and the same
  # rows in two calls of two prompts (`row_offset`).
  growing = dataclasses.replace(compacting, compact_every=0, decode_cache="growing")
  grown = growing(params, prompts, jax.random.key(7))
  out["growing_tokens"] = parallel.gather(grown.tokens).tolist()
  out["regroups"] = growing._regroup_rows_fn._cache_size()  # pylint: disable=protected-access
  calls = [
    growing(params, prompts[:2], jax.random.key(7)),
    growing(params, prompts[2:], jax.random.key(7), row_offset=4),
  ]
  out["split_tokens"] = sampling.concat_outputs([parallel.gather(c) for c in calls]).tokens.tolist()
  with open(out_path, "w", encoding="utf-8") as f:
    json.dump(out, f)
  jax.distributed.shutdown()


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
