"""Judging while generation runs: the per-step deadline, groups judged as they finish
decoding (`lockstep.live_start`), and speculative live tournaments."""

import math

import jax
import numpy as np
import pytest

from arena_jax.train import read_metrics, train
from arena_jax.train import trainer as trainer_lib
from arena_jax.train.config import validate_config
from tests.train.conftest import smoke_config
from tests.train.test_resume import _params as restore

pytestmark = pytest.mark.heavy  # whole runs of the trainer: started early (tests/conftest.py)


@pytest.fixture
def early_stops(monkeypatch):
  """A random tiny policy almost never writes its stop token in 16 tokens, so every row would arrive at
  the end of decoding; 40 more stop tokens (of 256) make rows finish along the way, groups complete early."""
  original = trainer_lib.Sampler

  def sampler(**kw):
    return original(**dict(kw, stop_tokens=tuple(kw["stop_tokens"]) + tuple(range(100, 140))))

  monkeypatch.setattr(trainer_lib, "Sampler", sampler)


@pytest.mark.slow  # a run against a slow judge
def test_matches_past_the_step_deadline_are_cancelled_counted_and_left_out(data_dir, coin_verifier, tmp_path):
  # Every judgment hangs far past the deadline: the update cancels them instead of waiting.
  c = smoke_config("arena_live", data_dir)
  c.lockstep.judge_lag = 0
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


def _run(mode, data_dir, workdir, live_start="step_done", **reward):
  c = smoke_config(mode, data_dir, **reward)
  c.lockstep.live_start = live_start
  c.lockstep.stream_every = 3  # 16 new tokens: chunks end at steps 4, 7, 9, 12, 15, 16
  train(c, str(workdir))
  return read_metrics(str(workdir))


def _params(workdir):
  return jax.tree.leaves(restore(workdir, 2)[0])


def test_judging_groups_as_they_finish_decoding_trains_exactly_as_judging_the_step(
  data_dir, coin_verifier, early_stops, tmp_path
):
  # The embedded judge is deterministic: the same tournaments give the same verdicts, the same rewards.
  base = _run("arena_live", data_dir, tmp_path / "step_done")
  for start in ("group_done", "speculative"):
    rows = _run("arena_live", data_dir, tmp_path / start, live_start=start)
    for a, b in zip(_params(tmp_path / "step_done"), _params(tmp_path / start)):
      np.testing.assert_array_equal(a, b, err_msg=start)
    for r, r0 in zip(rows, base):
      assert r["judge/groups"] == r0["judge/groups"] and r["judge/calls"] == r0["judge/calls"], start
      assert r["judge/matches_late"] == 0
    assert sum(r["gen/groups_judged_early"] for r in rows) > 0, start  # judged while other rows decoded
  assert all(r["gen/groups_judged_early"] == 0 for r in base)
  # Speculation started tournaments for groups that turned out diverse (the coin verifier makes some).
  # (Whether an abandoned tournament had issued a match yet depends on the judge's timing: wasted calls ≥ 0.)
  assert sum(r["judge/groups_abandoned"] for r in rows) > 0
  assert all(0 <= r["judge/calls_wasted"] <= 6 * r["judge/groups_abandoned"] for r in rows)
  assert all(r["judge/groups_abandoned"] == 0 for r in base)


@pytest.mark.slow  # a run of its own topology
def test_group_done_with_an_anchored_bracket_for_every_group(data_dir, coin_verifier, early_stops, tmp_path):
  base = _run("arenarl", data_dir, tmp_path / "step_done")
  rows = _run("arenarl", data_dir, tmp_path / "group_done", live_start="group_done")
  for a, b in zip(_params(tmp_path / "step_done"), _params(tmp_path / "group_done")):
    np.testing.assert_array_equal(a, b)
  assert [r["judge/calls"] for r in rows] == [r["judge/calls"] for r in base]
  assert sum(r["gen/groups_judged_early"] for r in rows) > 0


@pytest.mark.parametrize("mode, topology", [("arena", ""), ("arena_live", "swiss"), ("arenarl", "live")])
def test_speculative_needs_live_tournaments_of_routed_groups(mode, topology, data_dir):
  c = smoke_config(mode, data_dir, topology=topology)
  c.lockstep.live_start = "speculative"
  with pytest.raises(ValueError, match=r"config\.lockstep\.live_start: 'speculative' .* use 'group_done'"):
    validate_config(c)
  c.lockstep.live_start = "group_done"
  validate_config(c)


def test_pipelined_live_tournaments_play_every_match_while_arrivals_stream(
  data_dir, coin_verifier, early_stops, tmp_path
):
  rows = _run("arena_live", data_dir, tmp_path, live_start="speculative", live_pipelined=True)
  assert sum(r["judge/groups"] for r in rows) > 0
  for r in rows:  # 3G − 6 = 6 calls per judged group of G = 4, none failed, none late
    assert r["judge/calls"] == 6 * r["judge/groups"] and r["judge/failures"] == 0 and r["judge/matches_late"] == 0


@pytest.mark.slow  # a rubric judge's run
def test_group_done_with_a_rubric_judge_scores_every_group_once(data_dir, coin_verifier, early_stops, tmp_path):
  rows = _run("rlaif", data_dir, tmp_path, live_start="group_done")
  for r in rows:  # every group of 4 judged, one rubric call per member
    assert r["judge/groups"] == 4 and r["judge/calls"] == 16 and r["judge/failures"] == 0
  assert sum(r["gen/groups_judged_early"] for r in rows) > 0
