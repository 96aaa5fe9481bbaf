"""The attention kernels against the xla reference (`models.attention`).

Splash runs here in Pallas interpret mode (the kernel's own code, interpreted on the CPU); cudnn cannot run
without a GPU, so its wrapper (layout, sequence lengths, segment mask, window) is checked through the same
`jax.nn.dot_product_attention` call with implementation="xla", and benchmarks/device.sh runs the kernel
itself on a GPU. Tolerances: float32 inputs, softmax over ≤ 256 keys of O(1) scores; the kernels sum in
blocks in another order, so outputs agree to a few float32 ulps of O(1) values (≤ 1e-5), gradients through
T = 256 sums to ≤ 1e-4.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax.models import attention as attn
from arena_jax.models import make_mesh, tiny_config
from arena_jax.models.transformer import init_model

B, T, K, R, H = 2, 256, 2, 2, 64


def _inputs(seed=0, t=T):
  rng = np.random.default_rng(seed)
  q = rng.normal(size=(B, t, K, R, H)).astype(np.float32) * H**-0.5
  k = rng.normal(size=(B, K, t, H)).astype(np.float32)
  v = rng.normal(size=(B, K, t, H)).astype(np.float32)
  return jnp.asarray(q), jnp.asarray(k), jnp.asarray(v)


def _packed_segments(t=T):
  """Row 0: three sequences and padding (0); row 1: one sequence then padding."""
  seg = np.zeros((B, t), np.int32)
  seg[0, :70], seg[0, 70:150], seg[0, 150:230] = 1, 2, 3
  seg[1, :200] = 1
  pos = np.zeros((B, t), np.int32)
  for b in range(B):
    for s in np.unique(seg[b]):
      idx = np.flatnonzero(seg[b] == s)
      pos[b, idx] = np.arange(len(idx))
  return jnp.asarray(seg), jnp.asarray(pos)


def _real(seg):
  return np.asarray(seg) > 0


@pytest.mark.slow  # splash's forward and backward programs
@pytest.mark.parametrize("window", [None, 40])
def test_splash_matches_the_reference_on_packed_rows_forward_and_backward(window):
  q, k, v = _inputs()
  seg, pos = _packed_segments()
  real = _real(seg)

  def run(impl, q, k, v):
    out = attn.full_attention(q, k, v, impl=impl, positions=pos, segment_ids=seg, window=window)
    return jnp.where(real[:, :, None, None], out, 0.0)

  ref, out = run("xla", q, k, v), run("splash", q, k, v)
  np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-5, rtol=1e-5)
  # A scalar of every output, weighted so that no gradient cancels by symmetry.
  w = jnp.asarray(np.random.default_rng(1).normal(size=ref.shape).astype(np.float32))
  grad = lambda impl: jax.grad(lambda q, k, v: jnp.sum(run(impl, q, k, v) * w), argnums=(0, 1, 2))(q, k, v)
  for g_ref, g in zip(grad("xla"), grad("splash")):
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), atol=1e-4, rtol=1e-4)


def test_splash_pads_a_length_that_is_not_a_multiple_of_its_tile():
  t = 100
  q, k, v = _inputs(2, t)
  valid = jnp.arange(t)[None, :] < jnp.asarray([[90], [100]])
  pos = jnp.broadcast_to(jnp.arange(t), (B, t))
  ref = attn.full_attention(q, k, v, impl="xla", positions=pos, valid=valid)
  out = attn.full_attention(q, k, v, impl="splash", positions=pos, valid=valid)
  m = np.asarray(valid)[:, :, None, None]
  np.testing.assert_allclose(np.asarray(out) * m, np.asarray(ref) * m, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window", [None, 40])
def test_the_cudnn_wrapper_matches_the_reference_through_the_same_api_call(window):
  q, k, v = _inputs(3)
  seg, pos = _packed_segments()
  qf = q.reshape(B, T, K * R, H)
  ref = attn.full_attention(q, k, v, impl="xla", positions=pos, segment_ids=seg, window=window)
  out = attn._dot_product_attention(qf, k, v, seg, None, window, implementation="xla")  # packed rows: a mask
  m = _real(seg)[:, :, None, None]
  np.testing.assert_allclose(np.asarray(out) * m, np.asarray(ref) * m, atol=1e-5, rtol=1e-5)
  # One sequence per row: sequence lengths instead of a mask.
  lengths = jnp.asarray([180, 256], jnp.int32)
  valid = jnp.arange(T)[None, :] < lengths[:, None]
  pos = jnp.broadcast_to(jnp.arange(T), (B, T))
  ref = attn.full_attention(q, k, v, impl="xla", positions=pos, valid=valid, window=window)
  out = attn._dot_product_attention(qf, k, v, valid.astype(jnp.int32), lengths, window, implementation="xla")
  m = np.asarray(valid)[:, :, None, None]
  np.testing.assert_allclose(np.asarray(out) * m, np.asarray(ref) * m, atol=1e-5, rtol=1e-5)


def test_auto_picks_the_kernel_of_the_platform_and_bad_names_are_refused():
  assert attn.resolve_attention("auto", "tpu") == "splash"
  assert attn.resolve_attention("auto", "gpu") == "cudnn"
  assert attn.resolve_attention("auto", "cpu") == "xla"
  assert attn.resolve_attention("splash", "cpu") == "splash"
  with pytest.raises(ValueError, match="attention must be one of"):
    attn.resolve_attention("flash")
  with pytest.raises(ValueError, match="attention must be one of"):
    tiny_config().replace(attention="flash")


@pytest.mark.mesh
def test_splash_runs_per_shard_of_a_mesh_with_heads_and_batch_split():
  """On a (data 1, fsdp 2, tensor 2) mesh of CPU devices: batch and heads split, one kernel per shard."""
  q, k, v = _inputs(4, 128)
  seg, pos = _packed_segments(128)
  mesh = make_mesh(1, 2, 2)
  ref = attn.full_attention(q, k, v, impl="xla", positions=pos, segment_ids=seg)

  @jax.jit
  def sharded(q, k, v):
    with attn.kernel_mesh(mesh):
      return attn.full_attention(q, k, v, impl="splash", positions=pos, segment_ids=seg)

  out = sharded(q, k, v)
  m = _real(seg)[:, :, None, None]
  np.testing.assert_allclose(np.asarray(out) * m, np.asarray(ref) * m, atol=1e-5, rtol=1e-5)


def test_a_model_with_splash_gives_the_reference_hidden_states_and_log_probs():
  """The whole forward (prefill layout: right-padded prompts) under each implementation."""
  from arena_jax.models import token_logprobs

  config = tiny_config().replace(sliding_window=24)
  ref_model = init_model(config.replace(attention="xla"), seed=0)
  model = init_model(config.replace(attention="splash"), seed=0)
  rng = np.random.default_rng(5)
  tokens = jnp.asarray(rng.integers(3, config.vocab_size, size=(2, 60)), jnp.int32)
  valid = jnp.arange(60)[None, :] < jnp.asarray([[60], [41]])
  h_ref = ref_model.hidden(tokens, valid=valid)
  h = model.hidden(tokens, valid=valid)
  m = np.asarray(valid)[:, :, None]
  np.testing.assert_allclose(np.asarray(h) * m, np.asarray(h_ref) * m, atol=1e-5, rtol=1e-5)
  prompt = tokens[:, :20]
  plen = jnp.asarray([20, 13], jnp.int32)
  completion = tokens[:, 20:]
  cmask = jnp.arange(40)[None, :] < jnp.asarray([[40], [25]])
  lp_ref = token_logprobs(ref_model, prompt, plen, completion, cmask)
  lp = token_logprobs(model, prompt, plen, completion, cmask)
  np.testing.assert_allclose(np.asarray(lp), np.asarray(lp_ref), atol=1e-5, rtol=1e-5)
