"""Tournament schedulers driven to completion by the async pairwise judge (SPEC §5)."""

import asyncio

import numpy as np
import pytest

from arena_jax import arena
from arena_jax import judges

from tests.judges.conftest import fast_config

PROBLEM = "Question: Compute (7 + 5) * 3 - 4.\nSolution:\n"
REFERENCE = "32"
# Best to worst by the embedded judge's penalty: 0, 0.5 (one operation not shown), 1 (a redundant
# step), 1.5 (three operations not shown), 2 (a slip and a wrong answer).
TRACES = [
  "7 + 5 = 12.\n\n12 * 3 = 36.\n\n36 - 4 = 32.\n\nAnswer: 32",
  "(7 + 5) * 3 = 36.\n\n36 - 4 = 32.\n\nAnswer: 32",
  "7 + 5 = 12.\n\n12 * 1 = 12.\n\n12 * 3 = 36.\n\n36 - 4 = 32.\n\nAnswer: 32",
  "Answer: 32",
  "7 + 5 = 13.\n\n13 * 3 = 39.\n\n39 - 4 = 35.\n\nAnswer: 35",
]


def run(url, jobs, config=None):
  async def main():
    judge = judges.make_judge(config or fast_config(), [url])
    try:
      return await judges.run_tournaments(judge, jobs)
    finally:
      await judge.close()

  return asyncio.run(main())


def test_round_robin_ranks_the_traces_by_process_quality(server):
  sched = arena.make_scheduler("round_robin", len(TRACES))
  (r,) = run(server.url, [judges.TournamentJob(sched, PROBLEM, REFERENCE, TRACES, group_id="g0")])
  assert sched.done and r.usage.calls == 10 and r.failures == 0 and sched.num_failed == 0
  scores = sched.native_scores()
  assert list(np.argsort(-scores)) == [0, 1, 2, 3, 4]
  f, s, o = sched.observed()
  assert len(o) == 10 and r.usage.prompt_tokens > 0


def test_many_groups_and_topologies_run_concurrently(server):
  g = len(TRACES)
  jobs = [
    judges.TournamentJob(arena.make_scheduler("live", g, arrival_order=[4, 3, 2, 1, 0]), PROBLEM, REFERENCE, TRACES, 1),
    judges.TournamentJob(arena.make_scheduler("seeded_single_elimination", g, anchor=0), PROBLEM, REFERENCE, TRACES, 2),
    judges.TournamentJob(arena.make_scheduler("swiss", g, seed=3), PROBLEM, REFERENCE, TRACES, 3),
  ]
  runs = run(server.url, jobs)
  for job, r in zip(jobs, runs):
    assert job.scheduler.done and r.failures == 0
  assert runs[0].usage.calls == arena.expected_calls("live", g) == 3 * g - 6
  assert runs[1].usage.calls == arena.expected_calls("seeded_single_elimination", g, anchor=0)
  assert int(np.argmax(runs[0].scheduler.native_scores())) == 0


def test_failed_judgments_are_dropped_and_counted():
  async def main():
    async with judges.serve_in_process(malformed_rate=1.0) as url:
      judge = judges.make_judge(fast_config(max_parse_retries=0), [url])
      sched = arena.make_scheduler("round_robin", 4)
      r = await judges.run_tournament(sched, judge, PROBLEM, REFERENCE, TRACES[:4], group_id=0)
      await judge.close()
      return sched, r

  sched, r = asyncio.run(main())
  assert sched.done and sched.num_failed == 6 and r.failures == 6 and len(sched.observed()[2]) == 0


def test_the_trace_count_must_match_the_scheduler(server):
  with pytest.raises(ValueError, match="traces for a tournament"):
    run(server.url, [judges.TournamentJob(arena.make_scheduler("round_robin", 3), PROBLEM, REFERENCE, TRACES)])
