"""The growing decode cache (`Sampler.decode_cache = "growing"`) and calls split by `row_offset`: the dense
cache's samples (a row's tokens depend on the key and its row index only), in less memory, streamed alike."""

import jax
import numpy as np
import pytest

from arena_jax import models, sampling

CONFIG = models.ModelConfig(
  vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)
STOP = 1
# 4 prompts × G = 4, stop steps spread over the 40-token budget, most rows short (SPEC §1's skewed lengths).
FORCED = (0, 39, 3, 17, 25, 1, 39, 8, 30, 2, 12, 39, 5, 21, 34, 9)
SAME = ("tokens", "lengths", "truncated", "completion_step", "is_greedy", "prompt_tokens", "prompt_lengths")


@pytest.fixture(scope="module")
def model():
  return models.init_model(CONFIG, seed=0)


@pytest.fixture(scope="module")
def prompts():
  rng = np.random.default_rng(1)
  return [list(rng.integers(3, 64, n)) for n in (5, 11, 1, 20)]


def _kw(**kw):
  return dict(
    config=CONFIG,
    max_new_tokens=40,
    num_samples=4,
    stop_tokens=(STOP,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0, top_p=0.95),
    logits_processor=sampling.ForcedStops(FORCED, STOP),
    **kw,
  )


def _assert_same_samples(got, want):
  for name in SAME:
    np.testing.assert_array_equal(np.asarray(getattr(got, name)), np.asarray(getattr(want, name)), err_msg=name)
  # The same decode steps, over batches of other shapes once rows are regrouped: float32 round-off (as for
  # the dense cache's compaction); bit-equal where nothing was regrouped (below).
  np.testing.assert_allclose(np.asarray(got.logprobs), np.asarray(want.logprobs), atol=1e-5)


def _dense_bytes(sampler, prompts):
  """The dense cache's one allocation: every completion chunk for every row, the prompt once per group."""
  c, p = CONFIG, sampler.pad_prompts(prompts)[0].shape[1]
  chunk, num_chunks = sampler._chunking  # pylint: disable=protected-access
  rows = len(prompts) * sampler.num_samples
  per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4  # keys and values, float32
  return per_token * (len(prompts) * p + rows * chunk * num_chunks)


@pytest.mark.slow  # both caches at a longer budget
def test_growing_cache_gives_the_dense_samples_in_less_memory(model, prompts):
  dense_sampler = sampling.Sampler(**_kw())
  dense = dense_sampler(model, prompts, jax.random.key(4))
  np.testing.assert_array_equal(dense.lengths, np.asarray(FORCED) + 1)  # the processor fixed every length
  growing_sampler = sampling.Sampler(**_kw(decode_cache="growing"))
  assert growing_sampler._chunking == (8, 5)  # pylint: disable=protected-access  (~N/16, a multiple of 8)
  growing = growing_sampler(model, prompts, jax.random.key(4))
  _assert_same_samples(growing, dense)
  assert dense.peak_cache_bytes == _dense_bytes(dense_sampler, prompts)
  # It regrouped the live rows (fewer rows, their prompt still shared) and held under half the dense cache.
  assert growing_sampler._regroup_rows_fn._cache_size() >= 2  # pylint: disable=protected-access
  assert growing.peak_cache_bytes < 0.5 * dense.peak_cache_bytes
  # Compacting the dense cache gathers into a second whole cache: it holds more than its one allocation.
  compacted = sampling.Sampler(**_kw(compact_every=8))(model, prompts, jax.random.key(4))
  _assert_same_samples(compacted, dense)
  assert compacted.peak_cache_bytes > dense.peak_cache_bytes


@pytest.mark.slow  # both caches compiled again
def test_without_finished_rows_the_growing_cache_is_the_dense_one(model, prompts):
  """No row stops: nothing is regrouped, and the growing cache ends as the dense cache of its chunking,
  never holding more, with the same bits."""
  kw = dict(_kw(cache_chunk=8), stop_tokens=(), logits_processor=None)
  dense = sampling.Sampler(**kw)(model, prompts, jax.random.key(5))
  growing = sampling.Sampler(**kw, decode_cache="growing")(model, prompts, jax.random.key(5))
  for name in SAME + ("logprobs",):
    np.testing.assert_array_equal(np.asarray(getattr(growing, name)), np.asarray(getattr(dense, name)), err_msg=name)
  assert growing.peak_cache_bytes == dense.peak_cache_bytes


def test_streaming_a_growing_cache_gives_the_dense_chunks(model, prompts):
  """The same chunks (cache chunks of the same size, cut every 5 steps), each finished row once, when it
  finished; the stream's output is the growing call's, to the bit."""
  dense_sampler = sampling.Sampler(**_kw(cache_chunk=8))
  growing_sampler = sampling.Sampler(**_kw(cache_chunk=8, decode_cache="growing"))
  dense = list(dense_sampler.stream(model, prompts, jax.random.key(6), every=5))
  growing = list(growing_sampler.stream(model, prompts, jax.random.key(6), every=5))
  assert [c.index for c in growing] == [c.index for c in dense] and len(growing) > 5
  for g, d in zip(growing, dense):
    for name in ("rows", "tokens", "lengths", "completion_step", "truncated"):
      np.testing.assert_array_equal(getattr(g, name), getattr(d, name), err_msg=f"chunk {g.index} {name}")
    np.testing.assert_allclose(g.logprobs, d.logprobs, atol=1e-5)
    assert (g.output is None) == (g is not growing[-1])
  assert sorted(np.concatenate([c.rows for c in growing]).tolist()) == list(range(16))
  call = growing_sampler(model, prompts, jax.random.key(6))
  for name in SAME + ("logprobs",):
    np.testing.assert_array_equal(np.asarray(getattr(growing[-1].output, name)), np.asarray(getattr(call, name)))
  assert growing[-1].output.peak_cache_bytes == call.peak_cache_bytes < dense[-1].output.peak_cache_bytes


@pytest.mark.slow  # split calls of both caches
@pytest.mark.parametrize("decode_cache", ["dense", "growing"])
def test_calls_split_by_row_offset_give_the_one_calls_samples(model, prompts, decode_cache):
  """Calls of 1, 2 and 1 prompts, each told the index of its first row: row r of a call draws as row
  row_offset + r of the one call (uniforms, greedy anchor, logits-processor row), whatever its batch."""
  sampler = sampling.Sampler(**_kw(decode_cache=decode_cache))
  one = sampler(model, prompts, jax.random.key(7))
  parts = [
    sampler(model, prompts[:1], jax.random.key(7)),
    sampler(model, prompts[1:3], jax.random.key(7), row_offset=4),
    sampler(model, prompts[3:], jax.random.key(7), row_offset=12),
  ]
  split = sampling.concat_outputs(parts, pad_id=sampler.pad_id)
  _assert_same_samples(split, one)  # prompts padded back to the widest call's bucket
  assert split.peak_cache_bytes == max(p.peak_cache_bytes for p in parts) < one.peak_cache_bytes
  # Streamed, a call's rows are its own (0 … its B·G − 1).
  chunks = list(sampler.stream(model, prompts[1:3], jax.random.key(7), row_offset=4))
  assert sorted(np.concatenate([c.rows for c in chunks]).tolist()) == list(range(8))
  np.testing.assert_array_equal(chunks[-1].output.tokens, parts[1].tokens)


def test_invalid_row_offsets_and_caches(model, prompts):
  sampler = sampling.Sampler(**_kw())
  for offset in (-4, 2):
    with pytest.raises(ValueError, match="row_offset must be a multiple ≥ 0 of num_samples = 4"):
      sampler(model, prompts, jax.random.key(0), row_offset=offset)
  with pytest.raises(ValueError, match="decode_cache must be one of"):
    sampling.Sampler(**_kw(decode_cache="paged"))


@pytest.mark.slow  # both caches on a mesh
@pytest.mark.mesh
def test_growing_cache_on_a_mesh_gives_the_one_device_samples(model, prompts):
  """3 prompts on 4 batch shards (data × fsdp; a filler prompt pads the batch), heads over `tensor`: the
  appended chunks and the regrouped rows stay laid out as the state, the rows are those of one device."""
  single = sampling.Sampler(**_kw())(model, prompts[:3], jax.random.key(8))
  sampler = sampling.Sampler(**_kw(decode_cache="growing"), mesh=models.make_mesh(data=2, fsdp=2, tensor=2))
  params = sampler.shard_params(model)
  got = sampler(params, prompts[:3], jax.random.key(8))
  assert len(got.tokens.sharding.device_set) == 8
  _assert_same_samples(jax.device_get(got), single)
  assert sampler._regroup_rows_fn._cache_size() >= 1  # pylint: disable=protected-access  (it regrouped)
  chunks = list(sampler.stream(params, prompts[:3], jax.random.key(8), every=4))
  np.testing.assert_array_equal(chunks[-1].output.tokens, got.tokens)
  assert sorted(np.concatenate([c.rows for c in chunks]).tolist()) == list(range(12))  # no filler row
  for c in chunks:
    np.testing.assert_array_equal(c.tokens, np.asarray(single.tokens)[c.rows])
