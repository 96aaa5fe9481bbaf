"""What the families' config.json handling shares: the decoder fields every family reads the same way (sizes,
RoPE and its scaling, norms, tied embeddings, dtype), their inverse for transformers' config classes, and the
refusals of what an architecture cannot express.

A family module builds its `config_from_hf` as `ModelConfig(**decoder_fields(hf, ARCHITECTURE), <its own
fields>)` and its `config_to_hf` as `{**hf_kwargs(config), <its own keys>}` after `check_expressible`.
"""

from __future__ import annotations

from typing import Any

from arena_jax.models.config import ModelConfig, RopeScaling
from arena_jax.models.hf.checks import UnsupportedCheckpointError

_HF_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def stored_dtype(hf: dict[str, Any]) -> str:
  """The checkpoint's storage dtype (`torch_dtype`, or transformers 5's `dtype`); float32 when unnamed."""
  return _HF_DTYPES.get(hf.get("torch_dtype") or hf.get("dtype") or "float32", "float32")


def decoder_fields(hf: dict[str, Any], architecture: str, *, query_scale: bool = False) -> dict[str, Any]:
  """The `ModelConfig` fields of a parsed config.json (old `rope_scaling` or new `rope_parameters` form) that
  do not depend on the family: sizes, RoPE, norms, tied embeddings, `attention_bias` / `mlp_bias` as stated,
  the stored dtype as `param_dtype` and `dtype`, and with `query_scale` the Llama-4 attention scaling
  (`llama_4_scaling_beta`), which is refused otherwise."""
  n_heads = hf["num_attention_heads"]
  head_dim = hf.get("head_dim") or hf["hidden_size"] // n_heads
  if hf.get("hidden_act", "silu") != "silu":
    raise UnsupportedCheckpointError(f"hidden_act={hf['hidden_act']!r}: only SwiGLU ('silu') is supported")

  rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
  if rope and all(isinstance(v, dict) for v in rope.values()):
    raise UnsupportedCheckpointError("per-layer-type rope_parameters are not supported")
  theta = rope.get("rope_theta", hf.get("rope_theta", 10_000.0))
  if rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) != 1.0:
    raise UnsupportedCheckpointError("partial_rotary_factor != 1 is not supported")
  rope_type = rope.get("rope_type", rope.get("type", "default"))
  max_pos = hf.get("max_position_embeddings", 8192)
  scaling = None
  if rope_type in ("linear", "llama3", "yarn"):
    orig = hf.get("original_max_position_embeddings") or rope.get("original_max_position_embeddings") or max_pos
    factor = rope.get("factor")
    if factor is None:
      factor = max_pos / orig
    scaling = RopeScaling(
      rope_type,
      factor=float(factor),
      low_freq_factor=float(rope.get("low_freq_factor", 1.0)),
      high_freq_factor=float(rope.get("high_freq_factor", 4.0)),
      original_max_position_embeddings=int(orig),
      beta_fast=float(rope.get("beta_fast") or 32.0),
      beta_slow=float(rope.get("beta_slow") or 1.0),
      mscale=rope.get("mscale"),
      mscale_all_dim=rope.get("mscale_all_dim"),
      attention_factor=rope.get("attention_factor"),
      truncate=bool(rope.get("truncate", True)),
    )
  elif rope_type != "default":
    raise UnsupportedCheckpointError(f"rope type {rope_type!r} is not supported (default, linear, llama3, yarn)")

  # Llama-4 attention scaling of the queries (Ministral-3: `llama_4_scaling_beta` in rope_parameters).
  query_beta = rope.get("llama_4_scaling_beta")
  query_length = int(
    rope.get("original_max_position_embeddings") or hf.get("original_max_position_embeddings") or max_pos
  )
  if query_beta is not None and not query_scale:
    raise UnsupportedCheckpointError(f"llama_4_scaling_beta is not supported for {architecture}")

  stored = stored_dtype(hf)
  return dict(
    vocab_size=hf["vocab_size"],
    d_model=hf["hidden_size"],
    num_layers=hf["num_hidden_layers"],
    num_heads=n_heads,
    num_kv_heads=hf.get("num_key_value_heads") or n_heads,
    head_dim=head_dim,
    mlp_dim=hf["intermediate_size"],
    rope_theta=float(theta),
    rope_scaling=scaling,
    rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
    tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
    attention_bias=bool(hf.get("attention_bias", False)),
    mlp_bias=bool(hf.get("mlp_bias", False)),
    param_dtype=stored,
    dtype=stored,
    max_position_embeddings=max_pos,
    query_scale_beta=None if query_beta is None else float(query_beta),
    query_scale_length=query_length if query_beta is not None else 16_384,
  )


def refuse_layer_types(hf: dict[str, Any], architecture: str) -> None:
  """For a family whose attention is full in every layer here: per-layer attention types are refused."""
  if hf.get("layer_types") and any(t != "full_attention" for t in hf["layer_types"]):
    raise UnsupportedCheckpointError(f"layer_types {hf['layer_types']} are not supported for {architecture}")


def check_expressible(
  config: ModelConfig,
  architecture: str,
  *,
  qk_norm: bool = False,
  qkv_bias: bool = False,
  mlp_bias: bool = False,
  query_scale: bool = False,
) -> None:
  """ValueError for what `architecture` cannot express: `qk_norm` and `qkv_bias` are fixed by the architecture
  (the config must match them), `mlp_bias` and `query_scale` (Llama-4 attention scaling) are options it has or
  lacks."""
  if config.qk_norm != qk_norm:
    raise ValueError(f"qk_norm={config.qk_norm} cannot be expressed as {architecture}")
  if config.qkv_bias != qkv_bias:
    raise ValueError(
      f"qkv_bias={config.qkv_bias} (q/k/v biases without an o bias) cannot be expressed as {architecture}"
    )
  if config.mlp_bias and not mlp_bias:
    raise ValueError(f"{architecture} has no mlp_bias")
  if config.query_scale_beta is not None and not query_scale:
    raise ValueError(
      "Llama-4 attention scaling is Ministral3ForCausalLM's, with YaRN RoPE whose "
      "original_max_position_embeddings equals query_scale_length"
    )


def hf_kwargs(config: ModelConfig) -> dict[str, Any]:
  """The transformers config keyword arguments every family shares (`rope_parameters` included); the family
  adds its biases, windows and options."""
  rope: dict[str, Any] = {"rope_type": "default", "rope_theta": config.rope_theta}
  if config.rope_scaling is not None:
    s = config.rope_scaling
    rope = {"rope_type": s.rope_type, "rope_theta": config.rope_theta, "factor": s.factor}
    if s.rope_type == "llama3":
      rope.update(
        low_freq_factor=s.low_freq_factor,
        high_freq_factor=s.high_freq_factor,
        original_max_position_embeddings=s.original_max_position_embeddings,
      )
    elif s.rope_type == "yarn":
      rope.update(
        original_max_position_embeddings=s.original_max_position_embeddings,
        beta_fast=s.beta_fast,
        beta_slow=s.beta_slow,
        truncate=s.truncate,
      )
      for k in ("mscale", "mscale_all_dim", "attention_factor"):
        if getattr(s, k) is not None:
          rope[k] = getattr(s, k)
  return dict(
    vocab_size=config.vocab_size,
    hidden_size=config.d_model,
    intermediate_size=config.mlp_dim,
    num_hidden_layers=config.num_layers,
    num_attention_heads=config.num_heads,
    num_key_value_heads=config.num_kv_heads,
    head_dim=config.head_dim,
    hidden_act="silu",
    max_position_embeddings=config.max_position_embeddings,
    rms_norm_eps=config.rms_norm_eps,
    tie_word_embeddings=config.tie_embeddings,
    rope_parameters=rope,
  )
