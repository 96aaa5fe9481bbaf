"""A step's rollout in several sampler calls (`rollout.sample_batch`) and in the growing decode cache
(`rollout.decode_cache`): the samples of one call, plain or streamed to the judge; bad values named."""

import types

import jax
import numpy as np
import pytest

from arena_jax import models, sampling
from arena_jax.train import async_loop
from arena_jax.train import config as train_config
from arena_jax.train.batch import Generation
from arena_jax.train.rollout import Generator

CONFIG = models.ModelConfig(
  vocab_size=64, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)
G, N, STOP = 4, 24, 1
# 5 prompts (the last call of 2 holds one), rows stopping all over the budget.
FORCED = tuple(int(t) for t in np.random.default_rng(3).integers(0, N, 5 * G))


class _Task:
  """Examples are token lists already; every completion scores 0 (no group is diverse)."""

  chat = False

  def prompt_texts(self, examples, tokenizer):
    return examples

  def verify_batch(self, examples, texts):
    return [0.0] * len(texts)

  def judge_question(self, example):
    return "q"

  def reference_answer(self, example):
    return "a"


class _Tokenizer:
  pad_id = 0

  def encode_batch(self, texts, add_bos):
    return texts

  def decode_batch(self, tokens, lengths):
    return [" ".join(map(str, t[:n])) for t, n in zip(tokens, lengths)]


class _ThinkingTokenizer(_Tokenizer):
  """Every completion opens a thinking block (`tasks.thinking`) and closes it only when its length is even: the
  odd-length ones end inside their thinking, as a completion cut at the token budget while thinking does."""

  def decode_batch(self, tokens, lengths):
    texts = super().decode_batch(tokens, lengths)
    return [f"<think>{t}" + ("</think> 7" if n % 2 == 0 else "") for t, n in zip(texts, lengths)]


class _Mode:
  def select(self, diverse):  # every finished group goes to the judge
    return np.ones(len(diverse), bool)

  def keep(self, diverse):  # the asynchronous loop keeps every group
    return np.ones(len(diverse), bool)


class _Judgment:
  def __init__(self):
    self.jobs = []

  def add(self, job):
    self.jobs.append(job)

  def arrive(self, index, member, trace, problem, reference):  # speculative
    pass

  def abandon(self, index):
    pass


@pytest.fixture(scope="module")
def model():
  return models.init_model(CONFIG, seed=0)


@pytest.fixture(scope="module")
def examples():
  rng = np.random.default_rng(1)
  return [list(rng.integers(3, 64, n)) for n in (5, 20, 1, 11, 17)]  # buckets 16 and 32 differ by call


def _generator(sample_batch: int, decode_cache: str, live_start="group_done", tokenizer=None) -> Generator:
  c = train_config.base_config()
  c.rollout.update(dict(prompts_per_step=5, group_size=G, max_new_tokens=N, sample_batch=sample_batch))
  c.lockstep.live_start = live_start
  sampler = sampling.Sampler(
    config=CONFIG,
    max_new_tokens=N,
    num_samples=G,
    stop_tokens=(STOP,),
    greedy_first=True,
    method=sampling.RandomSampling(temperature=1.0),
    logits_processor=sampling.ForcedStops(FORCED, STOP),
    decode_cache=decode_cache,
  )
  return Generator(c, _Mode(), _Task(), None, slice(0, 5), sampler, tokenizer or _Tokenizer(), add_bos=False)


def _assert_same_batch(got, want):
  for name in ("tokens", "lengths", "truncated", "completion_step", "prompt_tokens", "prompt_lengths"):
    np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)  # other batch shapes: round-off


@pytest.mark.slow  # split rollouts of both caches
@pytest.mark.parametrize("sample_batch, decode_cache", [(2, "dense"), (3, "growing")])
def test_a_split_rollout_samples_what_one_call_does(model, examples, sample_batch, decode_cache):
  rng = jax.random.key(2)
  one = _generator(0, "dense")._sample(model, examples, rng, Generation())
  np.testing.assert_array_equal(one.lengths, np.asarray(FORCED) + 1)
  gen = Generation()
  split = _generator(sample_batch, decode_cache)._sample(model, examples, rng, gen)
  _assert_same_batch(split, one)
  assert gen.batches == 1 and gen.trajectories == 5 * G and gen.tokens == int(one.lengths.sum())


@pytest.mark.slow  # a split rollout's programs
def test_a_split_rollout_streams_every_group_to_the_judge_once(model, examples):
  """Streamed over 3 calls of ≤ 2 prompts: each group is judged once, when its last member arrived, with
  the texts of one call; only the groups of the last call's last chunk arrive after decoding ended."""
  rng = jax.random.key(3)
  want = _generator(0, "dense")._sample(model, examples, rng, Generation())
  gen, judgment = Generation(), _Judgment()
  got = _generator(2, "growing")._sample_streaming(model, examples, rng, gen, judgment)
  _assert_same_batch(got, want)
  assert sorted(job.index for job in judgment.jobs) == list(range(5))
  texts = _Tokenizer().decode_batch(want.tokens, want.lengths)
  assert got.texts == texts and all(
    list(job.traces) == texts[job.index * G : (job.index + 1) * G] for job in judgment.jobs
  )
  assert 0 < gen.judged_early < 5  # the first calls' groups were all judged while later calls decoded


@pytest.mark.parametrize(
  "live_start",
  [
    "step_done",
    pytest.param("group_done", marks=pytest.mark.slow),
    pytest.param("speculative", marks=pytest.mark.slow),
  ],
)  # the streaming paths' programs: `make test-all`
def test_every_sampling_path_counts_the_completions_that_end_inside_their_thinking(model, examples, live_start):
  """`gen/unclosed_thinking` by value on each path of a step's rollout: sampled then verified
  (`_sample` + `verify`, step_done), and verified as the chunks finish while the judge is fed (`_sample_streaming`:
  group_done, speculative)."""
  generator = _generator(2, "dense", live_start, _ThinkingTokenizer())
  rng, gen = jax.random.key(4), Generation()
  if live_start == "step_done":
    part = generator.verify(generator._sample(model, examples, rng, gen), gen)
  else:
    part = generator._sample_streaming(model, examples, rng, gen, _Judgment())
  odd = int((part.lengths % 2).sum())  # those that never closed their thinking (`_ThinkingTokenizer`)
  assert 0 < odd < len(part.lengths) and gen.trajectories == len(part.lengths)
  assert gen.unclosed_thinking == odd


def test_the_asynchronous_loop_counts_the_completions_that_end_inside_their_thinking(model, examples):
  """The asynchronous loop's own sampling path (`async_loop._Batch`: decoded and verified segment by segment,
  groups handed over as they finish) counts them too, by value, in the step's `Generation`."""
  generator = _generator(2, "dense", "step_done", _ThinkingTokenizer())
  c = generator.config
  c.rollout.max_staleness, c.async_loop.push_every = 1, 4
  trainer = types.SimpleNamespace(
    config=c,
    generator=generator,
    sampler=generator.sampler,
    mode=_Mode(),
    task=generator.task,
    policy=types.SimpleNamespace(tokenizer=generator.tokenizer),
    block=generator.block,
    g=G,
    judge_runner=None,
  )
  loop = async_loop.AsyncLoop(trainer, log_step=None, stop=None)
  loop.sampler_params = lambda: model  # the trainer's weights, unchanged: no update runs here
  loop.sampler_version = loop.version
  batch = async_loop._Batch(loop, 0, examples)
  while batch.advance():
    pass
  assert len(loop.ready) == len(examples)
  lengths = np.concatenate([a.part.lengths for a in loop.ready])
  odd = int((lengths % 2).sum())  # those that never closed their thinking (`_ThinkingTokenizer`)
  assert 0 < odd < len(lengths)
  assert loop._generation(loop.ready).unclosed_thinking == odd


def test_bad_rollout_values_name_their_field():
  for name, value, message in (
    ("sample_batch", -1, r"config\.rollout\.sample_batch: must be an integer ≥ 0"),
    ("decode_cache", "paged", r"config\.rollout\.decode_cache: .*'paged'"),
  ):
    c = train_config.base_config()
    c.init.random_model = "tiny"
    c.rollout[name] = value
    with pytest.raises(ValueError, match=message):
      train_config.validate_config(c, check_devices=False)
