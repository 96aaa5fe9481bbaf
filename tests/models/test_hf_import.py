"""HF checkpoint import and parity with transformers (extra `hf`): logits ≤ 1e-4, 32 greedy tokens equal."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models, sampling
from tests.models.conftest import random_init

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

BASE = models.ModelConfig(
  vocab_size=97, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, mlp_dim=96, rms_norm_eps=1e-5
)

MINISTRAL3 = BASE.replace(
  rope_theta=1e6,
  query_scale_beta=0.1,
  query_scale_length=8,
  rope_scaling=models.RopeScaling(
    "yarn", factor=4.0, original_max_position_embeddings=8, mscale=1.0, mscale_all_dim=1.0
  ),
)

FAMILIES = {
  # Llama-3.1 RoPE scaling (original context 16 so that the scaled band is exercised), biases.
  "llama": (
    "LlamaForCausalLM",
    BASE.replace(
      rope_theta=500_000.0,
      attention_bias=True,
      mlp_bias=True,
      rope_scaling=models.RopeScaling("llama3", factor=8.0, original_max_position_embeddings=16),
    ),
  ),
  # Mistral: sliding window shorter than the sequences.
  "mistral": ("MistralForCausalLM", BASE.replace(sliding_window=6, num_kv_heads=1)),
  # Qwen3: QK-norm, a window on the second layer only (layer_types), tied embeddings.
  "qwen3": (
    "Qwen3ForCausalLM",
    BASE.replace(qk_norm=True, sliding_window=5, sliding_layers=(False, True), tie_embeddings=True, rope_theta=1e6),
  ),
  # YaRN RoPE (Ministral-3's), untied.
  "llama_yarn": (
    "LlamaForCausalLM",
    BASE.replace(rope_scaling=models.RopeScaling("yarn", factor=4.0, original_max_position_embeddings=16)),
  ),
  # Ministral-3's decoder: YaRN with mscale, and Llama-4 attention scaling; original context 8, so that
  # the query scale 1 + 0.1·log(1 + ⌊p/8⌋) changes every 8 positions of the 24- and 41-token sequences.
  "ministral3": ("Ministral3ForCausalLM", MINISTRAL3),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parity_with_transformers(family, hf_checkpoint):
  architecture, config = FAMILIES[family]
  hf_model, path = hf_checkpoint(config, architecture)
  model = models.load_hf(path)
  assert model.config == config
  assert_parity(hf_model, model)


def assert_parity(hf_model, model):
  """Logits within 1e-4 on two 24-token sequences, and 32 greedy tokens equal on prompts of two lengths."""
  config = model.config
  # Logits on full sequences longer than every window and than the RoPE original context.
  tokens = np.random.default_rng(0).integers(0, config.vocab_size, (2, 24))
  with torch.no_grad():
    ref = hf_model(torch.from_numpy(tokens)).logits.numpy()
  ours = np.asarray(jax.jit(lambda t: model(t))(jnp.asarray(tokens, jnp.int32)))
  assert np.abs(ours - ref).max() <= 1e-4, np.abs(ours - ref).max()

  # 32 greedy tokens from our sampler == transformers' greedy generate, on prompts of two lengths
  # (the shorter is right-padded in our batch).
  prompts = [list(tokens[0, :9]), list(tokens[1, :4])]
  out = sampling.Sampler(config=config, max_new_tokens=32, method=sampling.Greedy())(model, prompts, jax.random.key(0))
  for i, prompt in enumerate(prompts):
    ids = torch.tensor([prompt])
    with torch.no_grad():
      expected = hf_model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=32,
        min_new_tokens=32,
        eos_token_id=None,
        pad_token_id=0,
      )[0, len(prompt) :]
    np.testing.assert_array_equal(np.asarray(out.tokens[i]), expected.numpy())


@pytest.mark.parametrize("tied", [True, False])
def test_mistral3_conditional_generation_imports_its_text_decoder(tmp_path, tied):
  """The paper's policy's architecture: a Pixtral vision tower and projector (skipped) around a ministral3
  decoder (imported); the decoder's output tied to its embedding as the wrapper's config says."""
  import transformers  # pylint: disable=g-import-not-at-top

  text = transformers.Ministral3Config(**models.config_to_hf(MINISTRAL3, "Ministral3ForCausalLM"))
  vision = transformers.PixtralVisionConfig(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    head_dim=16,
    image_size=32,
    patch_size=8,
  )
  hf_config = transformers.Mistral3Config(vision_config=vision, text_config=text, tie_word_embeddings=tied)
  torch.manual_seed(4)
  hf_model = random_init(transformers.Mistral3ForConditionalGeneration(hf_config).eval())
  if tied:
    hf_model.tie_weights()
  hf_model.save_pretrained(tmp_path)
  model = models.load_hf(tmp_path)
  assert model.config == MINISTRAL3.replace(tie_embeddings=tied)
  assert_parity(hf_model, model)


def _fp8_checkpoint(hf_model, path, block):
  """`hf_model`'s weights written as an FP8 checkpoint (e4m3 projection weights and their weight_scale_inv,
  per tensor or per `block` tile, plus an activation scale); returns the dequantised state dict."""
  import safetensors.torch  # pylint: disable=g-import-not-at-top

  tensors, dequantised = {}, {}
  for name, w in hf_model.state_dict().items():
    if not name.endswith("proj.weight"):
      tensors[name] = dequantised[name] = w.contiguous()
      continue
    if block is None:
      scale = w.abs().max() / 448.0
      q = (w / scale).to(torch.float8_e4m3fn)
      back = q.float() * scale
    else:
      o, i = w.shape
      tiles = w.reshape(o // block[0], block[0], i // block[1], block[1])
      scale = tiles.abs().amax(dim=(1, 3)) / 448.0
      q = (tiles / scale[:, None, :, None]).to(torch.float8_e4m3fn).reshape(o, i)
      back = (q.float().reshape(tiles.shape) * scale[:, None, :, None]).reshape(o, i)
    tensors[name], tensors[name + "_scale_inv"] = q, scale.float().reshape(scale.shape)
    tensors[name.replace(".weight", ".activation_scale")] = torch.ones(())
    dequantised[name] = back
  safetensors.torch.save_file(tensors, str(path / "model.safetensors"))
  return dequantised


@pytest.mark.parametrize("block", [None, (16, 16)])
def test_fp8_checkpoints_are_dequantised_on_load(hf_checkpoint, tmp_path, block):
  hf_model, path = hf_checkpoint(MINISTRAL3, "Ministral3ForCausalLM", seed=5)
  hf = json.loads((path / "config.json").read_text())
  hf["quantization_config"] = {
    "quant_method": "fp8",
    "activation_scheme": "static",
    **({"weight_block_size": list(block)} if block else {}),
  }
  (tmp_path / "config.json").write_text(json.dumps(hf))
  dequantised = _fp8_checkpoint(hf_model, tmp_path, block)
  hf_model.load_state_dict(dequantised)  # the reference computes with exactly the dequantised weights
  assert any(v.dtype != torch.float32 for v in dequantised.values()) is False
  model = models.load_hf(tmp_path)
  assert model.config == MINISTRAL3
  assert_parity(hf_model, model)


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


@pytest.mark.mesh
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
  code = (
    "import sys, arena_jax.models, arena_jax.sampling, arena_jax.tokenizer; "
    "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
  )
  subprocess.run([sys.executable, "-c", code], check=True, env={"JAX_PLATFORMS": "cpu", "PATH": ""})
