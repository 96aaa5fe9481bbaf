"""Configs: the tiny default, named real-size configs (abstract instantiation), RoPE tables, sharding rules."""

import json
import math

import jax
import numpy as np
import pytest
from flax import nnx

from arena_jax import models


def test_tiny_config_is_the_stated_one():
  c = models.tiny_config()
  assert (c.vocab_size, c.d_model, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.mlp_dim) == (
    512,
    256,
    4,
    4,
    2,
    64,
    768,
  )
  assert c.tie_embeddings and c.param_dtype == c.dtype == "float32"
  assert 3e6 < c.num_params() < 4e6
  assert models.get_model_config("tiny") == c
  hash(c)  # static argument of jit


# Published parameter counts (embeddings included).
@pytest.mark.parametrize(
  "name, expected", [("llama3_8b", 8.03e9), ("llama3_1_8b", 8.03e9), ("qwen3_8b", 8.19e9), ("ministral3_8b", 8.5e9)]
)
def test_named_configs_instantiate_abstractly(name, expected):
  config = models.get_model_config(name)
  model = models.abstract_model(config)
  state = nnx.state(model)
  leaves = jax.tree.leaves(state)
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  total = sum(math.prod(x.shape) for x in leaves)
  assert total == config.num_params()
  assert abs(total - expected) / expected < 0.03
  # Every parameter carries one logical axis name per dimension.
  for _, var in nnx.to_flat_state(state):
    names = var.get_metadata()["out_sharding"]
    assert len(names) == len(var.shape) and all(isinstance(n, str) for n in names)


def test_registry_rejects_unknown_and_duplicate_names():
  with pytest.raises(KeyError, match="tiny"):
    models.get_model_config("nope")
  with pytest.raises(ValueError, match="already registered"):
    models.register_model_config("tiny")(models.tiny_config)
  assert models.get_model_config("tiny", param_dtype="bfloat16").param_dtype == "bfloat16"


def test_invalid_config_says_what_to_change():
  with pytest.raises(ValueError, match="multiple of num_kv_heads"):
    models.tiny_config().replace(num_kv_heads=3)
  with pytest.raises(ValueError, match="param_dtype"):
    models.tiny_config().replace(param_dtype="float8")
  with pytest.raises(ValueError, match="rope_type"):
    models.RopeScaling("dynamic")
  with pytest.raises(ValueError, match="qkv_bias"):
    models.tiny_config().replace(attention_bias=True, qkv_bias=True)


@pytest.mark.parametrize("biases", [{}, {"attention_bias": True}, {"qkv_bias": True}, {"mlp_bias": True}])
def test_num_params_counts_each_bias(biases):
  """q/k/v biases without an o bias (Qwen2's `qkv_bias`) and the others, as the model holds them."""
  config = models.tiny_config().replace(**biases)
  state = nnx.state(models.abstract_model(config))
  assert sum(math.prod(x.shape) for x in jax.tree.leaves(state)) == config.num_params()
  attn = models.abstract_model(config).layers[0].attn
  assert (attn.q_bias is not None) == bool(biases.get("attention_bias") or biases.get("qkv_bias"))
  assert (attn.o_bias is not None) == bool(biases.get("attention_bias"))


def test_a_model_config_json_written_before_qkv_bias_still_loads():
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top

  d = json.loads(policy_io.config_to_json(models.tiny_config()))
  del d["qkv_bias"]
  assert policy_io.config_from_json(json.dumps(d)) == models.tiny_config()
  qwen2 = models.tiny_config().replace(qkv_bias=True)
  assert policy_io.config_from_json(policy_io.config_to_json(qwen2)) == qwen2


@pytest.mark.parametrize(
  "rope",
  [
    None,
    models.RopeScaling("linear", factor=4.0),
    models.RopeScaling(
      "llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64
    ),
    models.RopeScaling(
      "yarn",
      factor=16.0,
      original_max_position_embeddings=64,
      beta_fast=32.0,
      beta_slow=1.0,
      mscale=1.0,
      mscale_all_dim=0.5,
    ),
  ],
)
def test_rope_frequencies_match_transformers(rope):
  transformers = pytest.importorskip("transformers")
  from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # pylint: disable=g-import-not-at-top

  config = models.ModelConfig(
    vocab_size=32,
    d_model=128,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    mlp_dim=64,
    rope_theta=50_000.0,
    rope_scaling=rope,
    max_position_embeddings=1024,
  )
  hf = transformers.LlamaConfig(**models.config_to_hf(config))
  inv_freq, factor = models.rope_frequencies(config)
  if rope is None:
    ref = 1.0 / (50_000.0 ** (np.arange(0, 64, 2) / 64))
    ref_factor = 1.0
  else:
    ref, ref_factor = ROPE_INIT_FUNCTIONS[rope.rope_type](hf, "cpu")
    ref = ref.numpy()
  np.testing.assert_allclose(inv_freq, ref, rtol=1e-6)
  assert factor == pytest.approx(ref_factor)


@pytest.mark.mesh
def test_logical_rules_replicate_what_does_not_divide():
  mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
  spec = models.logical_to_spec(("batch", "kv_heads", "head_dim"), (8, 2, 64), mesh)
  assert spec == jax.sharding.PartitionSpec(("data", "fsdp"), "tensor", None)
  # 3 KV heads do not split 2 ways; a batch of 2 splits over `data` only.
  spec = models.logical_to_spec(("batch", "kv_heads", "head_dim"), (2, 3, 64), mesh)
  assert spec == jax.sharding.PartitionSpec("data", None, None)
  assert models.num_batch_shards(mesh) == 4 and models.num_batch_shards(None) == 1


@pytest.mark.mesh
def test_param_shardings_cover_every_parameter():
  mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
  state = nnx.state(models.abstract_model(models.tiny_config()))
  shardings = models.param_shardings(state, mesh)
  assert jax.tree.structure(shardings) == jax.tree.structure(nnx.to_pure_dict(state))
  layer = shardings["layers"][0]
  assert layer["attn"]["q_proj"].spec == jax.sharding.PartitionSpec("fsdp", "tensor", None)
  assert layer["mlp"]["down_proj"].spec == jax.sharding.PartitionSpec("tensor", "fsdp")
  assert shardings["embedding"].spec == jax.sharding.PartitionSpec("tensor", "fsdp")
