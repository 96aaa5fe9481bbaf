r"""The tokenizer of a GGUF file, rebuilt from its metadata with the `tokenizers` library (imported on use: the
`hf` extra); `tokenizer.HFTokenizer("….gguf")` and `tokenizer.load_tokenizer` build theirs here.

A GGUF carries no tokenizer.json: llama.cpp's converter stores the vocabulary, the merges, each token's type and
the special token ids as metadata, and names the pre-tokenizer (`tokenizer.ggml.pre`) that its runtime applies.
`tokenizer_parts` rebuilds the same tokenizer with the `tokenizers` library, as transformers' GGUF loader does
(integrations/gguf/gguf_tokenizer_mapping.py), with one difference on purpose: the pre-tokenizer is llama.cpp's
for the named type. For SmolLM2 ("smollm") that isolates each digit (Unicode numeric character) first, as
SmolLM2's own tokenizer.json and llama.cpp do, where transformers uses the plain GPT-2 split. The two differ only
next to numerals: a run of two or more whitespace characters before a digit ("1.\n\n2.": llama.cpp and SmolLM2's
"ĊĊ", "2"; transformers' "Ċ", "Ċ", "2"), and a space before a non-ASCII numeral (" ²": "Ġ", "Â²" against "ĠÂ", "²").

A module of its own because this is where GGUF tokenizers are extended (a pre-tokenizer llama.cpp names, a
tokenizer model); it imports nothing of `arena_jax.tokenizer`, which imports it.
"""

from __future__ import annotations

import os
import pathlib
from typing import Sequence

from arena_jax import gguf_file
from arena_jax.gguf_file import GGUFError

GGUF_TOKENIZER_MODELS = ("gpt2", "llama")  # byte-level BPE; SentencePiece-style BPE with byte fallback
# llama.cpp's token types (gguf.TokenType).
_CONTROL, _USER_DEFINED = 3, 4

# The split regexes of the pre-tokenizers llama.cpp names, as the models' own tokenizer.json files write them.
_LLAMA3_SPLIT = (
  r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
  r"|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = _LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")
_GPT4O_SPLIT = (
  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
  r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
  r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = (
  r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
  r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
  r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT2, _DIGITS = "gpt2", "digits"  # GPT-2's own split (ByteLevel's regex); the same after isolating each digit
# tokenizer.ggml.pre → (split, ignore_merges, add_bos when the file does not say), per llama.cpp (llama-vocab.cpp):
# ignore_merges takes a pre-token that is itself in the vocabulary whole, as Llama 3's tokenizer.json does.
_GGUF_PRE = {
  **dict.fromkeys(("default", "gpt-2", "phi-2", "mpt", "olmo", "jais"), (_GPT2, False, False)),
  **dict.fromkeys(
    ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"), (_DIGITS, False, False)
  ),
  **dict.fromkeys(
    ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"),
    (_LLAMA3_SPLIT, True, True),
  ),
  **dict.fromkeys(("dbrx", "smaug-bpe"), (_LLAMA3_SPLIT, False, False)),
  **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2"), (_QWEN2_SPLIT, False, False)),
  **dict.fromkeys(("gpt-4o", "llama4", "minimax-m2"), (_GPT4O_SPLIT, False, False)),
  "tekken": (_TEKKEN_SPLIT, True, True),
}
# Architectures whose SentencePiece vocabulary needs its own treatment (transformers rebuilds Gemma's merges from the
# token order and gives Phi-3 a normaliser): not built here rather than built wrong.
_SPM_UNSUPPORTED_ARCHS = ("gemma", "gemma2", "gemma3", "gemma3n", "phi3")


def _byte_chars() -> dict[int, str]:
  """GPT-2's byte → printable character table (the spelling of a byte-level BPE vocabulary): printable Latin-1
  bytes stand for themselves, the others for the characters from U+0100 on, in byte order."""
  table = {b: chr(b) for b in (*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100))}
  for n, b in enumerate(b for b in range(256) if b not in table):
    table[b] = chr(0x100 + n)
  return table


def _gguf_merges(path, merges: Sequence[str]) -> list[tuple[str, str]]:
  out = []
  for i, merge in enumerate(merges):
    cut = merge.find(" ", 1)  # as llama.cpp splits them: a merge's left part is never empty
    if cut < 0:
      raise GGUFError(f"{path}: tokenizer.ggml.merges[{i}] = {merge!r} is not two tokens separated by a space")
    out.append((merge[:cut], merge[cut + 1 :]))
  return out


def _merges_from_scores(tokens: Sequence[str], scores: Sequence[float]) -> list[tuple[str, str]]:
  """The merges a SentencePiece BPE vocabulary implies (a GGUF of one stores none): every split of a token into two
  tokens of the vocabulary, best score first, then shortest left and right parts (transformers'
  `generate_merges`, so that ties fall the same way)."""
  vocab = {t: i for i, t in enumerate(tokens)}
  scored = dict(zip(tokens, scores))
  merges = []
  for token, score in scored.items():
    pairs = [(token[:k], token[k:]) for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
    pairs.sort(key=lambda p: (vocab[p[0]], vocab[p[1]]))
    merges += [(left, right, score) for left, right in pairs]
  merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
  return [(left, right) for left, right, _ in merges]


def tokenizer_parts(path: str | os.PathLike, *, eos_names: Sequence[str]) -> dict:
  """`tokenizer.HFTokenizer`'s parts (its `_setup` arguments: the `tokenizers.Tokenizer`, chat template,
  special tokens and ids, `add_bos_default`, `model_max_length`) for the tokenizer of a GGUF file, as the module
  docstring says; the EOS of a file that names none is the first of `eos_names` in the vocabulary.

  Raises:
    GGUFError: the file's tokenizer cannot be built (an unsupported model or pre-tokenizer, missing metadata).
  """
  import tokenizers  # pylint: disable=g-import-not-at-top  (hf extra, imported on use)
  from tokenizers import decoders, models, pre_tokenizers  # pylint: disable=g-import-not-at-top

  path = pathlib.Path(path).expanduser()
  meta = gguf_file.open_gguf(path).metadata
  model = meta.get("tokenizer.ggml.model")
  if model not in GGUF_TOKENIZER_MODELS:
    found = "no tokenizer.ggml.model" if model is None else f"tokenizer.ggml.model {model!r}"
    raise GGUFError(
      f"{path}: {found}; the supported tokenizer models are {', '.join(map(repr, GGUF_TOKENIZER_MODELS))}"
    )
  tokens = meta.get("tokenizer.ggml.tokens")
  if not tokens:
    raise GGUFError(f"{path}: no tokenizer.ggml.tokens (a GGUF without its vocabulary)")
  types = list(meta.get("tokenizer.ggml.token_type") or [])
  pre = meta.get("tokenizer.ggml.pre") or "default"
  arch = meta.get("general.architecture", "")
  ids = {}
  for name, key in (
    ("bos", "bos_token_id"),
    ("eos", "eos_token_id"),
    ("unk", "unknown_token_id"),
    ("pad", "padding_token_id"),
  ):
    i = meta.get(f"tokenizer.ggml.{key}")
    if i is not None and not 0 <= int(i) < len(tokens):
      raise GGUFError(f"{path}: tokenizer.ggml.{key} = {i} is outside the vocabulary of {len(tokens)} tokens")
    ids[name] = None if i is None else int(i)

  if model == "gpt2":
    if pre not in _GGUF_PRE:
      raise GGUFError(
        f"{path}: tokenizer.ggml.pre {pre!r} is not a pre-tokenizer this loader knows; known are {', '.join(_GGUF_PRE)}"
      )
    if not meta.get("tokenizer.ggml.merges"):
      raise GGUFError(f"{path}: no tokenizer.ggml.merges (a byte-level BPE needs its merges)")
    split, ignore_merges, add_bos = _GGUF_PRE[pre]
    spelling = _byte_chars()
    alphabet = set(spelling.values())
    # A token is stored in the byte alphabet ("Ġthe"); one that is not (an added token kept as its text) is
    # respelled, byte by byte, as transformers does.
    vocab = {
      t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i for i, t in enumerate(tokens)
    }
    tok = tokenizers.Tokenizer(
      models.BPE(
        vocab=vocab,
        merges=_gguf_merges(path, meta["tokenizer.ggml.merges"]),
        dropout=None,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
        ignore_merges=ignore_merges,
      )
    )
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split in (_GPT2, _DIGITS))
    if split == _GPT2:
      tok.pre_tokenizer = byte_level
    elif split == _DIGITS:
      tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
      tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(tokenizers.Regex(split), behavior="isolated"), byte_level]
      )
    tok.decoder = decoders.ByteLevel()
  else:  # "llama": SentencePiece's BPE, as transformers' LlamaTokenizer runs it
    if arch in _SPM_UNSUPPORTED_ARCHS:
      raise GGUFError(
        f"{path}: the SentencePiece tokenizer of a {arch!r} GGUF is not supported (its vocabulary needs "
        f"{arch}-specific handling); supported are byte-level ('gpt2') GGUFs and 'llama' ones of other architectures"
      )
    if meta.get("tokenizer.ggml.merges"):
      merges = _gguf_merges(path, meta["tokenizer.ggml.merges"])
    elif meta.get("tokenizer.ggml.scores"):
      merges = _merges_from_scores(tokens, meta["tokenizer.ggml.scores"])
    else:
      raise GGUFError(f"{path}: neither tokenizer.ggml.merges nor tokenizer.ggml.scores (a BPE needs one)")
    tok = tokenizers.Tokenizer(
      models.BPE(
        vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None
      )
    )
    # SentencePiece's dummy prefix ("▁" before the text), unless the file turns it off.
    prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(
      replacement="▁", prepend_scheme="first" if prefix else "never", split=False
    )
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(steps + ([decoders.Strip(content=" ", left=1, right=0)] if prefix else []))
    add_bos = True  # llama.cpp's default for a SentencePiece vocabulary
    alphabet = None
  # Control tokens (<|im_start|>, <s>) and user-defined ones (<think>) are matched whole in the text, as llama.cpp
  # matches them; the first are special (a decode may skip them), the second not. In a byte-level vocabulary, a
  # control token spelled outside the byte alphabet is a converter's mislabel: skipped, as transformers skips it.
  tok.add_special_tokens(
    [
      tokenizers.AddedToken(t, normalized=False, special=True)
      for t, kind in zip(tokens, types)
      if kind == _CONTROL and (alphabet is None or set(t) <= alphabet)
    ]
  )
  # The named special tokens too (an <unk> of type UNKNOWN), as transformers adds them.
  vocab = tok.get_vocab()
  named = sorted({tokens[i] for i in ids.values() if i is not None and tokens[i] in vocab})
  tok.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True) for t in named])
  tok.add_tokens(
    [
      tokenizers.AddedToken(t, normalized=False, special=False)
      for t, kind in zip(tokens, types)
      if kind == _USER_DEFINED and t in vocab
    ]
  )
  if ids["eos"] is None:  # the first of the usual names the vocabulary has
    ids["eos"] = next((i for i in map(tok.token_to_id, eos_names) if i is not None), None)
    if ids["eos"] is None:
      raise GGUFError(f"{path}: no tokenizer.ggml.eos_token_id, and none of {list(eos_names)} in the vocabulary")
  names = {"bos": "bos_token", "eos": "eos_token", "unk": "unk_token", "pad": "pad_token"}
  flag = meta.get("tokenizer.ggml.add_bos_token")
  length = meta.get(f"{arch}.context_length")
  return dict(
    tok=tok,
    path=str(path),
    chat_template=meta.get("tokenizer.chat_template") or None,
    # The chat template's variables: the special tokens' text, as transformers passes them.
    special_tokens={names[k]: tokens[i] for k, i in ids.items() if i is not None},
    bos_id=ids["bos"],
    eos_id=ids["eos"],
    pad_id=ids["pad"],
    unk_id=ids["unk"],
    add_bos_default=bool(flag) if flag is not None else add_bos,
    model_max_length=int(length) if isinstance(length, int) and length > 0 else None,
    missing_template="no tokenizer.chat_template in its metadata",
  )


__all__ = ["GGUF_TOKENIZER_MODELS", "tokenizer_parts"]
