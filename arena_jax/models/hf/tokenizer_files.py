"""The tokenizer files of a Hugging Face checkpoint directory, beside the weights that `models.hf.export` writes.

    export_tokenizer(tokenizer, out_dir)   tokenizer.json, tokenizer_config.json, special_tokens_map.json
    sentencepiece_tokenizer_json(proto)    a SentencePiece model as the `tokenizers` library's tokenizer.json
    special_token_ids(tokenizer)           config.json's bos/eos/pad token ids

A SentencePiece tokenizer (the testbed's policy) becomes a `tokenizer.json` that the `tokenizers` library (hence
transformers' fast tokenizers, vLLM, SGLang) runs as SentencePiece does: the same pieces and ids, its BPE merges
ranked by the score of the merged piece (the order SentencePiece merges in), or its unigram scores; BOS added
as the run's prompt convention says (`add_bos`). A HF tokenizer is copied file by file; one built from a GGUF's
metadata is written out. A module of its own because a new kind of tokenizer is added here, apart from the
weights' key maps (`export`); a run directory's tokenizer is `arena_jax.export.export_tokenizer`'s.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
from typing import Any

from arena_jax import fileio
from arena_jax.errors import MissingFileError
from arena_jax.gguf_file import is_gguf
from arena_jax.models.hf.export import ExportError

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
    source: a `SentencePieceTokenizer` or an `HFTokenizer` (an RL run directory's: `arena_jax.export`).
    out_dir: the directory (created; the tokenizer files of an earlier export are replaced).
    add_bos: whether the exported tokenizer starts an encoding with BOS (transformers' `add_special_tokens`);
      None = the tokenizer's own convention where it states one (`add_bos_default`), else BOS when it has one.
    chat_template: a SentencePiece tokenizer's Jinja chat template, for tokenizer_config.json (it has none: the
      testbed's prompts are plain text); a HF tokenizer keeps its own.
    model_max_length: tokenizer_config.json's `model_max_length` (default: unbounded).

  A SentencePiece tokenizer becomes tokenizer.json (`sentencepiece_tokenizer_json`), tokenizer_config.json
  (bos/eos/unk/pad as the model's pieces), special_tokens_map.json and a copy of tokenizer.model. A HF tokenizer
  (a run started from a HF checkpoint) is copied: every file of `TOKENIZER_FILES` beside its tokenizer.json; one
  built from a GGUF's metadata is written out (`tokenizer.save_hf_tokenizer`).
  """
  from arena_jax import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top

  if isinstance(source, (str, os.PathLike)):  # the tokenizer a run records is read above train
    raise TypeError(f"{source} is a path, not a tokenizer: a run directory's is arena_jax.export.export_tokenizer's")
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


__all__ = ["TOKENIZER_FILES", "export_tokenizer", "sentencepiece_tokenizer_json", "special_token_ids"]
