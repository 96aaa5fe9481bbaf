"""Judging while generation runs (issue 14): the per-step deadline, groups judged as they finish
decoding (`reward.live_start`), and speculative live tournaments."""
import math

import jax
import numpy as np

from arena_jax.train import read_metrics, train
from tests.train.conftest import smoke_config


def test_matches_past_the_step_deadline_are_cancelled_counted_and_left_out(data_dir, coin_verifier, tmp_path):
  # Every judgment hangs far past the deadline: the update cancels them instead of waiting.
  c = smoke_config("arena_live", data_dir)
  c.reward.async_lag = 0
  c.judge.step_deadline_s = 0.5
  c.judge.server.hang_rate, c.judge.server.hang_s = 1.0, 600.0
  train(c, str(tmp_path))
  rows = read_metrics(str(tmp_path))
  assert [r["step"] for r in rows] == [1, 2]
  assert sum(r["judge/groups"] for r in rows) > 0  # some groups were routed to the judge
  for r in rows:
    assert r["judge/groups_late"] == r["judge/groups"] == r["judge/groups_all_failed"]
    assert r["judge/matches_late"] >= r["judge/groups"] and r["judge/calls"] == 0
    assert r["time/judge_wait"] < 60  # not the 600 s of a hang (a bound, not a timing)
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
