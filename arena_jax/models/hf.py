"""Import of local Hugging Face checkpoints (config.json + safetensors, single or sharded).

Supported architectures: `LlamaForCausalLM`, `MistralForCausalLM`, `Qwen3ForCausalLM`,
`Ministral3ForCausalLM` (YaRN RoPE and Llama-4 attention scaling, `ModelConfig.query_scale_beta`) and
`Mistral3ForConditionalGeneration` (Ministral-3 Instruct, the paper's policy: its text decoder is
imported from `text_config`, the vision tower and projector are skipped with one log line). FP8
checkpoints (`quantization_config.quant_method = "fp8"`: e4m3 weights with `weight_scale_inv`,
per-tensor, per-row or block-wise) are dequantised tensor by tensor as they are placed. The reader
neither imports torch nor transformers: config.json is parsed here and safetensors files are memory-
mapped (bfloat16 and float8 via ml_dtypes), so a checkpoint larger than RAM loads tensor by tensor onto
a mesh.

Layout conversions (HF `nn.Linear.weight` is [out, in]):
  q_proj [N·H, D] → [D, N, H];  k_proj, v_proj [K·H, D] → [D, K, H];  o_proj [D, N·H] → [N, H, D]
  gate_proj, up_proj [F, D] → [D, F];  down_proj [D, F] → [F, D];  lm_head [V, D] → [D, V]
RoPE needs no permutation: both sides use the rotate_half layout.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import struct
from typing import Any, Sequence

from absl import logging
import jax
import ml_dtypes
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arena_jax.errors import UserError
from arena_jax.models.config import ModelConfig, RopeScaling
from arena_jax.models.sharding import LOGICAL_AXIS_RULES, param_shardings
from arena_jax.models.transformer import Transformer, abstract_model

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM", "Ministral3ForCausalLM",
                           "Mistral3ForConditionalGeneration")
# Multimodal wrappers whose text decoder is the policy: architecture → the decoder's architecture by the
# text_config's model_type.
_TEXT_DECODERS = {"Mistral3ForConditionalGeneration": {"ministral3": "Ministral3ForCausalLM",
                                                       "mistral": "MistralForCausalLM"}}
_HF_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class UnsupportedCheckpointError(UserError, ValueError):
  """The checkpoint's architecture or options are outside the supported family."""


class InvalidCheckpointError(UserError, ValueError):
  """The checkpoint contradicts itself or its model: a config value of the wrong type, a tensor of the
  wrong shape or with non-finite values, a weight path outside the directory, a header that does not
  fit its file. The message names the file and the field or tensor."""


# ─────────────────────────────────────── checks where the files enter ───────────────────────────────────────
# Each runs on what was read before anything is built from it (issue 21 item 8): a bad checkpoint is one
# clear error naming the file and the field or tensor, never a ZeroDivisionError, a TypeError, a
# MemoryError or a model that silently computes garbage.

_POSITIVE_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_OPTIONAL_POSITIVE_INTS = ("num_key_value_heads", "head_dim", "max_position_embeddings", "sliding_window",
                           "original_max_position_embeddings")
_POSITIVE_FLOATS = ("rope_theta", "rms_norm_eps")
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")
_STRINGS = ("hidden_act", "torch_dtype", "dtype", "model_type")
_ROPE_NUMBERS = ("rope_theta", "factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "attention_factor", "partial_rotary_factor")
MAX_HEADER_BYTES = 100 << 20  # the safetensors format's own limit on the JSON header


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_hf_config(hf, where: str) -> None:
  """Types and values of a parsed config.json (and of its `text_config`, where a multimodal wrapper
  nests the language model's): InvalidCheckpointError naming `where` and the field."""
  if not isinstance(hf, dict):
    raise InvalidCheckpointError(f"{where}: must hold a JSON object, got {type(hf).__name__}")
  archs = hf.get("architectures")
  if isinstance(archs, list) and archs and not any(a in SUPPORTED_ARCHITECTURES for a in archs):
    return  # `config_from_hf` names the supported architectures
  nested = hf.get("text_config")
  if nested is not None:
    check_hf_config(nested, f"{where}: text_config")
  problems = []
  for k in _POSITIVE_INTS:
    if k not in hf:
      if nested is None:
        problems.append(f"{k}: missing")
    elif not (_is_int(hf[k]) and hf[k] >= 1):
      problems.append(f"{k}: must be an integer ≥ 1, got {hf[k]!r:.40}")
  for k in _OPTIONAL_POSITIVE_INTS:
    if hf.get(k) is not None and not (_is_int(hf[k]) and hf[k] >= 1):
      problems.append(f"{k}: must be an integer ≥ 1 or null, got {hf[k]!r:.40}")
  if hf.get("max_window_layers") is not None and not (_is_int(hf["max_window_layers"]) and hf["max_window_layers"] >= 0):
    problems.append(f"max_window_layers: must be an integer ≥ 0, got {hf['max_window_layers']!r:.40}")
  for k in _POSITIVE_FLOATS:
    if k in hf and not (_is_number(hf[k]) and hf[k] > 0):
      problems.append(f"{k}: must be a finite number > 0, got {hf[k]!r:.40}")
  for k in _BOOLS:
    if hf.get(k) is not None and not isinstance(hf[k], bool):
      problems.append(f"{k}: must be true or false, got {hf[k]!r:.40}")
  for k in _STRINGS:
    if hf.get(k) is not None and not isinstance(hf[k], str):
      problems.append(f"{k}: must be a string, got {hf[k]!r:.40}")
  for k in ("architectures", "layer_types"):
    v = hf.get(k)
    if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
      problems.append(f"{k}: must be a list of strings, got {v!r:.60}")
  for k in ("rope_scaling", "rope_parameters"):
    rope = hf.get(k)
    if rope is None:
      continue
    if not isinstance(rope, dict):
      problems.append(f"{k}: must be an object or null, got {rope!r:.40}")
      continue
    for name in _ROPE_NUMBERS:
      if rope.get(name) is not None and not (_is_number(rope[name]) and rope[name] > 0):
        problems.append(f"{k}.{name}: must be a finite number > 0, got {rope[name]!r:.40}")
  if not problems:
    heads, kv = hf.get("num_attention_heads"), hf.get("num_key_value_heads")
    if heads and hf.get("head_dim") is None and hf.get("hidden_size", 0) % heads:
      problems.append(f"hidden_size: {hf['hidden_size']} is not a multiple of num_attention_heads={heads} "
                      "(and no head_dim is given)")
    if heads and kv and heads % kv:
      problems.append(f"num_key_value_heads: {kv} does not divide num_attention_heads={heads}")
    if isinstance(hf.get("layer_types"), list) and hf.get("num_hidden_layers") != len(hf["layer_types"]):
      problems.append(f"layer_types: {len(hf['layer_types'])} entries for num_hidden_layers="
                      f"{hf.get('num_hidden_layers')}")
  if problems:
    raise InvalidCheckpointError(f"{where}: " + "; ".join(problems))


def confined_file(directory: pathlib.Path, name, where: str) -> pathlib.Path:
  """`directory / name` for a weight file named by the checkpoint itself (its index), refused when the
  name could reach outside the directory (absolute, `..`, not a .safetensors file). Symlinks inside
  are followed as they are (a Hugging Face cache links its snapshot files to blobs beside them)."""
  if not isinstance(name, str) or not name:
    raise InvalidCheckpointError(f"{where}: a weight file name must be a non-empty string, got {name!r:.60}")
  parts = pathlib.PurePosixPath(name.replace("\\", "/")).parts
  if os.path.isabs(name) or name.startswith(("/", "\\")) or ".." in parts or not name.endswith(".safetensors"):
    raise InvalidCheckpointError(f"{where}: weight file {name!r} is outside the checkpoint directory {directory} "
                                 "(or not a .safetensors file); the index may name only files inside it")
  return directory / name


def _check_header(path: pathlib.Path, n: int | None, header, data_len: int) -> None:
  """The safetensors header against its file: sizes, offsets inside the data, shape × dtype = bytes."""
  if not isinstance(header, dict):
    raise InvalidCheckpointError(f"{path}: the safetensors header is not a JSON object")
  for name, info in header.items():
    if name == "__metadata__":
      continue
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
      raise InvalidCheckpointError(f"{where}: header entry is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not (isinstance(shape, list) and all(_is_int(d) and d >= 0 for d in shape)):
      raise InvalidCheckpointError(f"{where}: shape must be a list of integers ≥ 0, got {shape!r:.60}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_len):
      raise InvalidCheckpointError(f"{where}: data_offsets {offsets!r:.60} are not inside the file's {data_len} "
                                   "bytes of data (a truncated or damaged file)")
    if dtype in _ST_DTYPES:
      size = int(np.prod(shape, dtype=np.int64)) * np.dtype(_ST_DTYPES[dtype]).itemsize
      if offsets[1] - offsets[0] != size:
        raise InvalidCheckpointError(f"{where}: {offsets[1] - offsets[0]} bytes for shape {shape} of {dtype} "
                                     f"({size} bytes)")


def expected_hf_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
  """The exact shape of every tensor `_convert` reads, by its HF name (HF `nn.Linear.weight` is [out, in])."""
  c = config
  n, k, h, d, f, v = c.num_heads, c.num_kv_heads, c.head_dim, c.d_model, c.mlp_dim, c.vocab_size
  out = {"model.embed_tokens.weight": (v, d), "model.norm.weight": (d,), "lm_head.weight": (v, d)}
  for i in range(c.num_layers):
    p = f"model.layers.{i}."
    out.update({
        p + "self_attn.q_proj.weight": (n * h, d), p + "self_attn.k_proj.weight": (k * h, d),
        p + "self_attn.v_proj.weight": (k * h, d), p + "self_attn.o_proj.weight": (d, n * h),
        p + "self_attn.q_proj.bias": (n * h,), p + "self_attn.k_proj.bias": (k * h,),
        p + "self_attn.v_proj.bias": (k * h,), p + "self_attn.o_proj.bias": (d,),
        p + "self_attn.q_norm.weight": (h,), p + "self_attn.k_norm.weight": (h,),
        p + "mlp.gate_proj.weight": (f, d), p + "mlp.up_proj.weight": (f, d), p + "mlp.down_proj.weight": (d, f),
        p + "mlp.gate_proj.bias": (f,), p + "mlp.up_proj.bias": (f,), p + "mlp.down_proj.bias": (d,),
        p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
    })
  return out


def _all_finite(a: np.ndarray, rows: int = 1 << 12) -> bool:
  if a.ndim == 0:
    return bool(np.isfinite(a))
  # In slices: a memory-mapped tensor is never copied whole into memory.
  return all(bool(np.isfinite(a[i:i + rows]).all()) for i in range(0, a.shape[0], rows))


def check_weights(config: ModelConfig, weights: dict[str, np.ndarray], where: str) -> None:
  """Every tensor the model reads has exactly its shape by name, and every floating-point value is finite
  (`check_shapes`, `check_finite`)."""
  check_shapes(config, weights, where)
  check_finite(weights, where)


def check_shapes(config: ModelConfig, weights: dict[str, Any], where: str) -> None:
  """Every tensor the model reads has exactly its shape by name (a transposed [in, out] projection with
  the right element count would otherwise reshape silently). A transpose of a truly square matrix keeps
  its shape and cannot be told from it."""
  expected = expected_hf_shapes(config)
  for name, value in weights.items():
    want = expected.get(name)
    if want is not None and tuple(value.shape) != want:
      raise InvalidCheckpointError(f"{where}: tensor {name!r} has shape {tuple(value.shape)}, the config needs "
                                   f"{want} ([out, in] as nn.Linear stores it)")


def check_finite(weights: dict[str, Any], where: str) -> None:
  """Every floating-point tensor as stored holds finite values (FP8 payloads and their scales are checked
  before dequantisation, so no full-precision copy is made for it)."""
  for name, value in weights.items():
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (np.issubdtype(dtype, np.floating) or dtype == ml_dtypes.bfloat16
                              or "float8" in str(dtype)):
      if not _all_finite(value):
        raise InvalidCheckpointError(f"{where}: tensor {name!r} holds NaN or infinite values")


# ─────────────────────────────────────── config ───────────────────────────────────────


def text_decoder_config(hf: dict[str, Any]) -> tuple[dict[str, Any], str]:
  """(the decoder's config, its architecture) of a parsed config.json: the config itself for a causal LM,
  the `text_config` of a multimodal wrapper (`Mistral3ForConditionalGeneration`)."""
  archs = hf.get("architectures") or []
  arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
  if arch is None:
    raise UnsupportedCheckpointError(
        f"unsupported architecture {archs or hf.get('model_type')!r}: load_hf supports "
        f"{', '.join(SUPPORTED_ARCHITECTURES)}")
  if arch not in _TEXT_DECODERS:
    return hf, arch
  text = hf.get("text_config")
  if not isinstance(text, dict):
    raise UnsupportedCheckpointError(f"{arch}: config.json has no text_config")
  decoder = _TEXT_DECODERS[arch].get(text.get("model_type"))
  if decoder is None:
    raise UnsupportedCheckpointError(f"{arch}: text decoder model_type {text.get('model_type')!r} is not supported "
                                     f"({', '.join(_TEXT_DECODERS[arch])})")
  # The wrapper's storage dtype applies to the decoder when the text_config does not state its own.
  inherited = {k: hf[k] for k in ("torch_dtype", "dtype", "quantization_config") if k in hf and k not in text}
  return {**text, **inherited}, decoder


def config_from_hf(hf: dict[str, Any], *, param_dtype: str | None = None, dtype: str | None = None) -> ModelConfig:
  """A `ModelConfig` from a parsed HF config.json (old `rope_scaling` or new `rope_parameters` form; a
  multimodal wrapper's text decoder, `text_decoder_config`)."""
  hf, arch = text_decoder_config(hf)
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
        rope_type, factor=float(factor),
        low_freq_factor=float(rope.get("low_freq_factor", 1.0)),
        high_freq_factor=float(rope.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(orig),
        beta_fast=float(rope.get("beta_fast") or 32.0), beta_slow=float(rope.get("beta_slow") or 1.0),
        mscale=rope.get("mscale"), mscale_all_dim=rope.get("mscale_all_dim"),
        attention_factor=rope.get("attention_factor"), truncate=bool(rope.get("truncate", True)))
  elif rope_type != "default":
    raise UnsupportedCheckpointError(f"rope type {rope_type!r} is not supported (default, linear, llama3, yarn)")

  # Llama-4 attention scaling of the queries (Ministral-3: `llama_4_scaling_beta` in rope_parameters).
  query_beta = rope.get("llama_4_scaling_beta")
  query_length = int(rope.get("original_max_position_embeddings") or hf.get("original_max_position_embeddings")
                     or max_pos)
  if query_beta is not None and arch != "Ministral3ForCausalLM":
    raise UnsupportedCheckpointError(f"llama_4_scaling_beta is not supported for {arch}")

  num_layers = hf["num_hidden_layers"]
  window, sliding_layers = None, None
  if arch in ("MistralForCausalLM", "Ministral3ForCausalLM"):
    window = hf.get("sliding_window")
  elif arch == "Qwen3ForCausalLM" and hf.get("use_sliding_window", False):
    window = hf.get("sliding_window")
    types = hf.get("layer_types")
    if types is None:
      first = hf.get("max_window_layers", num_layers)
      types = ["sliding_attention" if i >= first else "full_attention" for i in range(num_layers)]
    sliding_layers = tuple(t == "sliding_attention" for t in types)
  elif hf.get("layer_types") and any(t != "full_attention" for t in hf["layer_types"]):
    raise UnsupportedCheckpointError(f"layer_types {hf['layer_types']} are not supported for {arch}")

  stored = _HF_DTYPES.get(hf.get("torch_dtype") or hf.get("dtype") or "float32", "float32")
  param_dtype = param_dtype or stored
  return ModelConfig(
      vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], num_layers=num_layers, num_heads=n_heads,
      num_kv_heads=hf.get("num_key_value_heads") or n_heads, head_dim=head_dim,
      mlp_dim=hf["intermediate_size"], rope_theta=float(theta), rope_scaling=scaling,
      rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)), qk_norm=arch == "Qwen3ForCausalLM",
      sliding_window=window, sliding_layers=sliding_layers,
      tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
      attention_bias=bool(hf.get("attention_bias", False)), mlp_bias=bool(hf.get("mlp_bias", False)),
      param_dtype=param_dtype, dtype=dtype or stored, max_position_embeddings=max_pos,
      query_scale_beta=None if query_beta is None else float(query_beta),
      query_scale_length=query_length if query_beta is not None else 16_384)


def config_to_hf(config: ModelConfig, architecture: str = "LlamaForCausalLM") -> dict[str, Any]:
  """Keyword arguments for the transformers config class of `architecture` (tests, benchmarks)."""
  if architecture not in SUPPORTED_ARCHITECTURES or architecture in _TEXT_DECODERS:
    raise UnsupportedCheckpointError(f"{architecture!r}: supported are {', '.join(SUPPORTED_ARCHITECTURES)} "
                                     "(for a multimodal wrapper, the kwargs of its text_config's decoder)")
  if config.qk_norm != (architecture == "Qwen3ForCausalLM"):
    raise ValueError(f"qk_norm={config.qk_norm} cannot be expressed as {architecture}")
  rope: dict[str, Any] = {"rope_type": "default", "rope_theta": config.rope_theta}
  if config.rope_scaling is not None:
    s = config.rope_scaling
    rope = {"rope_type": s.rope_type, "rope_theta": config.rope_theta, "factor": s.factor}
    if s.rope_type == "llama3":
      rope.update(low_freq_factor=s.low_freq_factor, high_freq_factor=s.high_freq_factor,
                  original_max_position_embeddings=s.original_max_position_embeddings)
    elif s.rope_type == "yarn":
      rope.update(original_max_position_embeddings=s.original_max_position_embeddings, beta_fast=s.beta_fast,
                  beta_slow=s.beta_slow, truncate=s.truncate)
      for k in ("mscale", "mscale_all_dim", "attention_factor"):
        if getattr(s, k) is not None:
          rope[k] = getattr(s, k)
  kw = dict(
      vocab_size=config.vocab_size, hidden_size=config.d_model, intermediate_size=config.mlp_dim,
      num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
      num_key_value_heads=config.num_kv_heads, head_dim=config.head_dim, hidden_act="silu",
      max_position_embeddings=config.max_position_embeddings, rms_norm_eps=config.rms_norm_eps,
      tie_word_embeddings=config.tie_embeddings, rope_parameters=rope, attention_bias=config.attention_bias)
  if architecture == "LlamaForCausalLM":
    if config.sliding_window is not None:
      raise ValueError("Llama has no sliding window; use MistralForCausalLM")
    kw["mlp_bias"] = config.mlp_bias
  elif config.mlp_bias:
    raise ValueError(f"{architecture} has no mlp_bias")
  if architecture in ("MistralForCausalLM", "Ministral3ForCausalLM"):
    if config.sliding_layers is not None:
      raise ValueError("Mistral's window applies to every layer; use sliding_layers=None")
    kw["sliding_window"] = config.sliding_window
    kw.pop("attention_bias")
  if config.query_scale_beta is not None:
    s = config.rope_scaling
    if architecture != "Ministral3ForCausalLM" or s is None or s.rope_type != "yarn" or (
        s.original_max_position_embeddings != config.query_scale_length):
      raise ValueError("Llama-4 attention scaling is Ministral3ForCausalLM's, with YaRN RoPE whose "
                       "original_max_position_embeddings equals query_scale_length")
    rope.update(type="yarn", llama_4_scaling_beta=config.query_scale_beta)
  if architecture == "Qwen3ForCausalLM":
    kw["use_sliding_window"] = config.sliding_window is not None
    if config.sliding_window is not None:
      kw["sliding_window"] = config.sliding_window
      layers = config.sliding_layers or (True,) * config.num_layers
      kw["layer_types"] = ["sliding_attention" if s else "full_attention" for s in layers]
  return kw


# ─────────────────────────────────────── safetensors ───────────────────────────────────────

_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
}
_FP8 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


def read_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
  """Memory-mapped arrays of one .safetensors file (format: u64 header size, JSON header, data)."""
  path = pathlib.Path(path)
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    if size < 8:
      raise InvalidCheckpointError(f"{path}: {size} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > min(size - 8, MAX_HEADER_BYTES):
      raise InvalidCheckpointError(f"{path}: header length {n} exceeds the file's {size - 8} bytes after the length "
                                   f"(or the format's {MAX_HEADER_BYTES}): a truncated or damaged file")
    try:
      header = json.loads(f.read(n))
    except (ValueError, RecursionError) as e:
      raise InvalidCheckpointError(f"{path}: the safetensors header is not valid JSON ({e!r:.120})") from None
  _check_header(path, n, header, size - 8 - n)
  data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
  out = {}
  for name, info in header.items():
    if name == "__metadata__":
      continue
    if info["dtype"] not in _ST_DTYPES:
      raise UnsupportedCheckpointError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
    start, end = info["data_offsets"]
    out[name] = data[start:end].view(_ST_DTYPES[info["dtype"]]).reshape(info["shape"])
  return out


def _read_weights(path: pathlib.Path) -> dict[str, np.ndarray]:
  index = path / "model.safetensors.index.json"
  if index.exists():
    try:
      weight_map = json.loads(index.read_text())["weight_map"]
      names = set(weight_map.values())
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
      raise InvalidCheckpointError(f"{index}: not an index with a weight_map object ({e!r:.120})") from None
    files = sorted(str(confined_file(path, name, str(index)).relative_to(path)) for name in names)
  elif (path / "model.safetensors").exists():
    files = ["model.safetensors"]
  else:
    files = sorted(p.name for p in path.glob("*.safetensors"))
  if not files:
    raise FileNotFoundError(f"no safetensors weights in {path} (expected model.safetensors or an index)")
  weights: dict[str, np.ndarray] = {}
  for name in files:
    weights.update(read_safetensors(path / name))
  return weights


# ─────────────────────────── text decoders of multimodal checkpoints, FP8 ───────────────────────────

_DECODER_PREFIXES = (("language_model.model.", "model."), ("model.language_model.", "model."),
                     ("language_model.lm_head.", "lm_head."))
_SKIPPED_PREFIXES = ("vision_tower.", "model.vision_tower.", "multi_modal_projector.", "model.multi_modal_projector.")


def text_decoder_weights(weights: dict[str, Any], architecture: str) -> dict[str, Any]:
  """The causal-LM tensor names of a multimodal checkpoint's text decoder (`language_model.model.*` and
  `model.language_model.*` → `model.*`, `language_model.lm_head` → `lm_head`); the vision tower and
  projector are dropped, said in one log line. Other architectures' weights pass unchanged."""
  if architecture not in _TEXT_DECODERS:
    return weights
  out, skipped = {}, 0
  for name, value in weights.items():
    if name.startswith(_SKIPPED_PREFIXES):
      skipped += 1
      continue
    for old, new in _DECODER_PREFIXES:
      if name.startswith(old):
        name = new + name[len(old):]
        break
    out[name] = value
  logging.info("load_hf: %s: importing the text decoder; the vision tower and projector (%d tensors) are "
               "skipped (the policy reads text only)", architecture, skipped)
  return out


class _Lazy:
  """A tensor computed when it is placed (`np.asarray`), with the views `_convert` takes (reshape,
  transpose, .T): a dequantised FP8 weight never exists in full precision before its turn."""

  def __init__(self, fn, shape):
    self._fn, self.shape = fn, tuple(shape)

  def __array__(self, dtype=None, copy=None):
    out = self._fn()
    return out if dtype is None else out.astype(dtype)

  def reshape(self, *shape):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
    known = int(np.prod([d for d in shape if d != -1]))
    shape = tuple(int(np.prod(self.shape)) // known if d == -1 else d for d in shape)
    return _Lazy(lambda: np.asarray(self).reshape(shape), shape)

  def transpose(self, *axes):
    return _Lazy(lambda: np.asarray(self).transpose(*axes), tuple(self.shape[a] for a in axes))

  @property
  def T(self):  # pylint: disable=invalid-name
    return _Lazy(lambda: np.asarray(self).T, self.shape[::-1])


def dequantize_fp8(weights: dict[str, Any], quantization: dict[str, Any] | None) -> dict[str, Any]:
  """FP8 checkpoints (`quant_method = "fp8"`) in float32: each float8 `X.weight` times its
  `X.weight_scale_inv` — a scalar, one scale per output row, or one per `weight_block_size` block —
  computed lazily at placement. Activation scales (`activation_scale`, `input_scale`) are dropped: the
  policy computes in bfloat16 / float32. Without a quantization config the weights pass unchanged."""
  if not quantization:
    return weights
  method = quantization.get("quant_method")
  if method != "fp8":
    raise UnsupportedCheckpointError(f"quantization_config.quant_method={method!r}: only 'fp8' checkpoints are "
                                     "dequantised on load")
  block = quantization.get("weight_block_size")
  out = {}
  for name, value in weights.items():
    if name.endswith((".activation_scale", ".input_scale", ".weight_scale_inv")):
      continue
    if getattr(value, "dtype", None) in _FP8:
      scale = weights.get(name + "_scale_inv")
      if scale is None:
        raise UnsupportedCheckpointError(f"FP8 tensor {name!r} has no {name}_scale_inv")
      value = _Lazy(lambda v=value, sc=scale: _dequantized(v, sc, block, name), value.shape)
    out[name] = value
  return out


def _dequantized(value: np.ndarray, scale: np.ndarray, block, name: str) -> np.ndarray:
  w = np.asarray(value).astype(np.float32)
  sc = np.asarray(scale).astype(np.float32)
  if sc.size == 1:
    return w * sc.reshape(())
  if block:  # one scale per [block[0], block[1]] tile of the [out, in] weight
    sc = np.repeat(np.repeat(sc, block[0], axis=0), block[1], axis=1)[:w.shape[0], :w.shape[1]]
  elif sc.shape in ((w.shape[0],), (w.shape[0], 1)):  # one scale per output row
    sc = sc.reshape(-1, 1)
  if sc.shape != w.shape:
    raise UnsupportedCheckpointError(f"{name}: FP8 scale of shape {np.shape(scale)} does not fit weight "
                                     f"{w.shape} (weight_block_size={block})")
  return w * sc


# ─────────────────────────────────────── weights ───────────────────────────────────────


def _convert(config: ModelConfig, w: dict[str, np.ndarray]) -> dict[str, Any]:
  """HF tensors → the nested pure dict of `nnx.to_pure_dict(nnx.state(Transformer))`."""
  c = config
  n, k, h, d = c.num_heads, c.num_kv_heads, c.head_dim, c.d_model
  used: set[str] = set()

  def get(name):
    if name not in w:
      raise UnsupportedCheckpointError(f"checkpoint lacks tensor {name!r}")
    used.add(name)
    return w[name]

  layers = {}
  for i in range(c.num_layers):
    p = f"model.layers.{i}."
    attn = {
        "q_proj": get(p + "self_attn.q_proj.weight").reshape(n, h, d).transpose(2, 0, 1),
        "k_proj": get(p + "self_attn.k_proj.weight").reshape(k, h, d).transpose(2, 0, 1),
        "v_proj": get(p + "self_attn.v_proj.weight").reshape(k, h, d).transpose(2, 0, 1),
        "o_proj": get(p + "self_attn.o_proj.weight").reshape(d, n, h).transpose(1, 2, 0),
    }
    if c.attention_bias:
      attn["q_bias"] = get(p + "self_attn.q_proj.bias").reshape(n, h)
      attn["k_bias"] = get(p + "self_attn.k_proj.bias").reshape(k, h)
      attn["v_bias"] = get(p + "self_attn.v_proj.bias").reshape(k, h)
      attn["o_bias"] = get(p + "self_attn.o_proj.bias")
    if c.qk_norm:
      attn["q_norm"] = {"scale": get(p + "self_attn.q_norm.weight")}
      attn["k_norm"] = {"scale": get(p + "self_attn.k_norm.weight")}
    mlp = {
        "gate_proj": get(p + "mlp.gate_proj.weight").T,
        "up_proj": get(p + "mlp.up_proj.weight").T,
        "down_proj": get(p + "mlp.down_proj.weight").T,
    }
    if c.mlp_bias:
      mlp.update(gate_bias=get(p + "mlp.gate_proj.bias"), up_bias=get(p + "mlp.up_proj.bias"),
                 down_bias=get(p + "mlp.down_proj.bias"))
    layers[i] = {
        "input_norm": {"scale": get(p + "input_layernorm.weight")},
        "attn": attn,
        "post_attention_norm": {"scale": get(p + "post_attention_layernorm.weight")},
        "mlp": mlp,
    }
  tree = {
      "embedding": get("model.embed_tokens.weight"),
      "layers": layers,
      "final_norm": {"scale": get("model.norm.weight")},
  }
  if not c.tie_embeddings:
    tree["lm_head"] = get("lm_head.weight").T
  elif "lm_head.weight" in w:
    used.add("lm_head.weight")  # tied: a stored copy of the embedding is redundant
  unused = sorted(name for name in w if name not in used and "rotary_emb" not in name)
  if unused:
    raise UnsupportedCheckpointError(f"checkpoint has tensors this model does not use: {unused[:8]}")
  return tree


def load_hf(path: str | os.PathLike, *, param_dtype: str | None = None, dtype: str | None = None,
            mesh: Mesh | None = None, rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES) -> Transformer:
  """Loads a local HF checkpoint directory into a `Transformer`.

  Args:
    path: a directory with config.json and model.safetensors (or a sharded
      model.safetensors.index.json).
    param_dtype: parameter dtype (default: the checkpoint's `torch_dtype`); a wider one upcasts each tensor
      on the host before it is placed (the RL trainer's float32 masters, `models.with_precision`).
    dtype: compute dtype (default: the checkpoint's `torch_dtype`).
    mesh: place each parameter directly with its logical sharding on this mesh.
    rules: logical axis rules for `mesh`.

  Raises:
    UnsupportedCheckpointError: for any architecture other than `SUPPORTED_ARCHITECTURES`.
  """
  path = pathlib.Path(path)
  try:
    hf = json.loads((path / "config.json").read_text())
  except (ValueError, RecursionError) as e:
    raise InvalidCheckpointError(f"{path / 'config.json'}: not valid JSON ({e!r:.120})") from None
  check_hf_config(hf, str(path / "config.json"))
  config = config_from_hf(hf, param_dtype=param_dtype, dtype=dtype)
  decoder_hf, _ = text_decoder_config(hf)
  architecture = next(a for a in hf.get("architectures") or [] if a in SUPPORTED_ARCHITECTURES)
  weights = text_decoder_weights(_read_weights(path), architecture)
  check_finite(weights, str(path))  # as stored: FP8 payloads and scales before dequantisation
  weights = dequantize_fp8(weights, decoder_hf.get("quantization_config"))
  if architecture in _TEXT_DECODERS:  # the wrapper ties the output to the embedding when it stores no lm_head
    config = config.replace(tie_embeddings="lm_head.weight" not in weights)
  check_shapes(config, weights, str(path))
  weights = _convert(config, weights)
  graphdef, abstract = nnx.split(abstract_model(config))
  pure_abstract = nnx.to_pure_dict(abstract)
  shardings = param_shardings(abstract, mesh, rules) if mesh is not None else None

  def place(path_, spec, value):
    value = np.asarray(value)
    if value.shape != spec.shape:
      name = "/".join(str(getattr(p, "key", p)) for p in path_)
      raise UnsupportedCheckpointError(f"{name}: checkpoint shape {value.shape} != model shape {spec.shape}")
    value = value.astype(spec.dtype)
    return jax.device_put(value, None if shardings is None else _lookup(shardings, path_))

  arrays = jax.tree_util.tree_map_with_path(place, pure_abstract, weights)
  nnx.replace_by_pure_dict(abstract, arrays)
  return nnx.merge(graphdef, abstract)


def _lookup(tree, path_):
  for p in path_:
    tree = tree[getattr(p, "key", getattr(p, "idx", p))]
  return tree
