"""Tokenizers: SentencePiece (train from any iterable of strings, load, save) and, optionally, a HF
`tokenizer.json` through the `tokenizers` library (imported lazily: it is in the `hf` extra).

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

PAD_ID, EOS_ID, BOS_ID, UNK_ID = 0, 1, 2, 3


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

  def apply_chat_template(
    self, messages: Sequence[dict], *, add_generation_prompt: bool = True, **template_kwargs
  ) -> str:
    """`messages` ([{"role": "system" | "user" | "assistant", "content": …}, …]) rendered by the checkpoint's
    own chat template as transformers renders it (`arena_jax.chat_template`); `template_kwargs` reach the
    template (e.g. `enable_thinking=False` for Qwen3). Tokenize the result without adding a BOS: the
    template writes its own."""
    if not self.chat_template:
      raise chat_template.ChatTemplateError(
        f"the tokenizer {self.path or type(self).__name__} has no chat template (neither "
        f"{chat_template.TEMPLATE_FILE} nor a chat_template entry in tokenizer_config.json); use "
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
  """A HF fast tokenizer (`tokenizer.json`) through the `tokenizers` library (lazy import)."""

  _BOS = ("<s>", "<|begin_of_text|>", "<bos>", "[BOS]")
  _EOS = ("</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<eos>", "[EOS]")
  _PAD = ("<pad>", "<|finetune_right_pad_id|>", "[PAD]", "<|endoftext|>")

  def __init__(
    self,
    path: str | os.PathLike,
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    pad_token: str | None = None,
  ):
    """`path`: a tokenizer.json, or a directory holding one (and maybe tokenizer_config.json, whose
    bos/eos/pad tokens are used unless given here)."""
    import tokenizers  # pylint: disable=g-import-not-at-top  (hf extra, imported on use)

    path = pathlib.Path(path)
    directory = path if path.is_dir() else path.parent
    file = path / "tokenizer.json" if path.is_dir() else path
    self._tok = tokenizers.Tokenizer.from_file(str(file))
    self.path = str(file)  # where it came from (a run records it for its evaluator)
    special = {}
    config_file = directory / "tokenizer_config.json"
    if config_file.exists():
      special = chat_template.special_tokens(json.loads(config_file.read_text()))
    self.chat_template = chat_template.load_chat_template(directory)
    self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
    self.bos_id = self._find(bos_token or special.get("bos_token"), self._BOS, required=False)
    self.eos_id = self._find(eos_token or special.get("eos_token"), self._EOS, required=True)
    pad = self._find(pad_token or special.get("pad_token"), self._PAD, required=False)
    self.pad_id = self.eos_id if pad is None else pad
    # The template's special-token variables are the config's own, as transformers passes them.
    self.special_tokens = special

  def _find(self, token, candidates, required):
    for t in ([token] if token else []) + list(candidates):
      i = self._tok.token_to_id(t)
      if i is not None:
        return i
    if required:
      raise ValueError(
        f"no special token among {[token] if token else list(candidates)} in this tokenizer; pass it explicitly"
      )
    return None

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


def load_tokenizer(path: str | os.PathLike) -> SentencePieceTokenizer | HFTokenizer:
  """A `.model` file → SentencePiece; a `tokenizer.json` (or a directory with one) → HF; a directory
  with only `tokenizer.model` → SentencePiece."""
  path = pathlib.Path(path)
  if path.is_dir():
    if (path / "tokenizer.json").exists():
      return HFTokenizer(path)
    if (path / "tokenizer.model").exists():
      return SentencePieceTokenizer.load(path / "tokenizer.model")
    raise FileNotFoundError(f"{path} has neither tokenizer.json nor tokenizer.model")
  if path.suffix == ".json":
    return HFTokenizer(path)
  return SentencePieceTokenizer.load(path)
