"""The RL train step and the sampler on meshes (data, fsdp, tensor) = (8,1,1), (2,2,2), (1,1,8) of 8 fake
CPU devices give the same loss, gradients, update and tokens as on one device (docs/tpu.md, "How it scales")."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models, parallel, sampling
from arena_jax.train import sharding as train_sharding
from arena_jax.train import step as step_lib
from tests.parallel.conftest import CONFIG, MESHES, NEEDS_8, loss_config, optim_config, rollout

pytestmark = NEEDS_8
KW = dict(temperature=1.0, micro_batches=2, use_reference=True)


@functools.lru_cache(maxsize=1)
def single_device_update():
  """(params, ref params, batch, state after one update, metrics) on the default device."""
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  ref = jax.tree.map(lambda x: x * 1.01, params)  # a reference policy that differs: the KL term has a gradient
  batch = rollout()
  optimizer = step_lib.make_optimizer(optim_config())
  update = step_lib.make_update_fn(CONFIG, optimizer, loss_config(), **KW)
  state, metrics = update(step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer), batch, ref)
  return params, ref, batch, jax.device_get(state), jax.device_get(metrics)


def adam_moments(state):
  """(mu, nu) of make_optimizer's chain(clip_by_global_norm, adamw): mu = (1 − b1)·clipped gradient."""
  adam = state.opt_state[1][0]
  return adam.mu, adam.nu


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: "x".join(map(str, s)))
def test_train_step_matches_one_device(shape):
  params, ref, batch, want, want_metrics = single_device_update()
  mesh = parallel.make_mesh(parallel.mesh_config(*shape))
  optimizer = step_lib.make_optimizer(optim_config())
  shardings = train_sharding.train_shardings(CONFIG, optimizer, mesh)
  update = train_sharding.train_step_fn(CONFIG, optimizer, loss_config(), mesh, **KW)
  state = train_sharding.init_train_state(params, optimizer, shardings)
  got, metrics = update(state, jax.device_put(batch, shardings.rollout), jax.device_put(ref, shardings.state.params))

  # Laid out as the rules say, on all 8 devices.
  q = got.params["layers"][0]["attn"]["q_proj"]
  assert q.sharding == shardings.state.params["layers"][0]["attn"]["q_proj"]
  assert adam_moments(got)[0]["layers"][0]["attn"]["q_proj"].sharding == q.sharding
  assert len(q.sharding.device_set) == 8
  got, metrics = jax.device_get(got), jax.device_get(metrics)

  assert {"loss", "grad_norm", "kl", "entropy"} <= set(want_metrics)
  for name, value in want_metrics.items():
    np.testing.assert_allclose(metrics[name], value, rtol=2e-5, atol=1e-7, err_msg=name)
  # Gradients: the first moment is (1 − b1) × the clipped gradient; the second its square.
  for got_m, want_m in zip(adam_moments(got), adam_moments(want)):
    for g, w in zip(jax.tree.leaves(got_m), jax.tree.leaves(want_m)):
      np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()) + 1e-12)
  # The AdamW update itself (≈ lr per coordinate at step 1, so an absolute tolerance well below lr = 1e-4).
  for g, w in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params)):
    np.testing.assert_allclose(g, w, atol=2e-5)
  assert int(got.step) == 1


@functools.lru_cache(maxsize=1)
def single_device_samples():
  model = models.init_model(CONFIG, seed=1)
  rng = np.random.default_rng(2)
  # 3 prompts: not a multiple of 8 batch shards, so the meshes with a batch axis pad the batch.
  prompts = [list(rng.integers(4, 128, n)) for n in (5, 9, 3)]
  out = sampling.Sampler(**sampler_kwargs())(model, prompts, jax.random.key(7))
  return model, prompts, jax.device_get(out)


def sampler_kwargs():
  return dict(
    config=CONFIG,
    max_new_tokens=12,
    num_samples=2,
    stop_tokens=(3,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
  )


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: "x".join(map(str, s)))
def test_sampler_matches_one_device(shape):
  model, prompts, want = single_device_samples()
  mesh = parallel.make_mesh(parallel.mesh_config(*shape))
  sampler = sampling.Sampler(**sampler_kwargs(), mesh=mesh)
  got = sampler(sampler.shard_params(model), prompts, jax.random.key(7))
  assert len(got.tokens.sharding.device_set) == 8
  got = jax.device_get(got)
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_array_equal(got.lengths, want.lengths)
  np.testing.assert_array_equal(got.completion_step, want.completion_step)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)


def test_uneven_micro_batches_fail_with_a_clear_message():
  mesh = parallel.make_mesh(parallel.mesh_config(8, 1, 1))
  with pytest.raises(ValueError, match="micro_batches"):
    train_sharding.check_train_batch(rows=16, micro_batches=4, mesh=mesh)  # 4 rows per micro-batch, 8 shards
  train_sharding.check_train_batch(rows=16, micro_batches=2, mesh=mesh)


@pytest.mark.slow  # the compacting sampler's programs on two meshes
@pytest.mark.parametrize("shape", [(8, 1, 1), (2, 2, 2)], ids=lambda s: "x".join(map(str, s)))
def test_compacting_sampler_matches_one_device(shape):
  """Compaction on a mesh: the row buckets stay multiples of the batch shards, and the rows are those of an
  uncompacted call on one device (stops forced at steps spread over the budget)."""
  model, prompts, _ = single_device_samples()
  kw = dict(sampler_kwargs(), logits_processor=sampling.ForcedStops((0, 11, 3, 7, 1, 5), 3))
  want = jax.device_get(sampling.Sampler(**kw)(model, prompts, jax.random.key(7)))
  mesh = parallel.make_mesh(parallel.mesh_config(*shape))
  sampler = sampling.Sampler(**kw, mesh=mesh, compact_every=2)
  got = sampler(sampler.shard_params(model), prompts, jax.random.key(7))
  assert sampler._compact_fn._cache_size() >= 1  # pylint: disable=protected-access  (it compacted)
  got = jax.device_get(got)
  np.testing.assert_array_equal(got.lengths, [1, 12, 4, 8, 2, 6])
  np.testing.assert_array_equal(got.tokens, want.tokens)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)
