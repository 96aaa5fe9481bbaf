"""The rewards of one RL step: wait for the step's judgment, aggregate the verdicts of each judged group into
judge rewards (Bradley–Terry fit, win rate, rank quantile or rubric: the mode's aggregation, SPEC §4–§7), and
hand the update its `StepRewards` (verifier [B, G], judge [B, G], judged [B], scale [B, G]) with the judge's
metrics. The router itself runs inside the jitted update (SPEC §3).

A judge that fails must neither stop training at once nor pass unnoticed: groups without a judgment get zero
advantage (SPEC §4: a failure is dropped, never a tie), and `JudgeOutageError` stops the run after
`reward.max_judge_outage_steps` steps in a row in which every call failed.
"""

from __future__ import annotations

import time
from typing import Any

from absl import logging
import numpy as np

from arena_jax import parallel
from arena_jax import rl
from arena_jax.errors import UserError
from arena_jax.train import step as step_lib
from arena_jax.train.batch import Pending


class JudgeOutageError(UserError, RuntimeError):
  """The judge failed every call for `reward.max_judge_outage_steps` steps in a row."""


class Rewarder:
  """Turns a generated step's judgment into the update's rewards (module docstring). Holds the count of
  consecutive steps in which every judge call failed."""

  def __init__(self, config, mode, block: slice, checkpoint_dir: str):
    self.config, self.mode, self.block, self.checkpoint_dir = config, mode, block, checkpoint_dir
    self.b, self.g = config.rollout.prompts_per_step, config.rollout.group_size
    self.outage_steps = 0  # consecutive steps in which every judge call failed

  def __call__(self, pending: Pending) -> tuple[step_lib.StepRewards, dict]:
    """Waits for the step's judgment and aggregates it: verifier, judge rewards and the judged mask of
    the whole step (each host judged its own block, host arrays), and the judge's metrics."""
    batch, n_local = pending.batch, pending.local.num_groups
    judge_r = np.full((n_local if self.mode.uses_judge else self.b, self.g), self.mode.fill)
    scale = np.ones_like(judge_r)  # advantage factors: < 1 only under reward.bt_shrinkage
    judged = np.zeros(len(judge_r), bool)
    m: dict[str, Any] = {}
    if self.mode.uses_judge:
      if pending.judgment is None:
        raise RuntimeError(
          f"reward mode {self.mode.name!r} judges groups but the step has no judgment; "
          "train() starts one (judging.JudgeRunner) on the configured judge URLs"
        )
      t0 = time.perf_counter()
      outcome = pending.judgment.result(timeout=self.config.judge.step_deadline_s or None)
      t1 = time.perf_counter()
      local_idx = np.asarray(outcome.indices, int) - self.block.start
      all_failed = 0
      if len(local_idx):
        judge_r[local_idx], ok = self.mode.aggregate(
          outcome.verdicts, self.g, l2=self.config.reward.bt_l2, solver=self.config.reward.bt_solver
        )
        judged[local_idx] = True
        all_failed = int((~ok).sum())
        if self.config.reward.bt_shrinkage and ok.any():
          live = [v for v, k in zip(outcome.verdicts, ok) if k]
          scale[local_idx[ok]] = rl.bt_shrinkage(
            live,
            self.g,
            l2=self.config.reward.bt_l2,
            solver=self.config.reward.bt_solver,
            shrinkage=self.config.reward.bt_shrinkage,
          )
          m["judge/shrinkage"] = float(scale[local_idx[ok]].mean())
      m["time/judge_wait"], m["time/bt_fit"] = t1 - t0, time.perf_counter() - t1
      # How long the judge still worked once the step was generated (0 when it finished during decoding).
      m["time/judge_after_gen"] = max(0.0, (pending.judgment.finished_at or t1) - pending.generated_at)
      # How long the step's judging ran, first group in to last judgment back: the judge's pairs/s is calls / this.
      started = pending.judgment.started_at
      m["time/judge"] = max(0.0, (pending.judgment.finished_at or t1) - started) if started else 0.0
      groups, calls, failures, all_failed, tokens, saved, late, late_groups, wasted, abandoned = (
        int(x)
        for x in parallel.host_sum(
          np.asarray(
            [
              len(local_idx),
              outcome.usage.calls,
              outcome.failures,
              all_failed,
              outcome.usage.total_tokens,
              outcome.calls_saved,
              outcome.late_matches,
              outcome.late_groups,
              outcome.wasted_calls,
              outcome.abandoned_groups,
            ],
            np.int64,
          )
        )
      )
      m.update(
        {
          "judge/groups": groups,
          "judge/calls": calls,
          "judge/calls_per_group": calls / max(groups, 1),
          "judge/calls_saved_duplicates": saved,
          "judge/failures": failures,
          "judge/failure_rate": failures / max(calls, 1),
          "judge/groups_all_failed": all_failed,
          "judge/tokens": tokens,
          "judge/matches_late": late,
          "judge/groups_late": late_groups,
          "judge/calls_wasted": wasted,
          "judge/groups_abandoned": abandoned,
        }
      )
      m.update(_failure_reasons(outcome.failure_reasons))
      if all_failed:
        # A judge that is down (or failing) mid-run must not stop training at once, nor pass unnoticed:
        # these groups get zero advantage (SPEC §4: failures are dropped, never ties).
        logging.warning(
          "step %d: %d of %d judged groups got no judgment (%d of %d judge calls failed; the first: %s; %d groups "
          "cut short by judge.step_deadline_s): they get zero advantage this step; see judge/failures, "
          "judge/groups_all_failed, judge/groups_late in metrics.jsonl",
          pending.step + 1,
          all_failed,
          groups,
          failures,
          calls,
          outcome.first_failure or "?",
          late_groups,
        )
      self._check_outage(calls, failures, outcome.first_failure)
    if self.mode.uses_judge:  # each host judged its own block: every host's rows, in host order
      judge_r, judged, scale = parallel.gather(judge_r), parallel.gather(judged), parallel.gather(scale)
    rewards = step_lib.StepRewards(
      np.asarray(batch.verifier, np.float32),
      np.asarray(judge_r, np.float32),
      np.asarray(judged),
      np.asarray(scale, np.float32),
    )
    return rewards, m

  def _check_outage(self, calls: int, failures: int, first_failure: str) -> None:
    """Stops the run once every judge call has failed for `reward.max_judge_outage_steps` steps in a row
    (the counts are summed over hosts, so every host stops at the same step)."""
    limit = self.config.reward.max_judge_outage_steps
    if not calls:
      return  # a step that judged nothing says nothing about the judge
    self.outage_steps = self.outage_steps + 1 if failures == calls else 0
    if limit and self.outage_steps >= limit:
      raise JudgeOutageError(
        f"every judge call failed for {self.outage_steps} steps in a row (reward.max_judge_outage_steps="
        f"{limit}); the judge's last answer: {first_failure or '?'}. Check judge.urls and judge.model (or "
        f"raise the limit); resume from the last checkpoint in {self.checkpoint_dir} with "
        "--config.resume=True"
      )


def _failure_reasons(reasons) -> dict:
  """`judge/failed/<reason>` counts summed over hosts (each host's judge fails on its own; reasons such
  as "http_503" are open-ended, so the counters travel as JSON)."""
  total: dict[str, int] = {}
  for host in parallel.gather_json(dict(reasons)):
    for reason, n in host.items():
      total[reason] = total.get(reason, 0) + int(n)
  return {f"judge/failed/{r}": n for r, n in total.items()}
