"""What the results read off one run's metrics.jsonl: generations, wall-clock and judge calls per step, the effective
judged signal, the routing at the end of training (the mechanism's condition) and the curves."""

from __future__ import annotations

import math

import numpy as np

from arena_jax.train import read_metrics


def _all_correct_share(rows: list[dict]) -> np.ndarray:
  """Per step: all-correct groups / non-diverse groups (the groups Arena routes), NaN where none is."""
  ac = np.asarray([r.get("groups/all_correct", 0.0) for r in rows], float)
  nd = ac + np.asarray([r.get("groups/all_wrong", 0.0) for r in rows], float)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(nd > 0, ac / np.where(nd > 0, nd, 1.0), np.nan)


# The end-of-training figures average at least this many steps: one step's 16 groups are too few to read.
MIN_FINAL_STEPS = 5


def run_metrics(workdir: str, final_fraction: float) -> dict:
  rows = read_metrics(workdir)
  steady = rows[1:] or rows  # step 1 carries the compilations
  get = lambda k, rs=steady: np.asarray([r.get(k, 0.0) for r in rs], float)
  calls, groups = get("judge/calls").sum(), get("judge/groups").sum()
  tail = rows[-max(min(MIN_FINAL_STEPS, len(rows)), math.ceil(final_fraction * len(rows))) :]
  ac, aw = get("groups/all_correct", tail).sum(), get("groups/all_wrong", tail).sum()
  faithful = [r.get("process/faithful_accuracy") for r in rows]
  head = rows[: len(tail)]
  return {
    "rows": rows,
    "gens_per_step": float(get("gen/trajectories", rows).mean()),
    "gen_batches_per_step": float(get("gen/batches", rows).mean()),
    "wall_per_step": float(get("time/wall").mean()),
    "judge_calls_per_routed_group": float(calls / groups) if groups else 0.0,
    "judge_calls_per_step": float(get("judge/calls", rows).mean()),
    "routed_fraction": float(get("groups/routed", rows).mean()),
    "utilisation": float(get("adv/nonzero_fraction", rows).mean()),
    # The effective judged signal: rows whose advantage is the judge's and non-zero, their share of
    # Σ|Â|, and the distinct traces per routed group (a mean over routed groups, not over steps).
    "judge_signal_rows": logged_mean(rows, "judge/signal_rows"),
    "judge_grad_share": logged_mean(rows, "judge/grad_share"),
    "distinct_per_routed_group": _routed_mean(rows, "judge/distinct_per_group"),
    "adv_l1": float(get("adv/l1", rows).mean()),
    "judge_failures": float(get("judge/failures", rows).sum()),
    # The mechanism's condition at the end of training (routed groups mostly all-correct): over the last
    # `final_fraction` of steps, the non-diverse share of the trained groups and the all-correct share of those
    # (None: none trained).
    "final_steps": len(tail),
    "final_non_diverse": float((ac + aw) / len(tail)),
    "final_all_correct_share": float(ac / (ac + aw)) if ac + aw > 0 else None,
    "final_routed_fraction": float(get("groups/routed", tail).mean()),
    # The testbed's condition (a) (docs/results/testbed.md): the flaw the verifier cannot see in the training
    # samples, over as many steps at the start as at the end; RLVR alone should leave it in place (None: a run that
    # predates the metric).
    "blind_flaw_first": logged_mean(head, "process/blind_flaw_rate"),
    "blind_flaw_final": logged_mean(tail, "process/blind_flaw_rate"),
    "curves": {
      "step": [int(r["step"]) for r in rows],
      "accuracy": [r.get("accuracy") for r in rows],
      "faithful_accuracy": faithful,
      "all_correct_share": [None if math.isnan(x) else float(x) for x in _all_correct_share(rows)],
    },
  }


def logged_mean(rows, key: str) -> float | None:
  """The mean of a metric over the steps that logged it; None for a run that predates it (shown as "–", not 0)."""
  v = [r[key] for r in rows if key in r]
  return float(np.mean(v)) if v else None


def _routed_mean(rows, key: str) -> float | None:
  """The mean of a per-routed-group metric over every routed group of the run (steps weighted by how many groups
  they routed); None when the run routed none or predates the metric."""
  w = np.asarray([r.get("groups/routed", 0.0) for r in rows if key in r], np.float64)
  v = np.asarray([r[key] for r in rows if key in r], np.float64)
  return float((w * v).sum() / w.sum()) if w.sum() > 0 else None
