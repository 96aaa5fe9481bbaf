"""The masked per-group router and the advantages run inside the jitted update (SPEC §1, §3, §5) and give
what routing on the host gave: the update with `StepRewards` equals the update fed host advantages."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arena_jax import arena, models, rl
from arena_jax.arena.testing import strength_judge
from arena_jax.train import step as step_lib
from tests.parallel.conftest import CONFIG, loss_config, optim_config, rollout

B, G = 4, 4


def step_rewards(seed=0):
  """Verifier rewards with diverse, all-correct and all-wrong groups; judge rewards NaN where a routed
  mode must never read them (the diverse groups)."""
  rng = np.random.default_rng(seed)
  verifier = np.array([[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 1, 1]], np.float32)
  diverse = verifier.var(-1) > 0
  judge = rng.uniform(size=(B, G)).astype(np.float32)
  judged = np.array([False, True, True, False])
  return verifier, judge, judged, diverse


def host_rewards(mode, verifier, judge, judged, diverse):
  """Routing as the trainer did it on the host before it moved into the jit."""
  if mode.judge_groups == "non_diverse":
    return np.where(diverse[:, None], verifier, judge)
  if mode.judge_groups == "all":
    return np.where(judged[:, None], judge, verifier)
  return verifier


@pytest.mark.parametrize("name", sorted(rl.REWARD_MODES))
def test_in_jit_advantages_equal_host_routing(name):
  mode = rl.get_mode(name)
  verifier, judge, judged, diverse = step_rewards()
  host_judge = judge.copy()
  judge = np.where(diverse[:, None] & (mode.judge_groups == "non_diverse"), np.nan, judge)
  want_r = host_rewards(mode, verifier, host_judge, judged, diverse)
  want = np.asarray(rl.group_advantages(jnp.asarray(want_r, jnp.float32)))
  r, adv = jax.jit(lambda v, j, m: mode.advantages(v, j, m))(verifier, judge, judged)
  assert np.isfinite(adv).all()
  np.testing.assert_allclose(np.asarray(r), want_r, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(np.asarray(adv), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scaled", [False, True])
def test_update_with_rewards_equals_update_with_host_advantages(scaled):
  """With `scale` (reward.bt_shrinkage's factors on the judged groups) the update trains on Â·scale."""
  mode = rl.get_mode("arena_live")
  verifier, judge, judged, diverse = step_rewards()
  scale = np.where(diverse[:, None], 1.0, np.random.default_rng(3).uniform(size=(B, G))).astype(np.float32)
  adv = np.asarray(rl.group_advantages(jnp.asarray(np.where(diverse[:, None], verifier, judge)))).reshape(-1)
  if scaled:
    adv = adv * scale.reshape(-1)
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  optimizer = step_lib.make_optimizer(optim_config())
  kw = dict(temperature=1.0, micro_batches=2, use_reference=False)
  batch = rollout(rows=B * G)
  host = step_lib.make_update_fn(CONFIG, optimizer, loss_config(0.0), **kw)
  want, want_m = host(
    step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer), batch._replace(advantages=jnp.asarray(adv)), None
  )
  routed = step_lib.make_update_fn(CONFIG, optimizer, loss_config(0.0), mode=mode, **kw)
  # The rollout's own advantages are ignored: the update computes them from the rewards.
  got, got_m = routed(
    step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer),
    batch._replace(advantages=jnp.full(B * G, 123.0)),
    None,
    step_lib.StepRewards(verifier, np.where(diverse[:, None], np.nan, judge), judged, scale if scaled else None),
    0,
  )
  # Two programs, so rounding apart. Adam's first step moves each weight by lr · g / (|g| + eps): by about lr
  # (1e-4) where |g| ≫ eps, by a rounding-sensitive fraction of it where a gradient cancels to near eps (1e-8):
  # one weight in 8,192 came out 2.3e-7 apart under the suite's compile flags (tests/cache.py). 1e-6 is 1% of lr;
  # a wrong advantage moves most weights by about lr.
  for g, w in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params)):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(got_m["loss"], want_m["loss"], rtol=1e-6)
  np.testing.assert_allclose(got_m["adv/l1"], np.abs(adv).mean(), rtol=1e-6)


def test_minibatch_k_trains_its_own_rows():
  mode = rl.get_mode("rlvr")
  verifier, judge, judged, _ = step_rewards()
  adv = np.asarray(rl.group_advantages(jnp.asarray(verifier))).reshape(-1)
  params = models.pure_params(models.init_model(CONFIG, seed=0))
  optimizer = step_lib.make_optimizer(optim_config())
  kw = dict(temperature=1.0, micro_batches=1, use_reference=False)
  half = rollout(rows=B * G // 2)
  host = step_lib.make_update_fn(CONFIG, optimizer, loss_config(0.0), **kw)
  routed = step_lib.make_update_fn(CONFIG, optimizer, loss_config(0.0), mode=mode, **kw)
  _, want = host(
    step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer), half._replace(advantages=jnp.asarray(adv[8:])), None
  )
  _, got = routed(
    step_lib.init_state(jax.tree.map(jnp.copy, params), optimizer),
    half,
    None,
    step_lib.StepRewards(verifier, judge, judged),
    jnp.int32(1),
  )
  np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-6)


def test_arenarl_rewards_give_the_rank_quantile_advantages():
  """arenarl's judge rewards are rank quantiles, so its group advantages are ArenaRL's (SPEC §5)."""
  mode = rl.get_mode("arenarl")
  rng = np.random.default_rng(1)
  ranks = np.stack([arena.tournaments.average_ranks(list(rng.integers(0, 3, G))) for _ in range(B)])
  verdicts = [rl.Verdicts(matches=(np.array([0]), np.array([1]), np.array([0.9])), native_ranking=r) for r in ranks]
  judge, ok = mode.aggregate(verdicts, G, l2=0.1, solver="newton")
  assert ok.all()
  _, adv = mode.advantages(np.zeros((B, G), np.float32), judge.astype(np.float32), np.ones(B, bool))
  np.testing.assert_allclose(adv, rl.rank_quantile_advantages(jnp.asarray(ranks, jnp.float32)), atol=1e-5)


def _round_robins(seed=0):
  """The observed matches of a round robin per group, judged by a noisy strength judge (SPEC §4)."""
  out = []
  for k in range(B):
    judge = strength_judge(np.random.default_rng(seed + k).normal(size=G), noise=1.0, seed=seed + k)
    s = arena.play(arena.make_scheduler("round_robin", G), judge)
    out.append(rl.Verdicts(matches=s.observed(), native_ranking=s.native_ranking()))
  return out


def test_the_papers_arenarl_baseline_is_arena_without_routing():
  """Seed 000's ArenaRL baseline: the round robin of `arena` on every group, win-rate rewards, no routing;
  the same as `arenarl` with its topology and its aggregation replaced, and unlike `arenarl`'s own
  rank quantiles of the same tournaments."""
  baseline, arena_mode = rl.get_mode("arenarl_baseline"), rl.get_mode("arena")
  assert (baseline.topology, baseline.aggregation, baseline.judge_groups) == ("round_robin", "win_rate", "all")
  verifier, _, _, diverse = step_rewards()
  np.testing.assert_array_equal(baseline.select(diverse), np.ones(B, bool))  # every group, diverse or not
  verdicts = _round_robins()
  judge, ok = baseline.aggregate(verdicts, G, l2=0.1, solver="newton")
  want = np.zeros((B, G))
  for k, v in enumerate(verdicts):  # r_i = 1/(G − 1) Σ_{j≠i} s(τ_i, τ_j): all G(G − 1)/2 pairs were played
    assert len(v.matches[0]) == G * (G - 1) // 2
    for f, sec, o in zip(*v.matches):
      want[k, f] += o / (G - 1)
      want[k, sec] += (1 - o) / (G - 1)
  np.testing.assert_allclose(judge, want, atol=1e-6)
  assert ok.all()
  np.testing.assert_allclose(arena_mode.aggregate(verdicts, G, l2=0.1, solver="newton")[0], judge)
  rewards, _ = baseline.advantages(verifier, judge.astype(np.float32), np.ones(B, bool))
  np.testing.assert_allclose(rewards, judge, atol=1e-6)  # the verifier is never read, not even when diverse
  # arenarl with aggregation replaced (reward.aggregation) gives the same rewards; arenarl's own does not.
  replaced = rl.get_mode("arenarl", aggregation="win_rate")
  np.testing.assert_allclose(replaced.aggregate(verdicts, G, l2=0.1, solver="newton")[0], judge)
  own = rl.get_mode("arenarl").aggregate(verdicts, G, l2=0.1, solver="newton")[0]
  assert not np.allclose(own, judge)
  assert rl.get_mode("arenarl").aggregation == "rank_quantile"  # the registered mode kept its own


def test_an_aggregation_of_the_other_judge_form_is_refused():
  with pytest.raises(ValueError, match=r"reward\.aggregation: 'pointwise' reads pointwise verdicts"):
    rl.get_mode("arenarl", aggregation="pointwise")
  with pytest.raises(ValueError, match=r"'bt' reads pairwise verdicts but mode 'rlaif' is pointwise"):
    rl.get_mode("rlaif", aggregation="bt")


@pytest.mark.parametrize("name", ["rlaif", "adaptive_pointwise"])
def test_a_failed_pointwise_judgment_is_left_out_of_its_groups_statistics(name):
  """A member whose rubric judgment failed gets Â = 0, and the others' advantages are those of the group
  without it (imputing the group's mean would shrink the std they are divided by: SPEC §4)."""
  mode = rl.get_mode(name)
  scores = [[1.0, 0.0, None, 0.5], [None, None, None, None], [0.0, 1.0, 1.0, 0.5], [None, 1.0, 1.0, 1.0]]
  judge, ok = mode.aggregate([rl.Verdicts(scores=s) for s in scores], G, l2=0.1, solver="newton")
  np.testing.assert_array_equal(ok, [True, False, True, True])
  verifier = np.zeros((B, G), np.float32)  # all wrong: every group non-diverse, so routed modes judge all
  rewards, adv = mode.advantages(verifier, judge.astype(np.float32), np.ones(B, bool))
  rewards, adv = np.asarray(rewards), np.asarray(adv)
  assert np.isfinite(rewards).all() and np.isfinite(adv).all()
  np.testing.assert_allclose(adv[0, [0, 1, 3]], rl.group_advantages(jnp.asarray([1.0, 0.0, 0.5])), atol=1e-5)
  assert adv[0, 2] == 0 and rewards[0, 2] == pytest.approx(0.5)  # the others' mean, for the logs
  imputed = rl.group_advantages(jnp.asarray([1.0, 0.0, 0.5, 0.5]))
  assert not np.allclose(adv[0, [0, 1, 3]], np.asarray(imputed)[[0, 1, 3]], atol=1e-3)
  np.testing.assert_array_equal(adv[1], 0.0)  # no judgment at all: the fill, zero advantage
  np.testing.assert_allclose(adv[2], rl.group_advantages(jnp.asarray([0.0, 1.0, 1.0, 0.5])), atol=1e-5)
  np.testing.assert_array_equal(adv[3], 0.0)  # the judged members agree: no signal, whatever the failure
