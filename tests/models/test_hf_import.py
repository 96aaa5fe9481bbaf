"""HF checkpoint import and parity with transformers (extra `hf`): logits ≤ 1e-4, 32 greedy tokens equal."""
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models, sampling

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

BASE = models.ModelConfig(vocab_size=97, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                          mlp_dim=96, rms_norm_eps=1e-5)

FAMILIES = {
    # Llama-3.1 RoPE scaling (original context 16 so that the scaled band is exercised), biases.
    "llama": ("LlamaForCausalLM", BASE.replace(
        rope_theta=500_000.0, attention_bias=True, mlp_bias=True,
        rope_scaling=models.RopeScaling("llama3", factor=8.0, original_max_position_embeddings=16))),
    # Mistral: sliding window shorter than the sequences.
    "mistral": ("MistralForCausalLM", BASE.replace(sliding_window=6, num_kv_heads=1)),
    # Qwen3: QK-norm, a window on the second layer only (layer_types), tied embeddings.
    "qwen3": ("Qwen3ForCausalLM", BASE.replace(
        qk_norm=True, sliding_window=5, sliding_layers=(False, True), tie_embeddings=True, rope_theta=1e6)),
    # YaRN RoPE (Ministral-3's), untied.
    "llama_yarn": ("LlamaForCausalLM", BASE.replace(
        rope_scaling=models.RopeScaling("yarn", factor=4.0, original_max_position_embeddings=16))),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parity_with_transformers(family, hf_checkpoint):
  architecture, config = FAMILIES[family]
  hf_model, path = hf_checkpoint(config, architecture)
  model = models.load_hf(path)
  assert model.config == config

  # Logits on full sequences longer than every window and than the RoPE original context.
  tokens = np.random.default_rng(0).integers(0, config.vocab_size, (2, 24))
  with torch.no_grad():
    ref = hf_model(torch.from_numpy(tokens)).logits.numpy()
  ours = np.asarray(jax.jit(lambda t: model(t))(jnp.asarray(tokens, jnp.int32)))
  assert np.abs(ours - ref).max() <= 1e-4, np.abs(ours - ref).max()

  # 32 greedy tokens from our sampler == transformers' greedy generate, on prompts of two lengths
  # (the shorter is right-padded in our batch).
  prompts = [list(tokens[0, :9]), list(tokens[1, :4])]
  out = sampling.Sampler(config=config, max_new_tokens=32, method=sampling.Greedy())(model, prompts,
                                                                                     jax.random.key(0))
  for i, prompt in enumerate(prompts):
    ids = torch.tensor([prompt])
    with torch.no_grad():
      expected = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=32,
                                   min_new_tokens=32, eos_token_id=None, pad_token_id=0)[0, len(prompt):]
    np.testing.assert_array_equal(np.asarray(out.tokens[i]), expected.numpy())


def test_sharded_checkpoint_loads(hf_checkpoint):
  config = BASE
  hf_model, path = hf_checkpoint(config, "LlamaForCausalLM", seed=1, max_shard_size="40KB")
  assert (path / "model.safetensors.index.json").exists()
  assert len(list(path.glob("*.safetensors"))) > 1
  tokens = np.arange(10)[None] % config.vocab_size
  with torch.no_grad():
    ref = hf_model(torch.from_numpy(tokens)).logits.numpy()
  np.testing.assert_allclose(np.asarray(models.load_hf(path)(jnp.asarray(tokens))), ref, atol=1e-4)


def test_bfloat16_checkpoint_keeps_its_dtype(hf_checkpoint):
  hf_model, path = hf_checkpoint(BASE, "MistralForCausalLM", seed=2, dtype=torch.bfloat16)
  model = models.load_hf(path)
  assert model.config.param_dtype == model.config.dtype == "bfloat16"
  assert model.embedding[...].dtype == jnp.bfloat16
  ref = hf_model.model.embed_tokens.weight.detach().float().numpy()
  np.testing.assert_array_equal(np.asarray(model.embedding[...], np.float32), ref)
  # Loading as float32 upcasts exactly.
  upcast = models.load_hf(path, param_dtype="float32")
  np.testing.assert_array_equal(np.asarray(upcast.embedding[...]), ref)


def test_load_onto_a_mesh_places_parameters_by_logical_axes(hf_checkpoint):
  _, path = hf_checkpoint(BASE, "LlamaForCausalLM", seed=3)
  mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
  model = models.load_hf(path, mesh=mesh)
  q = model.layers[0].attn.q_proj[...]
  assert q.sharding.spec == jax.sharding.PartitionSpec("fsdp", "tensor", None)
  np.testing.assert_array_equal(np.asarray(q), np.asarray(models.load_hf(path).layers[0].attn.q_proj[...]))


def test_unsupported_architecture_names_the_supported_ones(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
  with pytest.raises(models.UnsupportedCheckpointError) as err:
    models.load_hf(tmp_path)
  for name in ("GPT2LMHeadModel", "LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"):
    assert name in str(err.value)


def test_importing_the_package_never_imports_torch():
  code = ("import sys, arena_jax.models, arena_jax.sampling, arena_jax.tokenizer; "
          "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
  subprocess.run([sys.executable, "-c", code], check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
