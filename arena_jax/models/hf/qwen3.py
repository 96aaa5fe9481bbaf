"""Qwen3 (`Qwen3ForCausalLM`): the Llama layout with QK-norm (an RMSNorm over the head dimension of q and k
before RoPE) and optional q/k/v/o biases (`attention_bias`), and the Qwen sliding window: with
`use_sliding_window`, the layers that `layer_types` marks "sliding_attention" (or, without `layer_types`, the
layers from `max_window_layers` on) see `sliding_window` tokens. Qwen2 shares the window (`window_from_hf`).
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import common, llama
from arena_jax.models.hf.convert import Rule
from arena_jax.models.hf.family import Family, register
from arena_jax.models.hf.gguf import GGUFArchitecture, register_gguf

ARCHITECTURE = "Qwen3ForCausalLM"


def window_from_hf(hf: dict[str, Any], architecture: str, *, max_window_layers: int | None = None):
  """(sliding_window, sliding_layers) of a Qwen config; `max_window_layers` is the default of the field when
  config.json lacks it (None: the number of layers, no layer slides)."""
  if not hf.get("use_sliding_window", False):
    common.refuse_layer_types(hf, architecture)
    return None, None
  types = hf.get("layer_types")
  if types is None:
    num_layers = hf["num_hidden_layers"]
    first = hf.get("max_window_layers", num_layers if max_window_layers is None else max_window_layers)
    types = ["sliding_attention" if i >= first else "full_attention" for i in range(num_layers)]
  return hf.get("sliding_window"), tuple(t == "sliding_attention" for t in types)


def window_to_hf(config: ModelConfig) -> dict[str, Any]:
  """The Qwen window fields of a config: `use_sliding_window`, and with a window its span and `layer_types`."""
  kw: dict[str, Any] = {"use_sliding_window": config.sliding_window is not None}
  if config.sliding_window is not None:
    kw["sliding_window"] = config.sliding_window
    layers = config.sliding_layers or (True,) * config.num_layers
    kw["layer_types"] = ["sliding_attention" if s else "full_attention" for s in layers]
  return kw


def config_from_hf(hf: dict[str, Any]) -> ModelConfig:
  fields = common.decoder_fields(hf, ARCHITECTURE)
  window, layers = window_from_hf(hf, ARCHITECTURE)
  return ModelConfig(**fields, qk_norm=True, sliding_window=window, sliding_layers=layers)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  common.check_expressible(config, ARCHITECTURE, qk_norm=True)
  return {**common.hf_kwargs(config), "attention_bias": config.attention_bias, **window_to_hf(config)}


def key_map(config: ModelConfig) -> list[Rule]:
  a = llama.LAYER + "self_attn."
  return [
    *llama.key_map(config),
    Rule(a + "q_norm.weight", llama.OURS + "attn/q_norm/scale"),
    Rule(a + "k_norm.weight", llama.OURS + "attn/k_norm/scale"),
  ]


FAMILY = register(Family(ARCHITECTURE, config_from_hf=config_from_hf, config_to_hf=config_to_hf, key_map=key_map))
# llama.cpp's `qwen3`: q/k rows as transformers stores them; QK-norm as attn_q_norm / attn_k_norm.
GGUF = register_gguf(GGUFArchitecture('qwen3', ARCHITECTURE, permute_qk=False))
