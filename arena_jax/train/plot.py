"""Training curves as a PNG (reward, accuracy, routed fraction, judge calls, group composition)."""

from __future__ import annotations

import os

import numpy as np

from arena_jax.train.metrics import read_metrics

PANELS = (
  ("accuracy (verifier reward)", ("accuracy",)),
  ("groups", ("groups/all_correct", "groups/all_wrong", "groups/diverse", "groups/routed")),
  ("judge calls per step", ("judge/calls",)),
  ("advantage", ("adv/nonzero_fraction", "adv/l1")),
)


def plot_curves(workdir: str, path: str | None = None) -> str:
  """Writes `<workdir>/curves.png` from metrics.jsonl; returns its path."""
  import matplotlib  # pylint: disable=g-import-not-at-top  (lazy: only when plotting)

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  rows = read_metrics(workdir)
  path = path or os.path.join(workdir, "curves.png")
  fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.2))
  for ax, (title, keys) in zip(axes, PANELS):
    for key in keys:
      pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
      if pts:
        steps, values = map(np.asarray, zip(*pts))
        (line,) = ax.plot(steps, values, lw=0.8, alpha=0.35)
        ax.plot(steps, smooth(values), color=line.get_color(), lw=1.8, label=key.split("/")[-1])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if len(keys) > 1:
      ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def smooth(values: np.ndarray, window: int = 10) -> np.ndarray:
  """Trailing moving average over up to `window` steps (per-step values of a small batch are noisy)."""
  c = np.concatenate([[0.0], np.cumsum(values, dtype=float)])
  end = np.arange(1, len(values) + 1)
  start = np.maximum(end - window, 0)
  return (c[end] - c[start]) / (end - start)
