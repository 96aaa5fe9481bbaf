"""A judge measured against its teacher on held-out pairs (SPEC §10; `benchmarks.distilled_judge`).

From P(A) of each pair in both orders (`p_ab`: the first trace shown as A; `p_ba`: the second shown as A):
  outcome          the student's soft outcome of the first trace, (p_ab + 1 − p_ba) / 2 (debiased, SPEC §4)
  agreement        on the teacher's decisive pairs: the share where the student's outcome is on the teacher's side
                   of 1/2 (exactly 1/2 counts as a miss), with its Wilson 95% interval; overall and per flaw kind
  position_bias    |P(the trace shown first wins) − 1/2| over every row of both orders
  first_order_agreement  agreement of a single order's verdict (the first trace shown as A) without debiasing
  single_order_agreement the same over both orders: each order's verdict on its own (a judge that leans to a
                   position loses in the order where the lean is wrong), the share of the 2 × decisive verdicts
  brier            mean (outcome − teacher outcome)² over every labelled pair (calibration of the soft outcomes)
"""

from __future__ import annotations

import collections
from typing import Sequence

import numpy as np

from arena_jax.sampling.accuracy import wilson_interval


def judge_measures(labels: Sequence, p_ab: np.ndarray, p_ba: np.ndarray) -> dict:
  """The measures of the module docstring; `labels` (`teacher.Label`, each with an outcome) align with p_ab, p_ba."""
  p_ab, p_ba = np.asarray(p_ab, np.float64), np.asarray(p_ba, np.float64)
  teacher = np.asarray([label.outcome for label in labels], np.float64)
  outcome = 0.5 * (p_ab + 1.0 - p_ba)
  decisive = np.abs(teacher - 0.5) > 1e-6
  right = np.sign(outcome - 0.5) == np.sign(teacher - 0.5)
  right_first = np.sign(p_ab - 0.5) == np.sign(teacher - 0.5)
  right_second = np.sign(0.5 - p_ba) == np.sign(teacher - 0.5)  # the second trace shown as A

  def share(mask):
    n = int(mask.sum())
    k = int(right[mask].sum())
    lo, hi = wilson_interval(k, n)
    return {"agreement": k / n if n else float("nan"), "lo95": lo, "hi95": hi, "pairs": n}

  kinds = collections.Counter(label.kind for label in labels)
  per_kind = {kind: share(decisive & np.asarray([label.kind == kind for label in labels])) for kind in sorted(kinds)}
  overall = share(decisive)
  return {
    "pairs": int(len(labels)),
    "decisive_pairs": int(decisive.sum()),
    "agreement_vs_teacher": overall["agreement"],
    "agreement_lo95": overall["lo95"],
    "agreement_hi95": overall["hi95"],
    "first_order_agreement": float(right_first[decisive].mean()) if decisive.any() else float("nan"),
    "single_order_agreement": (
      float(0.5 * (right_first[decisive].mean() + right_second[decisive].mean())) if decisive.any() else float("nan")
    ),
    "per_kind": {k: v for k, v in per_kind.items() if v["pairs"]},
    "position_bias": float(abs(0.5 * (p_ab.mean() + p_ba.mean()) - 0.5)) if len(p_ab) else float("nan"),
    "brier": float(np.mean((outcome - teacher) ** 2)) if len(teacher) else float("nan"),
  }


__all__ = ["judge_measures"]
