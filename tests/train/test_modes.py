"""Every reward mode of SPEC §7 runs a few RL steps end to end (tiny shapes, the embedded judge), and a
new mode is one block: defined here, in this file alone, it trains."""

import json
import math
import os

import numpy as np
import pytest

from arena_jax import arena, rl
from arena_jax.train import read_metrics, train
from tests.train.conftest import arena_live_run_config, rlvr_run_config, smoke_config

pytestmark = pytest.mark.heavy  # whole runs of the trainer: started early (tests/conftest.py)

EXPECTED_CALLS = {  # judge calls per judged group of G = 4 with no failures (SPEC §5)
  "arena_live": 3 * 4 - 6,
  "arena": 4 * 3 // 2,
  "arenarl": 2 * 4 - 2,
  "arenarl_baseline": 4 * 3 // 2,
  "rlaif": 4,
  "adaptive_pointwise": 4,
}


# The modes whose 3-step smoke run is a shared one (tests/train/conftest.py): read, not trained again.
SHARED_RUNS = {"arena_live": ("arena_live_run", arena_live_run_config), "rlvr": ("rlvr_run", rlvr_run_config)}


@pytest.mark.parametrize("mode", sorted(rl.REWARD_MODES))
def test_mode_runs_and_logs(mode, data_dir, coin_verifier, tmp_path, request):
  if mode in SHARED_RUNS:
    fixture, config = SHARED_RUNS[mode]
    c = config(data_dir)
    workdir, summary = request.getfixturevalue(fixture)
  else:
    c, workdir = smoke_config(mode, data_dir), str(tmp_path)
    c.num_steps = 3
    summary = train(c, workdir)
  rows = read_metrics(workdir)
  assert [r["step"] for r in rows] == [1, 2, 3] and summary["steps"] == 3
  for r in rows:
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float)), r
    for key in (
      "accuracy",
      "groups/all_correct",
      "groups/all_wrong",
      "groups/diverse",
      "adv/l1",
      "adv/nonzero_fraction",
      "clip_fraction",
      "ratio",
      "entropy",
      "loss",
      "time/judge_wait",
      "gen/batches",
      "gen/trajectories",
      "gen/unclosed_thinking",
      "response_length",
    ):
      assert key in r, key
    fractions = r["groups/all_correct"] + r["groups/all_wrong"] + r["groups/diverse"]
    np.testing.assert_allclose(fractions, 1.0, atol=1e-6)
    # The effective judged signal: within the rows with any signal, none for the verifier's modes.
    assert 0 <= r["judge/signal_rows"] <= r["adv/nonzero_fraction"] + 1e-6 and 0 <= r["judge/grad_share"] <= 1 + 1e-6
    if not rl.get_mode(mode).uses_judge:
      assert r["judge/signal_rows"] == r["judge/grad_share"] == r["judge/distinct_per_group"] == 0
    elif rl.get_mode(mode).judge_groups == "non_diverse":
      assert r["judge/signal_rows"] <= 1 - r["groups/diverse"] + 1e-6
      assert (r["judge/distinct_per_group"] == 0) == (r["groups/routed"] == 0)
      assert r["judge/distinct_per_group"] <= c.rollout.group_size
    judged_expected = {"rlaif": 4, "arenarl": 4, "arenarl_baseline": 4}.get(mode, round(4 * (1 - r["groups/diverse"])))
    if not rl.get_mode(mode).uses_judge:
      assert "judge/calls" not in r
    else:
      assert r["judge/groups"] == judged_expected
      assert r["judge/calls"] == EXPECTED_CALLS[mode] * judged_expected
      assert r["judge/failures"] == 0
  # A mode that judges every group (rlaif, arenarl, arenarl_baseline) never reads the verifier, and the rule-based
  # judge may score every random text alike (each pair a tie): only the modes that read the verifier must update.
  if rl.get_mode(mode).judge_groups != "all":
    # Some update happened: the coin verifier gives diverse groups, hence non-zero advantages.
    assert any(r["adv/nonzero_fraction"] > 0 for r in rows)
  assert os.path.isdir(os.path.join(workdir, "checkpoints"))


def test_dynamic_sampling_trains_only_on_diverse_groups(data_dir, coin_verifier, tmp_path):
  c = smoke_config("rlvr_dapo", data_dir)
  train(c, str(tmp_path))
  rows = read_metrics(str(tmp_path))
  for r in rows:
    assert r["groups/diverse"] == 1.0
    assert r["gen/trajectories"] == r["gen/batches"] * 16 and r["gen/batches"] >= 1
    # What was generated is counted, not only what was kept: the cost of dynamic sampling.
    assert r["gen/tokens"] >= r["gen/tokens_trained"] and r["gen/tokens"] <= r["gen/batches"] * 16 * 16
    if r["gen/batches"] > 1:
      assert r["gen/tokens"] > r["gen/tokens_trained"]
  assert any(r["gen/batches"] > 1 for r in rows)  # the refill happened in this run


def test_dynamic_sampling_stops_with_a_clear_error_when_nothing_is_diverse(data_dir, tmp_path):
  c = smoke_config("rlvr_dapo", data_dir, max_gen_batches=2)
  with pytest.raises(RuntimeError, match=r"reward.max_gen_batches=2"):
    train(c, str(tmp_path))  # a random policy never solves arithmetic: every group is all-wrong


def test_a_new_mode_is_one_block(data_dir, tmp_path):
  """A mode with its own topology and its own aggregation, declared in one class, trains one step.
  (A random policy never solves arithmetic: every group is all-wrong, so every group is judged.)"""
  seen = []

  class HardWins(rl.Routed):
    """Swiss tournaments for the non-diverse groups; reward = the fraction of hard wins."""

    name = "test_hard_wins"
    judge_form = "pairwise"
    topology = "swiss"

    def aggregate(self, verdicts, group_size, *, l2, solver):
      seen.extend(verdicts)
      out = np.zeros((len(verdicts), group_size))
      for k, v in enumerate(verdicts):
        f, s, o = v.matches
        np.add.at(out[k], f, o > 0.5)
        np.add.at(out[k], s, o < 0.5)
      return out, np.ones(len(verdicts), bool)

  rl.register_mode(HardWins)
  try:
    c = smoke_config("test_hard_wins", data_dir)
    c.num_steps = 1
    train(c, str(tmp_path))
  finally:
    rl.REWARD_MODES.unregister("test_hard_wins")
  (row,) = read_metrics(str(tmp_path))
  assert row["groups/diverse"] == 0 and row["judge/groups"] == 4 and len(seen) == 4
  assert all(len(v.matches[0]) > 0 for v in seen)  # Swiss matches reached the mode's own aggregation
  assert row["judge/calls"] == 4 * arena.expected_calls("swiss", 4)


def test_each_step_writes_a_sample_of_its_completions(arena_live_run):
  workdir, _ = arena_live_run  # log.samples_per_step = 5
  with open(os.path.join(workdir, "samples.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(l) for l in f.read().splitlines()]
  assert [r["step"] for r in rows] == [1] * 5 + [2] * 5 + [3] * 5
  metrics = {r["step"]: r for r in read_metrics(workdir)}
  for r in rows:
    assert set(r) == {"step", "group", "member", "prompt", "completion", "verifier", "reward", "advantage", "judged"}
    assert r["prompt"].startswith("Question:") and isinstance(r["completion"], str)
    if not r["judged"]:  # a diverse group keeps its verifier reward (SPEC §3)
      assert r["reward"] == r["verifier"]
    assert math.isfinite(r["advantage"])
  # The 5 rows are spread over the step's 16 completions, so they cover all 4 groups: judged ones appear
  # exactly when the step routed some.
  for step, m in metrics.items():
    assert {r["group"] for r in rows if r["step"] == step} == {0, 1, 2, 3}
    assert any(r["judged"] for r in rows if r["step"] == step) == (m["groups/routed"] > 0)


def test_each_step_reports_the_process_quality_of_its_completions(data_dir, tmp_path):
  """`process/*`: the process checker's reading of the step's completions. With every completion
  checked, right answers split into faithful ones and compensating errors: the two rates sum to the
  step's verifier accuracy over the same rows (samples.jsonl holds them all)."""
  c = smoke_config("rlvr", data_dir)
  c.log.samples_per_step = c.log.process_checks = c.rollout.prompts_per_step * c.rollout.group_size
  train(c, str(tmp_path))
  rows = [json.loads(l) for l in (tmp_path / "samples.jsonl").read_text().splitlines()]
  for m in read_metrics(str(tmp_path)):
    right = np.mean([r["verifier"] > 0.5 for r in rows if r["step"] == m["step"]])
    assert m["process/faithful_accuracy"] + m["process/compensating_rate"] == pytest.approx(right)
    for k in ("bare_answer_rate", "skipped_rate", "flawed_correct_rate"):
      assert 0.0 <= m[f"process/{k}"] <= 1.0
  c.log.process_checks = 0  # off: no process metrics
  train(c, str(tmp_path / "off"))
  assert not [k for k in read_metrics(str(tmp_path / "off"))[0] if k.startswith("process/")]


def test_training_against_a_reasoning_style_judge(data_dir, tmp_path):
  """arena_live against the embedded judge in reasoning style: every match is read (none truncated here)."""
  c = smoke_config("arena_live", data_dir)
  c.judge.server.style, c.judge.server.truncate_rate = "reasoning", 0.0
  train(c, str(tmp_path))
  rows = read_metrics(str(tmp_path))
  assert all(r["judge/groups"] == 4 for r in rows)  # a random policy: every group all-wrong, all judged
  assert all(r["judge/calls"] == 4 * EXPECTED_CALLS["arena_live"] and r["judge/failures"] == 0 for r in rows), rows


@pytest.mark.parametrize("topology, shrinkage", [("live_info", 0.0), ("info_budget", 1.0)])
def test_information_gain_topologies_train(topology, shrinkage, data_dir, coin_verifier, tmp_path):
  """The information-gain schedules run in the trainer like any topology: arena_live's BT rewards
  on their matches, live_info on the groups' arrival order, each judged group costing `expected_calls`;
  with reward.bt_shrinkage the judged trajectories' advantages are scaled by factors in [0, 1]."""
  c = smoke_config("arena_live", data_dir, topology=topology, bt_shrinkage=shrinkage)
  train(c, str(tmp_path))
  rows = read_metrics(str(tmp_path))
  assert len(rows) == 2 and any(r["judge/groups"] > 0 for r in rows)
  for r in rows:
    assert r["judge/calls"] == r["judge/groups"] * arena.expected_calls(topology, 4) and r["judge/failures"] == 0
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float)), r
    assert ("judge/shrinkage" in r) == (shrinkage > 0 and r["judge/groups"] > 0)
    if "judge/shrinkage" in r:
      assert 0 <= r["judge/shrinkage"] <= 1  # random text: the embedded judge may call every match a tie


def test_training_with_the_jury_backend(data_dir, tmp_path):
  """rlaif with judge.backend=jury: every trajectory is audited by three jurors and a consolidator
  (4 calls), and the jury's severity score is the reward (SPEC §8)."""
  c = smoke_config("rlaif", data_dir)
  c.judge.backend, c.num_steps = "jury", 1
  assert c.judge.jury.num_jurors == 3 and c.judge.jury.mode == "consolidation"
  c.log.samples_per_step = 16
  train(c, str(tmp_path))
  (row,) = read_metrics(str(tmp_path))
  judged = 4  # rlaif judges every group
  assert row["judge/groups"] == judged and row["judge/failures"] == 0
  assert row["judge/calls"] == judged * 4 * (3 + 1)
  samples = [json.loads(l) for l in (tmp_path / "samples.jsonl").read_text().splitlines()]
  rewards = [r["reward"] for r in samples if r["judged"]]
  assert len(rewards) == 4 * judged and all(0.0 <= x <= 1.0 for x in rewards)
  assert all(math.isfinite(r["advantage"]) for r in samples)
