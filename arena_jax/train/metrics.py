"""Per-step metrics to JSONL and TensorBoard, and to W&B when tracked (`tracking`; only process 0 writes),
replay-safe on resume."""

from __future__ import annotations

import json
import math
import os
from typing import Mapping

import numpy as np

from arena_jax import fileio


class MetricsWriter:
  """Appends one JSON object per step to `<workdir>/metrics.jsonl` and mirrors scalars to TensorBoard;
  `write_samples` appends a few completions per step to `<workdir>/samples.jsonl` (and TensorBoard text).

  On construction with `resume_step`, rows of steps after `resume_step` (written after the last
  checkpoint by a run that then died) are dropped, so replayed steps never appear twice.
  """

  def __init__(
    self,
    workdir: str,
    *,
    resume_step: int | None = None,
    tensorboard: bool = True,
    enabled: bool = True,
    tracker=None,
  ):
    self.enabled = enabled
    self.tracker = tracker  # a `tracking.WandbTracker` (or anything with `log(step, row)`), or None
    self.path = os.path.join(workdir, "metrics.jsonl")
    self.samples_path = os.path.join(workdir, "samples.jsonl")
    self._tb = None
    if not enabled:
      return
    os.makedirs(workdir, exist_ok=True)
    for path in (self.path, self.samples_path):
      if resume_step is not None and os.path.exists(path):
        self._truncate_after(path, resume_step)
      elif resume_step is None and os.path.exists(path):
        os.remove(path)  # a fresh run in an old workdir starts a fresh log
    if tensorboard:
      from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top  (lazy: optional)

      self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step)

  @staticmethod
  def _truncate_after(path: str, step: int) -> None:
    fileio.write_jsonl(path, [row for row in fileio.read_jsonl(path, strict=False) if row.get("step", -1) <= step])

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
    if self.tracker is not None:
      self.tracker.log(step, row)

  def write_samples(self, step: int, rows: list[dict]) -> None:
    """Appends `rows` (one completion each, with `step`) to `<workdir>/samples.jsonl`, and a markdown
    rendering of them as TensorBoard text."""
    if not self.enabled or not rows:
      return
    with open(self.samples_path, "a", encoding="utf-8") as f:
      f.writelines(json.dumps({"step": int(step), **r}, ensure_ascii=False) + "\n" for r in rows)
    if self._tb is not None:
      text = "\n\n".join(
        f"**reward {r['reward']:.3f}, advantage {r['advantage']:+.3f}, verifier {r['verifier']:g}"
        f"{', judged' if r['judged'] else ''}**\n\n    " + (r["prompt"] + r["completion"]).replace("\n", "\n    ")
        for r in rows
      )
      self._tb.add_text("samples", text, step)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
      self._tb = None


def read_metrics(workdir: str) -> list[dict]:
  """The rows of `<workdir>/metrics.jsonl`, one per step (a torn last row skipped)."""
  return fileio.read_jsonl(os.path.join(str(workdir), "metrics.jsonl"), strict=False)


def _scalar(v):
  if isinstance(v, (np.ndarray, np.generic)) or hasattr(v, "item"):
    v = np.asarray(v).item()
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)  # JSON has no NaN/inf; keep it visible rather than dropping it
  return v
