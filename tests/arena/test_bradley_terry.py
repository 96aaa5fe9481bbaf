"""Bradley–Terry fitting (SPEC §6) against a float64 scipy L-BFGS-B reference, plus properties."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arena_jax import arena
from arena_jax.arena import bradley_terry as bt
from arena_jax.arena.testing import strength_judge

TOL = 1e-4  # float32 fit vs float64 reference (the acceptance bound)
SOLVERS = sorted(arena.SOLVERS)
# `make test` checks the default solver on every graph; the other solvers' runs of the same checks compile their own
# programs (seconds each at the suite's shapes) and run in the slow tier (`make test-all`).
SOLVER_TIERS = [s if s == bt.DEFAULT_SOLVER else pytest.param(s, marks=pytest.mark.slow) for s in SOLVERS]


def random_matches(rng, batch, g, m, *, outcomes=(0.1, 0.5, 0.9), pad=0):
  first = rng.integers(0, g, (batch, m + pad))
  second = (first + rng.integers(1, g, (batch, m + pad))) % g
  outcome = rng.choice(outcomes, (batch, m + pad))
  weight = np.ones((batch, m + pad))
  weight[:, m:] = 0.0
  return first, second, outcome, weight


def live_matches(rng, batch, g, noise=1.0):
  """Match lists of live tournaments (SPEC §5) driven by a noisy latent-strength judge."""
  rows = []
  for b in range(batch):
    sched = arena.make_scheduler("live", g, arrival_order=rng.permutation(g))
    arena.play(sched, strength_judge(rng.normal(size=g) * 2, noise=noise, seed=b))
    rows.append(sched.observed())
  m = max(len(r[0]) for r in rows)
  out = np.zeros((4, batch, m))
  for b, (f, s, o) in enumerate(rows):
    out[:, b, : len(f)] = np.stack([f, s, o, np.ones(len(f))])
  return out[0].astype(int), out[1].astype(int), out[2], out[3]


def assert_matches_reference(first, second, outcome, weight, g, solver="newton", l2=0.1):
  got = np.asarray(arena.fit_bradley_terry(first, second, outcome, weight, g, solver=solver, l2=l2))
  ref = arena.fit_bradley_terry_scipy(first, second, outcome, weight, g, l2=l2)
  assert got.shape == ref.shape
  np.testing.assert_allclose(got, ref, atol=TOL, rtol=0)
  return got


@pytest.mark.parametrize("solver", SOLVER_TIERS)
@pytest.mark.parametrize("g", [2, 3, 8, 16, 64])
def test_random_graphs_match_scipy(solver, g):
  rng = np.random.default_rng(g)
  assert_matches_reference(*random_matches(rng, 6, g, 3 * g, pad=5), g, solver=solver)


@pytest.mark.parametrize("solver", SOLVER_TIERS)
def test_live_tournament_graphs_match_scipy(solver):
  rng = np.random.default_rng(1)
  assert_matches_reference(*live_matches(rng, 8, 16), 16, solver=solver)


@pytest.mark.parametrize("solver", SOLVER_TIERS)
def test_round_robin_graph_matches_scipy_and_orders_by_strength(solver):
  g = 8
  sched = arena.play(arena.make_scheduler("round_robin", g), strength_judge(np.arange(g)))
  f, s, o = sched.observed()
  theta = assert_matches_reference(f, s, o, None, g, solver=solver)
  assert (np.diff(theta) > 0).all()


@pytest.mark.parametrize("solver", SOLVER_TIERS)
def test_all_ties_give_equal_strengths_and_half_rewards(solver):
  rng = np.random.default_rng(2)
  f, s, _, w = random_matches(rng, 3, 6, 12)
  o = np.full(f.shape, 0.5)
  theta = assert_matches_reference(f, s, o, w, 6, solver=solver)
  np.testing.assert_allclose(theta, 0.0, atol=1e-6)
  np.testing.assert_array_equal(arena.bt_rewards(f, s, o, w, 6, solver=solver), 0.5)


@pytest.mark.parametrize("l2", [0.1, 1e-3])
def test_undefeated_player_stays_finite(l2):
  g = 5
  f = np.array([0, 0, 0, 0, 1, 2])
  s = np.array([1, 2, 3, 4, 2, 3])
  o = np.array([1.0, 1.0, 1.0, 1.0, 0.9, 0.5])
  theta = assert_matches_reference(f, s, o, None, g, l2=l2)
  assert np.isfinite(theta).all() and theta.argmax() == 0


def test_disconnected_components_and_isolated_players():
  # {0, 1} and {2, 3} never meet; player 4 plays nobody and stays at 0 (λ pins it).
  f, s, o = np.array([0, 2]), np.array([1, 3]), np.array([0.9, 0.1])
  theta = assert_matches_reference(f, s, o, None, 5)
  assert theta[0] > theta[1] and theta[3] > theta[2]
  np.testing.assert_allclose(theta[4], 0.0, atol=1e-7)
  # Each component is symmetric about 0 (λ‖θ‖² with no evidence linking the components).
  np.testing.assert_allclose([theta[0] + theta[1], theta[2] + theta[3]], 0.0, atol=1e-6)


def test_one_match_closed_form():
  # One hard win, mirrored: minimise −2·log σ(2t) + 2λt² over θ = (t, −t); solved by scipy and us.
  theta = assert_matches_reference(np.array([1]), np.array([0]), np.array([1.0]), None, 2)
  t = theta[1]
  np.testing.assert_allclose(theta[0], -t, atol=1e-6)
  # Stationarity of the closed form: 2·(1 − σ(2t))·2 = 4λt.
  sig = 1.0 / (1.0 + np.exp(-2 * t))
  np.testing.assert_allclose(4 * (1 - sig), 4 * 0.1 * t, atol=1e-4)


def test_zero_matches_give_zero_strengths_and_half_rewards():
  f = np.zeros((3, 4), int)
  w = np.zeros((3, 4))
  np.testing.assert_array_equal(arena.fit_bradley_terry(f, f + 1, w + 0.5, w, 7), 0.0)
  np.testing.assert_array_equal(arena.bt_rewards(f, f + 1, w + 0.5, w, 7), 0.5)
  empty = np.zeros((2, 0), int)
  assert arena.fit_bradley_terry(empty, empty, empty.astype(float), empty.astype(float), 3).shape == (2, 3)


@pytest.mark.parametrize("batch", [1, pytest.param(4096, marks=pytest.mark.slow)])
def test_batch_sizes_match_scipy(batch):
  rng = np.random.default_rng(batch)
  f, s, o, w = random_matches(rng, batch, 16, 42)
  got = np.asarray(arena.fit_bradley_terry(f, s, o, w, 16))
  rows = rng.choice(batch, min(batch, 64), replace=False)  # the scipy loop on a sample keeps this fast
  ref = arena.fit_bradley_terry_scipy(f[rows], s[rows], o[rows], w[rows], 16)
  np.testing.assert_allclose(got[rows], ref, atol=TOL, rtol=0)


def test_leading_batch_dims_and_broadcast_weight():
  rng = np.random.default_rng(3)
  f, s, o, _ = random_matches(rng, 6, 5, 9)
  flat = np.asarray(arena.fit_bradley_terry(f, s, o, None, 5))
  nested = np.asarray(arena.fit_bradley_terry(*(a.reshape(2, 3, 9) for a in (f, s, o)), 1.0, 5))
  np.testing.assert_allclose(nested.reshape(6, 5), flat, atol=1e-6)


def test_padding_and_bucketing_do_not_change_the_fit():
  rng = np.random.default_rng(4)
  f, s, o, w = random_matches(rng, 3, 6, 10)
  base = np.asarray(arena.fit_bradley_terry(f, s, o, w, 6))
  pf, ps, po, pw = random_matches(rng, 3, 6, 10, pad=0)
  padded = [np.concatenate([a, b], -1) for a, b in ((f, pf), (s, ps), (o, po), (w, 0 * pw))]
  np.testing.assert_allclose(np.asarray(arena.fit_bradley_terry(*padded, 6)), base, atol=1e-6)


@pytest.mark.slow  # four fits compiled from a cleared cache
def test_bucketing_reuses_compiled_programs():
  rng = np.random.default_rng(5)
  bt._fit_jit.clear_cache()
  for batch, m in [(3, 9), (4, 12), (2, 16), (1, 10)]:  # all bucket to (4, 16) or (2, 16), (1, 16)
    arena.fit_bradley_terry(*random_matches(rng, batch, 6, m), 6)
  assert bt._fit_jit._cache_size() == 3


def test_jittable_with_device_arrays():
  rng = np.random.default_rng(6)
  f, s, o, w = random_matches(rng, 4, 6, 10)
  jitted = jax.jit(lambda *a: arena.bt_rewards(*a, 6))
  got = jitted(*(jnp.asarray(a) for a in (f, s, o, w)))
  np.testing.assert_allclose(got, arena.bt_rewards(f, s, o, w, 6), atol=1e-6)


def test_host_newton_matches_scipy():
  rng = np.random.default_rng(7)
  f, s, o, w = random_matches(rng, 1, 10, 25)
  host = arena.fit_bradley_terry_host(f[0], s[0], o[0], w[0], 10)
  np.testing.assert_allclose(host, arena.fit_bradley_terry_scipy(f, s, o, w, 10)[0], atol=1e-7)


def test_min_max_rewards():
  theta = jnp.array([[0.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
  np.testing.assert_allclose(arena.min_max_normalise(theta), [[0.0, 1 / 3, 1.0], [0.5, 0.5, 0.5]])


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(solver="adam"), "unknown Bradley–Terry solver 'adam'"),
    (dict(l2=0.0), "l2 must be > 0"),
  ],
)
def test_bad_options_raise(kwargs, match):
  with pytest.raises(ValueError, match=match):
    arena.fit_bradley_terry([0], [1], [1.0], None, 2, **kwargs)


@pytest.mark.parametrize(
  "args, match",
  [
    (([0], [2], [1.0]), "second holds player index 2"),
    (([-1], [1], [1.0]), "first holds player index -1"),
    (([0], [1], [1.5]), r"outcome must lie in \[0, 1\]"),
    (([0], [1], [np.nan]), r"outcome must lie in \[0, 1\]"),
    (([0.0], [1], [1.0]), "first must hold integer"),
  ],
)
def test_bad_matches_raise_naming_the_field(args, match):
  with pytest.raises(ValueError, match=match):
    arena.fit_bradley_terry(*args, None, 2)


# ───────────────────────────────────── properties (hypothesis) ─────────────────────────────────────

match_lists = st.integers(3, 7).flatmap(
  lambda g: st.tuples(
    st.just(g),
    st.lists(
      st.tuples(st.integers(0, g - 1), st.integers(1, g - 1), st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0])),
      min_size=1,
      max_size=12,
    ),
  )
)


def _arrays(g, rows):
  f = np.array([r[0] for r in rows])
  return f, (f + np.array([r[1] for r in rows])) % g, np.array([r[2] for r in rows])


@pytest.mark.slow  # 30 random match lists, a program per shape
@settings(max_examples=30, deadline=None)
@given(match_lists, st.randoms(use_true_random=False))
def test_permutation_equivariance(gm, rnd):
  g, rows = gm
  f, s, o = _arrays(g, rows)
  perm = np.array(rnd.sample(range(g), g))  # player p is renamed perm[p]
  theta = np.asarray(arena.fit_bradley_terry(f, s, o, None, g))
  renamed = np.asarray(arena.fit_bradley_terry(perm[f], perm[s], o, None, g))
  np.testing.assert_allclose(renamed[perm], theta, atol=1e-5)


@pytest.mark.slow  # 30 random match lists
@settings(max_examples=30, deadline=None)
@given(match_lists, st.integers(0, 6), st.integers(1, 6))
def test_an_added_win_never_lowers_the_winner(gm, winner, offset):
  g, rows = gm
  f, s, o = _arrays(g, rows)
  i, j = winner % g, (winner + offset) % g
  if i == j:
    return
  before = np.asarray(arena.fit_bradley_terry(f, s, o, None, g))
  after = np.asarray(arena.fit_bradley_terry(np.append(f, i), np.append(s, j), np.append(o, 1.0), None, g))
  assert after[i] >= before[i] - 1e-5


@pytest.mark.slow  # 30 random match lists
@settings(max_examples=30, deadline=None)
@given(match_lists, st.lists(st.booleans(), min_size=12, max_size=12))
def test_mirroring_a_match_changes_nothing(gm, flips):
  g, rows = gm
  f, s, o = _arrays(g, rows)
  flip = np.array(flips[: len(f)])
  mf, ms, mo = np.where(flip, s, f), np.where(flip, f, s), np.where(flip, 1.0 - o, o)
  np.testing.assert_allclose(
    arena.fit_bradley_terry(mf, ms, mo, None, g), arena.fit_bradley_terry(f, s, o, None, g), atol=1e-5
  )


# ───────────────────────────────────── standard errors (Laplace, sandwich) ─────────────────────────────────────


def reference_errors(first, second, outcome, weight, g, kind, l2=0.1):
  """Float64 reference on the literal match list of each group (no dense form, no JAX): θ from scipy, then
  A = Σ_m w p(1 − p) uuᵀ + λI (each match once, prior λ/2·‖θ‖²: the same optimum as L), Σ = A⁻¹ or
  A⁻¹ (Σ_m g_m g_mᵀ) A⁻¹, errors of θ_i − θ̄ (θ̄ over the players with a match)."""
  theta = arena.fit_bradley_terry_scipy(first, second, outcome, weight, g, l2=l2)
  out = np.zeros(theta.shape)
  for b in range(theta.shape[0]):
    live = (weight[b] > 0) & (first[b] != second[b])
    played = np.isin(np.arange(g), np.concatenate([first[b][live], second[b][live]])).astype(float)
    proj = np.eye(g) - np.outer(np.ones(g), played) / played.sum()
    a, meat = l2 * np.eye(g), np.zeros((g, g))
    for i, j, s, w in zip(first[b], second[b], outcome[b], weight[b]):
      if w == 0 or i == j:
        continue
      u = np.zeros(g)
      u[i], u[j] = 1.0, -1.0
      p = 1.0 / (1.0 + np.exp(-(theta[b, i] - theta[b, j])))
      a += w * p * (1 - p) * np.outer(u, u)
      meat += (w * (p - s)) ** 2 * np.outer(u, u)
    cov = np.linalg.inv(a)
    if kind == "sandwich":
      cov = cov @ meat @ cov
    out[b] = np.sqrt(np.diag(proj @ cov @ proj.T))
  return theta, out


@pytest.mark.parametrize("solver", SOLVER_TIERS)
@pytest.mark.parametrize("kind", arena.ERRORS)
def test_standard_errors_match_the_float64_reference(solver, kind):
  rng = np.random.default_rng(4)
  for args, g in ((random_matches(rng, 5, 6, 20, pad=3), 6), (live_matches(rng, 4, 12), 12)):
    theta, se = arena.fit_bradley_terry(*args, g, solver=solver, errors=kind)
    ref_theta, ref_se = reference_errors(*(np.asarray(a) for a in args), g, kind)
    np.testing.assert_allclose(theta, ref_theta, atol=TOL)
    np.testing.assert_allclose(se, ref_se, rtol=2e-3, atol=1e-5)
    assert se.shape == theta.shape and np.all(np.asarray(se) > 0)


def _bootstrap(first, second, outcome, g, rng, num=400):
  """Standard deviation of θ over `num` resamplings of the matches (one batched fit)."""
  idx = rng.integers(0, len(first), size=(num, len(first)))
  return np.asarray(arena.fit_bradley_terry(first[idx], second[idx], outcome[idx], None, g)).std(0)


@pytest.mark.slow  # 400 bootstrap fits
@pytest.mark.parametrize("soft", [False, True])
def test_standard_errors_agree_with_the_bootstrap(soft):
  """Small dense graphs: with Bernoulli verdicts Laplace and sandwich errors both match the bootstrap; with
  soft outcomes (0.9 / 0.1: less spread than a Bernoulli 1 / 0) the model-based Laplace errors are too
  wide and the sandwich still matches — why it is offered."""
  rng = np.random.default_rng(0)
  g, true = 5, np.array([1.2, 0.4, 0.0, -0.5, -1.1])
  i, j = np.triu_indices(g, 1)
  first, second = np.repeat(i, 24), np.repeat(j, 24)
  wins = rng.random(len(first)) < 1.0 / (1.0 + np.exp(-(true[first] - true[second])))
  outcome = np.where(wins, 0.9, 0.1) if soft else wins.astype(np.float64)
  boot = _bootstrap(first, second, outcome, g, rng)
  laplace = np.asarray(arena.fit_bradley_terry(first, second, outcome, None, g, errors="laplace")[1])
  sandwich = np.asarray(arena.fit_bradley_terry(first, second, outcome, None, g, errors="sandwich")[1])
  np.testing.assert_allclose(sandwich, boot, rtol=0.2)
  if soft:
    assert np.all(laplace > 1.15 * boot), (laplace, boot)
  else:
    np.testing.assert_allclose(laplace, boot, rtol=0.2)


def test_standard_errors_shrink_with_evidence_and_grow_for_sparse_players():
  g = 4
  i, j = np.triu_indices(g, 1)
  outcome = np.tile([0.9, 0.1, 0.9, 0.1, 0.9, 0.1], 8)
  few = arena.fit_bradley_terry(i, j, outcome[:6], None, g, errors="laplace")[1]
  many = arena.fit_bradley_terry(np.tile(i, 8), np.tile(j, 8), outcome, None, g, errors="laplace")[1]
  assert np.all(np.asarray(many) < 0.5 * np.asarray(few))
  # Player 3 in one match only: the least certain.
  se = np.asarray(
    arena.fit_bradley_terry(
      [0, 0, 1, 1, 0, 2], [1, 2, 2, 0, 3, 1], [0.9, 0.9, 0.5, 0.1, 0.9, 0.1], None, g, errors="laplace"
    )[1]
  )
  assert se.argmax() == 3
  with pytest.raises(ValueError, match="errors"):
    arena.fit_bradley_terry(i, j, outcome[:6], None, g, errors="fisher")


def test_a_player_without_matches_does_not_blur_the_others_errors():
  """Players 4 and 5 never play (failed judgments, or duplicates represented by another member): the
  errors of 0–3 are those of the 4-player fit; their own are large (prior only)."""
  rng = np.random.default_rng(2)
  first, second, outcome, _ = random_matches(rng, 1, 4, 30)
  small = np.asarray(arena.fit_bradley_terry(first, second, outcome, None, 4, errors="sandwich")[1])
  big = np.asarray(arena.fit_bradley_terry(first, second, outcome, None, 6, errors="sandwich")[1])
  np.testing.assert_allclose(big[:, :4], small, rtol=1e-4)
  laplace = np.asarray(arena.fit_bradley_terry(first, second, outcome, None, 6, errors="laplace")[1])
  assert np.all(laplace[:, 4:] > 5 * laplace[:, :4].max())
