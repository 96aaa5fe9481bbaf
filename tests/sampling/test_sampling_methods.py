"""Sampling methods and the sampler's pure mask helpers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import sampling


def test_top_k_keeps_the_k_largest():
  logits = jnp.asarray([[0.1, 3.0, -1.0, 2.0, 0.5], [5.0, 4.0, 3.0, 2.0, 1.0]])
  out = sampling.apply_top_k(logits, 2)
  kept = np.asarray(out > -1e29)
  np.testing.assert_array_equal(kept, [[0, 1, 0, 1, 0], [1, 1, 0, 0, 0]])
  np.testing.assert_array_equal(np.asarray(out)[kept], np.asarray(logits)[kept])
  assert sampling.apply_top_k(logits, 5) is logits


def test_top_p_keeps_the_smallest_nucleus():
  probs = np.asarray([0.5, 0.3, 0.15, 0.05])
  logits = jnp.log(jnp.asarray([probs, probs[::-1]]))
  kept = np.asarray(sampling.apply_top_p(logits, 0.75) > -1e29)
  # 0.5 < 0.75, 0.5 + 0.3 reaches it: the first two tokens.
  np.testing.assert_array_equal(kept, [[1, 1, 0, 0], [0, 0, 1, 1]])
  assert np.asarray(sampling.apply_top_p(logits, 0.1) > -1e29).sum(-1).tolist() == [1, 1]
  assert np.asarray(sampling.apply_top_p(logits, 1.0) > -1e29).all()


def test_sample_categorical_follows_the_distribution():
  probs = np.asarray([0.05, 0.0, 0.45, 0.2, 0.3])
  n = 40_000
  logits = jnp.broadcast_to(jnp.log(jnp.asarray(probs) + 1e-30), (n, 5))
  u = sampling.uniforms(jax.random.key(0), (n,))
  draws = np.asarray(jax.jit(sampling.sample_categorical)(logits, u))
  freq = np.bincount(draws, minlength=5) / n
  assert freq[1] == 0  # a zero-mass token is never drawn
  np.testing.assert_allclose(freq, probs, atol=4 * np.sqrt(0.25 / n))
  # Edges of u: the first and the last token with mass.
  edge = sampling.sample_categorical(logits[:2], jnp.asarray([np.finfo(np.float32).tiny, 1 - 1e-7]))
  assert edge.tolist() == [0, 4]


def test_methods():
  logits = jnp.asarray([[0.0, 2.0, 1.0], [3.0, -1.0, 0.0]])
  u = jnp.asarray([0.999, 0.999])
  assert sampling.Greedy()(logits, u).tolist() == [1, 0]
  assert sampling.RandomSampling(temperature=0.0)(logits, u).tolist() == [1, 0]
  assert sampling.RandomSampling(top_k=1)(logits, u).tolist() == [1, 0]
  assert sampling.RandomSampling(temperature=1.0)(logits, u).tolist() == [2, 2]
  assert sampling.Greedy().logprob_temperature == 1.0
  assert sampling.RandomSampling(temperature=0.7).logprob_temperature == 0.7
  assert sampling.RandomSampling(temperature=0.0).logprob_temperature == 1.0
  with pytest.raises(ValueError):
    sampling.RandomSampling(top_p=0.0)


def test_mask_after_stop_keeps_the_stop_token():
  tokens = jnp.asarray([[5, 1, 7, 1], [5, 6, 7, 8], [2, 9, 9, 9]])
  out = sampling.mask_after_stop(tokens, (1, 2), pad_id=0)
  np.testing.assert_array_equal(out, [[5, 1, 0, 0], [5, 6, 7, 8], [2, 0, 0, 0]])
  assert sampling.mask_after_stop(tokens, (), 0) is tokens


def test_bucket_length():
  assert [sampling.bucket_length(n, (16, 32)) for n in (1, 16, 17, 32, 33)] == [16, 16, 32, 32, 40]


def test_cache_chunking_covers_the_written_slots():
  for n in (1, 2, 12, 17, 33, 64, 1000):
    chunk, chunks = sampling.cache_chunking(n)
    assert chunk % 8 == 0 and 1 <= chunks <= 4 and chunk * chunks >= n - 1 and chunk * (chunks - 1) < max(n - 1, 1)
  assert sampling.cache_chunking(64) == (16, 4)
  assert sampling.cache_chunking(64, chunk=64) == (64, 1)
