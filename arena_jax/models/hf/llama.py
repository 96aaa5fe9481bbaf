"""Llama (`LlamaForCausalLM`): Llama 2 and 3, Llama-3.1's RoPE scaling "llama3", Llama-3.2's tied embeddings
(no `lm_head.weight` stored), optional q/k/v/o and MLP biases (`attention_bias`, `mlp_bias`).

Its tensor names are the ones every decoder family here stores, so its `key_map` is the others' base: each adds
what its architecture has on top (Qwen3's QK-norm, Qwen2's q/k/v biases).
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig
from arena_jax.models.hf import common
from arena_jax.models.hf.convert import HEADS, HEADS_IN, HEADS_OUT, KEEP, TRANSPOSED, Rule
from arena_jax.models.hf.family import Family, register
from arena_jax.models.hf.gguf import GGUFArchitecture, register_gguf

ARCHITECTURE = "LlamaForCausalLM"
LAYER = "model.layers.{layer}."  # an HF decoder layer's tensors
OURS = "layers/{layer}/"  # ours


def config_from_hf(hf: dict[str, Any]) -> ModelConfig:
  fields = common.decoder_fields(hf, ARCHITECTURE)
  common.refuse_layer_types(hf, ARCHITECTURE)
  return ModelConfig(**fields)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  common.check_expressible(config, ARCHITECTURE, mlp_bias=True)
  if config.sliding_window is not None:
    raise ValueError("Llama has no sliding window; use MistralForCausalLM")
  return {**common.hf_kwargs(config), "attention_bias": config.attention_bias, "mlp_bias": config.mlp_bias}


def key_map(config: ModelConfig) -> list[Rule]:
  """The Llama layout: embedding, pre-norm blocks of grouped-query attention and SwiGLU, final norm, lm head
  (with tied embeddings, a stored lm_head is the embedding's copy); the biases the config has."""
  a, m = LAYER + "self_attn.", LAYER + "mlp."
  rules = [
    Rule("model.embed_tokens.weight", "embedding"),
    Rule("model.norm.weight", "final_norm/scale"),
    Rule(LAYER + "input_layernorm.weight", OURS + "input_norm/scale"),
    Rule(LAYER + "post_attention_layernorm.weight", OURS + "post_attention_norm/scale"),
    Rule(a + "q_proj.weight", OURS + "attn/q_proj", HEADS_OUT),
    Rule(a + "k_proj.weight", OURS + "attn/k_proj", HEADS_OUT),
    Rule(a + "v_proj.weight", OURS + "attn/v_proj", HEADS_OUT),
    Rule(a + "o_proj.weight", OURS + "attn/o_proj", HEADS_IN),
    Rule(m + "gate_proj.weight", OURS + "mlp/gate_proj", TRANSPOSED),
    Rule(m + "up_proj.weight", OURS + "mlp/up_proj", TRANSPOSED),
    Rule(m + "down_proj.weight", OURS + "mlp/down_proj", TRANSPOSED),
  ]
  if config.attention_bias:
    rules += [Rule(a + f"{p}_proj.bias", OURS + f"attn/{p}_bias", HEADS) for p in "qkv"]
    rules.append(Rule(a + "o_proj.bias", OURS + "attn/o_bias", KEEP))
  if config.mlp_bias:
    rules += [Rule(m + f"{p}_proj.bias", OURS + f"mlp/{p}_bias", KEEP) for p in ("gate", "up", "down")]
  if config.tie_embeddings:
    rules.append(Rule("lm_head.weight", "embedding", KEEP, copy=True))
  else:
    rules.append(Rule("lm_head.weight", "lm_head", TRANSPOSED))
  return rules


FAMILY = register(Family(ARCHITECTURE, config_from_hf=config_from_hf, config_to_hf=config_to_hf, key_map=key_map))
# llama.cpp's `llama` (also Mistral's GGUFs): its converter permuted the q/k rows.
GGUF = register_gguf(GGUFArchitecture('llama', ARCHITECTURE, permute_qk=True))
