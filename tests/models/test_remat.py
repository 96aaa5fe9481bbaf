"""Activation rematerialisation (`ModelConfig.remat`): the same loss, gradients and samples as without it,
and less kept for the backward pass."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import models, sampling

CONFIG = models.ModelConfig(
  vocab_size=61, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=48, init_std=1.0
)
REMATS = [r for r in models.REMAT_POLICIES if r != "none"]


@pytest.fixture(scope="module")
def params():
  return models.pure_params(models.init_model(CONFIG, seed=3))


@pytest.fixture(scope="module")
def batch():
  rng = np.random.default_rng(0)
  prompts = jnp.asarray(rng.integers(3, CONFIG.vocab_size, (3, 6)), jnp.int32)
  lengths = jnp.asarray([6, 4, 2], jnp.int32)
  completions = jnp.asarray(rng.integers(3, CONFIG.vocab_size, (3, 7)), jnp.int32)
  weights = jnp.asarray(rng.normal(size=(3, 7)), jnp.float32)
  return prompts, lengths, completions, weights


def _loss(remat):
  """A weighted sum of teacher-forced log-probs and entropies (the shape of CISPO's loss) under `remat`."""
  config = CONFIG.replace(remat=remat)

  def loss(params, prompts, lengths, completions, weights):
    model = sampling.model_from_params(config, params)
    lp, ent = models.token_logprobs(model, prompts, lengths, completions, return_entropy=True)
    return jnp.sum(lp * weights) + 0.1 * jnp.sum(ent)

  return loss


def _residual_bytes(remat, params, batch):
  """Bytes the forward pass keeps for the backward pass (the leaves of `jax.vjp`'s closure)."""
  _, vjp = jax.vjp(lambda p: _loss(remat)(p, *batch), params)
  return sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(vjp))


@pytest.mark.parametrize("remat", REMATS)
def test_loss_and_gradients_equal_the_plain_ones(remat, params, batch):
  plain = jax.jit(jax.value_and_grad(_loss("none")))(params, *batch)
  remat_ = jax.jit(jax.value_and_grad(_loss(remat)))(params, *batch)
  np.testing.assert_allclose(remat_[0], plain[0], rtol=1e-5)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), remat_[1], plain[1])
  assert float(jnp.abs(plain[1]["layers"][0]["mlp"]["up_proj"]).max()) > 0  # the gradients compared are not all 0


@pytest.mark.slow  # one program per remat policy
def test_each_policy_keeps_less_for_the_backward_pass(params, batch):
  """none > dots_saveable > minimal > full in what the forward pass keeps: each policy recomputes more."""
  kept = {r: _residual_bytes(r, params, batch) for r in models.REMAT_POLICIES}
  assert kept["none"] > kept["dots_saveable"] > kept["minimal"] > kept["full"], kept


def test_the_sampler_is_unaffected(params):
  prompts = [[5, 9, 11, 3], [7, 8]]
  outs = [
    sampling.Sampler(config=CONFIG.replace(remat=r), max_new_tokens=6, num_samples=2, stop_tokens=(2,))(
      params, prompts, jax.random.key(1)
    )
    for r in ("none", "full")
  ]
  np.testing.assert_array_equal(outs[0].tokens, outs[1].tokens)
  np.testing.assert_allclose(outs[0].logprobs, outs[1].logprobs, rtol=1e-6)


def test_an_unknown_policy_names_the_field():
  with pytest.raises(ValueError, match="remat must be one of"):
    CONFIG.replace(remat="some")


def test_model_config_json_leaves_remat_out():
  from arena_jax.train import policy_io  # pylint: disable=g-import-not-at-top

  text = policy_io.config_to_json(CONFIG.replace(remat="full"))
  assert "remat" not in text and policy_io.config_from_json(text) == CONFIG
