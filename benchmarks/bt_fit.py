"""Batched Bradley–Terry fitting vs the paper's per-group scipy L-BFGS-B loop and choix (SPEC §6).

    python -m benchmarks.bt_fit [--groups 1024] [--players 16] [--repeats 5]

Workload: `--groups` live tournaments (SPEC §5) of `--players` trajectories each, judged by a noisy
latent-strength judge with soft outcomes (margin 0.4), padded to one [groups, M] match array. Every
solver of `arena_jax.arena.SOLVERS` runs through the public `fit_bradley_terry` (host arrays in,
device fit, result out; compile excluded), side by side with two host references on the same data:

  scipy  a per-group loop of scipy L-BFGS-B in float64 on the mirrored match list (the paper's method)
  choix  choix.opt_pairwise per group; choix takes unweighted (winner, loser) pairs, so each soft
         outcome s ∈ {0.1, 0.5, 0.9} becomes 10·s wins and 10·(1 − s) losses and α = 5λ: the same
         objective scaled by 10, hence the same θ.

Speed-ups are ratios of median wall-clock times measured in this one run. The last line is JSON.
"""

from __future__ import annotations

import argparse
import time

from benchmarks import common  # sets JAX_PLATFORMS before jax is imported

import jax  # noqa: E402
import numpy as np  # noqa: E402

from arena_jax import arena  # noqa: E402
from arena_jax.arena.testing import strength_judge  # noqa: E402


def live_graphs(groups: int, players: int, seed: int):
  rng = np.random.default_rng(seed)
  rows = []
  for b in range(groups):
    sched = arena.make_scheduler("live", players, arrival_order=rng.permutation(players))
    arena.play(sched, strength_judge(rng.normal(0, 1.5, players), noise=1.0, seed=seed + b))
    rows.append(sched.observed())
  m = max(len(r[0]) for r in rows)
  first, second = np.zeros((groups, m), np.int32), np.zeros((groups, m), np.int32)
  outcome, weight = np.full((groups, m), 0.5), np.zeros((groups, m))
  for b, (f, s, o) in enumerate(rows):
    first[b, : len(f)], second[b, : len(f)], outcome[b, : len(f)], weight[b, : len(f)] = f, s, o, 1.0
  return first, second, outcome, weight


def choix_fit(first, second, outcome, weight, players, l2):
  import choix  # pylint: disable=g-import-not-at-top

  out = np.zeros((first.shape[0], players))
  for b in range(first.shape[0]):
    data = []
    for f, s, o, w in zip(first[b], second[b], outcome[b], weight[b]):
      if w > 0:
        wins = int(round(10 * o))
        data += [(f, s)] * wins + [(s, f)] * (10 - wins)
    out[b] = choix.opt_pairwise(players, data, alpha=5 * l2, tol=1e-10)
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--groups", type=int, default=1024)
  parser.add_argument("--players", type=int, default=16)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--l2", type=float, default=arena.DEFAULT_L2)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()

  f, s, o, w = live_graphs(args.groups, args.players, args.seed)
  print(
    f"Bradley–Terry fit: {args.groups} live-tournament groups × G={args.players}, "
    f"{int(w.sum(-1).mean())} matches/group (padded M={f.shape[1]}), λ={args.l2}, backend={jax.default_backend()}"
  )

  seconds, diffs = {}, {}
  ref = arena.fit_bradley_terry_scipy(f, s, o, w, args.players, l2=args.l2)
  seconds["scipy"] = common.timed(
    lambda: arena.fit_bradley_terry_scipy(f, s, o, w, args.players, l2=args.l2),
    repeats=max(1, args.repeats // 2),
    warmup=0,
  )
  # choix takes ~70 s on this workload: one timed run, which is also the run whose θ is compared.
  start = time.perf_counter()
  choix_theta = choix_fit(f, s, o, w, args.players, args.l2)
  seconds["choix"] = time.perf_counter() - start
  diffs["choix"] = float(np.abs(choix_theta - ref).max())
  diffs["scipy"] = 0.0
  for solver in sorted(arena.SOLVERS):
    fit = lambda: jax.block_until_ready(arena.fit_bradley_terry(f, s, o, w, args.players, l2=args.l2, solver=solver))
    seconds[solver] = common.timed(fit, repeats=args.repeats)
    diffs[solver] = float(np.abs(np.asarray(fit()) - ref).max())

  rows = [(name, sec * 1e3, seconds["scipy"] / sec, diffs[name]) for name, sec in seconds.items()]
  common.print_table(["method", "ms (median)", "× scipy", "max |Δθ| vs scipy"], rows)
  default = arena.DEFAULT_SOLVER
  common.emit_json(
    {
      "groups": args.groups,
      "players": args.players,
      "default_solver": default,
      "seconds": {k: round(v, 6) for k, v in seconds.items()},
      "speedup_vs_scipy": round(seconds["scipy"] / seconds[default], 2),
      "speedup_vs_choix": round(seconds["choix"] / seconds[default], 2),
      "jaxopt_speedup_vs_scipy": round(seconds["scipy"] / seconds["lbfgs"], 2),
      "optax_speedup_vs_scipy": round(seconds["scipy"] / seconds["optax_lbfgs"], 2),
      "max_abs_diff_vs_scipy": diffs[default],
      "max_abs_diff_vs_scipy_by_method": diffs,
    }
  )


if __name__ == "__main__":
  main()
