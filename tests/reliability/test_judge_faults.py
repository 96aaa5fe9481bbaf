"""Judge faults during RL: flaky servers, hangs, garbage, 429s, a judge killed mid-run.

Training must go on, drop and count the failed matches (SPEC §4: never a tie), produce no NaN, and
wait on the judge no longer than the client's limits allow. The judges here are real embedded server
processes on loopback ports (`judge.urls`), so the test can SIGKILL them and start them again.
"""

import logging
import math

import pytest

from arena_jax.errors import UserError
from arena_jax.train import metrics as metrics_lib
from arena_jax.train import train
from arena_jax.train import trainer as trainer_lib
from tests.reliability.helpers import (
  KillableJudge,
  fast_client,
  free_port,
  killable_judge,
  read_rows,
  smoke_config,
  worst_case_judge_s,
)

G = 4  # the smoke config's group size; a live tournament of G has G − 1 sequential stages (SPEC §5)


def run_config(data_dir, urls, steps, **client):
  c = fast_client(smoke_config("arena_live", data_dir), **client)
  c.num_steps, c.checkpoint.every = steps, 2
  c.judge.urls = tuple(urls)
  return c


def hook_steps(monkeypatch, actions):
  """Runs `actions[step]()` right after the trainer logs step `step` (on the training thread, so the
  fault lands at a known point of the loop: with lockstep.judge_lag = 1 the next step's judging is in flight)."""

  class Hooked(metrics_lib.MetricsWriter):
    def write(self, step, values):
      super().write(step, values)
      if step in actions:
        actions[step]()

  monkeypatch.setattr(trainer_lib, "MetricsWriter", Hooked)


def assert_finite(rows):
  for r in rows:
    bad = {k: v for k, v in r.items() if (isinstance(v, float) and not math.isfinite(v)) or v in ("nan", "inf")}
    assert not bad, (r["step"], bad)


def judge_warnings(caplog):
  return [
    r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "got no judgment" in r.getMessage()
  ]


@pytest.mark.slow  # a run under every fault at once
def test_training_rides_out_the_fault_mix(data_dir, tmp_path):
  # 15% HTTP errors (500 / 503 / 429 alike: 10% 5xx, 5% 429, with Retry-After on 429 and 503), 5% hangs
  # far past the client timeout, 5% well-formed answers without a verdict. Seeded: the fault sequence
  # of the first N requests is fixed, so every kind occurs in this run.
  knobs = dict(
    error_rate=0.15,
    error_statuses=(500, 503, 429),
    retry_after_s=0.05,
    hang_rate=0.05,
    hang_s=60.0,
    malformed_rate=0.05,
    seed=3,
  )
  with killable_judge(**knobs) as judge:
    c = run_config(data_dir, [judge.url], 6, timeout_s=1.0, max_retries=1, max_parse_retries=0)
    summary = train(c, str(tmp_path))
    served = judge.stats()
  rows = read_rows(tmp_path)
  assert summary["steps"] == 6 and [r["step"] for r in rows] == list(range(1, 7))
  assert_finite(rows)
  calls = sum(r["judge/calls"] for r in rows)
  failures = sum(r["judge/failures"] for r in rows)
  # Every fault kind was met; each failed match traces back to an injected fault, and retries (429 after
  # its Retry-After, 5xx, timeouts) rescued many: requests exceed calls, failures stay below the faults.
  assert served["errors"] > 0 and served["hangs"] > 0 and served["malformed"] > 0, served
  assert served["requests"] > calls
  assert 0 < failures <= served["errors"] + served["hangs"] + served["malformed"]
  reasons = {}
  for r in rows:
    assert 0.0 <= r["judge/failure_rate"] <= 1.0 and r["judge/failures"] <= r["judge/calls"]
    by_reason = {k.split("/")[-1]: v for k, v in r.items() if k.startswith("judge/failed/")}
    assert sum(by_reason.values()) == r["judge/failures"], r  # every dropped match has its reason
    for k, v in by_reason.items():
      reasons[k] = reasons.get(k, 0) + v
    # A hang costs one client timeout, never the server's 60 s: the judge wait per step stays within what
    # the client's limits allow (generous margin for a loaded CI machine; nothing here is a benchmark).
    assert r["time/judge_wait"] <= worst_case_judge_s(c, G - 1) + 10.0, r
  assert reasons.get("unparseable", 0) > 0, reasons  # malformed answers: no parse retry, dropped
  assert (tmp_path / "checkpoints" / "6").is_dir()


@pytest.mark.slow  # a judge process killed and restarted
def test_a_judge_killed_mid_run_and_restarted(data_dir, tmp_path, monkeypatch, caplog):
  # Verdict noise: random traces tie under a noise-free judge, and ties give no advantage to tell from
  # the fallback's.
  judge = KillableJudge(free_port(), noise=3.0).start()
  try:
    # Killed after step 2 is logged (step 3's judging is in flight), back on the same port after step 4.
    hook_steps(monkeypatch, {2: judge.kill, 4: judge.start})
    c = run_config(data_dir, [judge.url], 8, max_retries=1)
    with caplog.at_level(logging.WARNING):
      summary = train(c, str(tmp_path))
  finally:
    judge.close()
  rows = {r["step"]: r for r in read_rows(tmp_path)}
  assert summary["steps"] == 8 and sorted(rows) == list(range(1, 9))
  assert_finite(rows.values())
  for s in (1, 2):
    assert rows[s]["judge/failures"] == 0
  down = rows[4]  # judged entirely while the judge was dead
  assert down["judge/groups"] > 0 and down["judge/failures"] == down["judge/calls"] > 0
  assert down["judge/failure_rate"] == 1.0 and down["judge/groups_all_failed"] == down["judge/groups"]
  # A random policy never solves arithmetic: every group is all-wrong and judged. While the judge is
  # down they fall back to zero advantage; with verdicts (before and after) the BT rewards train.
  assert down["groups/diverse"] == 0 and down["adv/nonzero_fraction"] == 0
  for s in (6, 7, 8):  # judged after the restart
    assert rows[s]["judge/failures"] == 0 and rows[s]["judge/groups_all_failed"] == 0, rows[s]
  assert any(rows[s]["adv/nonzero_fraction"] > 0 for s in (1, 2, 6, 7, 8))
  warned = judge_warnings(caplog)
  assert any(m.startswith("step 4:") for m in warned), warned
  assert not any(m.startswith(("step 1:", "step 2:", "step 6:", "step 7:", "step 8:")) for m in warned), warned


def test_a_judge_down_for_good_leaves_zero_advantages_and_says_so(data_dir, tmp_path, monkeypatch, caplog):
  judge = KillableJudge(free_port()).start()
  try:
    hook_steps(monkeypatch, {1: judge.kill})
    c = run_config(data_dir, [judge.url], 4, max_retries=1)
    with caplog.at_level(logging.WARNING):
      summary = train(c, str(tmp_path))
  finally:
    judge.close()
  rows = {r["step"]: r for r in read_rows(tmp_path)}
  assert summary["steps"] == 4 and sorted(rows) == [1, 2, 3, 4]
  assert_finite(rows.values())
  assert (tmp_path / "checkpoints" / "4").is_dir()  # the run finished and checkpointed regardless
  for s in (3, 4):  # submitted after the kill
    r = rows[s]
    assert r["judge/failure_rate"] == 1.0 and r["judge/groups_all_failed"] == r["judge/groups"], r
    assert r["groups/diverse"] == 0 and r["adv/nonzero_fraction"] == 0, r  # all judged, all zero
    assert any(m.startswith(f"step {s}:") and "zero advantage" in m for m in judge_warnings(caplog))


def test_a_judge_down_for_n_steps_stops_the_run_with_its_last_answer(data_dir, tmp_path, monkeypatch):
  """A judge that fails every call must not pass for RLVR: after reward.max_judge_outage_steps steps in
  a row the run stops, saying why and how to resume; the checkpoints before the outage stay."""
  judge = KillableJudge(free_port()).start()
  try:
    hook_steps(monkeypatch, {2: judge.kill})
    c = run_config(data_dir, [judge.url], 8, max_retries=0)
    c.checkpoint.every = 2
    c.reward.max_judge_outage_steps = 2
    with pytest.raises(trainer_lib.JudgeOutageError, match=r"every judge call failed for 2 steps in a row") as info:
      train(c, str(tmp_path))
  finally:
    judge.close()
  assert "the judge's last answer: " in str(info.value) and "--config.resume=True" in str(info.value)
  assert isinstance(info.value, UserError)  # one line from the launch mains
  rows = read_rows(tmp_path)
  assert [r["step"] for r in rows] == [1, 2, 3]  # step 2's judgment was in flight when the judge died
  assert (tmp_path / "checkpoints" / "2").is_dir()


def test_with_two_judges_losing_one_loses_no_match(data_dir, tmp_path, monkeypatch):
  with killable_judge() as spare:
    judge = KillableJudge(free_port()).start()
    try:
      hook_steps(monkeypatch, {1: judge.kill})
      c = run_config(data_dir, [judge.url, spare.url], 4, max_retries=2)
      train(c, str(tmp_path))
    finally:
      judge.close()
    served = spare.stats()
  rows = read_rows(tmp_path)
  assert [r["step"] for r in rows] == [1, 2, 3, 4]
  # Requests to the dead endpoint (refused or cut mid-flight) are retried on the other one.
  assert sum(r["judge/failures"] for r in rows) == 0
  assert served["answered"] >= sum(r["judge/calls"] for r in rows[2:])
