"""Duplicates for free: members of a judged group whose traces are the same up to whitespace
share one tournament node — no call between them, one call on behalf of all copies, equal rewards."""

import asyncio
import threading

import numpy as np
import pytest

from arena_jax import arena, judges, rl, tasks
from arena_jax.arena import Verdict
from arena_jax.train import judging


class LengthJudge:
  """Pairwise: the longer trace wins (equal lengths tie); pointwise: a score from the length. Records calls."""

  def __init__(self):
    self.pairs, self.scored = [], []

  async def compare(self, problem, reference, a, b, *, key=None):
    self.pairs.append((a, b))
    verdict = Verdict.TIE if len(a) == len(b) else (Verdict.FIRST_WINS if len(a) > len(b) else Verdict.SECOND_WINS)
    return judges.JudgeResult(arena.verdict_to_outcome(verdict, 0.4), verdict, usage=judges.Usage(calls=1))

  async def score_many(self, requests):
    self.scored.extend(r.trace for r in requests)
    return [judges.ScoreResult(min(1.0, len(r.trace) / 10), usage=judges.Usage(calls=1)) for r in requests]


class Runner(judging.JudgeRunner):
  """A JudgeRunner whose judge is the fake above (no server); `judge_groups` judges a step's jobs."""

  def __init__(self, mode, topology, dedupe=True):  # pylint: disable=super-init-not-called
    self.mode, self.seed, self.dedupe, self.judge = rl.get_mode(mode), 0, dedupe, LengthJudge()
    self.topology, self.transcripts, self.options = topology, None, {}
    self.scheduler = arena.SCHEDULERS[topology] if topology else None
    self._loop = asyncio.new_event_loop()
    self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
    self._thread.start()

  def judge_groups(self, jobs, g=8):
    try:
      return self.submit(0, jobs, g).result()
    finally:
      self._loop.call_soon_threadsafe(self._loop.stop)
      self._thread.join(timeout=10)


runner = Runner


TRACES = ["aaaa", "bb", "aaaa ", "c", "bb", " aaaa", "dddddd", "ee e"]  # nodes: aaaa ×3, bb ×2, c, dddddd, ee e


def test_nodes_group_members_by_normalised_trace():
  nodes = judging.Nodes.of(TRACES)
  assert nodes.representatives == (0, 1, 3, 6, 7) and nodes.count == 5
  assert list(nodes.node_of) == [0, 1, 0, 2, 1, 0, 3, 4] and list(nodes.copies) == [0, 1, 0, 3, 1, 0, 6, 7]
  assert tasks.normalise_trace(" a \n b\t") == "a b" and judging.Nodes.identity(3).count == 3


@pytest.mark.parametrize("topology", ["round_robin", "live", "seeded_single_elimination", "info_budget"])
def test_duplicates_share_one_node(topology):
  job = judging.GroupJob(3, "q", "ref", TRACES, arrival_order=[5, 1, 0, 2, 3, 4, 6, 7])
  r = runner("arena_live", topology)
  out = r.judge_groups([job])
  anchor = {"anchor": 0} if arena.SCHEDULERS[topology].needs_anchor else {}
  full, distinct = arena.expected_calls(topology, 8, **anchor), arena.expected_calls(topology, 5, **anchor)
  assert len(r.judge.pairs) == out.usage.calls == distinct  # one call per pair of distinct traces
  assert out.calls_saved == full - distinct > 0
  assert all(tasks.normalise_trace(a) != tasks.normalise_trace(b) for a, b in r.judge.pairs)
  (v,) = out.verdicts
  assert set(v.matches[0]) | set(v.matches[1]) <= {0, 1, 3, 6, 7}  # representatives play for their copies
  for agg in ("win_rate", "bt", "rank_quantile"):
    rewards = rl.AGGREGATORS[agg]([v], 8, l2=0.1, solver="newton")[0]
    assert rewards[0] == rewards[2] == rewards[5] and rewards[1] == rewards[4], agg  # equal for every copy
    assert rewards[6] == rewards.max(), agg  # the longest trace wins
  shrink = rl.bt_shrinkage([v], 8, l2=0.1, solver="newton", shrinkage=1.0)[0]
  assert shrink[0] == shrink[2] == shrink[5]


def test_without_dedupe_every_member_plays():
  job = judging.GroupJob(0, "q", "ref", TRACES, arrival_order=range(8))
  out = runner("arena", "round_robin", dedupe=False).judge_groups([job])
  assert out.usage.calls == 28 and out.calls_saved == 0 and out.verdicts[0].copies is None


def test_a_group_of_one_trajectory_needs_no_call():
  job = judging.GroupJob(0, "q", "ref", ["same"] * 4, arrival_order=range(4))
  r = runner("arena_live", "live")
  out = r.judge_groups([job], 4)
  assert r.judge.pairs == [] and out.calls_saved == arena.expected_calls("live", 4)
  (v,) = out.verdicts
  assert not v.empty  # equal rewards, not a failed group
  rewards, ok = rl.get_mode("arena_live").aggregate([v], 4, l2=0.1, solver="newton")
  assert ok.all() and np.all(rewards == 0.5)


def test_pointwise_scores_each_distinct_trace_once():
  job = judging.GroupJob(0, "q", "ref", TRACES, arrival_order=range(8))
  r = runner("rlaif", None)
  out = r.judge_groups([job])
  assert len(r.judge.scored) == 5 and out.calls_saved == 3 and out.usage.calls == 5
  scores = out.verdicts[0].scores
  assert scores[0] == scores[2] == scores[5] == 0.4 and scores[1] == scores[4] == 0.2
