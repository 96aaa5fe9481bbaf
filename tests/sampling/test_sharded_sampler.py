"""The sampler on 8 fake CPU devices (tests/conftest.py): same tokens as on one device for the same key."""

import jax
import numpy as np
import pytest

from arena_jax import models, sampling

# Divisible where the rules split: vocab, heads, KV heads and MLP over `tensor`, embed over `fsdp`.
CONFIG = models.ModelConfig(
  vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)


@pytest.mark.mesh
def test_mesh_sampling_matches_one_device():
  model = models.init_model(CONFIG, seed=1)
  rng = np.random.default_rng(2)
  # 3 prompts: not a multiple of the 4 batch shards (data × fsdp), so the mesh path pads the batch.
  prompts = [list(rng.integers(4, 64, n)) for n in (5, 9, 3)]
  kw = dict(
    config=CONFIG,
    max_new_tokens=12,
    num_samples=2,
    stop_tokens=(3,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
  )
  single = sampling.Sampler(**kw)(model, prompts, jax.random.key(7))
  mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
  sharded_sampler = sampling.Sampler(**kw, mesh=mesh)
  # Parameters placed on the mesh by their logical axes, as a trainer holds them.
  params = sharded_sampler.shard_params(model)
  assert params["layers"][0]["attn"]["q_proj"].sharding.spec == jax.sharding.PartitionSpec("fsdp", "tensor", None)
  sharded = sharded_sampler(params, prompts, jax.random.key(7))
  np.testing.assert_array_equal(sharded.tokens, single.tokens)
  np.testing.assert_array_equal(sharded.lengths, single.lengths)
  np.testing.assert_array_equal(sharded.completion_step, single.completion_step)
  np.testing.assert_allclose(sharded.logprobs, single.logprobs, atol=1e-5)
  assert len(sharded.tokens.sharding.device_set) == 8
  # Streaming on the mesh (padded batch): the same output, each real row once, when it finished.
  chunks = list(sharded_sampler.stream(params, prompts, jax.random.key(7), every=4))
  np.testing.assert_array_equal(chunks[-1].output.tokens, sharded.tokens)
  np.testing.assert_array_equal(chunks[-1].output.lengths, sharded.lengths)
  assert sorted(np.concatenate([c.rows for c in chunks]).tolist()) == list(range(6))  # no filler row
  for c in chunks:
    np.testing.assert_array_equal(c.tokens, np.asarray(single.tokens)[c.rows])
