"""Per-step metrics to JSONL and TensorBoard (only process 0 writes), replay-safe on resume."""
from __future__ import annotations

import json
import math
import os
from typing import Mapping

import numpy as np


class MetricsWriter:
  """Appends one JSON object per step to `<workdir>/metrics.jsonl` and mirrors scalars to TensorBoard.

  On construction with `resume_step`, rows of steps after `resume_step` (written after the last
  checkpoint by a run that then died) are dropped, so replayed steps never appear twice.
  """

  def __init__(self, workdir: str, *, resume_step: int | None = None, tensorboard: bool = True,
               enabled: bool = True):
    self.enabled = enabled
    self.path = os.path.join(workdir, "metrics.jsonl")
    self._tb = None
    if not enabled:
      return
    os.makedirs(workdir, exist_ok=True)
    if resume_step is not None and os.path.exists(self.path):
      self._truncate_after(resume_step)
    elif resume_step is None and os.path.exists(self.path):
      os.remove(self.path)  # a fresh run in an old workdir starts a fresh log
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top  (lazy: optional)

      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step)

  def _truncate_after(self, step: int) -> None:
    kept = [json.dumps(row) + "\n" for row in read_jsonl(self.path) if row.get("step", -1) <= step]
    tmp = self.path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.writelines(kept)
    os.replace(tmp, self.path)

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step)}
    row.update({k: _scalar(v) for k, v in metrics.items()})
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and isinstance(v, (int, float)) and math.isfinite(v):
          self._tb.add_scalar(k, v, step)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None


def read_jsonl(path: str) -> list[dict]:
  """The rows of an append-only JSONL log ([] if absent), skipping a line torn by a crash mid-write."""
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        continue  # torn (a SIGKILL mid-write) or blank
  return rows


def read_metrics(workdir: str) -> list[dict]:
  """The rows of `<workdir>/metrics.jsonl`, one per step (a torn last row skipped)."""
  return read_jsonl(os.path.join(str(workdir), "metrics.jsonl"))


def _scalar(v):
  if isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "item"):
    v = np.asarray(v).item()
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)  # JSON has no NaN/inf; keep it visible rather than dropping it
  return v
