"""Qwen2 and Qwen2.5 (`Qwen2ForCausalLM`): the Llama layout with biases on the q, k and v projections and none
on o (`ModelConfig.qkv_bias`; transformers builds them so whatever `attention_bias` says), no MLP biases, and
Qwen3's sliding window fields (`use_sliding_window`, `max_window_layers`, `layer_types`), read as transformers
reads them: without `layer_types`, the layers from `max_window_layers` (default 28) on use the window.
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import common, llama, qwen3
from arena_jax.models.hf.convert import HEADS, Rule
from arena_jax.models.hf.family import Family, register
from arena_jax.models.hf.gguf import GGUFArchitecture, register_gguf

ARCHITECTURE = "Qwen2ForCausalLM"
MAX_WINDOW_LAYERS = 28  # transformers' `Qwen2Config.max_window_layers` default


def config_from_hf(hf: dict[str, Any]) -> ModelConfig:
  fields = common.decoder_fields(hf, ARCHITECTURE)
  window, layers = qwen3.window_from_hf(hf, ARCHITECTURE, max_window_layers=MAX_WINDOW_LAYERS)
  fields.update(attention_bias=False, mlp_bias=False)  # Qwen2Config has neither field; its modules have no such biases
  return ModelConfig(**fields, qkv_bias=True, sliding_window=window, sliding_layers=layers)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  common.check_expressible(config, ARCHITECTURE, qkv_bias=True)
  return {**common.hf_kwargs(config), **qwen3.window_to_hf(config)}


def key_map(config: ModelConfig) -> list[Rule]:
  a = llama.LAYER + "self_attn."
  return [*llama.key_map(config), *(Rule(a + f"{p}_proj.bias", llama.OURS + f"attn/{p}_bias", HEADS) for p in "qkv")]


FAMILY = register(Family(ARCHITECTURE, config_from_hf=config_from_hf, config_to_hf=config_to_hf, key_map=key_map))
# llama.cpp's `qwen2`: q/k rows as transformers stores them.
GGUF = register_gguf(GGUFArchitecture('qwen2', ARCHITECTURE, permute_qk=False))
