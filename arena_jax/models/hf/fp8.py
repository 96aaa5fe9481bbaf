"""FP8 checkpoints (`quantization_config.quant_method = "fp8"`), dequantised tensor by tensor as they are placed.

An FP8 weight `X.weight` is stored in float8 (e4m3) beside `X.weight_scale_inv`: a scalar, one scale per
output row, or one per `weight_block_size` tile of the [out, in] matrix. `dequantize_fp8` replaces each by a
`Lazy` tensor that multiplies the two only when the loader places it, so the full-precision copy of one
weight exists at a time, never the whole model's.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from arena_jax.models.hf.checks import UnsupportedCheckpointError

_FP8 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


class Lazy:
  """A tensor computed when it is placed (`np.asarray`), with the views the key maps' layouts take (reshape,
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
    return Lazy(lambda: np.asarray(self).reshape(shape), shape)

  def transpose(self, *axes):
    return Lazy(lambda: np.asarray(self).transpose(*axes), tuple(self.shape[a] for a in axes))

  @property
  def T(self):  # pylint: disable=invalid-name
    return Lazy(lambda: np.asarray(self).T, self.shape[::-1])


def dequantize_fp8(weights: dict[str, Any], quantization: dict[str, Any] | None) -> dict[str, Any]:
  """FP8 checkpoints (`quant_method = "fp8"`) in float32: each float8 `X.weight` times its
  `X.weight_scale_inv` — a scalar, one scale per output row, or one per `weight_block_size` block —
  computed lazily at placement. Activation scales (`activation_scale`, `input_scale`) are dropped: the
  policy computes in bfloat16 / float32. Without a quantization config the weights pass unchanged."""
  if not quantization:
    return weights
  method = quantization.get("quant_method")
  if method != "fp8":
    raise UnsupportedCheckpointError(
      f"quantization_config.quant_method={method!r}: only 'fp8' checkpoints are dequantised on load"
    )
  block = quantization.get("weight_block_size")
  out = {}
  for name, value in weights.items():
    if name.endswith((".activation_scale", ".input_scale", ".weight_scale_inv")):
      continue
    if getattr(value, "dtype", None) in _FP8:
      scale = weights.get(name + "_scale_inv")
      if scale is None:
        raise UnsupportedCheckpointError(f"FP8 tensor {name!r} has no {name}_scale_inv")
      value = Lazy(lambda v=value, sc=scale, n=name: _dequantized(v, sc, block, n), value.shape)
    out[name] = value
  return out


def _dequantized(value: np.ndarray, scale: np.ndarray, block, name: str) -> np.ndarray:
  w = np.asarray(value).astype(np.float32)
  sc = np.asarray(scale).astype(np.float32)
  if sc.size == 1:
    return w * sc.reshape(())
  if block:  # one scale per [block[0], block[1]] tile of the [out, in] weight
    sc = np.repeat(np.repeat(sc, block[0], axis=0), block[1], axis=1)[: w.shape[0], : w.shape[1]]
  elif sc.shape in ((w.shape[0],), (w.shape[0], 1)):  # one scale per output row
    sc = sc.reshape(-1, 1)
  if sc.shape != w.shape:
    raise UnsupportedCheckpointError(
      f"{name}: FP8 scale of shape {np.shape(scale)} does not fit weight {w.shape} (weight_block_size={block})"
    )
  return w * sc
