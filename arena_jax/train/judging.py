"""The judge side of a training step: tournaments or rubric scores for the groups a mode sends to the
judge, run on a background event loop so they overlap the next step's generation (DESIGN: the loop).

`JudgeRunner` owns one asyncio loop in a daemon thread and the judge built on it; `submit` returns a
`concurrent.futures.Future` of a `JudgeOutcome`: per judged group its `Verdicts` (observed matches and
native ranking, or rubric scores) and the step's judge usage. The reward mode turns the verdicts into
judge rewards on the main thread (`RewardMode.aggregate`), so the Bradley–Terry fit (a jitted device
call, SPEC §6) is timed on its own.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import threading
from typing import Sequence

import numpy as np
from absl import logging

from arena_jax import arena
from arena_jax import judges
from arena_jax.rl import RewardMode, Verdicts


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
  verdicts: list[Verdicts] = dataclasses.field(default_factory=list)
  usage: judges.Usage = judges.Usage()
  failures: int = 0
  failure_reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  first_failure: str = ""  # the reason and the judge's own words, for the step's warning

  def count(self, result) -> None:
    """Adds one judgment (a pairwise `JudgeResult` or a pointwise `ScoreResult`): its cost and failure."""
    self.usage += result.usage
    if not result.ok:
      self.failures += 1
      self.failure_reasons[result.failure_reason] += 1
      if not self.first_failure:
        detail = " ".join(str(result.failure_detail or "").split())[:300]
        self.first_failure = f"{result.failure_reason}" + (f": {detail}" if detail else "")


class JudgeRunner:
  """A judge on its own event loop thread (one long-lived loop: the client's sessions live on it)."""

  def __init__(self, judge_config, urls: Sequence[str], mode: RewardMode, *, topology: str | None, seed: int):
    self.mode, self.seed = mode, seed
    self.scheduler = arena.SCHEDULERS[topology] if mode.judge_form == "pairwise" else None
    cfg = judge_config.copy_and_resolve_references()
    if mode.judge_form == "pairwise":
      cfg.backend = "pairwise"
    elif cfg.backend == "pairwise":  # a pointwise mode with the default backend: the rubric judge
      cfg.backend = "pointwise"
    self._loop = asyncio.new_event_loop()
    self._thread = threading.Thread(target=self._loop.run_forever, name="arena-judge", daemon=True)
    self._thread.start()
    self.judge = self._run(self._make(cfg, urls)).result()

  @staticmethod
  async def _make(cfg, urls):
    return judges.make_judge(cfg, urls)  # on the loop: the client's sessions belong to it

  def _run(self, coro) -> concurrent.futures.Future:
    return asyncio.run_coroutine_threadsafe(coro, self._loop)

  def submit(self, step: int, jobs: Sequence[GroupJob], group_size: int) -> concurrent.futures.Future:
    """Judges `jobs` in the background; the future's result is a `JudgeOutcome` (never an exception)."""
    if self.scheduler is not None:
      return self._run(_contained(self._tournaments(step, jobs, group_size), jobs))
    return self._run(_contained(self._pointwise(step, jobs), jobs))

  async def _tournaments(self, step, jobs, g) -> JudgeOutcome:
    tjobs = []
    for job in jobs:
      kwargs = {"seed": _seed(self.seed, step, job.index)}
      if self.scheduler.uses_arrival_order:
        kwargs["arrival_order"] = list(job.arrival_order)
      if self.scheduler.needs_anchor:
        kwargs["anchor"] = 0  # the sampler decodes member 0 of every group greedily
      tjobs.append(judges.TournamentJob(self.scheduler(g, **kwargs), job.problem, job.reference, job.traces,
                                        group_id=(step, job.index)))
    out = JudgeOutcome([j.index for j in jobs])
    for run in await judges.run_tournaments(self.judge, tjobs):
      out.verdicts.append(Verdicts(matches=run.scheduler.observed(), native_ranking=run.scheduler.native_ranking()))
      for _, _, r in run.results:
        out.count(r)
    return out

  async def _pointwise(self, step, jobs) -> JudgeOutcome:
    requests = [judges.ScoreRequest(job.problem, job.reference, trace, key=(step, job.index, i))
                for job in jobs for i, trace in enumerate(job.traces)]
    results = iter(await self.judge.score_many(requests))
    out = JudgeOutcome([j.index for j in jobs])
    for job in jobs:
      group = [next(results) for _ in job.traces]
      out.verdicts.append(Verdicts(scores=[r.score if r.ok else None for r in group]))
      for r in group:
        out.count(r)
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


async def _contained(judging, jobs: Sequence[GroupJob]) -> JudgeOutcome:
  """The outcome of `judging`, or, when it raises, one in which every group got no judgment.

  The client turns every judge failure into a failed judgment; this catches what nothing else does (a
  bug reached by a judge's answer, a scheduler surprise), so that a step's judging can cost that step's
  judge signal but never the run. Each group counts one failed call with reason `exception`, so that
  `reward.max_judge_outage_steps` still stops a run whose judging fails every step.
  """
  try:
    return await judging
  except Exception as e:  # pylint: disable=broad-except  (see the docstring)
    logging.exception("the judging of %d group(s) raised; they get no judgment this step", len(jobs))
    out = JudgeOutcome([j.index for j in jobs], verdicts=[Verdicts() for _ in jobs],
                       usage=judges.Usage(calls=len(jobs)), failures=len(jobs))
    out.failure_reasons["exception"] = len(jobs)
    out.first_failure = f"exception: {type(e).__name__}: {e}"[:300]
    return out


def _seed(seed: int, step: int, group: int) -> int:
  return int(np.random.SeedSequence([seed, step, group]).generate_state(1)[0])
