"""The judge side of a training step: tournaments or rubric scores for the groups a mode sends to the
judge, run on a background event loop so they overlap generation (DESIGN: the loop; issue 14).

`JudgeRunner` owns one asyncio loop in a daemon thread and the judge built on it. `open(step)` returns a
`StepJudgment`: the trainer adds each judged group as soon as it is known (`add`: after the whole step
was generated, or the moment the group's last member finished decoding), can feed a live tournament one
arrival at a time before the group's routing is known (`arrive`, `abandon`: `reward.live_start =
"speculative"`), then `close`s it; `result(timeout)` gives a `JudgeOutcome`: per judged group its
`Verdicts` (observed matches and native ranking, or rubric scores) and the step's judge usage. Matches
still running when the timeout (`judge.step_deadline_s`) expires are cancelled and counted late; their
groups fall back as groups with no judgment do. The reward mode turns the verdicts into judge rewards
on the main thread (`RewardMode.aggregate`), so the Bradley–Terry fit (a jitted device call, SPEC §6)
is timed on its own.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import inspect
import threading
import time
from typing import Sequence

import numpy as np

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
  late_matches: int = 0    # judgments still running at the step deadline: cancelled, not in the fit
  late_groups: int = 0     # groups cut short by the deadline: they fall back as groups with no judgment do
  wasted_calls: int = 0    # judgments issued for speculative tournaments of groups that turned out diverse
  abandoned_groups: int = 0

  def count(self, result) -> None:
    """Adds one judgment (a pairwise `JudgeResult` or a pointwise `ScoreResult`): its cost and failure."""
    self.usage += result.usage
    if not result.ok:
      self.failures += 1
      self.failure_reasons[result.failure_reason] += 1
      if not self.first_failure:
        detail = " ".join(str(result.failure_detail or "").split())[:300]
        self.first_failure = f"{result.failure_reason}" + (f": {detail}" if detail else "")


@dataclasses.dataclass
class _Group:
  """One group's judging on the loop: a tournament (`run` fills as matches return) or rubric scores."""

  index: int
  task: asyncio.Task
  run: judges.TournamentRun | None = None
  traces: list | None = None                 # a speculative tournament's traces, filled as members arrive
  arrivals: asyncio.Event | None = None      # set after each arrival (the tournament waits on it)
  abandoned: bool = False


class StepJudgment:
  """One step's judging (see the module docstring). Every method is called from the trainer's thread."""

  def __init__(self, runner: "JudgeRunner", step: int, group_size: int):
    self.runner, self.step, self.g = runner, step, group_size
    self._groups: dict[int, _Group] = {}  # touched on the loop only
    self._done: concurrent.futures.Future | None = None
    self._outcome: JudgeOutcome | None = None
    self.finished_at: float | None = None  # time.perf_counter() when the last judgment came back (or was cut)

  # ── feeding it (thread-safe: each call is queued on the loop, in order) ──

  def add(self, job: GroupJob) -> None:
    """Starts judging a whole group."""
    self.runner._loop.call_soon_threadsafe(self._start, job)

  def arrive(self, index: int, member: int, trace: str, problem: str, reference: str) -> None:
    """Feeds member `member` of group `index` to its live tournament (opened by its first arrival)
    before the group's routing is known; the tournament completes when all G have arrived."""
    self.runner._loop.call_soon_threadsafe(self._arrive, index, member, trace, problem, reference)

  def abandon(self, index: int) -> None:
    """Stops group `index`'s speculative tournament (a different verifier reward arrived): its
    judgments so far are wasted calls, the group is not judged."""
    self.runner._loop.call_soon_threadsafe(self._abandon, index)

  def close(self) -> "StepJudgment":
    """No more groups; their judging goes on in the background."""
    self._done = self.runner._run(self._gather())
    return self

  def result(self, timeout: float | None = None) -> JudgeOutcome:
    """The step's `JudgeOutcome`, waiting at most `timeout` seconds (None = until every judgment is in);
    what is still running then is cancelled and counted late."""
    if self._outcome is None:
      try:
        self._done.result(timeout)
        late = False
      except concurrent.futures.TimeoutError:
        self.runner._run(self._cancel()).result()
        self.finished_at, late = time.perf_counter(), True
      self._outcome = self._collect(late)
    return self._outcome

  # ── on the loop ──

  def _seed(self, index: int) -> int:
    return int(np.random.SeedSequence([self.runner.seed, self.step, index]).generate_state(1)[0])

  def _start(self, job: GroupJob) -> None:
    r = self.runner
    if r.scheduler is None:
      requests = [judges.ScoreRequest(job.problem, job.reference, trace, key=(self.step, job.index, i))
                  for i, trace in enumerate(job.traces)]
      self._groups[job.index] = _Group(job.index, asyncio.ensure_future(r.judge.score_many(requests)))
      return
    kwargs = {"seed": self._seed(job.index), **r.options}
    if r.scheduler.uses_arrival_order:
      kwargs["arrival_order"] = list(job.arrival_order)
    if r.scheduler.needs_anchor:
      kwargs["anchor"] = 0  # the sampler decodes member 0 of every group greedily
    self._play(job.index, r.scheduler(self.g, **kwargs), job.problem, job.reference, list(job.traces))

  def _play(self, index, scheduler, problem, reference, traces, arrivals=None) -> None:
    run = judges.TournamentRun(scheduler, (self.step, index))
    task = asyncio.ensure_future(judges.run_tournament(scheduler, self.runner.judge, problem, reference, traces,
                                                       group_id=(self.step, index), run=run, arrivals=arrivals))
    self._groups[index] = _Group(index, task, run, traces, arrivals)

  def _arrive(self, index, member, trace, problem, reference) -> None:
    group = self._groups.get(index)
    if group is None:
      scheduler = self.runner.scheduler(self.g, streaming=True, seed=self._seed(index), **self.runner.options)
      self._play(index, scheduler, problem, reference, [""] * self.g, asyncio.Event())
      group = self._groups[index]
    if group.abandoned:
      return
    group.traces[member] = trace
    group.run.scheduler.arrive(member)
    group.arrivals.set()

  def _abandon(self, index) -> None:
    group = self._groups.get(index)
    if group is not None:
      group.abandoned = True
      group.task.cancel()

  async def _gather(self) -> None:
    live = [g.task for g in self._groups.values() if not g.abandoned]
    await asyncio.gather(*live)
    self.finished_at = time.perf_counter()

  async def _cancel(self) -> None:
    tasks = [g.task for g in self._groups.values()]
    for task in tasks:
      task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

  def _collect(self, late: bool) -> JudgeOutcome:
    """The outcome from the groups' state (read after the loop is done with them)."""
    groups = sorted(self._groups.values(), key=lambda g: g.index)
    out = JudgeOutcome([g.index for g in groups if not g.abandoned])
    for g in groups:
      if g.abandoned:
        out.abandoned_groups += 1
        out.wasted_calls += g.run.scheduler.num_issued
        continue
      finished = g.task.done() and not g.task.cancelled()
      if finished and g.task.exception() is not None:
        raise g.task.exception()  # a judging bug, not a late judgment
      if g.run is None:  # rubric scores: the group's judgments are all in, or none is used
        results = g.task.result() if finished else []
        out.verdicts.append(Verdicts(scores=[r.score if r.ok else None for r in results] if finished else None))
        out.late_matches += 0 if finished else self.g
      else:
        sched = g.run.scheduler
        out.verdicts.append(Verdicts(matches=sched.observed(), native_ranking=sched.native_ranking())
                            if finished else Verdicts())
        out.late_matches += sched.num_issued - len(g.run.results)
        results = [r for _, _, r in g.run.results]
      out.late_groups += not finished
      for r in results:
        out.count(r)
    assert late or not out.late_groups, "every group finishes when nothing was cancelled"
    return out


class JudgeRunner:
  """A judge on its own event loop thread (one long-lived loop: the client's sessions live on it)."""

  def __init__(self, judge_config, urls: Sequence[str], mode: RewardMode, *, topology: str | None, seed: int,
               live_pipelined: bool = False):
    self.mode, self.seed = mode, seed
    self.scheduler = arena.SCHEDULERS[topology] if mode.judge_form == "pairwise" else None
    # Live tournaments: opponents chosen from the standings known at each arrival (pipelined) or only once
    # every earlier result is in (blocking, the default: reproducible).
    self.options = ({"wait_for_results": not live_pipelined} if self.scheduler is not None
                    and "wait_for_results" in inspect.signature(self.scheduler).parameters else {})
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

  def open(self, step: int, group_size: int) -> StepJudgment:
    """A step's judging, to `add` groups to (or feed arrivals to) and then `close`."""
    return StepJudgment(self, step, group_size)

  def submit(self, step: int, jobs: Sequence[GroupJob], group_size: int) -> StepJudgment:
    """Judges `jobs` in the background (all groups known at once); `.result()` is a `JudgeOutcome`."""
    judgment = self.open(step, group_size)
    for job in jobs:
      judgment.add(job)
    return judgment.close()

  def close(self) -> None:
    if self._loop.is_closed():
      return
    try:
      self._run(self.judge.close()).result(timeout=10)
    finally:
      self._loop.call_soon_threadsafe(self._loop.stop)
      self._thread.join(timeout=10)
      self._loop.close()
