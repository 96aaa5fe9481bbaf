"""Export of a policy as a Hugging Face checkpoint directory: what transformers, vLLM and SGLang load.

    export_params(params, model_config, out_dir)     config.json + model.safetensors (sharded above 5 GB)
    export_tokenizer(tokenizer or workdir, out_dir)  tokenizer.json, tokenizer_config.json, special_tokens_map.json
    export_checkpoint(workdir, out_dir, step=None)   both, for checkpoint `step` of an RL run (`launch.export`)

The weights are the importer's inverse, read off the same key map (`convert.Rule`s of the family): each of our
parameters goes to the HF name of the one rule that places it, through the inverse of that rule's `Layout`
(transpose back to the stored axis order, merge the split axes), so an export read back by `load_hf` gives the
very same arrays, and no second table per family exists to drift. The family is the one the run recorded (the
architecture of the HF checkpoint it started from) or, for a policy made here, the plainest family that
expresses the config (`default_architecture`). A config that the family cannot express exactly is refused: its
config.json is read back by the family's own `config_from_hf` and must give the same model.

A SentencePiece tokenizer (the testbed's policy) becomes a `tokenizer.json` that the `tokenizers` library (hence
transformers' fast tokenizers, vLLM, SGLang) runs as SentencePiece does: the same pieces and ids, its BPE merges
ranked by the score of the merged piece (the order SentencePiece merges in), or its unigram scores; BOS added
as the run's prompt convention says (`add_bos`). A HF tokenizer is copied file by file.

Nothing here imports torch or transformers; arrays are gathered to this host (single-host: a process that does
not hold every shard of a parameter is refused), and files are written through a temporary name renamed into
place, config.json last.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pathlib
import re
import shutil
from typing import Any, Mapping, Sequence

import jax
import ml_dtypes
import numpy as np
from flax import nnx

from arena_jax import fileio
from arena_jax.errors import MissingFileError, UserError
from arena_jax.gguf_file import is_gguf, open_gguf
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
# The files of a HF tokenizer (transformers 4 and 5, Mistral's tekken) that an export carries over.
TOKENIZER_FILES = (
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "added_tokens.json",
  "chat_template.jinja",
  "chat_template.json",
  "tokenizer.model",
  "vocab.json",
  "merges.txt",
  "tekken.json",
)


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
    step: the checkpoint step exported (`export_checkpoint`), None for `export_params`.
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
      "jax.experimental.multihost_utils.process_allgather, or export from the checkpoint: export_checkpoint)"
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
  rules = [r for r in _family(architecture).key_map(config) if not r.copy]
  out, names = [], set()
  for path, spec in specs.items():
    if tuple(ours[path].shape) != tuple(spec.shape):
      raise ValueError(f"parameter {path} has shape {tuple(ours[path].shape)}, the model config needs {spec.shape}")
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
    out.append((name, ours[path], rule.layout))
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


# ─────────────────────────────────────── the tokenizer ───────────────────────────────────────


def _token(piece: str, i: int, *, special: bool) -> dict[str, Any]:
  return {
    "id": i,
    "content": piece,
    "single_word": False,
    "lstrip": False,
    "rstrip": False,
    "normalized": False,
    "special": special,
  }


def sentencepiece_tokenizer_json(model_proto: bytes, *, add_bos: bool) -> dict[str, Any]:
  """The `tokenizer.json` (the `tokenizers` library's format) that encodes and decodes as the SentencePiece
  model `model_proto` does, BOS first when `add_bos`.

  Pieces keep their ids. Control and unknown pieces are special added tokens, user-defined ones (the newline
  of the models trained here) added tokens matched whole, as SentencePiece matches them. A BPE model's merges
  are, piece by piece in the order of their scores (the order SentencePiece's encoder merges in: the
  best-scoring result first), every split of the piece into two pieces; where two different splits of one
  piece overlap in a text, SentencePiece merges the leftmost and tokenizers the one listed first (no text of
  the task corpus tells them apart). A unigram model keeps its scores.

  Supported: identity or a precompiled normalisation, whitespace escaped as "▁" or not, the dummy prefix, byte
  fallback; refused (ExportError): the removal of extra whitespace, whitespace as a suffix. Two differences
  remain, neither for the models trained here (identity, no dummy prefix): with a dummy prefix, a text that
  starts with whitespace (after normalisation) gets none; and a text that spells a control token ("</s>") gets
  that token, as with every HF tokenizer, where SentencePiece reads the spelling as plain text.
  """
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top  (its protobuf, on use)

  proto = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  trainer, norm = proto.trainer_spec, proto.normalizer_spec
  if norm.remove_extra_whitespaces or trainer.treat_whitespace_as_suffix:
    raise ExportError(
      "this SentencePiece model removes extra whitespace or treats whitespace as a suffix, which tokenizer.json "
      "cannot reproduce exactly; SentencePieceTokenizer.train's models do neither"
    )
  kinds = {trainer.BPE: "BPE", trainer.UNIGRAM: "Unigram"}
  if trainer.model_type not in kinds:
    raise ExportError(f"SentencePiece model type {trainer.model_type} cannot be exported (BPE and unigram can)")
  pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
  byte_fallback = any(t == piece_type.BYTE for _, _, t in pieces)
  unk = next((i for i, (_, _, t) in enumerate(pieces) if t == piece_type.UNKNOWN), None)

  added = []
  for i, (piece, _, t) in enumerate(pieces):
    if t in (piece_type.CONTROL, piece_type.UNKNOWN):
      added.append(_token(piece, i, special=True))
    elif t == piece_type.USER_DEFINED:
      # Matched whole in the text before normalisation, as SentencePiece matches them.
      text = piece.replace("▁", " ") if norm.escape_whitespaces else piece
      added.append(_token(text, i, special=False))

  if kinds[trainer.model_type] == "BPE":
    vocab = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    mergeable = {piece for piece, _, t in pieces if t in (piece_type.NORMAL, piece_type.USER_DEFINED)}
    merged = sorted(
      ((score, i, piece) for i, (piece, score, t) in enumerate(pieces) if t == piece_type.NORMAL and len(piece) > 1),
      key=lambda s: (-s[0], s[1]),
    )
    merges = [
      [piece[:k], piece[k:]]
      for _, _, piece in merged
      for k in range(1, len(piece))
      if piece[:k] in mergeable and piece[k:] in mergeable
    ]
    model = {
      "type": "BPE",
      "dropout": None,
      "unk_token": None if unk is None else pieces[unk][0],
      "continuing_subword_prefix": None,
      "end_of_word_suffix": None,
      "fuse_unk": True,  # SentencePiece emits one unknown piece for a run of unknown characters
      "byte_fallback": byte_fallback,
      "ignore_merges": False,
      "vocab": vocab,
      "merges": merges,
    }
  else:
    model = {"type": "Unigram", "unk_id": unk, "vocab": [[p, s] for p, s, _ in pieces], "byte_fallback": byte_fallback}

  # SentencePiece's normalisation: its rule (none for identity), whitespace escaped as "▁", the dummy prefix.
  normalizers, pre_tokenizer, decoders = [], None, []
  if norm.precompiled_charsmap:  # a rule other than identity (nmt_nfkc, …), as SentencePiece stores it
    charsmap = base64.b64encode(norm.precompiled_charsmap).decode()
    normalizers.append({"type": "Precompiled", "precompiled_charsmap": charsmap})
  if norm.add_dummy_prefix:
    if not norm.escape_whitespaces:
      raise ExportError("a SentencePiece model with a dummy prefix and unescaped whitespace cannot be exported")
    # Once, before the first segment of the text (not after each added token, as a normaliser would); like
    # SentencePiece's, except that a text starting with a space gets none.
    pre_tokenizer = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
  elif norm.escape_whitespaces:
    normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})
  if norm.escape_whitespaces:
    decoders.append({"type": "Replace", "pattern": {"String": "▁"}, "content": " "})
  decoders += [{"type": "ByteFallback"}, {"type": "Fuse"}]
  if norm.add_dummy_prefix:
    decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})

  bos = pieces[trainer.bos_id][0] if 0 <= trainer.bos_id < len(pieces) else None
  post_processor = None
  if add_bos and bos is not None:
    post_processor = {
      "type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [
        {"SpecialToken": {"id": bos, "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": bos, "type_id": 1}},
        {"Sequence": {"id": "B", "type_id": 1}},
      ],
      "special_tokens": {bos: {"id": bos, "ids": [trainer.bos_id], "tokens": [bos]}},
    }
  return {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": added,
    "normalizer": {"type": "Sequence", "normalizers": normalizers} if normalizers else None,
    "pre_tokenizer": pre_tokenizer,
    "post_processor": post_processor,
    "decoder": {"type": "Sequence", "decoders": decoders},
    "model": model,
  }


def _piece(tokenizer, i: int | None) -> str | None:
  return None if i is None or i < 0 else tokenizer.id_to_piece(i)


def _sentencepiece_files(tokenizer, add_bos: bool, chat_template: str | None, model_max_length: int | None):
  special = {
    "bos_token": _piece(tokenizer, tokenizer.bos_id),
    "eos_token": _piece(tokenizer, tokenizer.eos_id),
    "unk_token": _piece(tokenizer, getattr(tokenizer, "unk_id", None)),
    "pad_token": _piece(tokenizer, tokenizer.pad_id),
  }
  special = {k: v for k, v in special.items() if v is not None}
  config: dict[str, Any] = {
    # The generic fast tokenizer: it runs tokenizer.json as written (a model's own class, e.g. LlamaTokenizer,
    # would put its own normaliser and dummy prefix in front).
    "tokenizer_class": "PreTrainedTokenizerFast",
    **special,
    "add_bos_token": bool(add_bos and tokenizer.bos_id is not None),
    "add_eos_token": False,
    "clean_up_tokenization_spaces": False,  # the text is byte-exact: " ." stays " ."
    "model_max_length": model_max_length or 1 << 30,
  }
  if chat_template:
    config["chat_template"] = chat_template
  tokenizer_json = sentencepiece_tokenizer_json(tokenizer.model_proto, add_bos=config["add_bos_token"])
  return {
    "tokenizer.json": json.dumps(tokenizer_json, ensure_ascii=False, indent=2),
    "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2),
    "special_tokens_map.json": json.dumps(special, ensure_ascii=False, indent=2),
    "tokenizer.model": tokenizer.model_proto,  # the source, for SentencePiece users; transformers reads the .json
  }


def _clear_tokenizer(out_dir: pathlib.Path, keep) -> None:
  """Removes the tokenizer files of an earlier export that this one does not write (a stale
  chat_template.jinja would win over tokenizer_config.json's template)."""
  for name in TOKENIZER_FILES:
    if name not in keep:
      (out_dir / name).unlink(missing_ok=True)


def export_tokenizer(
  source,
  out_dir: str | os.PathLike,
  *,
  add_bos: bool | None = None,
  chat_template: str | None = None,
  model_max_length: int | None = None,
) -> list[str]:
  """Writes the tokenizer files of a policy into `out_dir`; returns their names.

  Args:
    source: an RL run directory (its recorded tokenizer and `add_bos`: `policy_io.load_run_policy`), a
      `SentencePieceTokenizer`, or an `HFTokenizer`.
    out_dir: the directory (created; the tokenizer files of an earlier export are replaced).
    add_bos: whether the exported tokenizer starts an encoding with BOS (transformers' `add_special_tokens`);
      None = the run's convention (a tokenizer: BOS when it has one).
    chat_template: a SentencePiece tokenizer's Jinja chat template, for tokenizer_config.json (it has none: the
      testbed's prompts are plain text); a HF tokenizer keeps its own.
    model_max_length: tokenizer_config.json's `model_max_length` (default: unbounded).

  A SentencePiece tokenizer becomes tokenizer.json (`sentencepiece_tokenizer_json`), tokenizer_config.json
  (bos/eos/unk/pad as the model's pieces), special_tokens_map.json and a copy of tokenizer.model. A HF tokenizer
  (a run started from a HF checkpoint) is copied: every file of `TOKENIZER_FILES` beside its tokenizer.json; one
  built from a GGUF's metadata is written out (`tokenizer.save_hf_tokenizer`).
  """
  from arena_jax import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top

  if isinstance(source, (str, os.PathLike)):
    from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top  (train imports models: on use)

    _, source, recorded = policy_io.load_run_policy(source)
    add_bos = recorded if add_bos is None else add_bos
  if add_bos is None:  # the tokenizer's own convention where it states one (a GGUF, a tokenizer_config.json)
    stated = getattr(source, "add_bos_default", None)
    add_bos = source.bos_id is not None if stated is None else bool(stated)
  out_dir = pathlib.Path(out_dir).expanduser().absolute()
  out_dir.mkdir(parents=True, exist_ok=True)
  if isinstance(source, tokenizer_lib.SentencePieceTokenizer):
    files = _sentencepiece_files(source, add_bos, chat_template, model_max_length)
    _clear_tokenizer(out_dir, keep=files)
    for name, data in files.items():
      fileio.atomic_write(out_dir / name, data)
    return list(files)
  if isinstance(source, tokenizer_lib.HFTokenizer) and is_gguf(source.path):  # built from a GGUF's metadata
    if chat_template:
      raise ValueError(f"the tokenizer of {source.path} keeps its own chat template: pass none")
    return tokenizer_lib.save_hf_tokenizer(source, out_dir, add_bos=add_bos, model_max_length=model_max_length)
  if isinstance(source, tokenizer_lib.HFTokenizer):
    directory = pathlib.Path(source.path).parent
    names = [n for n in TOKENIZER_FILES if (directory / n).is_file()]
    if "tokenizer.json" not in names:
      raise MissingFileError(f"{directory} has no tokenizer.json to export")
    if chat_template:
      raise ValueError(f"the HF tokenizer of {directory} keeps its own chat template: pass none")
    if directory.resolve() != out_dir.resolve():
      _clear_tokenizer(out_dir, keep=names)
      for name in names:
        shutil.copyfile(directory / name, out_dir / name)
    return names
  raise TypeError(f"cannot export a tokenizer of type {type(source).__name__}")


def special_token_ids(tokenizer) -> dict[str, int | None]:
  """config.json's `bos_token_id`, `eos_token_id`, `pad_token_id` of one of our tokenizers."""
  return {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id}


# ─────────────────────────────────────── a run's checkpoint ───────────────────────────────────────


def checkpoint_steps(workdir: str | os.PathLike) -> list[int]:
  """The finalised checkpoint steps of a run (orbax renames a step's directory into place when complete)."""
  directory = pathlib.Path(workdir) / "checkpoints"
  return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def restore_params(workdir: str | os.PathLike, step: int, model_config: ModelConfig) -> dict:
  """The parameters of checkpoint `step` of a run, alone (not the optimizer state), as NumPy arrays on this
  host (`Checkpointer.restore_params(host=True)`: verified as the trainer verifies a restore, the step's
  manifest, then finite values).

  Raises:
    checkpoint.CheckpointError: the step is damaged or does not restore.
  """
  from arena_jax.train import checkpoint  # pylint: disable=g-import-not-at-top  (train imports models: on use)

  abstract = nnx.to_pure_dict(nnx.state(abstract_model(model_config)))
  target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), abstract)
  ckpt = checkpoint.Checkpointer(str(pathlib.Path(workdir).absolute() / "checkpoints"))
  try:
    return ckpt.restore_params(step, target, host=True)
  finally:
    ckpt.close()


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


def export_checkpoint(
  workdir: str | os.PathLike,
  out_dir: str | os.PathLike,
  *,
  step: int | None = None,
  architecture: str | None = None,
  dtype: str = "float32",
  max_shard_bytes: int = MAX_SHARD_BYTES,
) -> Exported:
  """Exports checkpoint `step` (default: the latest finalised one) of an RL run directory as a HF checkpoint
  with its tokenizer (`export_params`, `export_tokenizer`): only the parameters are read, onto this host.

  The architecture is `architecture`, else the one of the HF checkpoint the run started from
  (`source_checkpoint`), else `default_architecture`; a run from a HF checkpoint also keeps that checkpoint's
  special token ids and generation_config.json.

  Raises:
    MissingFileError: `workdir` is not a run directory, has no checkpoint, or not the step.
    checkpoint.CheckpointError: the step is damaged.
    InexpressibleError: the architecture cannot express the run's model config.
  """
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top  (train imports models: on use)

  workdir = pathlib.Path(workdir).expanduser().absolute()
  if not workdir.is_dir():
    raise MissingFileError(f"{workdir}: no such run directory")
  model_config, tokenizer, add_bos = policy_io.load_run_policy(workdir)
  steps = checkpoint_steps(workdir)
  if not steps:
    raise MissingFileError(f"{workdir / 'checkpoints'} holds no finalised checkpoint")
  if step is None:
    step = steps[-1]
  elif step not in steps:
    raise MissingFileError(f"{workdir / 'checkpoints'} has no finalised step {step} (it has {steps})")
  source = source_checkpoint(tokenizer)
  if source is not None and source[0].resolve() == pathlib.Path(out_dir).expanduser().resolve():
    raise ExportError(f"{out_dir} is the HF checkpoint the run started from: export to another directory")
  architecture = architecture or (source[2] if source else default_architecture(model_config))
  check_expressible(model_config, architecture)  # before the checkpoint is read
  params = restore_params(workdir, step, model_config)
  token_ids, generation_config = special_token_ids(tokenizer), None
  if source is not None:  # the checkpoint's own ids (a list of EOS ids, a null pad) and generation settings
    directory, decoder, _ = source
    token_ids.update({k: decoder[k] for k in token_ids if k in decoder})
    if (directory / "generation_config.json").is_file():
      generation_config = json.loads((directory / "generation_config.json").read_text(encoding="utf-8"))
  exported = export_params(
    params,
    model_config,
    out_dir,
    architecture=architecture,
    dtype=dtype,
    special_token_ids=token_ids,
    generation_config=generation_config,
    max_shard_bytes=max_shard_bytes,
  )
  names = export_tokenizer(
    tokenizer, exported.out_dir, add_bos=add_bos, model_max_length=model_config.max_position_embeddings
  )
  return dataclasses.replace(exported, files=exported.files + tuple(names), step=step)


def export_gguf(path: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "float32") -> Exported:
  """A GGUF file as a HF checkpoint directory that transformers loads: its weights dequantised (`models.hf.gguf`)
  and stored in `dtype`, config.json of its family (Llama, Qwen2, Qwen3), generation_config.json with its special
  token ids, and its tokenizer and chat template as tokenizer.json and tokenizer_config.json.

  Raises:
    gguf_file.GGUFError / MissingFileError: the file cannot be read (`models.hf.gguf.read_gguf`).
  """
  from arena_jax.models import pretrained  # pylint: disable=g-import-not-at-top
  from arena_jax.models.hf import gguf  # pylint: disable=g-import-not-at-top  (the family modules register in it)
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top  (train imports models: on use)

  path = pretrained.resolve(path)
  policy = policy_io.load_policy(path, weight_dtype="float32")
  architecture = gguf.architecture_of(open_gguf(path)).architecture
  token_ids = special_token_ids(policy.tokenizer)
  exported = export_params(
    jax.device_get(nnx.to_pure_dict(nnx.state(policy.model, nnx.Param))),
    policy.config,
    out_dir,
    architecture=architecture,
    dtype=dtype,
    special_token_ids=token_ids,
  )
  names = export_tokenizer(policy.tokenizer, exported.out_dir, model_max_length=policy.config.max_position_embeddings)
  return dataclasses.replace(exported, files=exported.files + tuple(names))


__all__ = [
  "EXPORT_DTYPES",
  "MAX_SHARD_BYTES",
  "ExportError",
  "Exported",
  "InexpressibleError",
  "check_expressible",
  "checkpoint_steps",
  "default_architecture",
  "export_checkpoint",
  "export_gguf",
  "export_params",
  "export_tokenizer",
  "hf_tensors",
  "model_type",
  "source_checkpoint",
  "restore_params",
  "sentencepiece_tokenizer_json",
  "special_token_ids",
]
