"""FP8 training (`model.quantization = "fp8"`): the train step's projections and MLP run as FP8
matmuls through Qwix, the masters stay float32, and a short SFT run tracks bfloat16's loss."""

import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models
from arena_jax.sampling import model_from_params
from arena_jax.train import sft
from tests.train.test_sft import get_config


def _lowered_text(quantization):
  """The SFT loss's gradient program of a 1-layer tiny policy: float32 masters, bf16 compute."""
  config = models.with_precision(models.tiny_config().replace(num_layers=1), dtype="bfloat16")
  config = config.replace(quantization=quantization)
  params = models.pure_params(models.init_model(config))
  tokens = jnp.zeros((2, 8), jnp.int32)

  def loss(p):
    model = models.quantize_for_training(model_from_params(config, p))
    return sft.sft_loss(model, tokens, tokens, jnp.ones((2, 8), bool))[0]

  grads = jax.eval_shape(jax.grad(loss), params)
  return jax.jit(jax.grad(loss)).lower(params).as_text(), {str(g.dtype) for g in jax.tree.leaves(grads)}


def test_fp8_quantizes_the_projections_forward_e4m3_and_backward_e5m2():
  (fp8, fp8_grads), (bf16, _) = _lowered_text("fp8"), _lowered_text("")
  assert "f8E4M3FN" in fp8 and "f8E5M2" in fp8
  assert "f8E4M3FN" not in bf16 and "f8E5M2" not in bf16
  # The masters stay float32: their gradients are float32 too.
  assert fp8_grads == {"float32"}


def _sft_losses(dtype, quantization):
  c = get_config("smoke")
  c.model.update(dict(d_model=None, num_layers=None, num_heads=None, num_kv_heads=None, head_dim=None, mlp_dim=None))
  c.model.dtype, c.model.quantization = dtype, quantization
  c.num_steps, c.batch_size, c.log_every, c.warmup_steps = 120, 16, 20, 20
  c.tasks.arithmetic.num_train = 2000
  c.eval.num_examples = 0
  with tempfile.TemporaryDirectory() as out:
    summary = sft.train_sft(c, out)
  return np.array([loss for _, loss in summary["loss_history"]])


@pytest.mark.slow  # two 120-step SFT runs
@pytest.mark.heavy  # ≈ 40 s: two 120-step SFT runs of the demo policy
def test_fp8_sft_tracks_bf16_loss():
  """120 SFT steps of the demo policy (2 layers, d_model 128), bf16 compute with and without FP8 matmuls, the
  same data order and initialisation. Stated tolerance: every 20-step mean loss of the FP8 run within 10% of
  the bf16 run's. One e4m3 operand rounds by up to 2⁻⁴ ≈ 6% and one e5m2 gradient by up to 2⁻³; averaged over
  a matmul's sum and over 20 steps the loss moves far less (measured here: ≤ 6% over 200 steps, where bf16 and
  float32 differ by ≤ 2%). The runs must also differ, or FP8 did nothing."""
  bf16, fp8 = _sft_losses("bfloat16", ""), _sft_losses("bfloat16", "fp8")
  assert bf16[-1] < 0.5 * bf16[0]  # it learned
  np.testing.assert_allclose(fp8, bf16, rtol=0.10)
  assert np.abs(fp8 - bf16).max() > 1e-4
