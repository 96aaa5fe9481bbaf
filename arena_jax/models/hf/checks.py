"""The errors of the HF import, and the checks where a checkpoint's files enter.

Each check runs on what was read before anything is built from it: a bad checkpoint is one
clear error naming the file and the field or tensor, never a ZeroDivisionError, a TypeError, a MemoryError or a
model that silently computes garbage. The shape checks live with the key maps that define the shapes
(`convert.check_shapes`); the safetensors header's checks with its reader (`reader`).
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from arena_jax.errors import UserError
from arena_jax.models.hf.family import architecture_of


class UnsupportedCheckpointError(UserError, ValueError):
  """The checkpoint's architecture or options are outside the supported family."""


class InvalidCheckpointError(UserError, ValueError):
  """The checkpoint contradicts itself or its model: a config value of the wrong type, a tensor of the
  wrong shape or with non-finite values, a weight path outside the directory, a header that does not
  fit its file. The message names the file and the field or tensor."""


_POSITIVE_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
_OPTIONAL_POSITIVE_INTS = (
  "num_key_value_heads",
  "head_dim",
  "max_position_embeddings",
  "sliding_window",
  "original_max_position_embeddings",
)
_POSITIVE_FLOATS = ("rope_theta", "rms_norm_eps")
_BOOLS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window")
_STRINGS = ("hidden_act", "torch_dtype", "dtype", "model_type")
_ROPE_NUMBERS = (
  "rope_theta",
  "factor",
  "low_freq_factor",
  "high_freq_factor",
  "beta_fast",
  "beta_slow",
  "mscale",
  "mscale_all_dim",
  "attention_factor",
  "partial_rotary_factor",
)


def is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_hf_config(hf, where: str) -> None:
  """Types and values of a parsed config.json (and of its `text_config`, where a multimodal wrapper
  nests the language model's): InvalidCheckpointError naming `where` and the field."""
  if not isinstance(hf, dict):
    raise InvalidCheckpointError(f"{where}: must hold a JSON object, got {type(hf).__name__}")
  archs = hf.get("architectures")
  if isinstance(archs, list) and archs and architecture_of(hf) is None:
    return  # `config_from_hf` names the supported architectures
  nested = hf.get("text_config")
  if nested is not None:
    check_hf_config(nested, f"{where}: text_config")
  problems = []
  for k in _POSITIVE_INTS:
    if k not in hf:
      if nested is None:
        problems.append(f"{k}: missing")
    elif not (is_int(hf[k]) and hf[k] >= 1):
      problems.append(f"{k}: must be an integer ≥ 1, got {hf[k]!r:.40}")
  for k in _OPTIONAL_POSITIVE_INTS:
    if hf.get(k) is not None and not (is_int(hf[k]) and hf[k] >= 1):
      problems.append(f"{k}: must be an integer ≥ 1 or null, got {hf[k]!r:.40}")
  if hf.get("max_window_layers") is not None and not (is_int(hf["max_window_layers"]) and hf["max_window_layers"] >= 0):
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
      problems.append(
        f"hidden_size: {hf['hidden_size']} is not a multiple of num_attention_heads={heads} (and no head_dim is given)"
      )
    if heads and kv and heads % kv:
      problems.append(f"num_key_value_heads: {kv} does not divide num_attention_heads={heads}")
    if isinstance(hf.get("layer_types"), list) and hf.get("num_hidden_layers") != len(hf["layer_types"]):
      problems.append(
        f"layer_types: {len(hf['layer_types'])} entries for num_hidden_layers={hf.get('num_hidden_layers')}"
      )
  if problems:
    raise InvalidCheckpointError(f"{where}: " + "; ".join(problems))


def _all_finite(a: np.ndarray, rows: int = 1 << 12) -> bool:
  if a.ndim == 0:
    return bool(np.isfinite(a))
  # In slices: a memory-mapped tensor is never copied whole into memory.
  return all(bool(np.isfinite(a[i : i + rows]).all()) for i in range(0, a.shape[0], rows))


def check_finite(weights: dict[str, Any], where: str) -> None:
  """Every floating-point tensor as stored holds finite values (FP8 payloads and their scales are checked
  before dequantisation, so no full-precision copy is made for it)."""
  for name, value in weights.items():
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (
      np.issubdtype(dtype, np.floating) or dtype == ml_dtypes.bfloat16 or "float8" in str(dtype)
    ):
      if not _all_finite(value):
        raise InvalidCheckpointError(f"{where}: tensor {name!r} holds NaN or infinite values")
