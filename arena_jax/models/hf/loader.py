"""`load_hf` and the config entry points, by the registered family of a checkpoint's architecture.

config.json ─ check_hf_config ─ text_decoder_config ─ family.config_from_hf ─→ ModelConfig
safetensors ─ read_weights ─ text_decoder_weights ─ check_finite ─ dequantize_fp8
            ─ convert(family.key_map(config)) ─ placed tensor by tensor, optionally onto a mesh ─→ Transformer

A `.gguf` file enters the same path (`gguf.read_gguf`): its metadata as config.json, its tensors renamed to the
family's HF names and dequantised at placement.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from arena_jax.models.config import ModelConfig
from arena_jax.gguf_file import is_gguf
from arena_jax.models.hf import convert, gguf
from arena_jax.models.hf.checks import InvalidCheckpointError, UnsupportedCheckpointError, check_finite, check_hf_config
from arena_jax.models.hf.family import ARCHITECTURES, Family, Wrapper, architecture_of
from arena_jax.models.hf.fp8 import dequantize_fp8
from arena_jax.models.hf.multimodal import text_decoder_config, text_decoder_weights
from arena_jax.models.hf.reader import read_weights
from arena_jax.models.sharding import LOGICAL_AXIS_RULES, param_shardings
from arena_jax.models.transformer import Transformer, abstract_model


def _family(architecture: str) -> Family:
  entry = ARCHITECTURES.get(architecture) if isinstance(architecture, str) else None
  if not isinstance(entry, Family):
    raise UnsupportedCheckpointError(
      f"{architecture!r}: supported are {', '.join(ARCHITECTURES)} "
      "(for a multimodal wrapper, the kwargs of its text_config's decoder)"
    )
  return entry


def config_from_hf(hf: dict[str, Any], *, param_dtype: str | None = None, dtype: str | None = None) -> ModelConfig:
  """A `ModelConfig` from a parsed HF config.json (a multimodal wrapper's text decoder, `text_decoder_config`).

  Args:
    hf: the parsed config.json.
    param_dtype: parameter dtype (default: the checkpoint's `torch_dtype`).
    dtype: compute dtype (default: the checkpoint's `torch_dtype`).
  """
  decoder_hf, architecture = text_decoder_config(hf)
  config = ARCHITECTURES[architecture].config_from_hf(decoder_hf)
  return config.replace(param_dtype=param_dtype or config.param_dtype, dtype=dtype or config.dtype)


def config_to_hf(config: ModelConfig, architecture: str = "LlamaForCausalLM") -> dict[str, Any]:
  """Keyword arguments for the transformers config class of `architecture` (tests, benchmarks); ValueError for
  a config the architecture cannot express."""
  return _family(architecture).config_to_hf(config)


def _param_specs(config: ModelConfig) -> dict[str, Any]:
  return convert.flat_params(nnx.to_pure_dict(nnx.state(abstract_model(config))))


def expected_hf_shapes(config: ModelConfig, *, architecture: str = "LlamaForCausalLM") -> dict[str, tuple[int, ...]]:
  """The exact stored shape of every tensor `architecture`'s key map reads for `config`, by its HF name (HF
  `nn.Linear.weight` is [out, in])."""
  return convert.expected_shapes(_family(architecture).key_map(config), _param_specs(config))


def check_shapes(
  config: ModelConfig, weights: dict[str, Any], where: str, *, architecture: str = "LlamaForCausalLM"
) -> None:
  """Every tensor the model reads has exactly its shape by name (`convert.check_shapes`)."""
  convert.check_shapes(_family(architecture).key_map(config), weights, _param_specs(config), where)


def check_weights(
  config: ModelConfig, weights: dict[str, Any], where: str, *, architecture: str = "LlamaForCausalLM"
) -> None:
  """Every tensor the model reads has exactly its shape by name, and every floating-point value is finite
  (`check_shapes`, `check_finite`)."""
  check_shapes(config, weights, where, architecture=architecture)
  check_finite(weights, where)


def load_hf(
  path: str | os.PathLike,
  *,
  param_dtype: str | None = None,
  dtype: str | None = None,
  mesh: Mesh | None = None,
  rules: Sequence[tuple[str, Any]] = LOGICAL_AXIS_RULES,
) -> Transformer:
  """Loads a local HF checkpoint directory into a `Transformer`.

  Args:
    path: a directory with config.json and model.safetensors (or a sharded
      model.safetensors.index.json), or a `.gguf` file (`models.hf.gguf`: F32, F16, BF16, the legacy, K- and
      i-quants, dequantised tensor by tensor).
    param_dtype: parameter dtype (default: the checkpoint's `torch_dtype`); a wider one upcasts each tensor
      on the host before it is placed (the RL trainer's float32 masters, `models.with_precision`).
    dtype: compute dtype (default: the checkpoint's `torch_dtype`).
    mesh: place each parameter directly with its logical sharding on this mesh.
    rules: logical axis rules for `mesh`.

  Raises:
    UnsupportedCheckpointError: for any architecture other than `SUPPORTED_ARCHITECTURES`.
  """
  path = pathlib.Path(path)
  if is_gguf(path):  # one file: its metadata as config.json, its tensors renamed to the family's HF names
    hf, stored = gguf.read_gguf(path)
    check_hf_config(hf, str(path))
  else:
    try:
      hf = json.loads((path / "config.json").read_text())
    except (ValueError, RecursionError) as e:
      raise InvalidCheckpointError(f"{path / 'config.json'}: not valid JSON ({e!r:.120})") from None
    check_hf_config(hf, str(path / "config.json"))
    stored = None  # read once the config is known to be supported
  config = config_from_hf(hf, param_dtype=param_dtype, dtype=dtype)
  if stored is None:
    stored = read_weights(path)
  decoder_hf, decoder = text_decoder_config(hf)
  architecture = architecture_of(hf)
  weights = text_decoder_weights(stored, architecture)
  check_finite(weights, str(path))  # as stored: FP8 payloads and scales before dequantisation
  weights = dequantize_fp8(weights, decoder_hf.get("quantization_config"))
  if isinstance(ARCHITECTURES[architecture], Wrapper):  # it ties the output to the embedding when it stores no lm_head
    config = config.replace(tie_embeddings="lm_head.weight" not in weights)
  graphdef, abstract = nnx.split(abstract_model(config))
  pure_abstract = nnx.to_pure_dict(abstract)
  tensors = convert.convert(
    ARCHITECTURES[decoder].key_map(config), weights, convert.flat_params(pure_abstract), str(path)
  )
  shardings = param_shardings(abstract, mesh, rules) if mesh is not None else None

  def place(path_, spec):
    name = convert.param_key(path_)
    value = np.asarray(tensors[name])
    if value.shape != spec.shape:
      raise UnsupportedCheckpointError(f"{name}: checkpoint shape {value.shape} != model shape {spec.shape}")
    value = value.astype(spec.dtype)
    return jax.device_put(value, None if shardings is None else _lookup(shardings, path_))

  arrays = jax.tree_util.tree_map_with_path(place, pure_abstract)
  nnx.replace_by_pure_dict(abstract, arrays)
  return nnx.merge(graphdef, abstract)


def _lookup(tree, path_):
  for p in path_:
    tree = tree[getattr(p, "key", getattr(p, "idx", p))]
  return tree
