"""Export of a policy as a Hugging Face checkpoint directory: what transformers, vLLM and SGLang load.

    export_params(params, model_config, out_dir)     config.json + model.safetensors (sharded above 5 GB)
    tokenizer_files.export_tokenizer(tokenizer, out_dir)   the tokenizer files beside them (`tokenizer_files`)

The pure conversion: parameters, a model config and a tokenizer in, files out. Reading them from an RL run's
checkpoint or a GGUF file is `arena_jax.export`'s (`launch.export`), above train: models never imports train.

The weights are the importer's inverse, read off the same key map (`convert.Rule`s of the family): each of our
parameters goes to the HF name of the one rule that places it, through the inverse of that rule's `Layout`
(transpose back to the stored axis order, merge the split axes), so an export read back by `load_hf` gives the
very same arrays, and no second table per family exists to drift. The family is the one the run recorded (the
architecture of the HF checkpoint it started from: `source_checkpoint`) or, for a policy made here, the
plainest family that expresses the config (`default_architecture`). A config that the family cannot express
exactly is refused: its config.json is read back by the family's own `config_from_hf` and must give the same
model.

Nothing here imports torch or transformers; arrays are gathered to this host (single-host: a process that does
not hold every shard of a parameter is refused), and files are written through a temporary name renamed into
place, config.json last.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
from typing import Any, Mapping, Sequence

import jax
import ml_dtypes
import numpy as np
from flax import nnx

from arena_jax import fileio
from arena_jax.errors import UserError
from arena_jax.models.config import ModelConfig, rope_frequencies
from arena_jax.models.hf import convert
from arena_jax.models.hf.checks import check_hf_config
from arena_jax.models.hf.family import ARCHITECTURES, Family, Wrapper
from arena_jax.models.transformer import abstract_model

EXPORT_DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
_ST_NAMES = {np.dtype(np.float32): "F32", np.dtype(ml_dtypes.bfloat16): "BF16", np.dtype(np.float16): "F16"}
MAX_SHARD_BYTES = 5 * 10**9  # transformers' "5GB" (decimal), the size its own sharded checkpoints are cut at
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
_SHARD = re.compile(r"model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?")


class ExportError(UserError, ValueError):
  """What an export cannot write faithfully (a SentencePiece option that tokenizer.json cannot reproduce)."""


class InexpressibleError(ExportError):
  """A model config that the chosen architecture cannot express (or an architecture that cannot be exported);
  the message names what would be lost."""


@dataclasses.dataclass(frozen=True)
class Exported:
  """What an export wrote.

  Attributes:
    out_dir: the directory.
    architecture: config.json's architecture.
    dtype: the stored dtype of the weights.
    files: the names written into `out_dir`, in the order written.
    step: the checkpoint step exported (`arena_jax.export.export_checkpoint`), None for `export_params`.
  """

  out_dir: pathlib.Path
  architecture: str
  dtype: str
  files: tuple[str, ...]
  step: int | None = None


# ─────────────────────────────────────── the architecture ───────────────────────────────────────


def default_architecture(config: ModelConfig) -> str:
  """The family a policy made here is exported as: what the config has that only one family expresses
  (Llama-4 attention scaling: Ministral-3; QK-norm: Qwen3; q/k/v-only biases: Qwen2; a sliding window:
  Mistral), else Llama. Whether the family expresses the whole config is `check_expressible`'s to say."""
  if config.query_scale_beta is not None:
    return "Ministral3ForCausalLM"
  if config.qk_norm:
    return "Qwen3ForCausalLM"
  if config.qkv_bias:
    return "Qwen2ForCausalLM"
  if config.sliding_window is not None:
    return "MistralForCausalLM"
  return "LlamaForCausalLM"


def model_type(architecture: str) -> str:
  """config.json's `model_type` of a causal LM: transformers names both after the model (`LlamaForCausalLM` →
  "llama", `Ministral3ForCausalLM` → "ministral3")."""
  return architecture.removesuffix("ForCausalLM").lower()


def _family(architecture: str) -> Family:
  entry = ARCHITECTURES.get(architecture) if isinstance(architecture, str) else None
  if isinstance(entry, Wrapper):
    decoders = ", ".join(d for _, d in entry.decoders)
    raise InexpressibleError(
      f"{architecture} is a multimodal wrapper, and the policy is its text decoder only: export as the "
      f"decoder's architecture ({decoders})"
    )
  if not isinstance(entry, Family):
    families = [name for name, e in ARCHITECTURES.items() if isinstance(e, Family)]
    raise InexpressibleError(f"architecture {architecture!r} cannot be exported; supported are {', '.join(families)}")
  return entry


def _behaviour(config: ModelConfig) -> dict[str, Any]:
  """What a config computes, whatever the spelling: the fields of the architecture, the RoPE frequencies that
  its theta and scaling give, each layer's window; not its dtypes or how a train step computes."""
  inv_freq, attention_factor = rope_frequencies(config)
  fields = dataclasses.asdict(config)
  spelled = ("rope_theta", "rope_scaling", "sliding_window", "sliding_layers")  # compared as what they give
  for name in spelled + ("param_dtype", "dtype", "init_std", "remat", "quantization", "attention"):
    del fields[name]
  if config.query_scale_beta is None:
    del fields["query_scale_length"]  # unused without the scaling, and not stored
  fields["rope"] = (inv_freq.tolist(), attention_factor)
  fields["windows"] = tuple(config.layer_window(i) for i in range(config.num_layers))
  return fields


def check_expressible(config: ModelConfig, architecture: str) -> dict[str, Any]:
  """The family's config.json fields of `config` (`Family.config_to_hf`, as JSON), after checking that the
  family reads them back (`Family.config_from_hf`) as the same model.

  Raises:
    InexpressibleError: the family cannot express `config` (naming what it loses), or is not a causal LM's.
  """
  family = _family(architecture)
  try:
    hf = json.loads(json.dumps(family.config_to_hf(config)))
  except ValueError as e:
    raise InexpressibleError(f"this model config cannot be exported as {architecture}: {e}") from None
  back = family.config_from_hf(hf)
  want, got = _behaviour(config), _behaviour(back)
  lost = [f"{k}={want[k]!r:.60} (read back as {got.get(k)!r:.60})" for k in want if want[k] != got.get(k)]
  if lost:
    raise InexpressibleError(
      f"this model config cannot be exported as {architecture}: it cannot express {'; '.join(lost)}"
    )
  return hf


def _hf_config(config: ModelConfig, architecture: str, dtype: str, special_token_ids: Mapping[str, int | None]):
  hf = check_expressible(config, architecture)
  rope = dict(hf.get("rope_parameters") or {})
  theta = rope.pop("rope_theta", config.rope_theta)
  out = {
    "architectures": [architecture],
    "model_type": model_type(architecture),
    **hf,
    # transformers 4 (and the servers pinned to it) read RoPE from these two; 5 from rope_parameters.
    "rope_theta": theta,
    "rope_scaling": rope if rope.get("rope_type", "default") != "default" else None,
    "torch_dtype": dtype,  # transformers 4's name
    "dtype": dtype,  # transformers 5's
    "use_cache": True,
  }
  for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
    if key in special_token_ids:
      out[key] = special_token_ids[key]
  check_hf_config(out, "the exported config.json")
  return out


# ─────────────────────────────────────── the weights ───────────────────────────────────────


def _to_hf(layout: convert.Layout, x: np.ndarray) -> np.ndarray:
  """Inverse of `Layout.to_ours`: our array back in the stored axis order, the split axes merged."""
  hf_shape = layout.hf_shape(x.shape)
  if layout.perm is not None:
    x = x.transpose(np.argsort(layout.perm))
  return np.ascontiguousarray(x).reshape(hf_shape)


def _host(path: str, x) -> np.ndarray:
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    raise ValueError(
      f"parameter {path} is sharded across hosts: export_params runs on one host (gather it first, e.g. with "
      "jax.experimental.multihost_utils.process_allgather, or export from the checkpoint: "
      "arena_jax.export.export_checkpoint)"
    )
  return np.asarray(x)


def hf_tensors(params, config: ModelConfig, architecture: str) -> list[tuple[str, Any, convert.Layout]]:
  """(HF name, our array, layout) for every parameter, in the model's parameter order, by the family's key map:
  each parameter goes to the one rule that the importer fills it from (a stored copy, such as a tied lm_head,
  is not written). Shapes and the set of parameters are checked against `config`'s model."""
  specs = convert.flat_params(nnx.to_pure_dict(nnx.state(abstract_model(config))))
  ours = convert.flat_params(params)
  missing, extra = sorted(set(specs) - set(ours)), sorted(set(ours) - set(specs))
  if missing or extra:
    raise ValueError(
      f"the parameters do not match the model config: missing {missing[:6]}, not in the model {extra[:6]}"
    )
  placed = hf_placement(config, architecture)
  out = []
  for path, spec in specs.items():
    if tuple(ours[path].shape) != tuple(spec.shape):
      raise ValueError(f"parameter {path} has shape {tuple(ours[path].shape)}, the model config needs {spec.shape}")
    name, layout = placed[path]
    out.append((name, ours[path], layout))
  return out


def hf_placement(config: ModelConfig, architecture: str) -> dict[str, tuple[str, convert.Layout]]:
  """{our parameter path: (its HF tensor name, layout)} by the family's key map, for every parameter of `config`'s
  model (what `hf_tensors` writes, and `models.lora.export_peft_adapters` names adapters after)."""
  specs = convert.flat_params(nnx.to_pure_dict(nnx.state(abstract_model(config))))
  rules = [r for r in _family(architecture).key_map(config) if not r.copy]
  out, names = {}, set()
  for path in specs:
    # The converter's own patterns (`{layer}` → an index), so both directions read a rule alike.
    rule, match = next(
      ((r, m) for r in rules if (m := convert._pattern(r.ours).fullmatch(path)) is not None), (None, None)
    )
    if rule is None:  # a key map that does not cover its own config's model
      raise ValueError(f"no rule of {architecture}'s key map places parameter {path!r}")
    name = convert._fill(rule.hf, match)
    if name in names:
      raise ValueError(f"{architecture}'s key map writes tensor {name!r} twice")
    names.add(name)
    out[path] = (name, rule.layout)
  return out


def _safetensors_header(entries: Sequence[tuple[str, tuple[int, ...], np.dtype]]) -> bytes:
  header: dict[str, Any] = {"__metadata__": {"format": "pt"}}  # transformers refuses a file without "pt"
  offset = 0
  for name, shape, dtype in entries:
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    header[name] = {"dtype": _ST_NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
    offset += size
  raw = json.dumps(header, separators=(",", ":")).encode()
  return raw + b" " * (-len(raw) % 8)  # the format pads the header with spaces so that the data is aligned


def _write_shard(path: pathlib.Path, tensors, dtype: np.dtype) -> None:
  """One .safetensors file, tensor by tensor (each converted as it is written: one host copy at a time)."""
  shapes = [(name, tuple(layout.hf_shape(x.shape)), dtype) for name, x, layout in tensors]
  header = _safetensors_header(shapes)
  tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
  try:
    with open(tmp, "wb") as f:
      f.write(len(header).to_bytes(8, "little"))
      f.write(header)
      for name, x, layout in tensors:
        array = np.ascontiguousarray(_to_hf(layout, _host(name, x)), dtype=dtype.newbyteorder("<"))
        f.write(array.view(np.uint8).data)
    os.replace(tmp, path)
  finally:
    tmp.unlink(missing_ok=True)


def _shards(tensors, dtype: np.dtype, max_bytes: int) -> list[list]:
  """Consecutive groups of at most `max_bytes` each (a larger tensor alone), as transformers cuts them."""
  shards, size = [[]], 0
  for t in tensors:
    n = int(np.prod(t[1].shape, dtype=np.int64)) * dtype.itemsize
    if shards[-1] and size + n > max_bytes:
      shards.append([])
      size = 0
    shards[-1].append(t)
    size += n
  return shards


def _clear(out_dir: pathlib.Path, names: Sequence[str]) -> None:
  """Removes config.json and the weight files an earlier export left (a stale index would win over a new
  single file), before anything new is written."""
  (out_dir / "config.json").unlink(missing_ok=True)
  for p in out_dir.iterdir():
    if p.is_file() and (_SHARD.fullmatch(p.name) or p.name in names):
      p.unlink()


def export_params(
  params,
  model_config: ModelConfig,
  out_dir: str | os.PathLike,
  *,
  architecture: str | None = None,
  dtype: str = "float32",
  special_token_ids: Mapping[str, int | None] | None = None,
  generation_config: Mapping[str, Any] | None = None,
  max_shard_bytes: int = MAX_SHARD_BYTES,
) -> Exported:
  """Writes `params` as a HF checkpoint directory: model.safetensors (or, above `max_shard_bytes`, the files
  model-0000k-of-0000n.safetensors and model.safetensors.index.json) and config.json, written last.

  Args:
    params: the pure parameter dict (`models.pure_params`; NumPy or JAX arrays, gathered to this host: a
      parameter sharded across hosts is refused).
    model_config: the model's config.
    out_dir: the directory (created; an earlier export's config.json and weight files are replaced).
    architecture: the HF architecture (a registered family, e.g. "Qwen3ForCausalLM"); None =
      `default_architecture(model_config)`.
    dtype: the stored dtype: "float32", "bfloat16" (rounded to nearest even) or "float16".
    special_token_ids: `bos_token_id`, `eos_token_id`, `pad_token_id` of the tokenizer, put in config.json
      (transformers' defaults are Llama's, which a SentencePiece policy's PAD 0 / EOS 1 / BOS 2 are not).
    generation_config: written as generation_config.json (default: the special token ids, when given).
    max_shard_bytes: the largest weight file.

  Raises:
    InexpressibleError: the family cannot express the config.
    ValueError: the parameters do not fit the config, or a bad dtype.
  """
  if dtype not in EXPORT_DTYPES:
    raise ValueError(f"dtype must be one of {tuple(EXPORT_DTYPES)} (got {dtype!r})")
  architecture = architecture or default_architecture(model_config)
  special_token_ids = dict(special_token_ids or {})
  hf = _hf_config(model_config, architecture, dtype, special_token_ids)
  tensors = hf_tensors(params, model_config, architecture)
  out_dir = pathlib.Path(out_dir).expanduser().absolute()
  out_dir.mkdir(parents=True, exist_ok=True)
  _clear(out_dir, ("generation_config.json",))
  np_dtype = np.dtype(EXPORT_DTYPES[dtype])
  shards = _shards(tensors, np_dtype, max_shard_bytes)
  files = []
  if len(shards) == 1:
    _write_shard(out_dir / WEIGHTS, shards[0], np_dtype)
    files.append(WEIGHTS)
  else:
    weight_map, total = {}, 0
    for k, shard in enumerate(shards, 1):
      name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
      _write_shard(out_dir / name, shard, np_dtype)
      files.append(name)
      for tensor_name, x, _ in shard:
        weight_map[tensor_name] = name
        total += int(np.prod(x.shape, dtype=np.int64)) * np_dtype.itemsize
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    fileio.atomic_write(out_dir / INDEX, json.dumps(index, indent=2))
    files.append(INDEX)
  if generation_config is None and special_token_ids:
    generation_config = {k: v for k, v in special_token_ids.items() if v is not None}
  if generation_config:
    fileio.atomic_write(out_dir / "generation_config.json", json.dumps(dict(generation_config), indent=2))
    files.append("generation_config.json")
  fileio.atomic_write(out_dir / "config.json", json.dumps(hf, indent=2, sort_keys=True))  # last: complete
  files.append("config.json")
  return Exported(out_dir, architecture, dtype, tuple(files))


# ─────────────────────────────────── the checkpoint a run started from ───────────────────────────────────


def source_checkpoint(tokenizer) -> tuple[pathlib.Path, dict[str, Any], str] | None:
  """(directory, decoder config, decoder architecture) of the HF checkpoint a run started from: the
  config.json beside the tokenizer the run records (for a multimodal wrapper, its text decoder's); None for a
  tokenizer made here, or beside a config.json that is not one of the registered architectures'."""
  from arena_jax.models.hf.multimodal import text_decoder_config  # pylint: disable=g-import-not-at-top

  path = getattr(tokenizer, "path", "")
  directory = pathlib.Path(path).parent if path else None
  if directory is None or not (directory / "config.json").is_file():
    return None
  try:
    decoder, architecture = text_decoder_config(json.loads((directory / "config.json").read_text(encoding="utf-8")))
  except (ValueError, KeyError, TypeError, AttributeError):  # not one of ours: the model config decides
    return None
  return directory, decoder, architecture


__all__ = [
  "EXPORT_DTYPES",
  "MAX_SHARD_BYTES",
  "ExportError",
  "Exported",
  "InexpressibleError",
  "check_expressible",
  "default_architecture",
  "export_params",
  "hf_tensors",
  "model_type",
  "source_checkpoint",
]
