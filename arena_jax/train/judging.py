"""The judge side of a training step: tournaments or rubric scores for the groups a mode sends to the
judge, run on a background event loop so they overlap the next step's generation (DESIGN: the loop).

`JudgeRunner` owns one asyncio loop in a daemon thread and the judge built on it; `submit_step`
returns a `concurrent.futures.Future` of a `JudgeOutcome` (the raw tournament / rubric results of the
step's judged groups). The trainer turns it into rewards with `judge_rewards` on the main thread, so
the Bradley–Terry fit (a jitted device call, SPEC §6) is timed on its own.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import threading
from typing import Sequence

import numpy as np

from arena_jax import arena
from arena_jax.rl.modes import RewardMode

# Topologies whose schedule needs the group's greedy sample as anchor (SPEC §5).
ANCHORED = ("anchor", "seeded_single_elimination", "double_elimination")


@dataclasses.dataclass
class GroupJob:
  """One judged group: its index in the step's batch, the texts, and the arrival order."""

  index: int
  problem: str
  reference: str
  traces: Sequence[str]
  arrival_order: Sequence[int]


@dataclasses.dataclass
class JudgeOutcome:
  """What the judge returned for a step's judged groups (host data, no rewards yet)."""

  indices: list[int]
  matches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = dataclasses.field(default_factory=list)
  native_ranks: list[np.ndarray | None] = dataclasses.field(default_factory=list)  # rank 0 = best
  scores: list[list[float | None]] = dataclasses.field(default_factory=list)  # pointwise
  calls: int = 0
  failures: int = 0
  failure_reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  prompt_tokens: int = 0
  completion_tokens: int = 0


class JudgeRunner:
  """A judge on its own event loop thread (one long-lived loop: the client's sessions live on it)."""

  def __init__(self, judge_config, urls: Sequence[str], mode: RewardMode, *, topology: str, seed: int):
    from arena_jax import judges  # pylint: disable=g-import-not-at-top  (aiohttp only when judging)

    self.mode, self.topology, self.seed = mode, topology, seed
    cfg = judge_config.copy_and_resolve_references()
    if mode.judge_form == "pairwise":
      cfg.backend = "pairwise"
    elif cfg.backend == "pairwise":  # a pointwise mode with the default backend: the rubric judge
      cfg.backend = "pointwise"
    self.backend = cfg.backend
    self._loop = asyncio.new_event_loop()
    self._thread = threading.Thread(target=self._loop.run_forever, name="arena-judge", daemon=True)
    self._thread.start()
    self.judge = self._run(self._make(judges, cfg, urls)).result()

  @staticmethod
  async def _make(judges, cfg, urls):
    return judges.make_judge(cfg, urls)

  def _run(self, coro) -> concurrent.futures.Future:
    return asyncio.run_coroutine_threadsafe(coro, self._loop)

  def submit_step(self, step: int, jobs: Sequence[GroupJob], group_size: int) -> concurrent.futures.Future:
    """Judges `jobs` in the background; the future's result is a `JudgeOutcome`."""
    if self.mode.judge_form == "pairwise":
      return self._run(self._tournaments(step, jobs, group_size))
    return self._run(self._pointwise(step, jobs))

  async def _tournaments(self, step, jobs, g) -> JudgeOutcome:
    from arena_jax import judges  # pylint: disable=g-import-not-at-top

    tjobs = []
    for job in jobs:
      kwargs = {"seed": _seed(self.seed, step, job.index)}
      if self.topology == "live":
        kwargs["arrival_order"] = list(job.arrival_order)
      if self.topology in ANCHORED:
        kwargs["anchor"] = 0  # the sampler decodes member 0 of every group greedily
      sched = arena.make_scheduler(self.topology, g, **kwargs)
      tjobs.append(judges.TournamentJob(sched, job.problem, job.reference, job.traces, group_id=(step, job.index)))
    runs = await judges.run_tournaments(self.judge, tjobs)
    out = JudgeOutcome([j.index for j in jobs])
    for run in runs:
      out.matches.append(run.scheduler.observed())
      out.native_ranks.append(run.scheduler.native_ranking())
      out.calls += run.calls
      out.failures += run.failures
      out.failure_reasons.update(r.failure_reason for _, _, r in run.results if not r.ok)
      out.prompt_tokens += run.prompt_tokens
      out.completion_tokens += run.completion_tokens
    return out

  async def _pointwise(self, step, jobs) -> JudgeOutcome:
    from arena_jax import judges  # pylint: disable=g-import-not-at-top

    requests = [judges.ScoreRequest(job.problem, job.reference, trace, key=(step, job.index, i))
                for job in jobs for i, trace in enumerate(job.traces)]
    results = await self.judge.score_many(requests)
    out = JudgeOutcome([j.index for j in jobs])
    k = 0
    for job in jobs:
      group = results[k:k + len(job.traces)]
      k += len(job.traces)
      out.scores.append([r.score if r.ok else None for r in group])
      for r in group:
        out.calls += r.calls
        out.failures += not r.ok
        if not r.ok:
          out.failure_reasons[r.failure_reason] += 1
        out.prompt_tokens += r.prompt_tokens
        out.completion_tokens += r.completion_tokens
    return out

  def close(self) -> None:
    if self._loop.is_closed():
      return
    try:
      self._run(self.judge.close()).result(timeout=10)
    finally:
      self._loop.call_soon_threadsafe(self._loop.stop)
      self._thread.join(timeout=10)
      self._loop.close()


def _seed(seed: int, step: int, group: int) -> int:
  return int(np.random.SeedSequence([seed, step, group]).generate_state(1)[0])


def judge_rewards(outcome: JudgeOutcome, mode: RewardMode, batch: int, group_size: int, *, l2: float,
                  solver: str) -> tuple[np.ndarray, np.ndarray, dict]:
  """Rewards [batch, G] for the judged groups (others 0.5), the judged mask [batch], and counts.

  Aggregation (SPEC §5–§7): win rate, Bradley–Terry (one batched jitted fit over the step's groups)
  or the topology's native ranking as ArenaRL's rank quantile; pointwise: the rubric scores, a failed
  member taking its group's mean (zero advantage). A group with no successful judgment keeps 1/2
  everywhere: zero advantage, and it is counted in `groups_all_failed`.
  """
  g = group_size
  rewards = np.full((batch, g), 0.5)
  judged = np.zeros(batch, bool)
  judged[outcome.indices] = True
  all_failed = 0
  if mode.judge_form == "pointwise":
    for idx, scores in zip(outcome.indices, outcome.scores):
      ok = [s for s in scores if s is not None]
      if not ok:
        all_failed += 1
        continue
      mean = float(np.mean(ok))
      rewards[idx] = [mean if s is None else s for s in scores]
    return rewards, judged, {"groups_all_failed": all_failed}

  empty = [len(m[0]) == 0 for m in outcome.matches]
  all_failed = int(sum(empty))
  live = [(idx, m, n) for idx, m, n, e in zip(outcome.indices, outcome.matches, outcome.native_ranks, empty) if not e]
  if not live:
    return rewards, judged, {"groups_all_failed": all_failed}
  if mode.aggregation == "bt":
    m = max(len(mm[0]) for _, mm, _ in live)
    arrays = np.zeros((4, len(live), m))
    for k, (_, (f, s, o), _) in enumerate(live):
      arrays[:, k, :len(f)] = np.stack([f, s, o, np.ones(len(f))])
    fitted = np.asarray(arena.bt_rewards(arrays[0].astype(np.int32), arrays[1].astype(np.int32), arrays[2],
                                         arrays[3], g, l2=l2, solver=solver))
    for k, (idx, _, _) in enumerate(live):
      rewards[idx] = fitted[k]
  elif mode.aggregation == "win_rate":
    for idx, (f, s, o), _ in live:
      score = np.bincount(f, o, g) + np.bincount(s, 1.0 - o, g)
      games = np.bincount(f, minlength=g) + np.bincount(s, minlength=g)
      rewards[idx] = np.where(games > 0, score / np.maximum(games, 1), 0.5)
  else:  # native ranking → rank quantile (ArenaRL)
    for idx, _, native in live:
      rewards[idx] = arena.tournaments.rank_quantile(native)
  return rewards, judged, {"groups_all_failed": all_failed}
