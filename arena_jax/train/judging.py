"""The judge side of a training step: tournaments or rubric scores for the groups a mode sends to the
judge, run on a background event loop so they overlap generation (docs/architecture.md, "The loop").

`JudgeRunner` owns one asyncio loop in a daemon thread and the judge built on it. `open(step)` returns a
`StepJudgment`: the trainer adds each judged group as soon as it is known (`add`: after the whole step
was generated, or the moment the group's last member finished decoding), can feed a live tournament one
arrival at a time before the group's routing is known (`arrive`, `abandon`: `lockstep.live_start =
"speculative"`), then `close`s it; `result(timeout)` gives a `JudgeOutcome`: per judged group its
`Verdicts` (observed matches and native ranking, or rubric scores) and the step's judge usage. Matches
still running when the timeout (`judge.step_deadline_s`) expires are cancelled and counted late; their
groups fall back as groups with no judgment do. The reward mode turns the verdicts into judge rewards
on the main thread (`RewardMode.aggregate`), so the Bradley–Terry fit (a jitted device call, SPEC §6)
is timed on its own.

Members of a group whose traces are identical up to whitespace share one tournament node (`Nodes`,
`reward.dedupe_traces`): no call between them, one call on behalf of all, equal rewards. A group
whose judging raises gets no judgment and counts one failed call (`exception`), never a crash.
Each finished group's transcript row is queued for `transcripts.TranscriptWriter`.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import functools
import inspect
import threading
import time
from typing import Any, Sequence

from absl import logging
import numpy as np

from arena_jax import arena
from arena_jax import judges
from arena_jax import tasks
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
  calls_saved: int = 0  # judge calls (pairs, or rubric scores) that duplicates did not need
  late_matches: int = 0  # judgments still running at the step deadline: cancelled, not in the fit
  late_groups: int = 0  # groups cut short by the deadline: they fall back as groups with no judgment do
  wasted_calls: int = 0  # judgments issued for speculative tournaments of groups that turned out diverse
  abandoned_groups: int = 0

  def extend(self, other: JudgeOutcome, index: int) -> None:
    """Adds `other`, the outcome of one group judged on its own, as group `index` of this outcome (the
    asynchronous loop judges each group apart and joins them per step: `async_loop.Judgments`).

    Every field is merged by its kind, read from the dataclass's fields, so a field added to this class is
    carried or fails here, never silently dropped: `indices` become `index`, lists concatenate, a
    Counter adds up, a flag is any, a string keeps the first non-empty one, anything else (counts, `Usage`) adds.
    """
    for f in dataclasses.fields(self):
      mine, theirs = getattr(self, f.name), getattr(other, f.name)
      if f.name == "indices":
        mine.extend([index] * len(theirs))
      elif isinstance(mine, collections.Counter):
        mine.update(theirs)
      elif isinstance(mine, list):
        mine.extend(theirs)
      elif isinstance(mine, (bool, str)):
        setattr(self, f.name, mine or theirs)
      else:
        setattr(self, f.name, mine + theirs)

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
  task: asyncio.Future
  run: judges.TournamentRun | None = None
  traces: list | None = None  # a speculative tournament's traces, filled as members arrive
  arrivals: asyncio.Event | None = None  # set after each arrival (the tournament waits on it)
  abandoned: bool = False
  job: GroupJob | None = None  # the whole group (None for a speculative one): transcripts
  nodes: "Nodes | None" = None  # its members grouped by identical trace (None: each plays alone)


class StepJudgment:
  """One step's judging (see the module docstring). Every method is called from the trainer's thread."""

  def __init__(self, runner: "JudgeRunner", step: int, group_size: int):
    self.runner, self.step, self.g = runner, step, group_size
    self._groups: dict[int, _Group] = {}  # touched on the loop only
    self._done: concurrent.futures.Future | None = None
    self._outcome: JudgeOutcome | None = None
    self.finished_at: float | None = None  # time.perf_counter() when the last judgment came back (or was cut)
    self.started_at: float | None = None  # time.perf_counter() when the first group started to be judged

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

  def done(self) -> bool:
    """The closed step's judgments are all back (or were cut): `result()` returns at once."""
    return self._outcome is not None or (self._done is not None and self._done.done())

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
    self.started_at = self.started_at or time.perf_counter()
    try:
      self._start_group(job)
    except Exception as e:  # pylint: disable=broad-except  (counted as the group's failure in `_collect`)
      failed = asyncio.get_running_loop().create_future()
      failed.set_exception(e)
      self._groups[job.index] = _Group(job.index, failed, job=job)

  def _start_group(self, job: GroupJob) -> None:
    r = self.runner
    nodes = r.nodes(job.traces)
    if r.scheduler is None:  # rubric scores, one per distinct trace on behalf of its copies
      requests = [
        judges.ScoreRequest(job.problem, job.reference, job.traces[i], key=(self.step, job.index, i))
        for i in nodes.representatives
      ]
      self._groups[job.index] = _Group(
        job.index, asyncio.ensure_future(r.judge.score_many(requests)), job=job, nodes=nodes
      )
      return
    if nodes.count < 2:  # one trajectory G times: equal rewards, nothing to ask
      done = asyncio.get_running_loop().create_future()
      done.set_result(None)
      self._groups[job.index] = _Group(job.index, done, job=job, nodes=nodes)
      return
    kwargs = {"seed": self._seed(job.index), **r.options}
    if r.scheduler.uses_arrival_order:  # a node arrives with its first copy
      kwargs["arrival_order"] = list(dict.fromkeys(int(nodes.node_of[i]) for i in job.arrival_order))
    if r.scheduler.needs_anchor:
      kwargs["anchor"] = int(nodes.node_of[0])  # the sampler decodes member 0 of every group greedily
    self._play(
      job.index,
      r.scheduler(nodes.count, **kwargs),
      job.problem,
      job.reference,
      [job.traces[i] for i in nodes.representatives],
    )
    self._groups[job.index].job, self._groups[job.index].nodes = job, nodes

  def _play(self, index, scheduler, problem, reference, traces, arrivals=None) -> None:
    run = judges.TournamentRun(scheduler, (self.step, index))
    task = asyncio.ensure_future(
      judges.run_tournament(
        scheduler,
        self.runner.judge,
        problem,
        reference,
        traces,
        group_id=(self.step, index),
        run=run,
        arrivals=arrivals,
      )
    )
    self._groups[index] = _Group(index, task, run, traces, arrivals)

  def _arrive(self, index, member, trace, problem, reference) -> None:
    self.started_at = self.started_at or time.perf_counter()
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
    await asyncio.gather(*live, return_exceptions=True)  # a group that raised is counted in `_collect`
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
    r = self.runner
    for g in groups:
      if g.abandoned:
        out.abandoned_groups += 1
        out.wasted_calls += g.run.scheduler.num_issued
        continue
      finished = g.task.done() and not g.task.cancelled()
      if finished and g.task.exception() is not None:
        _count_exception(out, g.task.exception())
        continue
      nodes = g.nodes or Nodes.identity(self.g)
      if g.run is None and r.scheduler is not None:  # every member the same trace: no call needed
        out.verdicts.append(Verdicts(matches=_NO_MATCHES, native_ranking=np.zeros(self.g), copies=nodes.copies))
        out.calls_saved += r.full_calls(self.g)
        continue
      if g.run is None:  # rubric scores: the group's judgments are all in, or none is used
        results = g.task.result() if finished else []
        scores = [x.score if x.ok else None for x in results]
        out.verdicts.append(Verdicts(scores=[scores[n] for n in nodes.node_of] if finished else None))
        out.late_matches += 0 if finished else nodes.count
        out.calls_saved += self.g - nodes.count
        build = functools.partial(
          transcripts_lib.pointwise_group_row,
          r.judge,
          self.step + 1,
          g.job,
          results,
          nodes.representatives,
          nodes.node_of,
        )
      else:
        sched = g.run.scheduler
        if finished:
          f, s, o = sched.observed()
          reps = np.asarray(nodes.representatives, np.int32)
          out.verdicts.append(
            Verdicts(
              matches=(reps[f], reps[s], o),
              native_ranking=arena.tournaments.average_ranks(list(sched.native_scores()[nodes.node_of])),
              copies=None if nodes.count == self.g else nodes.copies,
            )
          )
        else:
          out.verdicts.append(Verdicts())
        out.late_matches += sched.num_issued - len(g.run.results)
        out.calls_saved += r.full_calls(self.g) - r.full_calls(nodes.count) if nodes.count < self.g else 0
        results = [x for _, _, x in g.run.results]
        build = functools.partial(
          transcripts_lib.pairwise_group_row,
          r.judge,
          self.step + 1,
          g.job,
          g.run,
          r.topology,
          nodes.representatives,
          nodes.node_of,
        )
      out.late_groups += not finished
      for x in results:
        out.count(x)
      if finished and g.job is not None:
        r.record(self.step, g.job, build)
    assert late or not out.late_groups, "every group finishes when nothing was cancelled"
    return out


def _count_exception(out: JudgeOutcome, error: BaseException) -> None:
  """A group whose judging raised gets no judgment (zero advantage), and one failed call with reason
  `exception`: a bug reached by a judge's answer, or a scheduler surprise, costs that group's judge signal
  but never the run, and `reward.max_judge_outage_steps` still stops a run whose judging fails every step."""
  logging.error(
    "a judged group's judging raised; it gets no judgment this step", exc_info=(type(error), error, error.__traceback__)
  )
  out.verdicts.append(Verdicts())
  out.usage += judges.Usage(calls=1)
  out.failures += 1
  out.failure_reasons["exception"] += 1
  if not out.first_failure:
    out.first_failure = f"exception: {type(error).__name__}: {error}"[:300]


class JudgeRunner:
  """A judge on its own event loop thread (one long-lived loop: the client's sessions live on it)."""

  def __init__(
    self,
    judge_config,
    urls: Sequence[str],
    mode: RewardMode,
    *,
    topology: str | None,
    seed: int,
    live_pipelined: bool = False,
    dedupe: bool = True,
    transcripts: transcripts_lib.TranscriptWriter | None = None,
  ):
    self.mode, self.seed, self.dedupe = mode, seed, dedupe
    self.topology, self.transcripts = topology, transcripts
    self.scheduler = arena.SCHEDULERS[topology] if mode.judge_form == "pairwise" else None
    # Live tournaments: opponents chosen from the standings known at each arrival (pipelined) or only once
    # every earlier result is in (blocking, the default: reproducible).
    self.options = (
      {"wait_for_results": not live_pipelined}
      if self.scheduler is not None and "wait_for_results" in inspect.signature(self.scheduler).parameters
      else {}
    )
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

  def nodes(self, traces: Sequence[str]) -> "Nodes":
    """A group's tournament nodes: identical traces share one (`reward.dedupe_traces`), else one each."""
    return Nodes.of(traces) if self.dedupe else Nodes.identity(len(traces))

  def full_calls(self, players: int) -> int:
    """The calls a tournament among `players` costs by its topology's formula (duplicates' savings)."""
    return arena.expected_calls(self.scheduler.name, players, **({"anchor": 0} if self.scheduler.needs_anchor else {}))

  def record(self, step: int, job: GroupJob, build) -> None:
    """Queues the group's transcript row when it is sampled; `build` runs on the writer thread."""
    if self.transcripts is not None and self.transcripts.sampled(step + 1, job.index):
      self.transcripts.put(build)

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


_NO_MATCHES = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float64))


@dataclasses.dataclass(frozen=True)
class Nodes:
  """A group's members grouped into tournament nodes by `tasks.normalise_trace` (duplicates cost no judge call).

  representatives: the first member of each node, in member order (node k plays as member
  representatives[k]); node_of: int[G], each member's node; copies: int[G], each member's representative.
  """

  representatives: tuple[int, ...]
  node_of: np.ndarray

  @classmethod
  def of(cls, traces: Sequence[str]) -> "Nodes":
    first: dict[str, int] = {}
    node_of = np.asarray([first.setdefault(tasks.normalise_trace(t), len(first)) for t in traces], np.int64)
    reps = tuple(int(np.flatnonzero(node_of == k)[0]) for k in range(len(first)))
    return cls(reps, node_of)

  @classmethod
  def identity(cls, g: int) -> "Nodes":
    return cls(tuple(range(g)), np.arange(g))

  @property
  def count(self) -> int:
    return len(self.representatives)

  @property
  def copies(self) -> np.ndarray:
    return np.asarray(self.representatives, np.int64)[self.node_of]
