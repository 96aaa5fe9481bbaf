"""Cost and fidelity of every tournament topology × aggregation rule, with a simulated judge (SPEC §4–§6).

    python -m benchmarks.tournament_fidelity [--groups 400] [--sizes 8,16] [--noise 1.0]
        [--tie_band 0.25] [--position_bias 0.5] [--no_debias] [--margin 0.4] [--seed 0]

The simulated judge knows each trajectory's latent quality θ ~ N(0, 1). Asked about a pair it sees the
two in a presentation order (random per query when debiasing is on, SPEC §4 (1); canonical otherwise),
perceives d = θ_shown_first − θ_shown_second + position_bias + Logistic(0, noise), calls a tie when
|d| < tie_band and otherwise a win for the side d favours; the verdict is mapped back to the canonical
order and turned into a soft outcome with margin m.

For each group size G and topology (`arena_jax.arena.SCHEDULERS`) the same groups are ranked three ways:
  native    the topology's own rule (win rate, BT for live, anchor score, elimination/Swiss rank)
  win_rate  mean soft score over the observed (mirrored) matches
  bt        batched Bradley–Terry on the observed matches (`arena_jax.arena.fit_bradley_terry`)
and compared by Kendall τ-b with the latent truth and with round-robin + BT of the same group (a
separate full round robin judged by the same simulated judge). Judge calls and sequential judge rounds
per group are counted. This is the project's cost/fidelity table (the paper's Table 2, ArenaRL's
topology comparison); it reports whatever comes out. The last line is JSON.
"""
from __future__ import annotations

import argparse
import heapq
import math

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402

from arena_jax import arena  # noqa: E402

AGGREGATIONS = ("native", "win_rate", "bt")


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


def win_rates(first, second, outcome, g):
  score = np.bincount(first, outcome, g) + np.bincount(second, 1.0 - outcome, g)
  games = np.bincount(first, minlength=g) + np.bincount(second, minlength=g)
  return np.where(games > 0, score / np.maximum(games, 1), 0.5)


def kendall(a, b):
  tau = scipy.stats.kendalltau(a, b).statistic
  return 0.0 if math.isnan(tau) else float(tau)  # a constant ranking carries no order: τ = 0


def batched_bt(matches, g):
  m = max(1, max(len(f) for f, _, _ in matches))
  arrays = np.zeros((4, len(matches), m))
  for k, (f, s, o) in enumerate(matches):
    arrays[:, k, :len(f)] = np.stack([f, s, o, np.ones(len(f))])
  return np.asarray(arena.fit_bradley_terry(arrays[0].astype(np.int32), arrays[1].astype(np.int32),
                                            arrays[2], arrays[3], g))


def run_size(g, args, rng):
  thetas = rng.normal(size=(args.groups, g))
  judge = lambda b: SimulatedJudge(thetas[b], noise=args.noise, tie_band=args.tie_band,
                                   position_bias=args.position_bias, debias=not args.no_debias,
                                   margin=args.margin, rng=rng)
  rr = [arena.play(arena.make_scheduler("round_robin", g), judge(b)).observed() for b in range(args.groups)]
  rr_bt = batched_bt(rr, g)
  results = {}
  for name in sorted(arena.SCHEDULERS):
    scheds = []
    for b in range(args.groups):
      kwargs = {"seed": int(rng.integers(1 << 31))}
      if name == "live":
        kwargs["arrival_order"] = rng.permutation(g)
      if name in ("anchor", "seeded_single_elimination", "double_elimination"):
        kwargs["anchor"] = int(rng.integers(g))  # the group's greedy sample: of unremarkable quality
      scheds.append(arena.play(arena.make_scheduler(name, g, **kwargs), judge(b)))
    observed = [s.observed() for s in scheds]
    scores = {
        "native": [s.native_scores() for s in scheds],
        "win_rate": [win_rates(*o, g) for o in observed],
        "bt": list(batched_bt(observed, g)),
    }
    row = {"calls": float(np.mean([s.num_issued for s in scheds])),
           "rounds": float(np.mean([s.num_rounds for s in scheds]))}
    for agg in AGGREGATIONS:
      row[agg] = {
          "tau_truth": float(np.mean([kendall(sc, thetas[b]) for b, sc in enumerate(scores[agg])])),
          "tau_rr_bt": float(np.mean([kendall(sc, rr_bt[b]) for b, sc in enumerate(scores[agg])])),
      }
    results[name] = row
  reference = float(np.mean([kendall(rr_bt[b], thetas[b]) for b in range(args.groups)]))
  return results, reference


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


def pipelined_live(sizes, args, rng):
  """Blocking vs pipelined opponent choice of the live tournament (issue 14 item 5), arrivals spread in
  time (exponential gaps of mean `args.arrival_gap` judge latencies, in a random order): judge calls, the
  judge's time after the last arrival, Kendall τ of the BT ranking vs the latent truth and vs blocking
  live on the same group (for blocking itself: a second, independent blocking run, the noise floor)."""
  out = {}
  for g in sizes:
    thetas = rng.normal(size=(args.groups, g))
    judge = lambda b: SimulatedJudge(thetas[b], noise=args.noise, tie_band=args.tie_band,
                                     position_bias=args.position_bias, debias=not args.no_debias,
                                     margin=args.margin, rng=rng)
    runs = {}  # "replicate": a second blocking run of the same groups (the judge's own run-to-run noise)
    for name, wait in (("blocking", True), ("replicate", True), ("pipelined", False)):
      scheds, depth = [], []
      for b in range(args.groups):
        sched = arena.make_scheduler("live", g, streaming=True, wait_for_results=wait)
        times = np.cumsum(rng.exponential(args.arrival_gap, g))
        depth.append(play_timed(sched, judge(b), times, rng))
        scheds.append(sched)
      runs[name] = (scheds, batched_bt([s.observed() for s in scheds], g), depth)
    blocking_bt, replicate_bt = runs["blocking"][1], runs.pop("replicate")[1]
    tau = lambda x, y: float(np.mean([kendall(x[b], y[b]) for b in range(args.groups)]))
    out[str(g)] = {name: {
        "calls": float(np.mean([s.num_issued for s in scheds])),
        "judge_time_after_last_arrival": float(np.mean(depth)),
        "tau_truth": tau(bt, thetas),
        "tau_blocking": tau(bt, replicate_bt if name == "blocking" else blocking_bt),
    } for name, (scheds, bt, depth) in runs.items()}
  return out


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--groups", type=int, default=400, help="simulated groups per size")
  parser.add_argument("--sizes", default="8,16", help="comma-separated group sizes G")
  parser.add_argument("--noise", type=float, default=1.0, help="logistic noise scale of the judge")
  parser.add_argument("--tie_band", type=float, default=0.25, help="|perceived difference| below this is a tie")
  parser.add_argument("--position_bias", type=float, default=0.5, help="added in favour of the first-shown trace")
  parser.add_argument("--no_debias", action="store_true", help="present pairs in canonical order (no SPEC §4 randomisation)")
  parser.add_argument("--margin", type=float, default=arena.DEFAULT_MARGIN, help="soft margin m (SPEC §4)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--arrival_gap", type=float, default=0.25,
                      help="pipelined live: mean gap between arrivals, in judge latencies")
  args = parser.parse_args(argv)
  arena.check_margin(args.margin)
  rng = np.random.default_rng(args.seed)
  sizes = [int(x) for x in args.sizes.split(",")]
  print(f"{args.groups} groups per size; judge noise={args.noise}, tie band={args.tie_band}, "
        f"position bias={args.position_bias}, debias={'off' if args.no_debias else 'on'}, margin={args.margin}\n")
  figures = {"groups": args.groups, "noise": args.noise, "tie_band": args.tie_band,
             "position_bias": args.position_bias, "debias": not args.no_debias, "results": {}}
  rows = []
  for g in sizes:
    results, reference = run_size(g, args, rng)
    figures["results"][str(g)] = {"topologies": results, "round_robin_bt_tau_truth": reference}
    for name, row in sorted(results.items(), key=lambda kv: kv[1]["calls"]):
      for agg in AGGREGATIONS:
        rows.append((g, name, agg, row["calls"], row["rounds"], row[agg]["tau_truth"], row[agg]["tau_rr_bt"]))
  common.print_table(["G", "topology", "aggregation", "calls/group", "rounds", "τ vs truth", "τ vs RR-BT"], rows)
  print("\nτ: Kendall τ-b per group, averaged. RR-BT: a separate round robin of the same group fitted by BT "
        "(its own τ vs truth: " + ", ".join(
            f"G={g}: {figures['results'][str(g)]['round_robin_bt_tau_truth']:.3f}" for g in sizes) + ").")
  figures["pipelined_live"] = pipelined_live(sizes, args, rng)
  print(f"\nLive tournaments with arrivals spread in time (mean gap {args.arrival_gap} judge latencies; a "
        "judgment takes a lognormal time of median 1): blocking opponent choice waits for every earlier "
        "result, pipelined picks from the standings known when the arrival comes. τ of the BT ranking; "
        "blocking's τ vs blocking is against a second, independent blocking run of the same groups.")
  common.print_table(["G", "live", "calls/group", "judge time after last arrival", "τ vs truth", "τ vs blocking"],
                     [(g, name, r["calls"], r["judge_time_after_last_arrival"], r["tau_truth"], r["tau_blocking"])
                      for g, by in figures["pipelined_live"].items() for name, r in by.items()])
  common.emit_json(figures)


if __name__ == "__main__":
  main()
