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
from absl import logging

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
  calls_saved: int = 0  # judge calls (pairs, or rubric scores) that duplicates did not need
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
               dedupe: bool = True, transcripts: transcripts_lib.TranscriptWriter | None = None):
    self.mode, self.seed, self.dedupe = mode, seed, dedupe
    self.topology, self.transcripts = topology, transcripts
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

  def _nodes(self, traces) -> "Nodes":
    return Nodes.of(traces) if self.dedupe else Nodes.identity(len(traces))

  def _options(self, nodes: "Nodes", job: GroupJob, step: int) -> dict:
    """The scheduler's arguments for a group's tournament among its distinct traces (its nodes)."""
    kwargs = {"seed": _seed(self.seed, step, job.index)}
    if self.scheduler.uses_arrival_order:  # a node arrives with its first copy
      kwargs["arrival_order"] = list(dict.fromkeys(int(nodes.node_of[i]) for i in job.arrival_order))
    if self.scheduler.needs_anchor:
      kwargs["anchor"] = int(nodes.node_of[0])  # the sampler decodes member 0 of every group greedily
    return kwargs

  async def _tournaments(self, step, jobs, g) -> JudgeOutcome:
    tjobs, groups = [], []
    out = JudgeOutcome([j.index for j in jobs])
    for job in jobs:
      nodes = self._nodes(job.traces)
      groups.append(nodes)
      full = arena.expected_calls(self.scheduler.name, g, **({"anchor": 0} if self.scheduler.needs_anchor else {}))
      if nodes.count < 2:  # one trajectory G times: equal rewards, nothing to ask
        out.calls_saved += full
        continue
      kwargs = self._options(nodes, job, step)
      out.calls_saved += full - arena.expected_calls(self.scheduler.name, nodes.count, **kwargs)
      tjobs.append(judges.TournamentJob(self.scheduler(nodes.count, **kwargs), job.problem, job.reference,
                                        [job.traces[r] for r in nodes.representatives], group_id=(step, job.index)))
    runs = iter(await judges.run_tournaments(self.judge, tjobs))
    for job, nodes in zip(jobs, groups):
      run = next(runs) if nodes.count >= 2 else None
      if run is None:
        out.verdicts.append(Verdicts(matches=_NO_MATCHES, native_ranking=np.zeros(g), copies=nodes.copies))
      else:
        f, s, o = run.scheduler.observed()
        reps = np.asarray(nodes.representatives, np.int32)
        out.verdicts.append(Verdicts(
            matches=(reps[f], reps[s], o),
            native_ranking=arena.tournaments.average_ranks(list(run.scheduler.native_scores()[nodes.node_of])),
            copies=None if nodes.count == g else nodes.copies))
        for _, _, r in run.results:
          out.count(r)
      self._record(step, job, functools.partial(transcripts_lib.pairwise_group_row, self.judge, step + 1, job, run,
                                                self.topology, nodes.representatives, nodes.node_of))
    return out

  async def _pointwise(self, step, jobs) -> JudgeOutcome:
    groups = [self._nodes(job.traces) for job in jobs]
    requests = [judges.ScoreRequest(job.problem, job.reference, job.traces[i], key=(step, job.index, i))
                for job, nodes in zip(jobs, groups) for i in nodes.representatives]
    results = iter(await self.judge.score_many(requests))
    out = JudgeOutcome([j.index for j in jobs])
    for job, nodes in zip(jobs, groups):
      group = [next(results) for _ in nodes.representatives]  # one score on behalf of all copies
      scores = [r.score if r.ok else None for r in group]
      out.verdicts.append(Verdicts(scores=[scores[n] for n in nodes.node_of]))
      out.calls_saved += len(job.traces) - nodes.count
      for r in group:
        out.count(r)
      self._record(step, job, functools.partial(transcripts_lib.pointwise_group_row, self.judge, step + 1, job, group,
                                                nodes.representatives, nodes.node_of))
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


_NO_MATCHES = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float64))


def normalise_trace(text: str) -> str:
  """What makes two traces the same trajectory for the judge: equal text up to whitespace (runs of
  spaces, tabs and newlines count as one space; leading and trailing whitespace is dropped)."""
  return " ".join(text.split())


@dataclasses.dataclass(frozen=True)
class Nodes:
  """A group's members grouped into tournament nodes by `normalise_trace` (issue 20: duplicates for free).

  representatives: the first member of each node, in member order (node k plays as member
  representatives[k]); node_of: int[G], each member's node; copies: int[G], each member's representative.
  """

  representatives: tuple[int, ...]
  node_of: np.ndarray

  @classmethod
  def of(cls, traces: Sequence[str]) -> "Nodes":
    first: dict[str, int] = {}
    node_of = np.asarray([first.setdefault(normalise_trace(t), len(first)) for t in traces], np.int64)
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


def _seed(seed: int, step: int, group: int) -> int:
  return int(np.random.SeedSequence([seed, step, group]).generate_state(1)[0])
