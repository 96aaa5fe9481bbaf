"""Mistral (`MistralForCausalLM`): the Llama layout with a sliding window on every layer (`sliding_window`, null
for full attention) and no biases. Ministral-3 (`ministral3`) is this family with YaRN RoPE and Llama-4
attention scaling.
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import common, llama
from arena_jax.models.hf.family import Family, register

ARCHITECTURE = "MistralForCausalLM"


def mistral_config(hf: dict[str, Any], architecture: str, *, query_scale: bool = False) -> ModelConfig:
  """A Mistral-family decoder's config (its `layer_types`, if any, are not read: the window is every layer's)."""
  return ModelConfig(
    **common.decoder_fields(hf, architecture, query_scale=query_scale), sliding_window=hf.get("sliding_window")
  )


def mistral_kwargs(config: ModelConfig, architecture: str, *, query_scale: bool = False) -> dict[str, Any]:
  """A Mistral-family decoder's transformers kwargs. `attention_bias` is not one of them: the architecture has
  no biases, and a config's is left out, as it always was."""
  common.check_expressible(config, architecture, query_scale=query_scale)
  if config.sliding_layers is not None:
    raise ValueError("Mistral's window applies to every layer; use sliding_layers=None")
  return {**common.hf_kwargs(config), "sliding_window": config.sliding_window}


def config_from_hf(hf: dict[str, Any]) -> ModelConfig:
  return mistral_config(hf, ARCHITECTURE)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  return mistral_kwargs(config, ARCHITECTURE)


FAMILY = register(Family(ARCHITECTURE, config_from_hf=config_from_hf, config_to_hf=config_to_hf, key_map=llama.key_map))
