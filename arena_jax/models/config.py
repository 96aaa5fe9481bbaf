"""Model configuration for the Llama / Mistral / Qwen3 / Ministral-3 decoder family, and a registry of named configs.

One frozen, hashable dataclass describes the whole family; the differences between the families are
fields (QK-norm for Qwen3, q/k/v-only biases for Qwen2, sliding window for Mistral, RoPE scaling for
Llama-3.1 / Ministral-3, Llama-4 attention scaling for Ministral-3, tied embeddings for small models). Being
hashable, a config can be a static argument of `jax.jit`.

Named configs (`get_model_config(name)`, `MODEL_CONFIGS`):
  tiny           the embedded demo's policy (see `tiny_config`)
  llama3_8b      Meta-Llama-3-8B
  llama3_1_8b    Llama-3.1-8B (RoPE scaling "llama3")
  qwen3_8b       Qwen3-8B (QK-norm)
  ministral3_8b  Ministral-3-8B-Instruct-2512's text decoder (the paper's policy, SPEC §9): a Mistral-family
                 decoder with YaRN RoPE and Llama-4 attention scaling (`query_scale_beta`).
Real-size configs are meant for `jax.eval_shape` / AOT compiles on this machine, not for running here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from arena_jax.registry import Registry

# `ModelConfig.attention` (`models.attention`): "auto" picks by the platform a program is traced for.
ATTENTION_IMPLS = ("xla", "splash", "cudnn")
ATTENTION_CHOICES = ("auto",) + ATTENTION_IMPLS

MODEL_DTYPES = ("float32", "bfloat16", "float16")

# Low-precision matmuls of the train step (`ModelConfig.quantization`; `models.quantization`):
#   ""    none: the projections and the MLP compute in `dtype`
#   fp8   FP8 in the decoder blocks' projections and MLP: e4m3 operands forward, e5m2 gradients backward
#         (Qwix's quantized training, the recipe maxtext calls `fp8_full`); the weights stay as stored
QUANTIZATIONS = ("", "fp8")

# Activation rematerialisation of each decoder block in the backward pass (`ModelConfig.remat`): the name
# of a `jax.checkpoint_policies` policy, i.e. which intermediates of a block the forward pass keeps.
#   none           keep everything (no `jax.checkpoint`): fastest, most memory
#   dots_saveable  keep every matmul output, attention scores included; recompute the elementwise work
#   minimal        keep the matmuls without batch dimensions (q/k/v/o projections, MLP): recompute the
#                  attention (scores, softmax, probabilities), the part that grows with T²
#   full           keep only each block's input: recompute the whole block (≈ one more forward pass)
REMAT_POLICIES = {
  "none": None,
  "dots_saveable": "dots_saveable",
  "minimal": "dots_with_no_batch_dims_saveable",
  "full": "nothing_saveable",
}


@dataclasses.dataclass(frozen=True)
class RopeScaling:
  """RoPE frequency scaling, as in transformers' `rope_parameters` (modeling_rope_utils.py).

  Attributes:
    rope_type: "linear" (positions divided by `factor`), "llama3" (Llama-3.1's smooth band-wise
      interpolation) or "yarn" (YaRN, with its attention factor applied to cos/sin).
    factor: the context extension factor.
    low_freq_factor, high_freq_factor: "llama3" band edges.
    original_max_position_embeddings: pre-training context ("llama3", "yarn").
    beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor, truncate: "yarn" parameters.
  """

  rope_type: str
  factor: float = 1.0
  low_freq_factor: float = 1.0
  high_freq_factor: float = 4.0
  original_max_position_embeddings: int = 8192
  beta_fast: float = 32.0
  beta_slow: float = 1.0
  mscale: float | None = None
  mscale_all_dim: float | None = None
  attention_factor: float | None = None
  truncate: bool = True

  def __post_init__(self):
    if self.rope_type not in ("linear", "llama3", "yarn"):
      raise ValueError(
        f"RopeScaling.rope_type={self.rope_type!r} is not supported; use 'linear', 'llama3' or 'yarn' "
        "(or rope_scaling=None for plain RoPE)."
      )


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """A decoder-only transformer of the Llama family.

  Attributes:
    vocab_size: embedding rows; a tokenizer's vocabulary must not exceed it.
    d_model: residual width (HF `hidden_size`).
    num_layers: decoder blocks.
    num_heads: query heads.
    num_kv_heads: key/value heads (grouped-query attention; `num_heads % num_kv_heads == 0`).
    head_dim: width of one head (HF `head_dim`, default `d_model // num_heads`).
    mlp_dim: SwiGLU hidden width (HF `intermediate_size`).
    rope_theta: RoPE base θ.
    rope_scaling: optional frequency scaling.
    rms_norm_eps: ε inside every RMSNorm.
    qk_norm: RMSNorm over the head dimension of q and k before RoPE (Qwen3).
    sliding_window: attention span in tokens (Mistral, Qwen3 `use_sliding_window`): a query at
      position p sees keys at positions in (p − window, p]. None = full causal attention.
    sliding_layers: which layers use the window (Qwen3 `layer_types`); None = all layers.
    tie_embeddings: the output projection is the transposed input embedding.
    attention_bias: biases on the q/k/v/o projections (HF `attention_bias`).
    qkv_bias: biases on the q/k/v projections only, none on o (Qwen2); `attention_bias` includes them, so
      at most one of the two is set.
    mlp_bias: biases on the SwiGLU projections (HF Llama `mlp_bias`).
    param_dtype: storage dtype of the parameters: the trained weights' (the run config's
      `model.weight_dtype`, float32 by default whatever the checkpoint stores) or a sampler's copy.
    dtype: compute dtype of activations; each weight is cast to it where it is used (softmax, norms and
      logits are always float32).
    max_position_embeddings: informational (the context the checkpoint was trained for).
    query_scale_beta: Llama-4 attention scaling (Ministral-3's `llama_4_scaling_beta`): the rotated
      queries at position p are multiplied by 1 + β·log(1 + ⌊p / query_scale_length⌋), so positions
      past the original context attend more sharply. None = off.
    query_scale_length: its length scale (the checkpoint's `original_max_position_embeddings`).
    init_std: standard deviation of the embedding at random initialisation (None = 1/√d_model);
      kernels use LeCun-normal (std 1/√fan_in).
    remat: activation rematerialisation of each decoder block when differentiated, a key of
      `REMAT_POLICIES` ("none", "dots_saveable", "minimal", "full"). It changes memory and time of the
      backward pass, never values, and is no part of the architecture: `model_config.json` does not store
      it (the run config's `model.remat` sets it for the train step).
    quantization: low-precision matmuls of the differentiated forward pass, a name in `QUANTIZATIONS`
      ("" = none; "fp8": `models.quantization`). Like `remat`, how the train step computes, not what the
      weights are: `model_config.json` does not store it, and the sampler never uses it.
    attention: the full-sequence attention kernel (training forward, prefill, log-prob pass), a key of
      `models.attention.ATTENTION_CHOICES`: "auto" (splash on TPU, cudnn on GPU, xla elsewhere), "xla",
      "splash" or "cudnn". How programs compute, like `remat`: `model_config.json` does not store it.
  """

  vocab_size: int
  d_model: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  mlp_dim: int
  head_dim: int | None = None
  rope_theta: float = 10_000.0
  rope_scaling: RopeScaling | None = None
  rms_norm_eps: float = 1e-6
  qk_norm: bool = False
  sliding_window: int | None = None
  sliding_layers: tuple[bool, ...] | None = None
  tie_embeddings: bool = False
  attention_bias: bool = False
  qkv_bias: bool = False
  mlp_bias: bool = False
  param_dtype: str = "float32"
  dtype: str = "float32"
  max_position_embeddings: int = 8192
  init_std: float | None = None
  query_scale_beta: float | None = None
  query_scale_length: int = 16_384
  remat: str = "none"
  quantization: str = ""
  attention: str = "auto"

  def __post_init__(self):
    if self.head_dim is None:
      object.__setattr__(self, "head_dim", self.d_model // self.num_heads)
    if self.sliding_layers is not None:
      object.__setattr__(self, "sliding_layers", tuple(bool(s) for s in self.sliding_layers))
    problems = []
    for name in ("vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "mlp_dim", "head_dim"):
      if getattr(self, name) <= 0:
        problems.append(f"{name} must be positive (got {getattr(self, name)})")
    if self.num_kv_heads > 0 and self.num_heads % self.num_kv_heads:
      problems.append(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
    if self.head_dim and self.head_dim % 2:
      problems.append(f"head_dim must be even for RoPE (got {self.head_dim})")
    for name in ("param_dtype", "dtype"):
      if getattr(self, name) not in MODEL_DTYPES:
        problems.append(f"{name} must be one of {MODEL_DTYPES} (got {getattr(self, name)!r})")
    if self.attention_bias and self.qkv_bias:
      problems.append("qkv_bias (q/k/v only) is implied by attention_bias (q/k/v/o); set one of them")
    if self.sliding_window is not None and self.sliding_window <= 0:
      problems.append(f"sliding_window must be positive or None (got {self.sliding_window})")
    if self.query_scale_length <= 0:
      problems.append(f"query_scale_length must be positive (got {self.query_scale_length})")
    if self.remat not in REMAT_POLICIES:
      problems.append(f"remat must be one of {tuple(REMAT_POLICIES)} (got {self.remat!r})")
    if self.quantization not in QUANTIZATIONS:
      problems.append(f"quantization must be one of {QUANTIZATIONS} (got {self.quantization!r})")
    if self.attention not in ATTENTION_CHOICES:
      problems.append(f"attention must be one of {ATTENTION_CHOICES} (got {self.attention!r})")
    if self.sliding_layers is not None and len(self.sliding_layers) != self.num_layers:
      problems.append(f"sliding_layers has {len(self.sliding_layers)} entries for {self.num_layers} layers")
    if problems:
      raise ValueError("Invalid ModelConfig: " + "; ".join(problems) + ".")

  @property
  def num_groups(self) -> int:
    """Query heads per key/value head."""
    return self.num_heads // self.num_kv_heads

  def layer_window(self, layer: int) -> int | None:
    """The sliding window of `layer`, or None when it attends to the whole causal context."""
    if self.sliding_window is None:
      return None
    if self.sliding_layers is not None and not self.sliding_layers[layer]:
      return None
    return self.sliding_window

  def replace(self, **changes) -> "ModelConfig":
    return dataclasses.replace(self, **changes)

  def num_params(self) -> int:
    """Parameter count (embeddings included once when tied)."""
    d, h, n, k, f = self.d_model, self.head_dim, self.num_heads, self.num_kv_heads, self.mlp_dim
    attn = (
      d * h * (2 * n + 2 * k)
      + (h * (n + 2 * k) if self.attention_bias or self.qkv_bias else 0)
      + (d if self.attention_bias else 0)
    )
    mlp = 3 * d * f + (2 * f + d if self.mlp_bias else 0)
    norms = 2 * d + (2 * h if self.qk_norm else 0)
    emb = self.vocab_size * d * (1 if self.tie_embeddings else 2)
    return self.num_layers * (attn + mlp + norms) + emb + d


def with_precision(config: ModelConfig, *, weight_dtype: str = "float32", dtype: str = "") -> ModelConfig:
  """The config of a policy's trained weights: stored in `weight_dtype` (the masters and, through them, the
  optimizer state), computing in `dtype` ("" = the policy's own compute dtype). maxtext's `weight_dtype` /
  `dtype` pair: float32 masters under bfloat16 compute keep every small AdamW step that bfloat16 storage
  would round away (SPEC §9's lr 4e-7)."""
  return config.replace(param_dtype=weight_dtype, dtype=dtype or config.dtype)


def sampling_config(config: ModelConfig) -> ModelConfig:
  """The config of the sampler's copy of a policy: weights stored in the compute dtype (cast once per step
  from the masters, `Sampler.shard_params`), no rematerialisation, no quantization."""
  return config.replace(param_dtype=config.dtype, remat="none", quantization="")


# ─────────────────────────────────────── RoPE frequencies ───────────────────────────────────────


def rope_frequencies(config: ModelConfig) -> tuple[np.ndarray, float]:
  """Inverse frequencies [head_dim/2] and the cos/sin attention factor.

  θ_i = rope_theta^(−2i/head_dim), then the optional scaling, following transformers'
  `ROPE_INIT_FUNCTIONS` (default, linear, llama3, yarn) so that imported checkpoints match.
  """
  dim = config.head_dim
  base = float(config.rope_theta)
  inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
  scaling = config.rope_scaling
  attention_factor = 1.0
  if scaling is None:
    pass
  elif scaling.rope_type == "linear":
    inv_freq = inv_freq / scaling.factor
  elif scaling.rope_type == "llama3":
    old_context = scaling.original_max_position_embeddings
    low_freq_wavelen = old_context / scaling.low_freq_factor
    high_freq_wavelen = old_context / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_context / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    inv_freq = np.where(medium, smoothed, scaled)
  elif scaling.rope_type == "yarn":
    inv_freq, attention_factor = _yarn(dim, base, scaling)
  return inv_freq.astype(np.float32), float(attention_factor)


def _yarn(dim: int, base: float, s: RopeScaling) -> tuple[np.ndarray, float]:
  """YaRN (Peng et al. 2023): interpolate low frequencies, keep high ones, ramp in between."""

  def get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

  attention_factor = s.attention_factor
  if attention_factor is None:
    if s.mscale and s.mscale_all_dim:
      attention_factor = get_mscale(s.factor, s.mscale) / get_mscale(s.factor, s.mscale_all_dim)
    else:
      attention_factor = get_mscale(s.factor)

  def correction_dim(rotations):
    return dim * math.log(s.original_max_position_embeddings / (rotations * 2 * math.pi)) / (2 * math.log(base))

  low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
  if s.truncate:
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, dim - 1)
  if low == high:
    high += 0.001  # avoids a division by zero, as the reference does
  ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
  pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
  extrapolation = 1.0 - ramp
  inv_freq = (1.0 / (s.factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
  return inv_freq, attention_factor


# ─────────────────────────────────────── registry ───────────────────────────────────────

# Named configs: zero-argument functions returning a `ModelConfig`.
MODEL_CONFIGS: Registry[Callable[[], ModelConfig]] = Registry("model config")


def register_model_config(name: str):
  """Decorator: registers a zero-argument function returning a `ModelConfig` under `name`."""
  return MODEL_CONFIGS.register(name)


def get_model_config(name: str, **overrides) -> ModelConfig:
  """The named config, with optional field overrides (e.g. `param_dtype="bfloat16"`)."""
  return MODEL_CONFIGS.get_or_raise(name)().replace(**overrides)


@register_model_config("tiny")
def tiny_config() -> ModelConfig:
  """The embedded demo's policy: 4 layers, d_model 256, 4 heads of 64 (2 KV heads), SwiGLU 768,
  vocab 512 (the built-in tasks' SentencePiece size), tied embeddings, float32; ≈3.3 M parameters."""
  return ModelConfig(
    vocab_size=512,
    d_model=256,
    num_layers=4,
    num_heads=4,
    num_kv_heads=2,
    head_dim=64,
    mlp_dim=768,
    rope_theta=10_000.0,
    rms_norm_eps=1e-6,
    tie_embeddings=True,
    max_position_embeddings=2048,
  )


# What the 8B-class decoders share: 32 query heads of 128 over a 4096-wide residual, 8 KV heads, stored in
# bfloat16 as published (an RL run trains float32 masters of them: `with_precision`).
_8B = dict(d_model=4096, num_heads=32, num_kv_heads=8, head_dim=128, param_dtype="bfloat16", dtype="bfloat16")


@register_model_config("llama3_8b")
def llama3_8b() -> ModelConfig:
  return ModelConfig(**_8B, vocab_size=128_256, num_layers=32, mlp_dim=14_336, rope_theta=500_000.0, rms_norm_eps=1e-5,
                     max_position_embeddings=8192)  # fmt: skip


@register_model_config("llama3_1_8b")
def llama3_1_8b() -> ModelConfig:
  return llama3_8b().replace(
    rope_scaling=RopeScaling(
      "llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192
    ),
    max_position_embeddings=131_072,
  )


@register_model_config("qwen3_8b")
def qwen3_8b() -> ModelConfig:
  return ModelConfig(**_8B, vocab_size=151_936, num_layers=36, mlp_dim=12_288, rope_theta=1_000_000.0,
                     rms_norm_eps=1e-6, qk_norm=True, max_position_embeddings=40_960)  # fmt: skip


@register_model_config("ministral3_8b")
def ministral3_8b() -> ModelConfig:
  yarn = RopeScaling("yarn", factor=16.0, original_max_position_embeddings=16_384, beta_fast=32.0, beta_slow=1.0,
                     mscale=1.0, mscale_all_dim=1.0)  # fmt: skip
  return ModelConfig(**_8B, vocab_size=131_072, num_layers=34, mlp_dim=14_336, rope_theta=1_000_000.0,
                     rms_norm_eps=1e-5, rope_scaling=yarn, max_position_embeddings=262_144, query_scale_beta=0.1,
                     query_scale_length=16_384)  # fmt: skip
