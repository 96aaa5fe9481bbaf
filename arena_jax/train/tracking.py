"""Experiment tracking with Weights & Biases (`config.wandb`, the `wandb` extra; off by default).

    python -m launch.train --config=configs/arith_arena_live.py --workdir=runs/a --config.wandb.project=arena
    python -m launch.train ... --config.wandb.project=arena --config.wandb.mode=offline   # no network: wandb sync later

What a run logs (process 0 only):
  the config        the whole run config, as W&B's run config
  the metrics       every row of metrics.jsonl at its optimizer step (the curves of W&B's charts)
  the curves        curves.png at the end (`train.plot_curves`), as an image
  the tables        at the end (`wandb.tables`): the inspector's tables (`launch.inspect`) as W&B tables: `groups`
                    (per step and group: routed, judged, and each member's verifier reward, judge reward, trained
                    reward and advantage), `judge_calls` (per call: pair, order shown, verdict, outcome, latency,
                    failure) and `samples` (samples.jsonl: prompt, completion, rewards)

A resumed run continues the same W&B run: its id is kept in `<workdir>/wandb_run_id`. The W&B files live in
`<workdir>/wandb` (offline runs too, for `wandb sync`). `wandb` is imported here only when a project is named; a
missing package is a one-line error naming the extra.
"""

from __future__ import annotations

import json
import math
import os
import uuid

from arena_jax import fileio
from arena_jax.errors import ConfigError
from arena_jax.train import transcripts as transcripts_lib

INSTALL = "pip install -e '.[wandb]'"
RUN_ID_FILE = "wandb_run_id"
_TEXT_LIMIT = 2000  # characters of a trace or prompt kept in a table cell


def _import_wandb(project: str):
  try:
    import wandb  # pylint: disable=g-import-not-at-top  (the optional extra)
  except ImportError:
    raise ConfigError(
      f"config.wandb.project = {project!r} asks for W&B logging, but the `wandb` package is not installed: {INSTALL}"
    ) from None
  return wandb


class WandbTracker:
  """One W&B run for one training run (module docstring)."""

  def __init__(self, config, workdir: str, *, resume: bool):
    w = config.wandb
    self.wandb = _import_wandb(w.project)
    self.workdir = os.path.abspath(workdir)
    self.tables = bool(w.tables)
    id_path = os.path.join(self.workdir, RUN_ID_FILE)
    run_id = None
    if resume and os.path.exists(id_path):
      run_id = open(id_path, encoding="utf-8").read().strip() or None
    run_id = run_id or uuid.uuid4().hex[:12]
    fileio.atomic_write(id_path, run_id)
    self.run = self.wandb.init(
      project=w.project,
      entity=w.entity or None,
      name=w.name or os.path.basename(self.workdir.rstrip("/")),
      mode=w.mode,
      tags=list(w.tags),
      dir=self.workdir,
      id=run_id,
      resume="allow",
      config=json.loads(config.to_json(sort_keys=True)),
      settings=self.wandb.Settings(console="off", silent=True),
    )

  @property
  def running(self) -> bool:
    return self.run is not None

  def log(self, step: int, row: dict) -> None:
    """One metrics.jsonl row at optimizer step `step` (finite numbers only: W&B's charts take no strings)."""
    data = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float)) and math.isfinite(v)}
    self.run.log(data, step=int(step))

  def finish(self, summary: dict | None = None) -> None:
    """The curves and the tables, then the end of the W&B run."""
    try:
      plot = (summary or {}).get("plot")
      extra = {}
      if plot and os.path.exists(plot):
        extra["curves"] = self.wandb.Image(plot)
      if self.tables:
        extra.update(self._tables())
      if extra:
        self.run.log(extra, commit=True)
    finally:
      self.run.finish()
      self.run = None

  def abort(self) -> None:
    """Ends the W&B run as failed (a training run that raised)."""
    if self.run is not None:
      self.run.finish(exit_code=1)
      self.run = None

  def _tables(self) -> dict:
    out = {}
    groups = []
    for s in transcripts_lib.read_steps(self.workdir):
      for g in s["groups"]:
        for member, values in enumerate(zip(g["verifier"], g["judge"], g["reward"], g["advantage"])):
          groups.append([s["step"], g["group"], member, g["diverse"], g["routed"], g["judged"], *values])
    if groups:
      columns = ["step", "group", "member", "diverse", "routed", "judged", "verifier", "judge", "reward", "advantage"]
      out["tables/groups"] = self.wandb.Table(columns=columns, data=groups)
    calls = [
      [
        r["step"],
        r["group"],
        r.get("i", r.get("member")),
        r.get("j"),
        r["call"],
        json.dumps(r.get("order_shown")),
        r.get("answer", "")[:_TEXT_LIMIT] if r.get("answer") else "",
        str(r.get("verdict_shown")),
        r.get("outcome", r.get("score")),
        r.get("latency_s"),
        r.get("failure_reason") or "",
      ]
      for r in transcripts_lib.read_transcripts(self.workdir)
    ]
    if calls:
      columns = ["step", "group", "i", "j", "call", "order_shown", "answer", "verdict_shown", "outcome", "latency_s"]
      out["tables/judge_calls"] = self.wandb.Table(columns=columns + ["failure"], data=calls)
    samples = fileio.read_jsonl(os.path.join(self.workdir, "samples.jsonl"), strict=False)
    if samples:
      columns = ["step", "prompt", "completion", "verifier", "reward", "advantage", "judged"]
      data = [
        [r.get("step"), r.get("prompt", "")[-_TEXT_LIMIT:], r.get("completion", "")[:_TEXT_LIMIT]]
        + [r.get(k) for k in ("verifier", "reward", "advantage", "judged")]
        for r in samples
      ]
      out["tables/samples"] = self.wandb.Table(columns=columns, data=data)
    return out


def check_available(config) -> None:
  """Fails at once, before anything is built, when `config.wandb.project` asks for W&B and `wandb` is missing."""
  if config.get("wandb") and config.wandb.project:
    _import_wandb(config.wandb.project)


def open_tracker(config, workdir: str, *, resume: bool, enabled: bool = True) -> WandbTracker | None:
  """The run's W&B tracker, or None when `config.wandb.project` is "" (or on processes other than 0)."""
  if not enabled or not config.get("wandb") or not config.wandb.project:
    return None
  return WandbTracker(config, workdir, resume=resume)
