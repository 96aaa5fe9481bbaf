"""The KV-cache sampler: layout, stop tokens, behaviour log-probs, greedy exactness, groups, recompiles."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arena_jax import models, sampling

CONFIG = models.ModelConfig(
  vocab_size=61, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)
STOP = (1, 2)


@pytest.fixture(scope="module")
def model():
  return models.init_model(CONFIG, seed=0)


@pytest.fixture(scope="module")
def prompts():
  rng = np.random.default_rng(1)
  return [list(rng.integers(3, 61, n)) for n in (5, 11, 1, 20)]  # buckets 16 and 32 both occur below


@nnx.jit
def _forward(model, tokens):
  return model(tokens)


def _teacher_forced_greedy(model, prompt, steps, width=32):
  """Greedy continuation by repeated full forward passes (no cache). Causal attention lets one
  fixed-width buffer serve every step: the zeros after position len − 1 cannot affect it."""
  seq = list(prompt)
  for _ in range(steps):
    buffer = np.zeros((1, width), np.int32)
    buffer[0, : len(seq)] = seq
    seq.append(int(jnp.argmax(_forward(model, jnp.asarray(buffer))[0, len(seq) - 1])))
  return seq[len(prompt) :]


def test_output_layout_and_stop_tokens(model, prompts):
  g, n = 3, 12
  sampler = sampling.Sampler(
    config=CONFIG, max_new_tokens=n, num_samples=g, stop_tokens=STOP, method=sampling.RandomSampling(temperature=1.5)
  )
  out = sampler(model, prompts, jax.random.key(0))
  rows = len(prompts) * g
  assert out.tokens.shape == out.logprobs.shape == (rows, n)
  assert out.lengths.shape == out.truncated.shape == out.completion_step.shape == out.is_greedy.shape == (rows,)
  assert out.prompt_tokens.shape == (len(prompts), 32) and out.prompt_lengths.tolist() == [5, 11, 1, 20]
  assert out.grouped(out.tokens).shape == (len(prompts), g, n)
  tokens, logprobs, lengths = map(np.asarray, (out.tokens, out.logprobs, out.lengths))
  assert 0 < (~np.asarray(out.truncated)).sum() < rows  # some rows stop, some hit the budget (seeded)
  for r in range(rows):
    stops = [t for t in range(n) if tokens[r, t] in STOP]
    if out.truncated[r]:
      assert not stops and lengths[r] == n
    else:
      assert stops[0] == lengths[r] - 1  # the stop token is the last one kept
    assert out.completion_step[r] == lengths[r] - 1
    assert np.all(tokens[r, lengths[r] :] == 0) and np.all(logprobs[r, lengths[r] :] == 0)
    assert np.all(logprobs[r, : lengths[r]] < 0)
  np.testing.assert_array_equal(out.completion_mask(), np.arange(n)[None] < lengths[:, None])
  assert not np.asarray(out.is_greedy).any()


def test_behaviour_logprobs_equal_teacher_forced_logprobs(model, prompts):
  """π_old recorded by the sampler == `token_logprobs` at the sampler's temperature (SPEC §2)."""
  g = 2
  method = sampling.RandomSampling(temperature=0.8, top_k=20)
  sampler = sampling.Sampler(config=CONFIG, max_new_tokens=10, num_samples=g, stop_tokens=STOP, method=method)
  out = sampler(model, prompts, jax.random.key(1))
  recomputed = models.token_logprobs(
    model,
    jnp.repeat(out.prompt_tokens, g, axis=0),
    jnp.repeat(out.prompt_lengths, g, axis=0),
    out.tokens,
    out.completion_mask(),
    temperature=sampler.logprob_temperature,
  )
  np.testing.assert_allclose(out.logprobs, recomputed, atol=2e-5)


def test_greedy_equals_teacher_forced_argmax_whatever_the_padding(model, prompts):
  sampler = sampling.Sampler(config=CONFIG, max_new_tokens=8, method=sampling.Greedy())
  out = sampler(model, prompts, jax.random.key(2))
  for i, prompt in enumerate(prompts):
    assert np.asarray(out.tokens[i]).tolist() == _teacher_forced_greedy(model, prompt, 8)
  # Alone in a smaller bucket, a prompt gets the same continuation.
  alone = sampler(model, prompts[:1], jax.random.key(3))
  np.testing.assert_array_equal(alone.tokens[0], out.tokens[0])


def test_greedy_with_a_sliding_window_prompt_longer_than_the_window():
  config = CONFIG.replace(sliding_window=4)
  model = models.init_model(config, seed=4)
  prompt = list(np.random.default_rng(5).integers(3, 61, 9))
  # Two samples share the prompt's cache; chunks of 8 put the window across a chunk boundary.
  out = sampling.Sampler(config=config, max_new_tokens=12, num_samples=2, cache_chunk=8, method=sampling.Greedy())(
    model, [prompt], jax.random.key(0)
  )
  expected = _teacher_forced_greedy(model, prompt, 12)
  assert np.asarray(out.tokens).tolist() == [expected, expected]


@pytest.mark.slow  # a chunked cache's programs
def test_cache_chunking_does_not_change_the_samples(model, prompts):
  kw = dict(
    config=CONFIG, max_new_tokens=20, num_samples=2, stop_tokens=STOP, method=sampling.RandomSampling(temperature=1.0)
  )
  chunked = sampling.Sampler(**kw, cache_chunk=8)(model, prompts, jax.random.key(10))  # 3 chunks
  whole = sampling.Sampler(**kw, cache_chunk=24)(model, prompts, jax.random.key(10))  # 1 chunk
  np.testing.assert_array_equal(chunked.tokens, whole.tokens)
  np.testing.assert_allclose(chunked.logprobs, whole.logprobs, atol=1e-5)


def test_greedy_first_member_is_the_greedy_anchor(model, prompts):
  kw = dict(config=CONFIG, max_new_tokens=8, num_samples=4, stop_tokens=STOP)
  anchored = sampling.Sampler(**kw, method=sampling.RandomSampling(temperature=2.0), greedy_first=True)
  out = anchored(model, prompts, jax.random.key(4))
  greedy = sampling.Sampler(**{**kw, "num_samples": 1}, method=sampling.Greedy())(model, prompts, jax.random.key(5))
  np.testing.assert_array_equal(out.grouped(out.tokens)[:, 0], greedy.tokens)
  np.testing.assert_array_equal(out.is_greedy, np.tile([True, False, False, False], len(prompts)))
  # Its behaviour log-probs are those of greedy decoding (log 1 = 0), the sampled members' those of the
  # policy at the group's temperature, as the loss scores them.
  assert anchored.logprob_temperature == 2.0
  lp, mask = out.grouped(np.asarray(out.logprobs)), np.arange(8) < out.grouped(np.asarray(out.lengths))[..., None]
  np.testing.assert_array_equal(lp[:, 0], 0.0)
  assert np.all(lp[:, 1:][mask[:, 1:]] < 0)
  plain = sampling.Sampler(**kw, method=sampling.RandomSampling(temperature=2.0))(model, prompts, jax.random.key(4))
  same = out.grouped(np.asarray(out.tokens))[:, 1:] == plain.grouped(np.asarray(plain.tokens))[:, 1:]
  np.testing.assert_allclose(lp[:, 1:][same], plain.grouped(np.asarray(plain.logprobs))[:, 1:][same], atol=1e-5)
  # The other members sample: not all equal to the anchor.
  assert not np.all(out.grouped(out.tokens)[:, 1:] == out.grouped(out.tokens)[:, :1])


def test_keys_and_groups(model, prompts):
  sampler = sampling.Sampler(
    config=CONFIG, max_new_tokens=6, num_samples=5, method=sampling.RandomSampling(temperature=1.0)
  )
  a = sampler(model, prompts, jax.random.key(6))
  b = sampler(model, prompts, jax.random.key(6))
  c = sampler(model, prompts, jax.random.key(7))
  np.testing.assert_array_equal(a.tokens, b.tokens)
  assert not np.array_equal(a.tokens, c.tokens)
  # The samples of a group differ from one another (one shared prefill, independent draws).
  grouped = np.asarray(a.grouped(a.tokens))
  assert all(len({tuple(row) for row in group}) > 1 for group in grouped)


def test_first_token_distribution_is_the_policy(model):
  """Empirical frequencies of the first sampled token match softmax(logits / T)."""
  prompt = [5, 9, 13]
  g, temperature = 4000, 1.3
  out = sampling.Sampler(
    config=CONFIG, max_new_tokens=1, num_samples=g, method=sampling.RandomSampling(temperature=temperature)
  )(model, [prompt], jax.random.key(8))
  probs = np.asarray(jax.nn.softmax(model(jnp.asarray([prompt]))[0, -1] / temperature))
  freq = np.bincount(np.asarray(out.tokens[:, 0]), minlength=CONFIG.vocab_size) / g
  assert np.abs(freq - probs).max() < 4 * np.sqrt(probs.max() / g)
  np.testing.assert_allclose(out.logprobs[:, 0], np.log(probs[np.asarray(out.tokens[:, 0])]), atol=1e-5)


def test_new_params_do_not_recompile(model, prompts):
  sampler = sampling.Sampler(config=CONFIG, max_new_tokens=5, num_samples=2, stop_tokens=STOP)
  other = jax.tree.map(lambda x: x * 1.01, nnx.to_pure_dict(nnx.state(model)))
  first = sampler(model, prompts, jax.random.key(9))
  second = sampler(other, prompts, jax.random.key(9))
  third = sampler(nnx.state(model), prompts[:2], jax.random.key(9))  # same bucket, fewer prompts
  assert sampler._prefill_fn._cache_size() == 2 and sampler._decode_fn._cache_size() == 2  # pylint: disable=protected-access
  assert not np.array_equal(first.logprobs, second.logprobs)
  np.testing.assert_array_equal(third.tokens, first.tokens[:4])  # rows depend on key and row index only


def test_invalid_calls():
  with pytest.raises(ValueError, match="at least one token"):
    sampling.Sampler(config=CONFIG, max_new_tokens=2).pad_prompts([[1, 2], []])
  with pytest.raises(ValueError, match="max_new_tokens"):
    sampling.Sampler(config=CONFIG, max_new_tokens=0)
  tokens, lengths = sampling.Sampler(config=CONFIG, max_new_tokens=2, pad_id=0).pad_prompts(
    (np.asarray([[4, 5, 6], [7, 0, 0]]), np.asarray([3, 1]))
  )
  assert tokens.shape == (2, 16) and lengths.tolist() == [3, 1] and tokens[1, :2].tolist() == [7, 0]


def _stream(sampler, model, prompts, key, every=0):
  chunks = list(sampler.stream(model, prompts, key, every=every))
  return chunks, chunks[-1].output


def test_streaming_gives_the_plain_output_and_each_row_once_when_it_finishes(model, prompts):
  g, n = 3, 40
  sampler = sampling.Sampler(
    config=CONFIG,
    max_new_tokens=n,
    num_samples=g,
    stop_tokens=STOP,
    cache_chunk=16,
    method=sampling.RandomSampling(temperature=1.5),
  )
  plain = sampler(model, prompts, jax.random.key(3))
  chunks, out = _stream(sampler, model, prompts, jax.random.key(3), every=5)
  for name in ("tokens", "logprobs", "lengths", "truncated", "completion_step", "prompt_tokens"):
    np.testing.assert_array_equal(np.asarray(getattr(out, name)), np.asarray(getattr(plain, name)), err_msg=name)
  rows = np.concatenate([c.rows for c in chunks])
  assert sorted(rows.tolist()) == list(range(len(prompts) * g))  # every row once
  assert len(chunks) > 2 and [c.index for c in chunks] == list(range(len(chunks)))
  step = np.asarray(plain.completion_step)
  last_step = -1
  for c in chunks:
    np.testing.assert_array_equal(c.tokens, np.asarray(plain.tokens)[c.rows])
    np.testing.assert_array_equal(c.logprobs, np.asarray(plain.logprobs)[c.rows])
    np.testing.assert_array_equal(c.lengths, np.asarray(plain.lengths)[c.rows])
    np.testing.assert_array_equal(c.truncated, np.asarray(plain.truncated)[c.rows])
    # arrival order: by completion step, and no row arrives before an earlier-finished one
    assert np.all(np.diff(step[c.rows]) >= 0) and (len(c.rows) == 0 or step[c.rows][0] >= last_step)
    last_step = step[c.rows][-1] if len(c.rows) else last_step
    assert (c.output is None) == (c is not chunks[-1])
  assert chunks[0].rows.size and chunks[0].rows.size < len(rows)  # rows arrive before decoding ends (seeded)


# Stop steps spread over the whole budget (rows of one group finish at very different times).
FORCED = (0, 39, 3, 17, 25, 1, 39, 8, 30, 2, 12, 39, 5, 21, 34, 9)


@pytest.mark.slow  # compaction's programs
def test_compaction_gives_the_same_rows_as_one_batch(model, prompts):
  """Gathering the live rows into smaller batches between decode segments changes no row: tokens, log-probs,
  lengths (greedy anchors included), in one call or streamed."""
  kw = dict(
    config=CONFIG,
    max_new_tokens=40,
    num_samples=4,
    stop_tokens=STOP[:1],
    greedy_first=True,
    cache_chunk=16,
    method=sampling.RandomSampling(temperature=1.0),
    logits_processor=sampling.ForcedStops(FORCED, STOP[0]),
  )
  plain = sampling.Sampler(**kw)(model, prompts, jax.random.key(4))
  np.testing.assert_array_equal(plain.lengths, np.asarray(FORCED) + 1)  # the processor fixed every length
  compacting = sampling.Sampler(**kw, compact_every=4)
  compact = compacting(model, prompts, jax.random.key(4))
  assert compacting._compact_fn._cache_size() >= 2  # pylint: disable=protected-access  (16 → 12 → 8 → … rows)
  for name in ("tokens", "lengths", "truncated", "completion_step", "is_greedy", "prompt_tokens", "prompt_lengths"):
    np.testing.assert_array_equal(np.asarray(getattr(compact, name)), np.asarray(getattr(plain, name)), err_msg=name)
  np.testing.assert_allclose(compact.logprobs, plain.logprobs, atol=1e-5)
  chunks, out = _stream(compacting, model, prompts, jax.random.key(4), every=5)
  for name in ("tokens", "logprobs", "lengths"):  # streaming compacts at the same steps: the call's output to the bit
    np.testing.assert_array_equal(np.asarray(getattr(out, name)), np.asarray(getattr(compact, name)), err_msg=name)
  assert sorted(np.concatenate([c.rows for c in chunks]).tolist()) == list(range(16))  # every row once
  for c in chunks:
    np.testing.assert_array_equal(c.tokens, np.asarray(plain.tokens)[c.rows])
    np.testing.assert_array_equal(c.lengths, np.asarray(FORCED)[c.rows] + 1)


def test_row_buckets_and_invalid_compaction():
  sampler = sampling.Sampler(config=CONFIG, max_new_tokens=8, compact_every=2)
  buckets = [sampler._row_bucket(n) for n in (1, 2, 3, 5, 7, 9, 13, 100)]  # pylint: disable=protected-access
  assert buckets == [1, 2, 3, 6, 8, 12, 16, 128]
  with pytest.raises(ValueError, match="compact_every"):
    sampling.Sampler(config=CONFIG, max_new_tokens=8, compact_every=-1)


def test_equal_samplers_share_their_programs_and_a_different_one_does_not(model, prompts):
  """Every field of a Sampler is static, so an equal sampler built later (the next train() in a notebook)
  reuses the programs already traced and compiled; a sampler that differs in any field gets its own."""
  make = lambda **kw: sampling.Sampler(config=CONFIG, max_new_tokens=6, num_samples=2, stop_tokens=STOP, **kw)
  a, b = make(), make()
  first = a(model, prompts, jax.random.key(0))
  assert b._prefill_fn is a._prefill_fn and b._decode_fn is a._decode_fn and b._segment_fns is a._segment_fns
  second = b(model, prompts, jax.random.key(0))
  np.testing.assert_array_equal(np.asarray(first.tokens), np.asarray(second.tokens))
  for other in (make(pad_id=3), make(method=sampling.Greedy()), make(greedy_first=True)):
    assert other._decode_fn is not a._decode_fn and other._prefill_fn is not a._prefill_fn
