"""The NNX transformer: causality, padding, dtypes, windows, and teacher-forced log-probs (SPEC §2)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from arena_jax import models

CONFIG = models.ModelConfig(
  vocab_size=61, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)


@pytest.fixture(scope="module")
def model():
  return models.init_model(CONFIG, seed=3)


@pytest.fixture(scope="module")
def forward():
  return nnx.jit(lambda m, tokens, positions, valid: m(tokens, positions, valid))


def _tokens(shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).integers(0, CONFIG.vocab_size, shape), jnp.int32)


def test_forward_is_causal(model, forward):
  tokens = _tokens((2, 9))
  logits = forward(model, tokens, None, None)
  assert logits.shape == (2, 9, CONFIG.vocab_size) and logits.dtype == jnp.float32
  changed = forward(model, tokens.at[:, 6].set((tokens[:, 6] + 1) % CONFIG.vocab_size), None, None)
  np.testing.assert_allclose(logits[:, :6], changed[:, :6], atol=1e-6)
  assert not np.allclose(logits[:, 6:], changed[:, 6:])


def test_masked_padding_is_invisible(model, forward):
  """A gap of invalid tokens (the sampler's right-padded prompt) changes nothing after it."""
  tokens = _tokens((1, 8), seed=1)
  plain = forward(model, tokens, None, None)
  gapped = jnp.concatenate([tokens[:, :5], jnp.full((1, 3), 7, jnp.int32), tokens[:, 5:]], axis=1)
  positions = jnp.asarray([[0, 1, 2, 3, 4, 0, 0, 0, 5, 6, 7]], jnp.int32)
  valid = positions.at[0, 5:8].set(-1) >= 0
  out = forward(model, gapped, positions, valid)
  np.testing.assert_allclose(out[:, :5], plain[:, :5], atol=1e-5)
  np.testing.assert_allclose(out[:, 8:], plain[:, 5:], atol=1e-5)


def test_bfloat16_params_and_compute_track_float32(model):
  config = CONFIG.replace(param_dtype="bfloat16", dtype="bfloat16")
  low = nnx.merge(
    nnx.graphdef(models.abstract_model(config)),
    jax.tree.map(lambda x: x.astype(jnp.bfloat16), nnx.to_pure_dict(nnx.state(model))),
  )
  tokens = _tokens((2, 6), seed=2)
  ref = model(tokens)
  out = low(tokens)
  assert out.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out)))
  assert float(jnp.max(jnp.abs(out - ref))) < 0.1 * float(jnp.max(jnp.abs(ref)))


def test_sliding_window_limits_attention():
  windowed = models.init_model(CONFIG.replace(sliding_window=3), seed=3)
  full = models.init_model(CONFIG, seed=3)
  tokens = _tokens((1, 8), seed=4)
  a, b = windowed(tokens), full(tokens)
  np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)  # within the window: identical
  assert not np.allclose(a[:, 3:], b[:, 3:])
  # Position p sees p-2..p: changing token 0 leaves positions ≥ 3 of the first layer untouched, and
  # with 2 layers the influence reaches at most position 4.
  c = windowed(tokens.at[0, 0].set((tokens[0, 0] + 1) % CONFIG.vocab_size))
  np.testing.assert_allclose(a[:, 5:], c[:, 5:], atol=1e-6)


def _reference_logprobs(model, prompt, completion, temperature):
  """log softmax of the unpadded forward pass, one row at a time."""
  seq = jnp.asarray([list(prompt) + list(completion)], jnp.int32)
  logits = model(seq)[0] / temperature
  logp = jax.nn.log_softmax(logits, axis=-1)
  rows = jnp.arange(len(prompt) - 1, len(prompt) + len(completion) - 1)
  return logp[rows, jnp.asarray(completion)], logp[rows]


def test_token_logprobs_match_the_unpadded_forward(model):
  rng = np.random.default_rng(5)
  prompts = [rng.integers(0, 61, n) for n in (3, 6)]
  completions = [rng.integers(0, 61, n) for n in (5, 2)]
  p, n = 8, 5
  prompt_tokens = np.zeros((2, p), np.int32)
  completion_tokens = np.zeros((2, n), np.int32)
  mask = np.zeros((2, n), bool)
  for i, (pr, co) in enumerate(zip(prompts, completions)):
    prompt_tokens[i, : len(pr)] = pr
    completion_tokens[i, : len(co)] = co
    mask[i, : len(co)] = True
  lengths = jnp.asarray([len(x) for x in prompts])
  lp, ent = models.token_logprobs(
    model,
    jnp.asarray(prompt_tokens),
    lengths,
    jnp.asarray(completion_tokens),
    jnp.asarray(mask),
    temperature=0.7,
    return_entropy=True,
  )
  chunked = models.token_logprobs(
    model,
    jnp.asarray(prompt_tokens),
    lengths,
    jnp.asarray(completion_tokens),
    jnp.asarray(mask),
    temperature=0.7,
    chunk_size=2,
  )
  np.testing.assert_allclose(chunked, lp, atol=1e-6)
  for i, (pr, co) in enumerate(zip(prompts, completions)):
    ref, ref_logp = _reference_logprobs(model, pr, co, 0.7)
    np.testing.assert_allclose(lp[i, : len(co)], ref, atol=1e-5)
    ref_entropy = -jnp.sum(jnp.exp(ref_logp) * ref_logp, axis=-1)
    np.testing.assert_allclose(ent[i, : len(co)], ref_entropy, atol=1e-5)
    assert np.all(np.asarray(lp[i, len(co) :]) == 0) and np.all(np.asarray(ent[i, len(co) :]) == 0)


def test_token_logprobs_are_differentiable_and_optax_updates_params():
  model = models.init_model(CONFIG, seed=7)
  prompts = _tokens((2, 4), seed=8)
  completions = _tokens((2, 6), seed=9)
  lengths = jnp.asarray([4, 2])

  def loss_fn(m):
    return -jnp.mean(models.token_logprobs(m, prompts, lengths, completions, chunk_size=4))

  optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

  @nnx.jit
  def step(m, opt):
    loss, grads = nnx.value_and_grad(loss_fn)(m)
    opt.update(m, grads)
    return loss, grads

  loss0, grads = step(model, optimizer)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
  assert float(jnp.abs(grads["embedding"][...]).sum()) > 0
  for _ in range(5):
    loss, _ = step(model, optimizer)
  assert float(loss) < float(loss0)
