"""Ministral-3 (`Ministral3ForCausalLM`), and `Mistral3ForConditionalGeneration`, the multimodal checkpoint of
Ministral-3 Instruct (the paper's policy, SPEC §9) whose text decoder is imported.

The decoder is a Mistral-family one with YaRN RoPE and Llama-4 attention scaling (`llama_4_scaling_beta` in
`rope_parameters`, `ModelConfig.query_scale_beta`): the rotated queries at position p are scaled by
1 + β·log(1 + ⌊p / original_max_position_embeddings⌋). The wrapper's decoder is `text_config` (a ministral3 or
mistral model_type); its vision tower and projector are skipped with one log line (`multimodal`).
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import llama, mistral
from arena_jax.models.hf.family import Family, Wrapper, register

ARCHITECTURE = "Ministral3ForCausalLM"
WRAPPER = "Mistral3ForConditionalGeneration"


def config_from_hf(hf: dict[str, Any]) -> ModelConfig:
  return mistral.mistral_config(hf, ARCHITECTURE, query_scale=True)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  kw = mistral.mistral_kwargs(config, ARCHITECTURE, query_scale=True)
  if config.query_scale_beta is not None:
    s = config.rope_scaling
    if s is None or s.rope_type != "yarn" or s.original_max_position_embeddings != config.query_scale_length:
      raise ValueError(
        "Llama-4 attention scaling is Ministral3ForCausalLM's, with YaRN RoPE whose "
        "original_max_position_embeddings equals query_scale_length"
      )
    kw["rope_parameters"].update(type="yarn", llama_4_scaling_beta=config.query_scale_beta)
  return kw


FAMILY = register(Family(ARCHITECTURE, config_from_hf=config_from_hf, config_to_hf=config_to_hf, key_map=llama.key_map))

# Both tensor layouts of the wrapper: the older `language_model.model.*` and the newer `model.language_model.*`.
WRAPPER_ENTRY = register(
  Wrapper(
    WRAPPER,
    decoders=(("ministral3", ARCHITECTURE), ("mistral", mistral.ARCHITECTURE)),
    renames=(
      ("language_model.model.", "model."),
      ("model.language_model.", "model."),
      ("language_model.lm_head.", "lm_head."),
    ),
    skipped=("vision_tower.", "model.vision_tower.", "multi_modal_projector.", "model.multi_modal_projector."),
  )
)
