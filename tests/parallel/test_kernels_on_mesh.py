"""The attention kernels inside the sharded programs (`models.attention`): the RL update and the
sampler with `attention="splash"` (Pallas interpret mode on these CPU devices, one kernel per shard through
`kernel_mesh`) on a (data 2, fsdp 2, tensor 2) mesh agree with the xla reference on one device.

Tolerances as in test_equivalence.py: float32 sums over a few hundred terms, in another order per shard."""

import jax
import pytest
import jax.numpy as jnp
import numpy as np

from arena_jax import models, parallel, sampling
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib
from tests.parallel.conftest import NEEDS_8, loss_config, optim_config, rollout

pytestmark = NEEDS_8

# Heads split 2 ways over `tensor`, 2 query heads per KV head, a head width splash tiles.
CONFIG = models.ModelConfig(
  vocab_size=128, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=32, mlp_dim=128, init_std=1.0
)
KW = dict(temperature=1.0, micro_batches=2, use_reference=False)


@pytest.mark.slow  # splash's sharded backward
def test_the_sharded_update_with_splash_matches_the_reference_on_one_device():
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  batch = rollout(rows=8, prompt_len=8, new_tokens=8)
  optimizer = step_lib.make_optimizer(optim_config())
  ref_update = step_lib.make_update_fn(CONFIG.replace(attention="xla"), optimizer, loss_config(0.0), **KW)
  want, want_metrics = ref_update(step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer), batch, None)

  mesh = parallel.make_mesh(parallel.mesh_config(2, 2, 2))
  splash = CONFIG.replace(attention="splash")
  shardings = train_sharding.train_shardings(splash, optimizer, mesh)
  update = train_sharding.train_step_fn(splash, optimizer, loss_config(0.0), mesh, **KW)
  lowered = update.lower(
    train_sharding.init_train_state(params, optimizer, shardings), jax.device_put(batch, shardings.rollout), None
  )
  assert "shard_map" in lowered.as_text() or "sdy.manual_computation" in lowered.as_text()  # per shard
  state = train_sharding.init_train_state(params, optimizer, shardings)
  got, metrics = jax.device_get(update(state, jax.device_put(batch, shardings.rollout), None))
  for name in ("loss", "grad_norm", "entropy"):
    np.testing.assert_allclose(metrics[name], want_metrics[name], rtol=2e-5, atol=1e-7, err_msg=name)
  for g, w in zip(jax.tree.leaves(got.params), jax.tree.leaves(jax.device_get(want.params))):
    np.testing.assert_allclose(g, w, atol=2e-5)


@pytest.mark.slow  # splash's sharded prefill
def test_the_sharded_sampler_with_splash_prefills_as_the_reference():
  model = models.init_model(CONFIG, seed=1)
  rng = np.random.default_rng(2)
  prompts = [list(rng.integers(4, 128, n)) for n in (5, 9, 3, 7)]
  kw = dict(max_new_tokens=10, num_samples=2, stop_tokens=(3,), method=sampling.RandomSampling(temperature=1.0))
  want = jax.device_get(
    sampling.Sampler(config=CONFIG.replace(attention="xla"), **kw)(model, prompts, jax.random.key(7))
  )
  mesh = parallel.make_mesh(parallel.mesh_config(2, 2, 2))
  sampler = sampling.Sampler(config=CONFIG.replace(attention="splash"), mesh=mesh, **kw)
  got = jax.device_get(sampler(sampler.shard_params(model), prompts, jax.random.key(7)))
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)
