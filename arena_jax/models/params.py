"""The parameters of a model as a pure nested dict: the one form the sampler, the trainer and the
policy directory pass around (jit arguments, orbax trees, `nnx.merge` inputs)."""

from __future__ import annotations

from typing import Any

from flax import nnx


def pure_params(model_or_params: Any) -> dict:
  """`nnx.to_pure_dict(nnx.state(model, nnx.Param))` of a Module, `to_pure_dict` of an `nnx.State`;
  anything else (already a pure dict, or a tree of arrays) is returned as it is."""
  if isinstance(model_or_params, nnx.Module):
    model_or_params = nnx.state(model_or_params, nnx.Param)
  if isinstance(model_or_params, nnx.State):
    model_or_params = nnx.to_pure_dict(model_or_params)
  return model_or_params
