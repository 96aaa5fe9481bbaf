"""Llama-3.2 import (`LlamaForCausalLM` with tied embeddings, no lm_head.weight stored, RoPE scaling "llama3") and
parity with transformers: float32 logits within 1e-4, 32 greedy tokens equal (`assert_parity`)."""

import json

import pytest

from arena_jax import models
from tests.models.test_hf_import import BASE, assert_parity

pytest.importorskip("torch")
pytest.importorskip("transformers")

# Llama-3.2-1B's options at a tiny size: rope θ 5e5, "llama3" scaling with factor 32. The original context 64
# puts the 8 frequencies of a 16-wide head in all three bands of the scaling (wavelengths 2π < 64/4 kept,
# 32.5 in [16, 64] smoothed, the rest > 64 divided by the factor).
LLAMA32 = BASE.replace(
  rope_theta=500_000.0,
  tie_embeddings=True,
  max_position_embeddings=1024,
  rope_scaling=models.RopeScaling(
    "llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64
  ),
)


def _as_on_the_hub(hf: dict) -> dict:
  """config.json in the form the Hub's Llama-3.2 checkpoints have (transformers 4): `rope_scaling` and a
  top-level `rope_theta` instead of `rope_parameters`, `torch_dtype` instead of `dtype`."""
  hf = dict(hf)
  rope = hf.pop("rope_parameters")
  hf["rope_theta"] = rope.pop("rope_theta")
  hf["rope_scaling"] = rope
  hf["torch_dtype"] = hf.pop("dtype", "float32")
  return hf


@pytest.mark.parametrize("form", ["transformers5", "hub"])
def test_tied_llama32_matches_transformers(form, hf_checkpoint):
  hf_model, path = hf_checkpoint(LLAMA32, "LlamaForCausalLM")
  assert "lm_head.weight" not in models.read_safetensors(path / "model.safetensors")
  if form == "hub":
    hf = _as_on_the_hub(json.loads((path / "config.json").read_text()))
    (path / "config.json").write_text(json.dumps(hf))
  model = models.load_hf(path)
  assert model.config == LLAMA32 and model.lm_head is None
  assert_parity(hf_model, model)
