"""Qwen2 import (`Qwen2ForCausalLM`: q/k/v biases without an o bias, the Qwen sliding window) and parity with
transformers: float32 logits within 1e-4, 32 greedy tokens equal (`assert_parity`)."""

import json

import pytest

from arena_jax import models
from tests.models.test_hf_import import BASE, assert_parity

pytest.importorskip("torch")
pytest.importorskip("transformers")

ARCHITECTURE = "Qwen2ForCausalLM"
CONFIGS = {
  # Qwen2-0.5B's shape of options: tied embeddings, rope θ 1e6, no window.
  "tied": BASE.replace(qkv_bias=True, tie_embeddings=True, rope_theta=1e6),
  # A window shorter than the sequences on the second layer only, untied.
  "sliding": BASE.replace(qkv_bias=True, sliding_window=5, sliding_layers=(False, True), rope_theta=1e6),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_parity_with_transformers(name, hf_checkpoint):
  config = CONFIGS[name]
  hf_model, path = hf_checkpoint(config, ARCHITECTURE)
  model = models.load_hf(path)
  assert model.config == config
  attn = model.layers[0].attn
  assert attn.q_bias is not None and attn.o_bias is None
  assert_parity(hf_model, model)


def test_without_layer_types_the_window_starts_at_max_window_layers(hf_checkpoint, tmp_path):
  """As transformers' Qwen2Config: layers ≥ max_window_layers slide when config.json has no layer_types."""
  _, path = hf_checkpoint(CONFIGS["sliding"], ARCHITECTURE, seed=1)
  hf = json.loads((path / "config.json").read_text())
  del hf["layer_types"]
  assert models.config_from_hf(dict(hf, max_window_layers=1)) == CONFIGS["sliding"]
  del hf["max_window_layers"]  # transformers' default, 28: no layer of two slides
  assert models.config_from_hf(hf).sliding_layers == (False, False)


def test_what_qwen2_cannot_express_is_refused(hf_checkpoint):
  _, path = hf_checkpoint(CONFIGS["tied"], ARCHITECTURE, seed=2)
  hf = json.loads((path / "config.json").read_text())
  with pytest.raises(models.UnsupportedCheckpointError, match="layer_types"):
    models.config_from_hf(dict(hf, use_sliding_window=False, layer_types=["full_attention", "sliding_attention"]))
  with pytest.raises(ValueError, match="qkv_bias=False"):
    models.config_to_hf(BASE.replace(attention_bias=True), ARCHITECTURE)
