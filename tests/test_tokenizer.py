"""Tokenizers: SentencePiece training from an iterable, round trips, batching, special ids, HF tokenizer.json."""

import numpy as np
import pytest

from arena_jax import models
from arena_jax import tokenizer as tok
from tests.tokenizer_fixtures import arithmetic_corpus, write_bpe_tokenizer


_corpus = arithmetic_corpus


@pytest.fixture(scope="module")
def sp():
  return tok.SentencePieceTokenizer.train(_corpus(), vocab_size=128)


def test_trained_model_has_the_fixed_special_ids(sp):
  assert (
    (sp.pad_id, sp.eos_id, sp.bos_id, sp.unk_id) == (tok.PAD_ID, tok.EOS_ID, tok.BOS_ID, tok.UNK_ID) == (0, 1, 2, 3)
  )
  assert 20 < sp.vocab_size <= 128
  sp.check_vocab(models.tiny_config().vocab_size)
  with pytest.raises(ValueError, match="vocab_size"):
    sp.check_vocab(sp.vocab_size - 1)


@pytest.mark.parametrize(
  "text",
  [
    "Problem: compute 12 + 3 * 4.\n\nStep 1: 3 * 4 = 12.\n\nAnswer: 24",
    "  Step 2:  compute  Problems\n\n\nAnswer: 7 ",  # leading, double, trailing spaces; 3 newlines
    "Answer: 987654321",
  ],
)
def test_round_trip_is_byte_exact(sp, text):
  ids = sp.encode(text)
  assert sp.decode(ids) == text
  assert all(0 <= i < sp.vocab_size for i in ids)


def test_digits_are_single_tokens(sp):
  pieces = [sp.id_to_piece(i) for i in sp.encode("Answer: 1234")]
  assert [p for p in pieces if any(c.isdigit() for c in p)] == ["1", "2", "3", "4"]


def test_batch_encode_decode(sp):
  texts = ["Step 1: 3 * 4 = 12.", "Answer: 5", "Problem: compute 1 + 2 * 3."]
  tokens, lengths = sp.encode_batch(texts, add_bos=True, add_eos=True)
  assert tokens.dtype == np.int32 and tokens.shape == (3, lengths.max())
  for row, n, text in zip(tokens, lengths, texts):
    assert row[0] == sp.bos_id and row[n - 1] == sp.eos_id and np.all(row[n:] == sp.pad_id)
    assert sp.decode(row) == text  # BOS decodes to nothing; decoding stops at EOS
  assert sp.decode_batch(tokens) == texts
  left, left_lengths = sp.encode_batch(texts, max_length=3, truncate="left")
  assert left_lengths.max() == 3 and sp.decode(left[1, :3]) == sp.decode(sp.encode("Answer: 5")[-3:])
  right, _ = sp.encode_batch(texts, max_length=3)
  assert right[1, :3].tolist() == sp.encode("Answer: 5")[:3]
  # decode_batch with explicit lengths (e.g. a sampler's completions), and stop_at_eos off.
  assert sp.decode_batch([[*sp.encode("Answer"), 0, 0]], lengths=[1]) == [sp.decode(sp.encode("Answer")[:1])]
  eos_text = sp.decode([*sp.encode("Ans"), sp.eos_id, *sp.encode("wer")], stop_at_eos=False)
  assert eos_text.startswith("Ans") and eos_text.endswith("wer")


def test_save_load_and_dispatch(sp, tmp_path):
  path = tmp_path / "arith.model"
  sp.save(path)
  for loaded in (tok.SentencePieceTokenizer.load(path), tok.load_tokenizer(path)):
    assert isinstance(loaded, tok.SentencePieceTokenizer)
    assert loaded.encode("Answer: 42") == sp.encode("Answer: 42") and loaded.vocab_size == sp.vocab_size


def test_byte_fallback_round_trips_unseen_characters():
  sp = tok.SentencePieceTokenizer.train(_corpus(), vocab_size=400, byte_fallback=True)
  text = "ünïcödé ✓ 42"
  assert sp.decode(sp.encode(text)) == text


def test_hf_tokenizer_json(tmp_path):
  write_bpe_tokenizer(
    tmp_path,
    vocab_size=300,
    special_tokens=["<pad>", "</s>", "<s>", "<unk>"],
    config={"eos_token": "</s>", "pad_token": {"content": "<pad>"}},
  )
  hf = tok.load_tokenizer(tmp_path)
  assert isinstance(hf, tok.HFTokenizer)
  assert (hf.pad_id, hf.eos_id, hf.bos_id) == (0, 1, 2)
  text = "Problem: compute 3 + 4 * 5.\n\nAnswer: 23"
  ids = hf.encode(text, add_bos=True, add_eos=True)
  assert ids[0] == 2 and ids[-1] == 1 and hf.decode(ids[1:]) == text
  tokens, lengths = hf.encode_batch([text, "Answer: 1"])
  assert hf.decode_batch(tokens, lengths) == [text, "Answer: 1"]


def test_the_corpus_tokenizer_cache_is_shared_across_data_dirs_and_missed_on_another_corpus(tmp_path, monkeypatch):
  """`$ARENA_JAX_TOKENIZER_CACHE`: a process that finds the corpus's model there reads it instead of training
  (the same bytes); another data directory with the same files hits it, a different task config misses it."""
  from arena_jax.tasks import config as tasks_config  # pylint: disable=g-import-not-at-top
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top
  from tests import cache  # pylint: disable=g-import-not-at-top

  assert cache.TOKENIZER_ENV == policy_io.TOKENIZER_CACHE_ENV  # the suite sets the variable the library reads
  monkeypatch.setenv(policy_io.TOKENIZER_CACHE_ENV, str(tmp_path / "cache"))
  monkeypatch.setattr(policy_io, "_CORPUS_TOKENIZERS", {})
  c = tasks_config.demo_config()
  c.arithmetic.num_train, c.countdown.num_train = 64, 8
  c.data_dir = str(tmp_path / "a")
  trained = policy_io._corpus_tokenizer(c, 96)
  (model,) = (tmp_path / "cache").iterdir()
  assert model.read_bytes() == trained

  trains = []
  monkeypatch.setattr(policy_io, "_CORPUS_TOKENIZERS", {})  # a new process
  real_train = policy_io.SentencePieceTokenizer.train
  monkeypatch.setattr(
    policy_io.SentencePieceTokenizer, "train", lambda *a, **k: trains.append(1) or real_train(*a, **k)
  )
  c.data_dir = str(tmp_path / "b")
  assert policy_io._corpus_tokenizer(c, 96) == trained and not trains  # read, not trained
  c.arithmetic.max_ops = c.arithmetic.max_ops + 1  # another corpus
  other = policy_io._corpus_tokenizer(c, 96)
  assert trains == [1] and len(list((tmp_path / "cache").iterdir())) == 2 and isinstance(other, bytes)
