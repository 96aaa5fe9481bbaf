"""Tokenizers: SentencePiece (train from any iterable of strings, load, save) and, optionally, a HF
`tokenizer.json` through the `tokenizers` library (imported lazily: it is in the `hf` extra), which also
builds the tokenizer of a GGUF file from its metadata (`load_tokenizer("….gguf")`, read by `gguf_tokenizer`)
and writes any HF tokenizer out as a directory that transformers loads (`save_hf_tokenizer`).

Both expose the same small interface: `vocab_size`, `pad_id` / `eos_id` / `bos_id`, `encode`,
`encode_batch` (right-padded numpy arrays + lengths, the sampler's prompt format), `decode`,
`decode_batch`, and `check_vocab(model_vocab_size)`.

The SentencePiece models trained here fix PAD = 0, EOS = 1, BOS = 2, UNK = 3 (gemma's convention;
`pad_id` 0 is also the sampler's default), keep text byte-exact (identity normalisation, whitespace
and newlines preserved — step splitting at blank lines depends on it, SPEC §8), split digits into
single tokens (arithmetic), and add no dummy prefix, so decode(encode(s)) == s for any string whose
characters occur in the training corpus (any string at all with `byte_fallback=True`).
"""

from __future__ import annotations

import io
import json
import os
import pathlib
from typing import Iterable, Protocol, Sequence

import numpy as np
import sentencepiece as spm

from arena_jax import chat_template
from arena_jax import fileio
from arena_jax import gguf_file
from arena_jax import gguf_tokenizer

PAD_ID, EOS_ID, BOS_ID, UNK_ID = 0, 1, 2, 3
_NO_TEMPLATE_IN_DIRECTORY = f"neither {chat_template.TEMPLATE_FILE} nor a chat_template entry in tokenizer_config.json"


class Tokenizer(Protocol):
  """What the rest of arena_jax needs from a tokenizer."""

  vocab_size: int
  pad_id: int
  eos_id: int
  bos_id: int | None

  def encode(self, text, *, add_bos: bool = False, add_eos: bool = False): ...

  def decode(self, ids, *, stop_at_eos: bool = True) -> str: ...


class _Common:
  """encode_batch / decode_batch / check_vocab / apply_chat_template on top of encode / decode."""

  pad_id: int
  eos_id: int
  vocab_size: int
  chat_template: str | None = None  # the checkpoint's Jinja chat template (HF tokenizers that ship one)
  special_tokens: dict[str, str] = {}  # bos_token, eos_token, … as text, for the chat template
  path: str = ""
  # Where a chat template would have been (for the error that says there is none).
  _missing_template: str = _NO_TEMPLATE_IN_DIRECTORY

  def apply_chat_template(
    self, messages: Sequence[dict], *, add_generation_prompt: bool = True, **template_kwargs
  ) -> str:
    """`messages` ([{"role": "system" | "user" | "assistant", "content": …}, …]) rendered by the checkpoint's
    own chat template as transformers renders it (`arena_jax.chat_template`); `template_kwargs` reach the
    template (e.g. `enable_thinking=False` for Qwen3). Tokenize the result without adding a BOS: the
    template writes its own."""
    if not self.chat_template:
      raise chat_template.ChatTemplateError(
        f"the tokenizer {self.path or type(self).__name__} has no chat template ({self._missing_template}); use "
        "tasks.prompt_format = 'plain'"
      )
    return chat_template.render(
      self.chat_template,
      messages,
      add_generation_prompt=add_generation_prompt,
      special=self.special_tokens,
      source=f"chat template of {self.path}",
      **template_kwargs,
    )

  def encode_batch(
    self,
    texts: Sequence[str],
    *,
    add_bos: bool = False,
    add_eos: bool = False,
    max_length: int | None = None,
    truncate: str = "right",
  ) -> tuple[np.ndarray, np.ndarray]:
    """(tokens int32 [B, L] right-padded with `pad_id`, lengths int32 [B]).

    `max_length` truncates each sequence, dropping tokens on the `truncate` side ("right" keeps the
    beginning, "left" keeps the end, e.g. for prompts whose question is at the end).
    """
    if truncate not in ("left", "right"):
      raise ValueError(f"truncate must be 'left' or 'right' (got {truncate!r})")
    seqs = self.encode(list(texts), add_bos=add_bos, add_eos=add_eos)
    if max_length is not None:
      seqs = [s[:max_length] if truncate == "right" else s[max(0, len(s) - max_length) :] for s in seqs]
    lengths = np.asarray([len(s) for s in seqs], np.int32)
    out = np.full((len(seqs), int(lengths.max(initial=0))), self.pad_id, np.int32)
    for i, s in enumerate(seqs):
      out[i, : len(s)] = s
    return out, lengths

  def decode_batch(self, tokens, lengths=None, *, stop_at_eos: bool = True) -> list[str]:
    """Decodes each row (of a [B, L] array or a list of lists), up to `lengths` when given."""
    rows = [list(np.asarray(r)) for r in tokens]
    if lengths is not None:
      rows = [r[: int(n)] for r, n in zip(rows, np.asarray(lengths))]
    return [self.decode(r, stop_at_eos=stop_at_eos) for r in rows]

  def check_vocab(self, model_vocab_size: int) -> None:
    """Raises if token ids could fall outside a model's embedding table."""
    if self.vocab_size > model_vocab_size:
      raise ValueError(
        f"the tokenizer has {self.vocab_size} tokens but the model's vocab_size is {model_vocab_size}: "
        "train the tokenizer with vocab_size ≤ the model's, or raise ModelConfig.vocab_size"
      )

  def _strip(self, ids, stop_at_eos: bool) -> list[int]:
    ids = [int(i) for i in np.asarray(ids).reshape(-1)]
    if stop_at_eos and self.eos_id in ids:
      ids = ids[: ids.index(self.eos_id)]
    # Ids past the tokenizer's vocabulary (a model's embedding table is often padded beyond it, and an
    # untrained policy samples them) have no text: they are dropped rather than failing the decode.
    return [i for i in ids if i != self.pad_id and 0 <= i < self.vocab_size]


class SentencePieceTokenizer(_Common):
  """A SentencePiece model (`.model` protobuf)."""

  def __init__(self, model_proto: bytes):
    self._proto = bytes(model_proto)
    self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
    self.vocab_size = self._sp.get_piece_size()
    self.pad_id = self._sp.pad_id()
    self.eos_id = self._sp.eos_id()
    bos = self._sp.bos_id()
    self.bos_id = bos if bos >= 0 else None
    self.unk_id = self._sp.unk_id()
    if self.pad_id < 0:
      raise ValueError("this SentencePiece model has no pad piece; train it with pad_id ≥ 0")

  # ── construction ──

  @classmethod
  def load(cls, path: str | os.PathLike) -> "SentencePieceTokenizer":
    return cls(pathlib.Path(path).read_bytes())

  def save(self, path: str | os.PathLike) -> None:
    # Atomic: a crash mid-write never leaves a truncated model where a resume looks for it.
    fileio.atomic_write(path, self._proto)

  @property
  def model_proto(self) -> bytes:
    return self._proto

  @classmethod
  def train(
    cls,
    texts: Iterable[str],
    vocab_size: int,
    *,
    model_type: str = "bpe",
    split_digits: bool = True,
    byte_fallback: bool = False,
    user_defined_symbols: Sequence[str] = (),
    character_coverage: float = 1.0,
    max_sentences: int | None = None,
    hard_vocab_limit: bool = False,
    num_threads: int = 2,
    seed: int = 0,
  ) -> "SentencePieceTokenizer":
    """Trains a model on an iterable of strings (e.g. the built-in tasks' corpus generator).

    Args:
      texts: the corpus; each string is one "sentence" and may contain newlines.
      vocab_size: the size to aim for (an upper bound unless `hard_vocab_limit`: a small corpus may
        support fewer pieces); use the model's `ModelConfig.vocab_size`.
      model_type: "bpe" or "unigram".
      split_digits: every digit is its own token (arithmetic).
      byte_fallback: unknown characters become UTF-8 byte tokens (256 pieces of the budget) instead
        of UNK, so every string round-trips.
      user_defined_symbols: extra pieces kept whole (newline is always one).
      character_coverage: fraction of characters covered by the vocabulary.
      max_sentences: train on a random subset of this many strings.
      hard_vocab_limit: fail unless exactly `vocab_size` pieces can be made.
      num_threads: trainer threads.
      seed: the trainer's random seed (subset sampling).
    """
    symbols = ["\n"] + [s for s in user_defined_symbols if s != "\n"]
    writer = io.BytesIO()
    kwargs = dict(
      sentence_iterator=iter(texts),
      model_writer=writer,
      vocab_size=vocab_size,
      model_type=model_type,
      pad_id=PAD_ID,
      eos_id=EOS_ID,
      bos_id=BOS_ID,
      unk_id=UNK_ID,
      pad_piece="<pad>",
      eos_piece="</s>",
      bos_piece="<s>",
      unk_piece="<unk>",
      normalization_rule_name="identity",
      remove_extra_whitespaces=False,
      add_dummy_prefix=False,
      allow_whitespace_only_pieces=True,
      split_digits=split_digits,
      byte_fallback=byte_fallback,
      user_defined_symbols=symbols,
      character_coverage=character_coverage,
      hard_vocab_limit=hard_vocab_limit,
      num_threads=num_threads,
      max_sentence_length=1 << 20,
      minloglevel=2,
    )
    if max_sentences is not None:
      kwargs.update(input_sentence_size=max_sentences, shuffle_input_sentence=True)
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(**kwargs)
    return cls(writer.getvalue())

  # ── use ──

  def encode(self, text: str | Sequence[str], *, add_bos: bool = False, add_eos: bool = False):
    """Token ids of one string (list[int]) or of each string of a list (list[list[int]])."""
    return self._sp.encode(text if isinstance(text, str) else list(text), add_bos=add_bos, add_eos=add_eos)

  def decode(self, ids, *, stop_at_eos: bool = True) -> str:
    """Text of `ids`, dropping padding (and everything from the first EOS when `stop_at_eos`)."""
    return self._sp.decode(self._strip(ids, stop_at_eos))

  def id_to_piece(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))

  def piece_to_id(self, piece: str) -> int:
    return self._sp.piece_to_id(piece)


class HFTokenizer(_Common):
  """A HF fast tokenizer through the `tokenizers` library (lazy import): from a `tokenizer.json` (or a directory
  holding one), from a GGUF file's metadata (a `.gguf` path; `arena_jax.gguf_tokenizer`), or from an
  in-memory `tokenizers.Tokenizer` (`from_tokenizer`).

  Besides `_Common`'s attributes: `unk_id` (None when it has none), `add_bos_default` (whether the checkpoint
  asks for a BOS at the start of an encoding: a GGUF's `tokenizer.ggml.add_bos_token`, a directory's
  tokenizer_config.json `add_bos_token`; None when it does not say) and `model_max_length` (None when unknown).
  """

  _BOS = ("<s>", "<|begin_of_text|>", "<bos>", "[BOS]")
  _EOS = ("</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<eos>", "[EOS]")
  _PAD = ("<pad>", "<|finetune_right_pad_id|>", "[PAD]", "<|endoftext|>")

  unk_id: int | None = None
  add_bos_default: bool | None = None
  model_max_length: int | None = None

  def __init__(
    self,
    path: str | os.PathLike,
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    pad_token: str | None = None,
  ):
    """`path`: a tokenizer.json, a directory holding one (and maybe tokenizer_config.json, whose bos/eos/pad
    tokens are used unless given here), or a `.gguf` file (its tokenizer, chat template and special tokens are
    rebuilt from its metadata: `gguf_tokenizer`; `gguf_file.GGUFError` when they cannot be)."""
    if gguf_file.is_gguf(path):
      parts = gguf_tokenizer.tokenizer_parts(path, eos_names=self._EOS)
      for name, token in (("bos_id", bos_token), ("eos_id", eos_token), ("pad_id", pad_token)):
        if token:
          parts[name] = self._find(parts["tok"], token, (), required=True)
      self._setup(**parts)
      return
    import tokenizers  # pylint: disable=g-import-not-at-top  (hf extra, imported on use)

    path = pathlib.Path(path)
    directory = path if path.is_dir() else path.parent
    file = path / "tokenizer.json" if path.is_dir() else path
    tok = tokenizers.Tokenizer.from_file(str(file))
    config = {}
    config_file = directory / "tokenizer_config.json"
    if config_file.exists():
      config = json.loads(config_file.read_text())
    special = chat_template.special_tokens(config)
    max_length = config.get("model_max_length")
    self._setup(
      tok,
      path=str(file),  # where it came from (a run records it for its evaluator)
      chat_template=chat_template.load_chat_template(directory),
      # The template's special-token variables are the config's own, as transformers passes them.
      special_tokens=special,
      bos_id=self._find(tok, bos_token or special.get("bos_token"), self._BOS, required=False),
      eos_id=self._find(tok, eos_token or special.get("eos_token"), self._EOS, required=True),
      pad_id=self._find(tok, pad_token or special.get("pad_token"), self._PAD, required=False),
      unk_id=self._find(tok, special.get("unk_token"), (), required=False),
      add_bos_default=config.get("add_bos_token") if isinstance(config.get("add_bos_token"), bool) else None,
      # transformers writes 1e30 (its VERY_LARGE_INTEGER) for "unbounded": that is no length.
      model_max_length=max_length if isinstance(max_length, int) and max_length < 1 << 40 else None,
    )

  @classmethod
  def from_tokenizer(
    cls,
    tokenizer,
    *,
    path: str | os.PathLike = "",
    chat_template: str | None = None,
    special_tokens: dict[str, str] | None = None,
    bos_id: int | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    unk_id: int | None = None,
    add_bos_default: bool | None = None,
    model_max_length: int | None = None,
  ) -> "HFTokenizer":
    """An in-memory `tokenizers.Tokenizer` (used as is, not copied) with its chat template and special tokens.

    `special_tokens` ({"bos_token": "<s>", …}) are the chat template's variables; an id left None is looked up
    from them, then among the usual names (`_BOS`, `_EOS`, `_PAD`); the pad id falls back on the EOS id.
    `path` is what `load_tokenizer` rebuilds it from (a run directory records it).
    """
    self = cls.__new__(cls)
    special = dict(special_tokens or {})
    self._setup(
      tokenizer,
      path=os.fspath(path),
      chat_template=chat_template,
      special_tokens=special,
      bos_id=bos_id if bos_id is not None else cls._find(tokenizer, special.get("bos_token"), cls._BOS, False),
      eos_id=eos_id if eos_id is not None else cls._find(tokenizer, special.get("eos_token"), cls._EOS, True),
      pad_id=pad_id if pad_id is not None else cls._find(tokenizer, special.get("pad_token"), cls._PAD, False),
      unk_id=unk_id if unk_id is not None else cls._find(tokenizer, special.get("unk_token"), (), False),
      add_bos_default=add_bos_default,
      model_max_length=model_max_length,
    )
    return self

  def _setup(
    self,
    tok,
    *,
    path,
    chat_template,
    special_tokens,
    bos_id,
    eos_id,
    pad_id,
    unk_id,
    add_bos_default,
    model_max_length,
    missing_template=None,
  ) -> None:
    self._tok = tok
    if missing_template:
      self._missing_template = missing_template
    self.path = path
    self.chat_template = chat_template
    self.special_tokens = special_tokens
    self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
    self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
    self.pad_id = eos_id if pad_id is None else pad_id
    self.add_bos_default = add_bos_default
    self.model_max_length = model_max_length

  @staticmethod
  def _find(tok, token, candidates, required):
    for t in ([token] if token else []) + list(candidates):
      i = tok.token_to_id(t)
      if i is not None:
        return i
    if required:
      raise ValueError(
        f"no special token among {[token] if token else list(candidates)} in this tokenizer; pass it explicitly"
      )
    return None

  @property
  def backend(self):
    """The underlying `tokenizers.Tokenizer`."""
    return self._tok

  def id_to_token(self, i: int) -> str | None:
    return self._tok.id_to_token(int(i))

  def encode(self, text: str | Sequence[str], *, add_bos: bool = False, add_eos: bool = False):
    single = isinstance(text, str)
    encodings = self._tok.encode_batch([text] if single else list(text), add_special_tokens=False)
    out = []
    for e in encodings:
      ids = list(e.ids)
      if add_bos and self.bos_id is not None:
        ids = [self.bos_id] + ids
      if add_eos:
        ids = ids + [self.eos_id]
      out.append(ids)
    return out[0] if single else out

  def decode(self, ids, *, stop_at_eos: bool = True) -> str:
    return self._tok.decode(self._strip(ids, stop_at_eos), skip_special_tokens=False)


def save_hf_tokenizer(
  tokenizer: HFTokenizer,
  directory: str | os.PathLike,
  *,
  add_bos: bool | None = None,
  model_max_length: int | None = None,
) -> list[str]:
  """Writes a HF tokenizer directory (tokenizer.json, tokenizer_config.json, special_tokens_map.json) that both
  `load_tokenizer(directory)` and transformers' `AutoTokenizer.from_pretrained(directory)` load into the same
  tokenizer as `tokenizer` (same ids, same chat rendering); returns the names written. This is how the tokenizer
  of a GGUF (which has no tokenizer.json) leaves as a HF one.

  Args:
    tokenizer: the tokenizer (from a GGUF, a directory or `HFTokenizer.from_tokenizer`).
    directory: created if missing; a chat_template.jinja / chat_template.json already there is removed (it would
      win over tokenizer_config.json's template).
    add_bos: whether transformers' encoding starts with BOS (tokenizer_config.json's `add_bos_token`, and the
      tokenizer.json's post-processor); None = `tokenizer.add_bos_default`, else whether it has a BOS (the policy
      loader's rule).
    model_max_length: tokenizer_config.json's `model_max_length`; None = `tokenizer.model_max_length`, else
      unbounded (2**30, as `models.hf.tokenizer_files` writes).
  """
  import tokenizers  # pylint: disable=g-import-not-at-top  (hf extra, imported on use)
  from tokenizers import processors  # pylint: disable=g-import-not-at-top

  if add_bos is None:
    add_bos = tokenizer.add_bos_default if tokenizer.add_bos_default is not None else tokenizer.bos_id is not None
  add_bos = bool(add_bos and tokenizer.bos_id is not None)
  tok = tokenizers.Tokenizer.from_str(tokenizer.backend.to_str())  # a copy: the post-processor is the file's own
  if add_bos:
    bos = tokenizer.id_to_token(tokenizer.bos_id)
    tok.post_processor = processors.TemplateProcessing(
      single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, tokenizer.bos_id)]
    )
  else:
    tok.post_processor = None
  special = {
    name: tokenizer.id_to_token(i)
    for name, i in (
      ("bos_token", tokenizer.bos_id),
      ("eos_token", tokenizer.eos_id),
      ("unk_token", tokenizer.unk_id),
      ("pad_token", tokenizer.pad_id),
    )
    if i is not None
  }
  # Other named special tokens (sep, cls, mask) the template may use, as the source had them.
  special.update({k: v for k, v in tokenizer.special_tokens.items() if k not in special})
  config: dict = {
    # The generic fast tokenizer: it runs tokenizer.json as written (as `models.hf.tokenizer_files` writes it).
    "tokenizer_class": "PreTrainedTokenizerFast",
    **special,
    "add_bos_token": add_bos,
    "add_eos_token": False,
    "clean_up_tokenization_spaces": False,  # the text is byte-exact
    "model_max_length": model_max_length or tokenizer.model_max_length or 1 << 30,
  }
  if tokenizer.chat_template:
    config["chat_template"] = tokenizer.chat_template
  directory = pathlib.Path(directory).expanduser()
  directory.mkdir(parents=True, exist_ok=True)
  for stale in (chat_template.TEMPLATE_FILE, "chat_template.json"):
    (directory / stale).unlink(missing_ok=True)
  files = {
    "tokenizer.json": tok.to_str(pretty=True),
    "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2),
    "special_tokens_map.json": json.dumps(special, ensure_ascii=False, indent=2),
  }
  for name, text in files.items():
    fileio.atomic_write(directory / name, text)
  return list(files)


def load_tokenizer(path: str | os.PathLike) -> SentencePieceTokenizer | HFTokenizer:
  """A `.model` file → SentencePiece; a `tokenizer.json` (or a directory with one) → HF; a directory
  with only `tokenizer.model` → SentencePiece; a `.gguf` file → HF, built from its metadata (its `path` is the
  .gguf, so `load_tokenizer(tokenizer.path)` rebuilds it).

  Raises:
    gguf_file.GGUFError: a GGUF whose tokenizer cannot be built (e.g. an unsupported `tokenizer.ggml.model`).
  """
  path = pathlib.Path(path)
  if gguf_file.is_gguf(path):
    return HFTokenizer(path)
  if path.is_dir():
    if (path / "tokenizer.json").exists():
      return HFTokenizer(path)
    if (path / "tokenizer.model").exists():
      return SentencePieceTokenizer.load(path / "tokenizer.model")
    raise FileNotFoundError(f"{path} has neither tokenizer.json nor tokenizer.model")
  if path.suffix == ".json":
    return HFTokenizer(path)
  return SentencePieceTokenizer.load(path)
