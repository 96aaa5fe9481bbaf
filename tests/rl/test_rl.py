"""Group advantages, the per-group router and the CISPO loss (SPEC §1–§3, §5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import rl


def test_group_advantages_match_the_formula():
  r = jnp.array([[1.0, 0.0, 0.0, 1.0, 1.0]])
  mean, std = 0.6, np.sqrt(0.24)
  np.testing.assert_allclose(rl.group_advantages(r), (np.asarray(r) - mean) / (std + 1e-6), rtol=1e-6)
  std1 = np.std(np.asarray(r), ddof=1)
  np.testing.assert_allclose(rl.group_advantages(r, ddof=1), (np.asarray(r) - mean) / (std1 + 1e-6), rtol=1e-6)


@pytest.mark.parametrize("value", [0.0, 1.0, 0.1, 0.3])
def test_non_diverse_groups_get_exactly_zero(value):
  r = jnp.full((2, 16), value)
  assert not rl.is_diverse(r).any()
  np.testing.assert_array_equal(rl.group_advantages(r), 0.0)


def test_router_selects_per_group_and_never_reads_judge_rewards_of_diverse_groups():
  verifier = jnp.array([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
  judge = jnp.array([[jnp.nan] * 3, [0.2, 0.9, 0.5], [1.0, 0.0, 0.5]])
  routed, diverse = rl.route_rewards(verifier, judge)
  np.testing.assert_array_equal(diverse, [True, False, False])
  np.testing.assert_array_equal(routed, np.concatenate([verifier[:1], judge[1:]]))
  # Diverse groups reduce exactly to RLVR.
  np.testing.assert_array_equal(rl.group_advantages(routed)[0], rl.group_advantages(verifier)[0])


def test_router_is_jittable_and_batched():
  rng = np.random.default_rng(0)
  verifier = jnp.asarray(rng.integers(0, 2, (5, 4, 8)).astype(np.float32))
  judge = jnp.asarray(rng.random((5, 4, 8)).astype(np.float32))
  routed, diverse = jax.jit(rl.route_rewards)(verifier, judge)
  assert routed.shape == (5, 4, 8) and diverse.shape == (5, 4)
  np.testing.assert_array_equal(routed, np.where(np.asarray(diverse)[..., None], verifier, judge))


def test_rank_quantile_advantages():
  ranking = jnp.array([[0.0, 1.0, 2.0, 3.0]])  # best first
  r = np.array([1.0, 2 / 3, 1 / 3, 0.0])
  np.testing.assert_allclose(rl.rank_quantile_advantages(ranking)[0], (r - r.mean()) / (r.std() + 1e-6), rtol=1e-5)


# ───────────────────────────────────────────── CISPO ─────────────────────────────────────────────


def _batch(seed=0, b=4, t=6):
  rng = np.random.default_rng(seed)
  logp = jnp.asarray(-rng.random((b, t)) * 3, jnp.float32)
  old = logp + jnp.asarray(rng.normal(0, 1.0, (b, t)), jnp.float32)
  adv = jnp.asarray(rng.normal(size=b), jnp.float32)
  lengths = jnp.asarray(rng.integers(1, t + 1, b))
  return logp, old, adv, rl.completion_mask(lengths, t)


def _loss(logp, old, adv, mask, **kw):
  out = rl.cispo_loss(logp, old, adv, mask, **kw)
  return out.loss_sum / out.denominator


@pytest.mark.parametrize("eps_low, eps_high", [(1.0, 4.0), (0.2, 0.2), (0.0, 0.0)])
def test_cispo_gradient_equals_hand_derived_form(eps_low, eps_high):
  logp, old, adv, mask = _batch()
  grad = jax.grad(_loss)(logp, old, adv, mask, eps_low=eps_low, eps_high=eps_high)
  rho = np.exp(np.asarray(logp) - np.asarray(old))
  clipped = np.clip(rho, 1 - eps_low, 1 + eps_high)
  # ∇_{logp_{i,t}} (−J) = −sg(ρ̂_{i,t})·Â_i / Σ_i|o_i| on completion tokens, 0 elsewhere.
  expected = -clipped * np.asarray(adv)[:, None] * np.asarray(mask) / np.asarray(mask).sum()
  np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


def test_cispo_clips_the_weight_not_the_gradient():
  # A token with a huge ratio still gets a (capped) gradient; PPO's clipped surrogate would give 0.
  logp, old = jnp.array([[0.0]]), jnp.array([[-5.0]])
  grad = jax.grad(_loss)(logp, old, jnp.array([1.0]), jnp.ones((1, 1)), eps_high=4.0)
  np.testing.assert_allclose(grad, [[-5.0]])


def test_ratio_one_reduces_to_reinforce_with_group_advantages():
  logp, _, _, mask = _batch(1)
  rewards = jnp.array([[1.0, 0.0], [0.0, 1.0]]).reshape(4)
  adv = rl.group_advantages(rewards.reshape(2, 2)).reshape(4)
  cispo = jax.grad(_loss)(logp, logp, adv, mask)
  reinforce = jax.grad(lambda lp: -(adv[:, None] * lp * mask).sum() / mask.sum())(logp)
  np.testing.assert_allclose(cispo, reinforce, rtol=1e-6)


def test_masked_tokens_contribute_nothing():
  logp, old, adv, mask = _batch(2)
  garbage = jnp.where(mask > 0, logp, jnp.inf), jnp.where(mask > 0, old, -jnp.inf)
  out = rl.cispo_loss(*garbage, adv, mask)
  ref = rl.cispo_loss(logp, old, adv, mask)
  np.testing.assert_allclose(out.loss_sum, ref.loss_sum, rtol=1e-6)
  grad = jax.grad(lambda lp: rl.cispo_loss(lp, old, adv, mask).loss_sum)(logp)
  assert (np.asarray(grad)[np.asarray(mask) == 0] == 0).all()


def test_truncated_completions_can_be_masked():
  logp, old, adv, mask = _batch(3)
  truncated = jnp.array([True, False, False, False])
  out = rl.cispo_loss(logp, old, adv, mask, truncated=truncated, mask_truncated=True)
  ref = rl.cispo_loss(logp[1:], old[1:], adv[1:], mask[1:])
  np.testing.assert_allclose([out.loss_sum, out.denominator], [ref.loss_sum, ref.denominator], rtol=1e-6)


@pytest.mark.parametrize("aggregation", rl.AGGREGATIONS)
def test_sum_and_denominator_are_exact_under_micro_batching(aggregation):
  logp, old, adv, mask = _batch(4, b=8)
  whole = rl.cispo_loss(logp, old, adv, mask, aggregation=aggregation)
  parts = [rl.cispo_loss(logp[s], old[s], adv[s], mask[s], aggregation=aggregation) for s in (slice(0, 3), slice(3, 8))]
  np.testing.assert_allclose(
    sum(p.loss_sum for p in parts) / sum(p.denominator for p in parts), whole.loss_sum / whole.denominator, rtol=1e-6
  )


def test_seq_mean_token_mean_weights_sequences_equally():
  logp = jnp.array([[-1.0, -1.0, -1.0, -1.0], [-2.0, 0.0, 0.0, 0.0]])
  mask = jnp.array([[1.0, 1, 1, 1], [1, 0, 0, 0]])
  adv = jnp.array([1.0, 1.0])
  out = rl.cispo_loss(logp, logp, adv, mask, aggregation="seq_mean_token_mean")
  np.testing.assert_allclose(out.loss_sum / out.denominator, (1.0 + 2.0) / 2)
  tok = rl.cispo_loss(logp, logp, adv, mask)
  np.testing.assert_allclose(tok.loss_sum / tok.denominator, (4.0 + 2.0) / 5)


def test_metrics_clip_fraction_ratio_entropy_kl():
  logp = jnp.zeros((1, 4))
  old = jnp.log(jnp.array([[1.0, 1.0, 0.1, 1.0]]))  # ratios 1, 1, 10, 1 → one clipped at cap 5
  mask = jnp.array([[1.0, 1.0, 1.0, 0.0]])
  out = rl.cispo_loss(
    logp, old, jnp.ones(1), mask, entropy=jnp.full((1, 4), 2.0), ref_logprobs=jnp.zeros((1, 4)), kl_coef=0.1
  )
  vals = rl.metric_values(out.metrics)
  np.testing.assert_allclose(vals["clip_fraction"], 1 / 3, rtol=1e-6)
  np.testing.assert_allclose(vals["ratio"], 12 / 3, rtol=1e-6)
  np.testing.assert_allclose(vals["entropy"], 2.0)
  np.testing.assert_allclose(vals["kl"], 0.0, atol=1e-7)  # π_θ == π_ref
  np.testing.assert_allclose(vals["response_length"], 3.0)


def test_kl_penalty_pulls_towards_the_reference():
  logp, old, adv, mask = _batch(5)
  ref = logp - 0.5
  g0 = jax.grad(_loss)(logp, old, 0 * adv, mask, ref_logprobs=ref, kl_coef=1.0)
  # With zero advantage only the KL term acts; logp above ref ⇒ positive gradient (descent lowers it).
  assert (np.asarray(g0)[np.asarray(mask) > 0] > 0).all()


def test_bad_options_raise():
  logp, old, adv, mask = _batch()
  with pytest.raises(ValueError, match="unknown CISPO aggregation"):
    rl.cispo_loss(logp, old, adv, mask, aggregation="sum")
  with pytest.raises(ValueError, match="eps_low"):
    rl.cispo_loss(logp, old, adv, mask, eps_low=1.5)


def test_bt_shrinkage_factors():
  """f_i = z²/(z² + κ), z = (θ_i − θ̄)/SE_i: 1 everywhere when off, smaller for a trajectory nearer the mean
  or less certain, and computed from one batched fit with Laplace errors."""
  theta = np.array([[2.0, 1.0, -1.0, -2.0]])
  se = np.array([[0.5, 0.5, 2.0, 0.5]])
  np.testing.assert_array_equal(rl.shrinkage_factors(theta, se, 0.0), np.ones((1, 4)))
  f = rl.shrinkage_factors(theta, se, 1.0)
  np.testing.assert_allclose(f, [[16 / 17, 4 / 5, 0.25 / 1.25, 16 / 17]])
  assert np.all(rl.shrinkage_factors(theta, se, 4.0) < f)
  # 0 beat 1 and 2 six times each, 1 and 2 tied six times, 3 tied 2 once: 0 stands out, 3 is uncertain.
  first, second = np.array([0] * 12 + [1] * 6 + [2]), np.array([1] * 6 + [2] * 6 + [2] * 6 + [3])
  outcome = np.array([0.9] * 12 + [0.5] * 7)
  f = rl.bt_shrinkage([rl.Verdicts(matches=(first, second, outcome))], 4, l2=0.1, solver="newton", shrinkage=1.0)
  assert f.shape == (1, 4) and f[0, 0] > 0.7 and f[0, 3] < 0.5 * min(f[0, 1], f[0, 2])
