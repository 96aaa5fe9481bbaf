"""Cost and fidelity of every tournament topology × aggregation rule, with simulated judges (SPEC §4–§6).

    python -m benchmarks.tournament_fidelity [--groups 200] [--sizes 8,16] [--noises 0.5,1.0]
        [--tie_band 0.25] [--position_bias 0.5] [--no_debias] [--margin 0.4] [--shrinkage 1.0]
        [--budgets 21,42,63,84,120] [--curve_size 16] [--seed 0]

The simulated judge knows each trajectory's latent quality θ ~ N(0, 1). Asked about a pair it sees the
two in a presentation order (random per query when debiasing is on, SPEC §4 (1); canonical otherwise),
perceives d = θ_shown_first − θ_shown_second + position_bias + Logistic(0, noise), calls a tie when
|d| < tie_band and otherwise a win for the side d favours; the verdict is mapped back to the canonical
order and turned into a soft outcome with margin m. Two judges are simulated, one per `--noises` value
(a sharper and a noisier one), both with the same position bias.

For each judge, group size G and topology (`arena_jax.arena.SCHEDULERS`, plus `random_pairs`: live's
number of calls spent on distinct pairs drawn uniformly, one round — the baseline an informed schedule
must beat) the same groups are ranked four ways:
  native        the topology's own rule (win rate, BT for live*/info_budget, anchor score, elimination/Swiss rank)
  win_rate      mean soft score over the observed matches
  bt            batched Bradley–Terry on the observed matches (`arena_jax.arena.fit_bradley_terry`)
  bt_shrinkage  the advantage direction under `reward.bt_shrinkage` = κ: f_i·(θ_i − θ̄), f_i = z_i²/(z_i² + κ)
and compared by Kendall τ-b with the latent truth and with round-robin + BT of the same group (a separate
full round robin judged by the same judge). Judge calls and sequential judge rounds per group are counted.

The budget curve (G = `--curve_size`): τ against the truth (BT aggregation) of the paper's live rule
(best/worst/median, generalised by `arena.tournaments.leaderboard_positions`), of `live_info`,
`info_budget` and random pairs, each given `--budgets` judge calls per group (live's are spread over the
arrivals by `arena.tournaments.arrival_quota`).

The last line is JSON; its "topologies" entry is the headline: G = 16 (or the largest size run), the
noise-1.0 judge (or the first), BT aggregation — {name: {"calls", "tau_truth", "tau_round_robin"}}.
"""

from __future__ import annotations

import argparse
import heapq
import math

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402

from arena_jax import arena, rl  # noqa: E402
from arena_jax.arena import tournaments  # noqa: E402

AGGREGATIONS = ("native", "win_rate", "bt", "bt_shrinkage")
BASELINE = "random_pairs"
CURVE_RULES = ("live", "live_info", "info_budget", BASELINE)


class SimulatedJudge:
  """Latent-quality judge with logistic noise, a tie band and a position bias (see module doc)."""

  def __init__(self, theta, *, noise, tie_band, position_bias, debias, margin, rng):
    self.theta, self.noise, self.tie_band = np.asarray(theta), noise, tie_band
    self.bias, self.debias, self.rng = position_bias, debias, rng
    self.win = arena.verdict_to_outcome(arena.Verdict.FIRST_WINS, margin)

  def __call__(self, pairs):
    out = []
    for i, j in pairs:
      swap = self.debias and self.rng.random() < 0.5
      a, b = (j, i) if swap else (i, j)
      d = self.theta[a] - self.theta[b] + self.bias + self.rng.logistic(0.0, self.noise)
      s = 0.5 if abs(d) < self.tie_band else (self.win if d > 0 else 1.0 - self.win)
      out.append(1.0 - s if swap else s)  # back to the canonical (i, j) order
    return out


class RandomPairs(tournaments.RoundRobin):
  """Baseline (not a registered topology): `budget` distinct pairs of the round robin, drawn uniformly
  from `seed`, judged in one round; ranked by BT."""

  name = BASELINE

  def __init__(self, num_players, *, budget=None, **kwargs):
    self.budget = self.expected_calls(num_players, budget=budget)  # before the first round is drawn
    super().__init__(num_players, **kwargs)

  def _advance(self):
    pairs = super()._advance()
    pick = np.random.default_rng(self.seed).choice(len(pairs), min(self.budget, len(pairs)), replace=False)
    return [pairs[k] for k in sorted(pick)]

  def native_scores(self):
    f, s, o = self.observed()
    return arena.fit_bradley_terry_host(f, s, o, None, self.num_players)

  @classmethod
  def expected_calls(cls, num_players, **options):
    return tournaments.InfoBudget.expected_calls(num_players, **options)


def make(name, g, rng, **options):
  """A fresh scheduler of `name` for one simulated group, with what the trainer would give it."""
  kwargs = {"seed": int(rng.integers(1 << 31))}
  if name == BASELINE:
    return RandomPairs(g, **kwargs, **options)
  if arena.SCHEDULERS[name].uses_arrival_order:
    kwargs["arrival_order"] = rng.permutation(g)
  if arena.SCHEDULERS[name].needs_anchor:
    kwargs["anchor"] = int(rng.integers(g))  # the group's greedy sample: of unremarkable quality
  return arena.make_scheduler(name, g, **kwargs, **options)


def win_rates(first, second, outcome, g):
  score = np.bincount(first, outcome, g) + np.bincount(second, 1.0 - outcome, g)
  games = np.bincount(first, minlength=g) + np.bincount(second, minlength=g)
  return np.where(games > 0, score / np.maximum(games, 1), 0.5)


def kendall(a, b):
  tau = scipy.stats.kendalltau(a, b).statistic
  return 0.0 if math.isnan(tau) else float(tau)  # a constant ranking carries no order: τ = 0


def batched_bt(matches, g):
  """(θ, Laplace SE) [n, G] of every group's matches in one batched fit."""
  verdicts = [rl.Verdicts(matches=m) for m in matches]
  theta, se = arena.fit_bradley_terry(*rl.padded_matches(verdicts), g, errors="laplace")
  return np.asarray(theta, np.float64), np.asarray(se, np.float64)


def aggregate(scheds, g, shrinkage):
  """{aggregation: [scores per group]} for finished schedulers (see the module doc)."""
  observed = [s.observed() for s in scheds]
  theta, se = batched_bt(observed, g)
  factors = rl.shrinkage_factors(theta, se, shrinkage)
  return {
    "native": [s.native_scores() for s in scheds],
    "win_rate": [win_rates(*o, g) for o in observed],
    "bt": list(theta),
    "bt_shrinkage": list(factors * (theta - theta.mean(-1, keepdims=True))),
  }


def mean_tau(scores, reference):
  return float(np.mean([kendall(sc, ref) for sc, ref in zip(scores, reference)]))


def run_cell(g, make_judge, thetas, rr_bt, shrinkage, rng):
  """Every topology × aggregation for one judge and group size: {name: row}."""
  results = {}
  for name in sorted(arena.SCHEDULERS) + [BASELINE]:
    scheds = [arena.play(make(name, g, rng), make_judge(b)) for b in range(len(thetas))]
    scores = aggregate(scheds, g, shrinkage)
    row = {
      "calls": float(np.mean([s.num_issued for s in scheds])),
      "rounds": float(np.mean([s.num_rounds for s in scheds])),
    }
    for agg in AGGREGATIONS:
      row[agg] = {"tau_truth": mean_tau(scores[agg], thetas), "tau_round_robin": mean_tau(scores[agg], rr_bt)}
    results[name] = row
  return results


def budget_curve(g, make_judge, thetas, budgets, rng):
  """{rule: {budget: {"calls", "tau_truth"}}}: τ (BT) of each rule in CURVE_RULES at each budget."""
  curve = {}
  for name in CURVE_RULES:
    curve[name] = {}
    for budget in budgets:
      scheds = [arena.play(make(name, g, rng, budget=budget), make_judge(b)) for b in range(len(thetas))]
      theta, _ = batched_bt([s.observed() for s in scheds], g)
      curve[name][str(budget)] = {
        "calls": float(np.mean([s.num_issued for s in scheds])),
        "tau_truth": mean_tau(theta, thetas),
      }
  return curve


def judge_factory(thetas, noise, args, rng):
  return lambda b: SimulatedJudge(
    thetas[b],
    noise=noise,
    tie_band=args.tie_band,
    position_bias=args.position_bias,
    debias=not args.no_debias,
    margin=args.margin,
    rng=rng,
  )


def run_judge(noise, sizes, args, rng):
  """Everything for one simulated judge: per size the topology table, and the budget curve."""
  out = {"sizes": {}}
  for g in sizes:
    thetas = rng.normal(size=(args.groups, g))
    make_judge = judge_factory(thetas, noise, args, rng)
    rr = [arena.play(arena.make_scheduler("round_robin", g), make_judge(b)).observed() for b in range(args.groups)]
    rr_bt = batched_bt(rr, g)[0]
    out["sizes"][str(g)] = {
      "topologies": run_cell(g, make_judge, thetas, rr_bt, args.shrinkage, rng),
      "round_robin_bt_tau_truth": mean_tau(rr_bt, thetas),
    }
    if g == args.curve_size:
      out["budget_curve"] = budget_curve(g, make_judge, thetas, args.budgets, rng)
  return out


def headline(figures, sizes, noises):
  """The JSON's "topologies": G = 16 (or the largest size), the noise-1.0 judge (or the first), BT."""
  g = 16 if 16 in sizes else max(sizes)
  noise = 1.0 if 1.0 in noises else noises[0]
  rows = figures["judges"][str(noise)]["sizes"][str(g)]["topologies"]
  return {"size": g, "noise": noise, "aggregation": "bt"}, {
    name: {"calls": row["calls"], "tau_truth": row["bt"]["tau_truth"], "tau_round_robin": row["bt"]["tau_round_robin"]}
    for name, row in rows.items()
  }


def play_timed(scheduler, judge, arrival_times, rng):
  """Plays a streaming live tournament in simulated time: trajectory k arrives at `arrival_times[k]`, every
  judgment takes a lognormal time of median 1 (a judge latency) from its issue; returns the time from the
  last arrival until the last result (the judge's critical path after generation, in latencies)."""
  events = [(t, 0, k, None) for k, t in enumerate(arrival_times)]  # (time, kind 0 arrival / 1 result, ...)
  heapq.heapify(events)
  now = 0.0
  while events:
    now, kind, a, b = heapq.heappop(events)
    if kind == 0:
      scheduler.arrive(a)
    else:
      scheduler.record(*a, b)
    pairs = scheduler.next_matches()
    for pair, outcome in zip(pairs, judge(pairs)):
      heapq.heappush(events, (now + float(rng.lognormal(0.0, 0.5)), 1, pair, outcome))
  assert scheduler.done, scheduler
  return now - max(arrival_times)


def pipelined_live(sizes, args, rng, noise: float):
  """Blocking vs pipelined opponent choice of the live tournament, arrivals spread in
  time (exponential gaps of mean `args.arrival_gap` judge latencies, in a random order): judge calls, the
  judge's time after the last arrival, Kendall τ of the BT ranking vs the latent truth and vs blocking
  live on the same group (for blocking itself: a second, independent blocking run, the noise floor)."""
  out = {}
  for g in sizes:
    thetas = rng.normal(size=(args.groups, g))
    judge = judge_factory(thetas, noise, args, rng)
    runs = {}  # "replicate": a second blocking run of the same groups (the judge's own run-to-run noise)
    for name, wait in (("blocking", True), ("replicate", True), ("pipelined", False)):
      scheds, depth = [], []
      for b in range(args.groups):
        sched = arena.make_scheduler("live", g, streaming=True, wait_for_results=wait)
        times = np.cumsum(rng.exponential(args.arrival_gap, g))
        depth.append(play_timed(sched, judge(b), times, rng))
        scheds.append(sched)
      runs[name] = (scheds, batched_bt([s.observed() for s in scheds], g)[0], depth)
    blocking_bt, replicate_bt = runs["blocking"][1], runs.pop("replicate")[1]
    tau = lambda x, y: float(np.mean([kendall(x[b], y[b]) for b in range(args.groups)]))
    out[str(g)] = {
      name: {
        "calls": float(np.mean([s.num_issued for s in scheds])),
        "judge_time_after_last_arrival": float(np.mean(depth)),
        "tau_truth": tau(bt, thetas),
        "tau_blocking": tau(bt, replicate_bt if name == "blocking" else blocking_bt),
      }
      for name, (scheds, bt, depth) in runs.items()
    }
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--groups", type=int, default=200, help="simulated groups per judge and size")
  parser.add_argument("--sizes", default="8,16", help="comma-separated group sizes G")
  parser.add_argument("--noises", default="0.5,1.0", help="logistic noise scales: one simulated judge each")
  parser.add_argument("--tie_band", type=float, default=0.25, help="|perceived difference| below this is a tie")
  parser.add_argument("--position_bias", type=float, default=0.5, help="added in favour of the first-shown trace")
  parser.add_argument(
    "--no_debias", action="store_true", help="present pairs in canonical order (no SPEC §4 randomisation)"
  )
  parser.add_argument("--margin", type=float, default=arena.DEFAULT_MARGIN, help="soft margin m (SPEC §4)")
  parser.add_argument("--shrinkage", type=float, default=1.0, help="κ of the bt_shrinkage aggregation")
  parser.add_argument("--budgets", default="21,42,63,84,120", help="judge calls per group on the budget curve")
  parser.add_argument("--curve_size", type=int, default=16, help="G of the budget curve (skipped if not in --sizes)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--arrival_gap", type=float, default=0.25, help="pipelined live: mean gap between arrivals, in judge latencies"
  )
  args = parser.parse_args(argv)
  arena.check_margin(args.margin)
  args.budgets = [int(x) for x in args.budgets.split(",")]
  rng = np.random.default_rng(args.seed)
  sizes = [int(x) for x in args.sizes.split(",")]
  noises = [float(x) for x in args.noises.split(",")]
  print(
    f"{args.groups} groups per judge and size; judge noise ∈ {noises}, tie band={args.tie_band}, "
    f"position bias={args.position_bias}, debias={'off' if args.no_debias else 'on'}, margin={args.margin}, "
    f"shrinkage κ={args.shrinkage}\n"
  )
  figures = {
    "groups": args.groups,
    "noises": noises,
    "tie_band": args.tie_band,
    "position_bias": args.position_bias,
    "debias": not args.no_debias,
    "shrinkage": args.shrinkage,
    "judges": {str(noise): run_judge(noise, sizes, args, rng) for noise in noises},
  }
  rows, curve_rows = [], []
  for noise in noises:
    for g in sizes:
      results = figures["judges"][str(noise)]["sizes"][str(g)]["topologies"]
      for name, row in sorted(results.items(), key=lambda kv: kv[1]["calls"]):
        rows.append(
          (
            noise,
            g,
            name,
            row["calls"],
            row["rounds"],
            *(row[agg][key] for key in ("tau_truth", "tau_round_robin") for agg in AGGREGATIONS),
          )
        )
    for name, points in figures["judges"][str(noise)].get("budget_curve", {}).items():
      curve_rows.append((noise, name, *(f"{p['tau_truth']:.3f} ({p['calls']:.0f})" for p in points.values())))
  common.print_table(
    ["noise", "G", "topology", "calls", "rounds"]
    + [f"τ truth {a}" for a in AGGREGATIONS]
    + [f"τ RR {a}" for a in AGGREGATIONS],
    rows,
  )
  print(
    "\nτ: Kendall τ-b per group, averaged; 'τ RR': against a separate round robin of the same group fitted "
    "by BT (its own τ vs truth: "
    + "; ".join(
      f"noise {n}, G={g}: {figures['judges'][str(n)]['sizes'][str(g)]['round_robin_bt_tau_truth']:.3f}"
      for n in noises
      for g in sizes
    )
    + ")."
  )
  if curve_rows:
    print(f"\nBudget curve at G = {args.curve_size}: τ vs truth of the BT fit (calls per group)")
    common.print_table(["noise", "rule"] + [f"budget {b}" for b in args.budgets], curve_rows)
  figures["headline"], figures["topologies"] = headline(figures, sizes, noises)
  figures["pipelined_live"] = pipelined_live(sizes, args, rng, noises[-1])
  print(
    f"\nLive tournaments with arrivals spread in time (judge noise {noises[-1]}, mean gap {args.arrival_gap} judge "
    "latencies; a "
    "judgment takes a lognormal time of median 1): blocking opponent choice waits for every earlier "
    "result, pipelined picks from the standings known when the arrival comes. τ of the BT ranking; "
    "blocking's τ vs blocking is against a second, independent blocking run of the same groups."
  )
  common.print_table(
    ["G", "live", "calls/group", "judge time after last arrival", "τ vs truth", "τ vs blocking"],
    [
      (g, name, r["calls"], r["judge_time_after_last_arrival"], r["tau_truth"], r["tau_blocking"])
      for g, by in figures["pipelined_live"].items()
      for name, r in by.items()
    ],
  )
  common.emit_json(figures)


if __name__ == "__main__":
  main()
