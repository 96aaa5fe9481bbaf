"""What an RL step reports (docs/architecture.md lists the metrics): its metrics, a sample of its completions
(`samples.jsonl`) and its judge transcript row (`transcripts.read_steps`).

Here, apart from the loop (`train.trainer`), because this is what one extends to report something new about a
step; both loops (lock-step and `async_loop`) record every step through `StepReporter`.
"""

from __future__ import annotations

import numpy as np

from arena_jax import parallel
from arena_jax import tasks
from arena_jax.train import step as step_lib
from arena_jax.train.batch import Batch, Pending


class StepReporter:
  """A step's metrics, samples and transcript row, from its `Pending` work, its `StepRewards` and the metrics
  of its rewards and update (SPEC §1–§7 name what they measure)."""

  def __init__(self, config, mode, task, block: slice, tokenizer, schedule, topology: str):
    self.config, self.mode, self.task, self.block, self.tokenizer = config, mode, task, block, tokenizer
    self.schedule, self.topology = schedule, topology  # `schedule`: the optimizer's learning rate per update
    self.g = config.rollout.group_size

  def __call__(
    self, pending: Pending, rewards: step_lib.StepRewards, m: dict, *, update_s: float, step_s: float, transcripts
  ) -> tuple[dict, list[dict]]:
    """The step's metrics (`m`: the rewards' and the update's, completed here) and its sample of completions;
    writes its transcript row to `transcripts` (a `TranscriptWriter`, or None)."""
    row_rewards, row_advantages = m.pop("rows/rewards"), m.pop("rows/advantages")
    samples = self.samples(pending, np.asarray(rewards.judged), row_rewards, row_advantages)
    m.update(self.process_metrics(pending.local))
    if transcripts is not None and parallel.is_main_process():
      transcripts.put(self.step_row(pending, rewards, row_rewards, row_advantages))
    batch, gen = pending.batch, pending.generation
    v = batch.verifier
    m.update(
      {
        # accuracy: over every generated sample (what the policy achieves; with dynamic sampling the
        # trained groups are a selection); reward/verifier: over the trained groups.
        "reward/verifier": float(v.mean()),
        "accuracy": gen.correct / max(gen.trajectories, 1),
        "groups/all_correct": float((v.min(-1) >= 1).mean()),
        "groups/all_wrong": float((v.max(-1) <= 0).mean()),
        "groups/diverse": float(batch.diverse.mean()),
        "groups/routed": float(self.mode.select(batch.diverse).mean()) if self.mode.uses_judge else 0.0,
        # The judge's room: distinct completions per routed group (0 when no group was routed).
        "judge/distinct_per_group": self._distinct_routed(pending.local),
        "gen/batches": gen.batches,
        "gen/trajectories": gen.trajectories,
        "gen/tokens": gen.tokens,
        "gen/tokens_trained": int(batch.lengths.sum()),
        "gen/groups_judged_early": int(parallel.host_sum(np.asarray(gen.judged_early))),
        "gen/tokens_per_s": float(gen.tokens / max(gen.sample_s, 1e-9)),
        "gen/unclosed_thinking": gen.unclosed_thinking,
        "time/sample": gen.sample_s,
        "time/verify": gen.verify_s,
        "time/update": update_s,
        # The learning rate of the step's last update, from the optimizer's own schedule.
        "lr": float(self.schedule((pending.step + 1) * self.config.optim.minibatches - 1)),
        "time/step": step_s,  # this step's own work
      }
    )
    m.setdefault("time/judge_wait", 0.0)
    m.setdefault("time/judge_after_gen", 0.0)
    m.setdefault("time/bt_fit", 0.0)
    return m, samples

  def _distinct_routed(self, local: Batch) -> float:
    """The mean distinct traces per routed group over every host's groups (a collective: every host calls it)."""
    routed = self.mode.select(local.diverse) if self.mode.uses_judge else np.zeros(local.num_groups, bool)
    distinct = tasks.distinct_traces(local.texts, self.g)[routed] if routed.any() else np.zeros(0)
    total, count = parallel.host_sum(np.asarray([distinct.sum(), len(distinct)], np.float64))
    return float(total / count) if count else 0.0

  def samples(self, pending: Pending, judged, rewards, advantages) -> list[dict]:
    """`log.samples_per_step` of this host's completions, spread over its groups: what the policy wrote,
    with the rewards and advantages it was trained with."""
    local, n = pending.local, self.config.log.samples_per_step
    rows = np.linspace(0, local.num_groups * self.g - 1, min(n, local.num_groups * self.g)).astype(int)
    out = []
    for r in rows:
      b, i = divmod(int(r), self.g)
      gb = self.block.start + b  # the group's index in the step
      # The prompt as the policy was given it (through its chat template with tasks.prompt_format = chat).
      prompt = self.task.prompt_texts([local.examples[b]], self.tokenizer)[0]
      out.append(
        {
          "group": gb,
          "member": i,
          "prompt": prompt,
          "completion": local.texts[r],
          "verifier": float(local.verifier[b, i]),
          "reward": float(rewards[gb, i]),
          "advantage": float(advantages[gb, i]),
          "judged": bool(judged[gb]),
        }
      )
    return out

  def step_row(self, pending: Pending, rewards: step_lib.StepRewards, row_rewards, row_advantages) -> dict:
    """The step's transcript row (`transcripts.read_steps`): every group's router decision and rewards."""
    batch = pending.batch
    routed = self.mode.select(batch.diverse) if self.mode.uses_judge else np.zeros(batch.num_groups, bool)
    judge_r, judged = np.asarray(rewards.judge), np.asarray(rewards.judged)
    groups = [
      {
        "group": b,
        "diverse": bool(batch.diverse[b]),
        "routed": bool(routed[b]),
        "judged": bool(judged[b]),
        "verifier": batch.verifier[b].tolist(),
        "judge": judge_r[b].tolist(),
        "reward": np.asarray(row_rewards[b]).tolist(),
        "advantage": np.asarray(row_advantages[b]).tolist(),
      }
      for b in range(batch.num_groups)
    ]
    return {
      "kind": "step",
      "step": pending.step + 1,
      "mode": self.mode.name,
      "topology": self.topology,
      "task": self.config.tasks.train_task,
      "group_size": self.g,
      "groups": groups,
    }

  def process_metrics(self, local: Batch) -> dict:
    """`process/*`: the process checker's reading of `log.process_checks` completions of the step (whole
    groups spread over every host's share), summed over hosts — what the judge is meant to change."""
    checks = self.config.log.process_checks
    if not checks or not self.task.has_process_checker:  # the same on every host: the gather below is collective
      return {}
    groups = np.unique(np.linspace(0, local.num_groups - 1, min(-(-checks // self.g), local.num_groups)).astype(int))
    rows = [b * self.g + i for b in groups for i in range(self.g)]
    reports = [self.task.check_process(local.examples[r // self.g], local.texts[r]) for r in rows]
    counts = tasks.process_counts(reports, [float(local.verifier[r // self.g, r % self.g]) for r in rows])
    total = {k: sum(host[k] for host in parallel.gather_json(counts)) for k in counts}
    return {f"process/{k}": v for k, v in tasks.process_rates(total).items()}
