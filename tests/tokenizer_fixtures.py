"""Tokenizers the tests build: a corpus in the built-in tasks' style and a byte-level BPE `tokenizer.json`."""

import json

import pytest


def arithmetic_corpus():
  """A generator (any iterable of strings works), in the built-in tasks' style: steps at blank lines."""
  for a in range(30):
    for b in range(1, 9):
      yield (
        f"Problem: compute {a} + {b} * {a % 7}.\n\nStep 1: {b} * {a % 7} = {b * (a % 7)}.\n\n"
        f"Step 2: {a} + {b * (a % 7)} = {a + b * (a % 7)}.\n\nAnswer: {a + b * (a % 7)}"
      )


def write_bpe_tokenizer(path, *, vocab_size: int, special_tokens, config: dict) -> None:
  """A byte-level BPE trained on `arithmetic_corpus`, saved as `path`/tokenizer.json with `config` as its
  tokenizer_config.json (skips the test without the `tokenizers` package, of the `hf` extra)."""
  tokenizers = pytest.importorskip("tokenizers")
  model = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
  model.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  model.decoder = tokenizers.decoders.ByteLevel()
  trainer = tokenizers.trainers.BpeTrainer(
    vocab_size=vocab_size,
    special_tokens=list(special_tokens),
    initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
  )
  model.train_from_iterator(arithmetic_corpus(), trainer)
  model.save(str(path / "tokenizer.json"))
  (path / "tokenizer_config.json").write_text(json.dumps(config))
