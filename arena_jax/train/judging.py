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
import functools
import threading
from typing import Any, Sequence

import numpy as np

from arena_jax import arena
from arena_jax import judges
from arena_jax.rl import RewardMode, Verdicts
from arena_jax.train import transcripts as transcripts_lib


@dataclasses.dataclass
class GroupJob:
  """One judged group: its index in the step's batch, the texts, and the arrival order."""

  index: int
  problem: str
  reference: str
  traces: Sequence[str]
  arrival_order: Sequence[int]
  example: Any = None  # the task's `Example`, recorded in the transcripts (the process checker reads it)


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

  def __init__(self, judge_config, urls: Sequence[str], mode: RewardMode, *, topology: str | None, seed: int,
               transcripts: transcripts_lib.TranscriptWriter | None = None):
    self.mode, self.seed, self.topology, self.transcripts = mode, seed, topology, transcripts
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
    """Judges `jobs` in the background; the future's result is a `JudgeOutcome`."""
    if self.scheduler is not None:
      return self._run(self._tournaments(step, jobs, group_size))
    return self._run(self._pointwise(step, jobs))

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
    for job, run in zip(jobs, await judges.run_tournaments(self.judge, tjobs)):
      out.verdicts.append(Verdicts(matches=run.scheduler.observed(), native_ranking=run.scheduler.native_ranking()))
      for _, _, r in run.results:
        out.count(r)
      self._record(step, job, functools.partial(transcripts_lib.pairwise_group_row, self.judge, step + 1, job, run,
                                                self.topology))
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
      self._record(step, job, functools.partial(transcripts_lib.pointwise_group_row, self.judge, step + 1, job, group))
    return out

  def _record(self, step: int, job: GroupJob, build) -> None:
    """Queues the group's transcript row when it is sampled; `build` runs on the writer thread."""
    if self.transcripts is not None and self.transcripts.sampled(step + 1, job.index):
      self.transcripts.put(build)

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
