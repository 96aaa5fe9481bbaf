"""Tests of the tournament schedulers (SPEC §5): call counts, bracket shapes, Swiss pairing rules, live
opponent choice, failure handling, native rankings and BT aggregation of the observed matches.

One file over 600 lines on purpose: it holds one concern, the schedulers' shared contract (`NAMES`, run over every
topology by the parametrised tests), with a section per topology; a new topology joins `NAMES` here."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena_jax.arena import fit_bradley_terry_host
from arena_jax.arena import tournaments as T
from arena_jax.arena.testing import strength_judge

NAMES = (
  "round_robin",
  "live",
  "anchor",
  "seeded_single_elimination",
  "double_elimination",
  "swiss",
  "live_info",
  "info_budget",
)
PAPER_NAMES = NAMES[:6]  # the information-gain schedules rank by BT on sparse graphs: see their own tests
FAST = settings(max_examples=40, deadline=None)


def _latent(num_players, seed):
  """Distinct latent strengths in a random order (the strongest is not at a fixed index)."""
  return np.random.default_rng(seed).permutation(num_players).astype(np.float64)


def _kendall_tau(a, b):
  a, b = np.asarray(a), np.asarray(b)
  i, j = np.triu_indices(len(a), 1)
  return float(np.mean(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])))


def _unordered(pairs):
  return [tuple(sorted(p)) for p in pairs]


class _Recorder:
  """A judge that also keeps every batch it was asked about."""

  def __init__(self, judge):
    self.judge, self.batches = judge, []

  def __call__(self, pairs):
    self.batches.append(list(pairs))
    return self.judge(pairs)


# ───────────────────────────────────────── call counts and rounds ─────────────────────────────────────────


@pytest.mark.parametrize("name", NAMES)
def test_call_counts_and_rounds(name):
  for g in range(2, 18):
    sched = T.play(T.make_scheduler(name, g, anchor=0, seed=g), strength_judge(_latent(g, g)))
    assert sched.done and sched.num_failed == 0
    assert sched.num_issued == T.expected_calls(name, g, anchor=0) == len(sched.observed()[0])
    log_g = math.ceil(math.log2(g))
    closed_form = {
      "round_robin": (g * (g - 1) // 2, 1),
      "live": (3 * g - 6 if g >= 3 else 1, g - 1),
      "anchor": (g - 1, 1),
      "seeded_single_elimination": (2 * g - 2, 1 + log_g),
      "double_elimination": (2 * g - 2 + (g - 1), None),  # seeded by the anchor because anchor= is given
      "swiss": (log_g * (g // 2), log_g),
      "live_info": (3 * g - 6 if g >= 3 else 1, g - 1),
      "info_budget": (3 * g - 6 if g >= 3 else 1, -(-max(1, 3 * g - 6) // (g // 2))),
    }[name]
    assert sched.num_issued == closed_form[0], g
    if closed_form[1] is not None:
      assert sched.num_rounds == closed_form[1], g


CLOSED_FORMS = {  # each scheduler's `calls_formula`, as a function of G (run as the trainer runs it)
  "round_robin": lambda g: g * (g - 1) // 2,
  "live": lambda g: 3 * g - 6,
  "anchor": lambda g: g - 1,
  "seeded_single_elimination": lambda g: 2 * g - 2,
  "double_elimination": lambda g: 3 * g - 3,
  "swiss": lambda g: (g - 1).bit_length() * (g // 2),
  "live_info": lambda g: 3 * g - 6,
  "info_budget": lambda g: 3 * g - 6,
}


@pytest.mark.parametrize("name", sorted(T.SCHEDULERS))
def test_calls_formula_matches_expected_calls(name):
  cls = T.SCHEDULERS[name]
  assert cls.calls_formula, "every topology states its cost for docs/judges.md"
  for g in range(3, 33):
    got = T.expected_calls(name, g, **({"anchor": 0} if cls.needs_anchor else {}))
    assert got == CLOSED_FORMS[name](g), (name, g, cls.calls_formula)


def test_expected_calls_reference_values():
  assert T.expected_calls("live", 16) == 42 and T.expected_calls("round_robin", 16) == 120
  assert T.expected_calls("live", 2) == 1 and T.expected_calls("live", 3) == 3
  assert T.expected_calls("double_elimination", 16) == 30  # unseeded: WB 15 + LB 14 + final 1
  assert T.expected_calls("double_elimination", 16, anchor=3) == 45
  assert T.expected_calls("seeded_single_elimination", 16, seeding="index") == 15
  assert T.expected_calls("swiss", 16, num_rounds_max=2) == 16


def test_each_batch_runs_concurrently_and_each_pair_is_issued_once():
  """Within a bracket/Swiss round no player appears twice, and next_matches never repeats a batch."""
  for name in NAMES[1:]:
    sched = T.make_scheduler(name, 11, anchor=4, seed=2)
    judge = strength_judge(_latent(11, 0))
    while not sched.done:
      batch = sched.next_matches()
      assert sched.next_matches() == []  # nothing more until these results are in
      seeding_round = all(4 in pair for pair in batch)  # the anchor comparisons before a bracket
      if name not in ("anchor", "live", "live_info", "info_budget") and not seeding_round:
        players = [p for pair in batch for p in pair]
        assert len(players) == len(set(players)), (name, batch)
      for pair, s in zip(batch, judge(batch)):
        sched.record(*pair, s)
    assert sched.next_matches() == []


# ───────────────────────────────────────── brackets ─────────────────────────────────────────


def test_bracket_order_is_the_standard_recursion():
  assert T.bracket_order(2) == [0, 1]
  assert T.bracket_order(4) == [0, 3, 1, 2]
  assert T.bracket_order(8) == [0, 7, 3, 4, 1, 6, 2, 5]
  for size in (2, 4, 8, 16, 32):
    order = T.bracket_order(size)
    assert sorted(order) == list(range(size))
    assert all(a + b == size - 1 for a, b in zip(order[::2], order[1::2]))  # seed k meets seed size−1−k


@pytest.mark.parametrize(
  "g, first_round, second_round",
  [
    # seeding="index": seed k (0-based) is trajectory k; byes go to the top P − G seeds.
    (5, [(3, 4)], [(0, 3), (1, 2)]),
    (6, [(3, 4), (2, 5)], [(0, 3), (1, 2)]),
    (12, [(7, 8), (4, 11), (6, 9), (5, 10)], [(0, 7), (3, 4), (1, 6), (2, 5)]),
  ],
)
def test_single_elimination_byes_and_pairings(g, first_round, second_round):
  # Index 0 strongest: the better seed always wins, so round 2 is fully determined.
  judge = _Recorder(strength_judge(-np.arange(g, dtype=float)))
  sched = T.play(T.make_scheduler("seeded_single_elimination", g, seeding="index"), judge)
  assert judge.batches[0] == first_round
  assert judge.batches[1] == second_round
  assert sched.champion == 0 and sched.num_issued == g - 1
  got_bye = set(range(g)) - {p for pair in first_round for p in pair}
  assert got_bye == set(range(2 ** math.ceil(math.log2(g)) - g))


def test_single_elimination_seeds_from_the_anchor_comparisons():
  g, anchor = 6, 2
  # Scores against the anchor: 5 ≻ 3 ≻ anchor-level ties ... chosen through latent strengths.
  strengths = np.array([0.0, -1.0, 0.5, 3.0, 0.5, 4.0])
  judge = _Recorder(strength_judge(strengths))
  sched = T.play(T.make_scheduler("seeded_single_elimination", g, anchor=anchor), judge)
  assert judge.batches[0] == [(i, anchor) for i in range(g) if i != anchor]
  # Seeding points: 5, 3 → 0.9; 4 → 0.5 (tie with the anchor); anchor → mean(0.1, 0.1, 0.5, 0.9, 0.9)=0.5;
  # 0, 1 → 0.1. Equal points are ordered by index.
  assert sched.seeds == [3, 5, 2, 4, 0, 1]
  assert judge.batches[1] == [(4, 0), (2, 1)]  # seeds 4 v 5 and 3 v 6; seeds 1, 2 have byes
  assert sched.champion == 5
  ranking = sched.native_ranking()
  assert ranking[5] == 0 and ranking[3] == 1  # finalist
  # Ranks follow elimination rounds: the semi-final losers before the first-round losers.
  assert max(ranking[[2, 4]]) < min(ranking[[0, 1]])


def test_single_elimination_ties_within_a_round_by_average_points():
  g = 4  # seeds 0..3; first round (0, 3), (1, 2); 0 and 1 win, 3 and 2 go out in round 1
  outcomes = {(0, 3): 0.9, (1, 2): 0.6, (0, 1): 0.9}
  sched = T.make_scheduler("seeded_single_elimination", g, seeding="index")
  T.play(sched, lambda pairs: [outcomes[p] for p in pairs])
  # 2 lost 0.6 → 0.4 points, 3 lost 0.9 → 0.1 points: 2 ranks above 3.
  np.testing.assert_allclose(sched.native_ranking(), [0, 1, 2, 3])
  np.testing.assert_allclose(sched.native_scores(), [1, 2 / 3, 1 / 3, 0])


def test_bracket_tie_or_failure_goes_to_the_better_seed():
  for outcome in (0.5, None):
    sched = T.make_scheduler("seeded_single_elimination", 4, seeding="index")
    T.play(sched, lambda pairs, o=outcome: [o if p == (0, 3) else 0.1 for p in pairs])
    # (0, 3): tie/failure → seed 0; (1, 2) → 2 wins; final (0, 2) → 2 wins.
    assert sched.champion == 2 and sched.num_seed_decided == 1
    assert sched.num_failed == (1 if outcome is None else 0)


def test_double_elimination_structure():
  g = 8
  judge = _Recorder(strength_judge(-np.arange(g, dtype=float)))  # the better seed always wins
  sched = T.play(T.make_scheduler("double_elimination", g, seeding="index"), judge)
  assert judge.batches == [
    [(0, 7), (3, 4), (1, 6), (2, 5)],  # WB round 1
    [(0, 3), (1, 2), (4, 7), (5, 6)],  # WB round 2 ‖ LB round over the four WB round-1 losers
    [(0, 1), (2, 5), (3, 4)],  # WB final ‖ LB: survivors 4, 5 + WB drops 2, 3 (seed fold)
    [(2, 3)],  # LB: 2, 3 + WB-final loser 1; the best seed (1) has the bye
    [(1, 2)],
    [(0, 1)],  # grand final, WB champion first; no bracket reset
  ]
  assert sched.num_issued == 2 * g - 2 and sched.champion == 0
  ranking = sched.native_ranking()
  np.testing.assert_allclose(ranking[:4], [0, 1, 2, 3])
  assert ranking[4] == ranking[5] and ranking[6] == ranking[7] and ranking[5] < ranking[6]


def test_double_elimination_survives_one_loss():
  g = 4  # seed 0 loses its WB final to 1, then wins the LB final and the grand final
  outcomes = {(0, 3): 0.9, (1, 2): 0.9, (0, 1): 0.1, (2, 3): 0.9}
  judge = _Recorder(lambda pairs: [outcomes.get(p, 0.9) for p in pairs])
  sched = T.play(T.make_scheduler("double_elimination", g, seeding="index"), judge)
  assert judge.batches[-1] == [(1, 0)]
  assert sched.champion == 1  # the grand final (1, 0) → 0.9 for 1
  assert sched.native_ranking()[0] == 1


# ───────────────────────────────────────── swiss ─────────────────────────────────────────


@FAST
@given(
  g=st.integers(2, 17),
  seed=st.integers(0, 2**16),
  outcomes=st.lists(st.sampled_from([0.1, 0.5, 0.9, 0.3, None]), min_size=64, max_size=64),
)
def test_swiss_never_rematches_and_byes_rotate(g, seed, outcomes):
  it = iter(outcomes * 4)
  sched = T.play(T.make_scheduler("swiss", g, seed=seed), lambda pairs: [next(it) for _ in pairs])
  issued = _unordered(zip(*sched.observed()[:2]))
  assert sched.num_issued == T.expected_calls("swiss", g)  # a complete rematch-free pairing every round
  assert len(set(issued)) == len(issued)
  byes = [b for b in sched.byes if b is not None]
  assert len(byes) == (sched.total_rounds if g % 2 else 0)
  assert len(set(byes)) == len(byes)  # nobody gets a second bye while others had none


def test_swiss_all_pairs_distinct_including_failures():
  g = 9
  issued = []

  def judge(pairs):
    issued.extend(_unordered(pairs))
    return [None] * len(pairs)

  sched = T.play(T.make_scheduler("swiss", g, seed=3), judge)
  assert len(set(issued)) == len(issued) == sched.num_failed == sched.num_issued
  assert len(sched.observed()[0]) == 0
  # Only byes scored: a failed judgment is no tie.
  assert sched.points.sum() == sched.total_rounds


def test_swiss_points_bye_and_buchholz():
  g = 3  # round 1: two play, the third gets a bye (+1); round 2: the bye player meets one of them
  sched = T.play(T.make_scheduler("swiss", g, seed=0), strength_judge([2.0, 1.0, 0.0]))
  assert sched.total_rounds == 2 and sched.num_issued == 2
  assert sched.points.sum() == 2 + 2  # two decided matches, two byes
  f, s, _ = sched.observed()
  for i in range(g):
    opponents = [int(b) for a, b in zip(f, s) if a == i] + [int(a) for a, b in zip(f, s) if b == i]
    assert sched.buchholz()[i] == sum(sched.points[j] for j in opponents)
  assert sched.native_ranking()[0] == 0


@pytest.mark.parametrize(
  "name, options", [("swiss", {}), ("double_elimination", {}), ("seeded_single_elimination", {"seeding": "shuffle"})]
)
def test_seeded_determinism(name, options):
  g = 13
  runs = []
  for seed in (5, 5, 6):
    judge = strength_judge(_latent(g, 1), noise=1.0, seed=11)
    runs.append(T.play(T.make_scheduler(name, g, seed=seed, **options), judge))
  a, b, c = runs
  for x, y in zip(a.observed(), b.observed()):
    np.testing.assert_array_equal(x, y)
  np.testing.assert_array_equal(a.native_ranking(), b.native_ranking())
  assert list(a.observed()[0][:6]) != list(c.observed()[0][:6])  # another seed, another first round


# ───────────────────────────────────────── live ─────────────────────────────────────────


def test_live_meets_best_worst_median():
  g = 5
  strengths = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # later arrivals stronger
  sched = T.play(T.make_scheduler("live", g), strength_judge(strengths))
  assert sched.opponents[0] == [] and sched.opponents[1] == [0] and sched.opponents[2] == [1, 0]
  # Before 3 arrives the leaderboard is 2 ≻ 1 ≻ 0: best 2, worst 0, median 1.
  assert sched.opponents[3] == [2, 0, 1]
  # Before 4: 3 ≻ 2 ≻ 1 ≻ 0: best 3, worst 0, median (n − 1)//2 = position 1 → 2.
  assert sched.opponents[4] == [3, 0, 2]
  assert sched.num_rounds == g - 1
  assert list(np.argsort(-sched.native_scores())) == [4, 3, 2, 1, 0]


def test_live_tie_break_by_arrival():
  # Every judgment a tie: strengths stay equal, so positions follow arrival (earlier = better).
  sched = T.play(T.make_scheduler("live", 6, arrival_order=[5, 3, 1, 0, 2, 4]), lambda p: [0.5] * len(p))
  assert sched.opponents[1] == [5, 3] and sched.opponents[0] == [5, 1, 3]
  assert sched.opponents[2] == [5, 0, 3]


@FAST
@given(g=st.integers(4, 12), seeds=st.tuples(st.integers(0, 999), st.integers(0, 999)))
def test_live_arrival_order_changes_the_graph(g, seeds):
  graphs = []
  for seed in seeds + (seeds[0],):
    order = np.random.default_rng(seed).permutation(g)
    sched = T.play(T.make_scheduler("live", g, arrival_order=order), strength_judge(_latent(g, 7)))
    graphs.append(frozenset(_unordered(zip(*sched.observed()[:2]))))
    assert sched.num_issued == 3 * g - 6
    for k, arrival in enumerate(order):  # each arrival meets min(k, 3) distinct earlier arrivals
      assert len(set(sched.opponents[arrival])) == min(k, 3)
      assert set(sched.opponents[arrival]) <= set(order[:k].tolist())
  assert graphs[0] == graphs[2]  # same order, same graph (two orders may coincide by chance: see below)


def test_live_arrival_order_changes_the_graph_deterministic():
  g, judge = 8, strength_judge(_latent(8, 3))
  a = T.play(T.make_scheduler("live", g, arrival_order=range(g)), judge)
  b = T.play(T.make_scheduler("live", g, arrival_order=range(g)[::-1]), judge)
  assert set(_unordered(zip(*a.observed()[:2]))) != set(_unordered(zip(*b.observed()[:2])))


def test_live_win_rate_leaderboard_and_no_wait():
  g = 9
  judge = strength_judge(_latent(g, 4))
  sched = T.play(T.make_scheduler("live", g, leaderboard="win_rate"), judge)
  assert sched.num_issued == 3 * g - 6 and sched.num_rounds == g - 1
  eager = T.play(T.make_scheduler("live", g, wait_for_results=False), judge)
  assert eager.num_issued == 3 * g - 6 and eager.num_rounds == 1  # all arrivals known upfront, no waiting


def test_live_streaming_arrivals():
  g = 6
  judge = strength_judge(_latent(g, 5))
  sched = T.make_scheduler("live", g, streaming=True)
  assert not sched.done and sched.next_matches() == []
  sched.arrive(4)
  assert sched.next_matches() == [] and not sched.done  # alone: nothing to compare
  sched.arrive(2)
  batch = sched.next_matches()
  assert batch == [(2, 4)]
  sched.arrive(0)  # arrives while (2, 4) is pending: queued until that result is in
  assert sched.next_matches() == []
  sched.record(2, 4, judge(batch)[0])
  batch = sched.next_matches()
  assert sorted(batch) == [(0, 2), (0, 4)]  # 0 meets the best and the worst of {2, 4}
  with pytest.raises(ValueError, match="already arrived"):
    sched.arrive(2)
  for i in (1, 3, 5):
    sched.arrive(i)
  for pair, s in zip(batch, judge(batch)):
    sched.record(*pair, s)
  T.play(sched, judge)
  assert sched.done and sched.num_issued == 3 * g - 6
  # The streamed tournament equals the upfront one with the same arrival order.
  reference = T.play(T.make_scheduler("live", g, arrival_order=[4, 2, 0, 1, 3, 5]), judge)
  np.testing.assert_array_equal(sched.observed()[0], reference.observed()[0])
  np.testing.assert_array_equal(sched.observed()[1], reference.observed()[1])


def test_live_streaming_close_with_missing_members():
  sched = T.make_scheduler("live", 5, streaming=True)
  for i in (0, 1, 2):
    sched.arrive(i)
  with pytest.raises(RuntimeError, match="arrive"):
    T.play(sched, strength_judge(np.arange(5.0)))
  assert not sched.done
  sched.close()
  assert sched.done and sched.num_issued == 3
  with pytest.raises(ValueError, match="close"):
    sched.arrive(3)


# ───────────────────────────────────── information-gain schedules ─────────────────────────────────────


def test_arrival_quota_spreads_a_budget_over_the_arrivals():
  assert T.arrival_quota(16) == [0, 1, 2] + [3] * 13  # the paper's min(t, 3)
  assert T.arrival_quota(2) == [0, 1] and T.arrival_quota(3) == [0, 1, 2]
  for g, budget in ((16, 21), (16, 63), (8, 5), (9, 30)):
    quota = T.arrival_quota(g, budget)
    assert sum(quota) == budget and all(0 <= q <= t for t, q in enumerate(quota))
    top = max(quota)  # water-filled level by level: every arrival is at the top level or one below
    assert all(min(t, top - 1) <= q <= min(t, top) for t, q in enumerate(quota)), quota
  assert T.arrival_quota(6, 1000) == list(range(6))  # capped: a round robin in arrival order
  for bad in (0, -3, 2.5, True):
    with pytest.raises(ValueError, match="budget"):
      T.arrival_quota(8, bad)


@pytest.mark.parametrize("name", ["live", "live_info"])
def test_live_budget_and_arrival_order(name):
  g, order = 12, np.random.default_rng(3).permutation(12)
  for budget in (None, 7, 30, 66):
    sched = T.play(
      T.make_scheduler(name, g, arrival_order=order, seed=2, budget=budget),
      strength_judge(_latent(g, 4), noise=1.0, seed=1),
    )
    quota = T.arrival_quota(g, budget)
    assert sched.num_issued == sum(quota) == T.expected_calls(name, g, budget=budget)
    assert sched.num_rounds == sum(q > 0 for q in quota)
    for k, arrival in enumerate(order):  # only players already in, each at most once
      assert len(set(sched.opponents[arrival])) == quota[k]
      assert set(sched.opponents[arrival]) <= set(order[:k].tolist())
  assert len(set(_unordered(zip(*sched.observed()[:2])))) == g * (g - 1) // 2  # budget 66: every pair


def test_pair_information_is_the_log_det_gain_of_the_laplace_posterior():
  rng = np.random.default_rng(0)
  a = rng.normal(size=(5, 5))
  cov = a @ a.T + 0.5 * np.eye(5)
  theta = rng.normal(size=5)
  first, second = np.array([0, 1, 4]), np.array([3, 2, 0])
  gain, c = T.pair_information(theta, cov, first, second)
  precision = np.linalg.inv(cov)
  for k in range(3):
    u = np.zeros(5)
    u[first[k]], u[second[k]] = 1.0, -1.0
    v = u @ cov @ u
    p = 1.0 / (1.0 + np.exp(-(theta[first[k]] - theta[second[k]]) / np.sqrt(1 + np.pi * v / 8)))
    np.testing.assert_allclose(c[k], p * (1 - p))
    expected = 0.5 * (np.linalg.slogdet(precision + c[k] * np.outer(u, u))[1] - np.linalg.slogdet(precision)[1])
    np.testing.assert_allclose(gain[k], expected, rtol=1e-9)


def test_informative_pairs_prefer_close_and_uncertain_pairs():
  rng = np.random.default_rng(0)
  theta, cov = np.array([3.0, 0.0, 0.1, -3.0]), 0.5 * np.eye(4)
  # (1, 2) is a coin flip; (0, 3) and (0, 1) are nearly certain outcomes.
  assert T.choose_informative_pairs(theta, cov, [(0, 1), (1, 2), (0, 3)], 1, rng) == [(1, 2)]
  # At equal means, the more uncertain pair.
  cov = np.diag([0.2, 0.2, 2.0, 2.0])
  assert T.choose_informative_pairs(np.zeros(4), cov, [(0, 1), (2, 3)], 1, rng) == [(2, 3)]
  # A batch spreads: with nothing known, the greedy design of G/2 pairs is a perfect matching.
  pairs = [(i, j) for i in range(8) for j in range(i + 1, 8)]
  batch = T.choose_informative_pairs(np.zeros(8), np.eye(8), pairs, 4, rng)
  assert sorted(p for pair in batch for p in pair) == list(range(8))


def test_informative_pairs_update_the_covariance_exactly():
  """The second pick is the best pair under the posterior that includes the first pick's information."""
  rng = np.random.default_rng(1)
  theta, cov = rng.normal(size=6) * 0.3, np.eye(6)
  pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
  first, second = T.choose_informative_pairs(theta, cov, pairs, 2, np.random.default_rng(0))
  u = np.zeros(6)
  u[list(first)] = [1.0, -1.0]
  c = T.pair_information(theta, cov, np.array([first[0]]), np.array([first[1]]))[1][0]
  updated = np.linalg.inv(np.linalg.inv(cov) + c * np.outer(u, u))
  rest = [p for p in pairs if p != first]
  gains = T.pair_information(theta, updated, np.array([p[0] for p in rest]), np.array([p[1] for p in rest]))[0]
  assert second == rest[int(np.argmax(gains))]


def test_info_budget_rounds_and_budget():
  g = 10
  judge = _Recorder(strength_judge(_latent(g, 2), noise=1.0, seed=0))
  sched = T.play(T.make_scheduler("info_budget", g, seed=4, budget=17, batch_size=4), judge)
  assert [len(b) for b in judge.batches] == [4, 4, 4, 4, 1] and sched.num_rounds == 5
  issued = [tuple(p) for b in judge.batches for p in b]
  assert len(set(_unordered(issued))) == 17 and all(i < j for i, j in issued)  # never a pair twice
  first_round = [p for pair in judge.batches[0] for p in pair]
  assert len(set(first_round)) == 8  # no result yet: disjoint pairs
  full = T.play(T.make_scheduler("info_budget", 6, budget=100), strength_judge(_latent(6, 1)))
  assert full.num_issued == 15 == T.expected_calls("info_budget", 6, budget=100)  # capped at every pair once
  for bad in ({"budget": 0}, {"batch_size": 0}):
    with pytest.raises(ValueError, match=next(iter(bad))):
      T.make_scheduler("info_budget", 6, **bad)


@pytest.mark.parametrize("name", ["live_info", "info_budget"])
def test_information_gain_schedules_are_seeded_and_rank_by_bt(name):
  g = 12
  strengths = _latent(g, 5)
  runs = [
    T.play(T.make_scheduler(name, g, seed=seed, arrival_order=range(g)), strength_judge(strengths)) for seed in (3, 3)
  ]
  for x, y in zip(runs[0].observed(), runs[1].observed()):
    np.testing.assert_array_equal(x, y)
  theta = fit_bradley_terry_host(*runs[0].observed(), None, g)
  np.testing.assert_allclose(runs[0].native_scores(), theta, atol=1e-6)
  assert _kendall_tau(theta, strengths) > 0.6  # a noiseless judge: the order is mostly recovered


# ───────────────────────────────────────── failures ─────────────────────────────────────────


@pytest.mark.parametrize("name", NAMES)
def test_failed_judgments_are_dropped_and_counted(name):
  g = 10
  judge = strength_judge(_latent(g, 6), fail_rate=0.3, seed=1)
  sched = T.play(T.make_scheduler(name, g, anchor=1, seed=0), judge)
  first, second, outcome = sched.observed()
  assert sched.num_failed > 0
  assert len(outcome) == sched.num_issued - sched.num_failed
  assert not np.any(outcome == 0.5)  # the noiseless judge never ties; a failure never becomes one
  assert first.dtype == np.int32 and outcome.dtype == np.float64
  assert np.all(np.isfinite(sched.native_scores()))


def test_round_robin_win_rate_over_observed_matches():
  sched = T.make_scheduler("round_robin", 3)
  outcomes = {(0, 1): 0.9, (0, 2): None, (1, 2): None}
  T.play(sched, lambda pairs: [outcomes[p] for p in pairs])
  np.testing.assert_allclose(sched.native_scores(), [0.9, 0.1, 0.5])  # 2 has no match: 1/2
  assert sched.num_failed == 2


def test_anchor_native_scores():
  sched = T.make_scheduler("anchor", 4, anchor=2)
  outcomes = {(0, 2): 0.9, (1, 2): None, (3, 2): 0.1}
  T.play(sched, lambda pairs: [outcomes[p] for p in pairs])
  np.testing.assert_allclose(sched.native_scores(), [0.9, 0.5, 0.5, 0.1])
  np.testing.assert_allclose(sched.native_ranking(), [0, 1.5, 1.5, 3])  # ties share the average rank


# ───────────────────────────────────── noiseless judge: strongest first ─────────────────────────────────────


@FAST
@given(g=st.integers(2, 17), seed=st.integers(0, 2**16), anchor_frac=st.floats(0, 0.999))
def test_noiseless_judge_strongest_first(g, seed, anchor_frac):
  strengths = _latent(g, seed)
  best, anchor = int(np.argmax(strengths)), int(anchor_frac * g)
  order = np.random.default_rng(seed + 1).permutation(g)
  for name in PAPER_NAMES:
    sched = T.play(T.make_scheduler(name, g, anchor=anchor, seed=seed, arrival_order=order), strength_judge(strengths))
    scores, ranking = sched.native_scores(), sched.native_ranking()
    assert name == "swiss" or scores[best] == scores.max(), name
    if name in ("round_robin", "seeded_single_elimination", "double_elimination"):
      assert ranking[best] == 0, name
    elif name == "anchor":  # everyone who beats the anchor shares the top score
      num_above = int(np.sum(strengths > strengths[anchor]))  # all score 0.9 vs the anchor
      assert ranking[best] == (0 if anchor == best else (num_above - 1) / 2)
    elif name == "swiss":  # most points; a bye holder may tie on points and win on Buchholz (G odd)
      assert sched.points[best] == sched.points.max()
      if g & (g - 1) == 0:
        assert ranking[best] == 0


def test_noiseless_live_strongest_first():
  # BT on the sparse live graph with soft outcomes: an undefeated late arrival with few matches can
  # trail a 12–1 early arrival at G = 17 (seen in ~0.1% of random orders), so check G ≤ 12 exhaustively
  # over a fixed sample and both leaderboards.
  for trial in range(60):
    rng = np.random.default_rng(trial)
    g = int(rng.integers(2, 13))
    strengths = rng.permutation(g).astype(float)
    for leaderboard in ("bt", "win_rate"):
      sched = T.play(
        T.make_scheduler("live", g, arrival_order=rng.permutation(g), leaderboard=leaderboard),
        strength_judge(strengths),
      )
      assert sched.native_ranking()[int(np.argmax(strengths))] == 0, (trial, leaderboard)


# ───────────────────────────────────────── Bradley–Terry aggregation ─────────────────────────────────────────


def test_round_robin_bt_recovers_latent_order():
  g = 12
  strengths = _latent(g, 8)
  sched = T.play(T.make_scheduler("round_robin", g), strength_judge(strengths))
  theta = fit_bradley_terry_host(*sched.observed(), None, g)
  assert _kendall_tau(theta, strengths) == 1.0
  noisy = T.play(T.make_scheduler("round_robin", g), strength_judge(strengths, noise=1.5, seed=0))
  theta = fit_bradley_terry_host(*noisy.observed(), None, g)
  assert _kendall_tau(theta, strengths) > 0.7


@pytest.mark.parametrize("name", NAMES[1:])
def test_every_topology_feeds_bt(name):
  g = 16
  strengths = _latent(g, 9)
  sched = T.play(T.make_scheduler(name, g, anchor=0, seed=1), strength_judge(strengths))
  theta = fit_bradley_terry_host(*sched.observed(), None, g)
  assert theta.shape == (g,) and np.all(np.isfinite(theta))
  assert _kendall_tau(theta, strengths) > 0.3, name
  if name == "live":
    np.testing.assert_allclose(sched.native_scores(), theta, atol=1e-6)


# ───────────────────────────────────────── invalid inputs ─────────────────────────────────────────


def test_invalid_construction():
  with pytest.raises(ValueError, match="unknown topology .knockout.; choose one of"):
    T.make_scheduler("knockout", 4)
  with pytest.raises(ValueError, match="num_players"):
    T.make_scheduler("round_robin", 1)
  with pytest.raises(ValueError, match="num_players"):
    T.expected_calls("live", 1)
  for bad in ([0, 1, 1, 3], [0, 1, 2], [0, 1, 2, 4], [[0, 1], [2, 3]]):
    with pytest.raises(ValueError, match="arrival_order"):
      T.make_scheduler("live", 4, arrival_order=bad)
  for name in ("anchor", "seeded_single_elimination", "double_elimination"):
    with pytest.raises(ValueError, match="anchor"):
      T.make_scheduler(name, 4, anchor=4)
    with pytest.raises(ValueError, match="anchor"):
      T.make_scheduler(name, 4, anchor=-1)
  for name in ("anchor", "seeded_single_elimination"):
    with pytest.raises(ValueError, match="anchor="):
      T.make_scheduler(name, 4)
  with pytest.raises(ValueError, match="leaderboard"):
    T.make_scheduler("live", 4, leaderboard="elo")
  with pytest.raises(ValueError, match="seeding"):
    T.make_scheduler("double_elimination", 4, seeding="random")
  with pytest.raises(ValueError, match="streaming"):
    T.make_scheduler("live", 4, arrival_order=[0, 1, 2, 3], streaming=True)
  with pytest.raises(ValueError, match="streaming"):
    T.make_scheduler("live", 4).arrive(0)


def test_invalid_records():
  sched = T.make_scheduler("round_robin", 3)
  sched.next_matches()
  with pytest.raises(ValueError, match="never issued"):
    T.make_scheduler("swiss", 4).record(0, 1, 0.9)  # queued but not yet handed out
  with pytest.raises(ValueError, match="issued as"):
    sched.record(1, 0, 0.9)
  for bad in (1.5, -0.1, float("nan"), "win"):
    with pytest.raises(ValueError, match="outcome"):
      sched.record(0, 1, bad)
  with pytest.raises(ValueError, match="first"):
    sched.record(3, 1, 0.9)
  with pytest.raises(ValueError, match="second"):
    sched.record(0, 7, 0.9)
  sched.record(0, 1, 0.9)
  with pytest.raises(ValueError, match="already recorded"):
    sched.record(0, 1, 0.9)
  assert sched.num_issued == 3 and len(sched.observed()[0]) == 1


def test_play_checks_judge_length():
  with pytest.raises(ValueError, match="outcomes"):
    T.play(T.make_scheduler("round_robin", 3), lambda pairs: [0.9])


def test_registry():
  assert set(T.SCHEDULERS) == set(NAMES)
  for name, cls in T.SCHEDULERS.items():
    assert cls.name == name and issubclass(cls, T.Scheduler)
  with pytest.raises(ValueError, match="already registered"):
    T.register_scheduler("swiss")(type("Again", (T.Swiss,), {}))
