"""Running tournament schedulers against an async pairwise judge (SPEC §5; docs/architecture.md, "The loop").

`run_tournament` drives one `arena.Scheduler` to completion: every match the scheduler hands out is
judged as soon as it is issued (matches of a stage run concurrently; a live tournament's next
arrival is issued the moment its stage's results are in), and each result is recorded as it comes
back — a failed judgment as None, which the scheduler drops and counts (SPEC §4). Each query's key
is (group id, i, j), so presentation orders and request seeds do not depend on completion order.
`run_tournaments` runs many groups concurrently (the client's per-endpoint limits bound the load).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, NamedTuple, Sequence

from arena_jax.arena.tournaments import Scheduler
from arena_jax.judges.pairwise import JudgeResult, PairwiseJudge
from arena_jax.judges.usage import Usage


class TournamentJob(NamedTuple):
  """One group's tournament: its scheduler, problem, reference answer and the G traces."""

  scheduler: Scheduler
  problem: str
  reference: str
  traces: Sequence[str]
  group_id: Any = 0


@dataclasses.dataclass
class TournamentRun:
  """A finished tournament: the scheduler (observed matches, native scores) and every judgment."""

  scheduler: Scheduler
  group_id: Any
  results: list[tuple[int, int, JudgeResult]] = dataclasses.field(default_factory=list)

  @property
  def usage(self) -> Usage:
    """What every judgment cost; `latency_s` is judge time summed over the matches, not the
    tournament's wall time (the matches of a stage run concurrently)."""
    return sum((r.usage for _, _, r in self.results), Usage())

  @property
  def failures(self) -> int:
    """Failed judgments (dropped by the scheduler, SPEC §4)."""
    return sum(not r.ok for _, _, r in self.results)


async def run_tournament(
  scheduler: Scheduler,
  judge: PairwiseJudge,
  problem: str,
  reference: str,
  traces: Sequence[str],
  *,
  group_id: Any = 0,
  run: TournamentRun | None = None,
  arrivals: asyncio.Event | None = None,
) -> TournamentRun:
  """Plays `scheduler` to completion with `judge` (see module docstring); returns the run.

  `run`: the `TournamentRun` to fill (a caller that may cancel the tournament keeps the results so far).
  `arrivals`: for a streaming scheduler (a live tournament fed by `arrive()` while it runs): set by the
  caller after each `arrive()` or `close()`; the tournament waits on it whenever it has nothing to judge,
  and `traces[i]` must hold trajectory i before it arrives.
  """
  if len(traces) != scheduler.num_players:
    raise ValueError(f"{len(traces)} traces for a tournament of num_players={scheduler.num_players}")
  run = run if run is not None else TournamentRun(scheduler, group_id)
  running: dict[asyncio.Task, tuple[int, int]] = {}
  waiter = None
  try:
    while True:
      for i, j in scheduler.next_matches():
        task = asyncio.ensure_future(judge.compare(problem, reference, traces[i], traces[j], key=(group_id, i, j)))
        running[task] = (i, j)
      if not running and scheduler.done:
        return run
      if arrivals is None:
        if not running:
          raise RuntimeError(
            f"{scheduler!r} is not done but has nothing to issue (a streaming live tournament run without `arrivals`?)"
          )
      elif waiter is None:
        waiter = asyncio.ensure_future(arrivals.wait())
      finished, _ = await asyncio.wait([*running, *([waiter] if waiter else [])], return_when=asyncio.FIRST_COMPLETED)
      if waiter in finished:
        arrivals.clear()
        waiter = None
      for task in finished:
        if task in running:
          i, j = running.pop(task)
          result = task.result()
          run.results.append((i, j, result))
          scheduler.record(i, j, result.outcome)
  finally:
    for task in [*running, *([waiter] if waiter else [])]:
      task.cancel()


async def run_tournaments(judge: PairwiseJudge, jobs: Sequence[TournamentJob]) -> list[TournamentRun]:
  """Runs the tournaments of many groups concurrently; results in the order of `jobs`."""
  return list(
    await asyncio.gather(
      *(run_tournament(j.scheduler, judge, j.problem, j.reference, j.traces, group_id=j.group_id) for j in jobs)
    )
  )
