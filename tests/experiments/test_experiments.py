"""The orchestrators above the library: configs found from the repository root whatever the working
directory, the study's modes from the reward-mode registry, a study written and restarted with the
trainer and the evaluator faked, the demo end to end on the smoke configs."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import experiments
from arena_jax import rl
from arena_jax.eval import watch
from arena_jax.train import read_metrics
from arena_jax.train.config import mode_config
from experiments import demo, study

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_config_paths_resolve_from_the_repository_root(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert experiments.REPO_ROOT == ROOT
  assert experiments.repo_path("configs/sft.py") == ROOT / "configs" / "sft.py"
  assert experiments.repo_path(tmp_path / "x.py") == tmp_path / "x.py"
  assert experiments.load_config("configs/sft.py:smoke").output_dir == "runs/sft_smoke"
  assert experiments.load_config("configs/arith_arena_live.py").reward.mode == "arena_live"


def test_launch_mains_find_their_default_configs_from_another_directory(tmp_path):
  code = ("import json; from absl import flags; import launch.demo as d, launch.compare as c; flags.FLAGS(['x']); "
          "print(json.dumps([d._SFT.value.output_dir, d._RL.value.reward.mode, c._STUDY.value.sft_config]))")
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["runs/sft_demo", "arena_live", "configs/sft.py"]
  proc = subprocess.run([sys.executable, "-m", "launch.demo", "--helpfull"], cwd=tmp_path, env=env,
                        capture_output=True, text=True)
  assert "--sft_config" in proc.stdout and "--rl_config" in proc.stdout, proc.stderr


def test_study_modes_are_the_registry():
  c = study.study_config()
  assert c.modes == tuple(rl.REWARD_MODES)
  assert study.BASELINE in rl.REWARD_MODES
  for name in c.modes:
    run = study.run_config(name, 2, c)
    assert run.reward.to_dict() == mode_config(name).reward.to_dict()
    assert (run.seed, run.num_steps, run.init.policy_dir) == (2, c.num_steps, c.sft_dir)
  c.modes = ("rlvr", "no_such_mode")
  with pytest.raises(ValueError, match="no_such_mode"):
    study.run_study(c)


def _fake_metrics(workdir, num_steps, mode):
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for step in range(1, num_steps + 1):
      f.write(json.dumps({"step": step, "accuracy": 0.1 * step, "gen/tokens": 100, "gen/trajectories": 128,
                          "gen/batches": 1, "time/wall": 2.0, "judge/calls": 3 if mode != "rlvr" else 0,
                          "judge/groups": 1, "groups/routed": 0.5, "adv/nonzero_fraction": 0.8, "adv/l1": 0.1,
                          "groups/all_correct": 0.2, "groups/all_wrong": 0.3, "groups/diverse": 0.5}) + "\n")


def test_study_runs_restarts_and_writes_truthful_results(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # not the repository: the SFT config is still found
  sft_configs, trained = [], []
  monkeypatch.setattr(study, "train_sft", lambda config, out: sft_configs.append((config, out)) or {})

  def fake_train(config, workdir):
    trained.append((config.reward.mode, config.seed))
    _fake_metrics(workdir, config.num_steps, config.reward.mode)
    return {}

  monkeypatch.setattr(study, "train", fake_train)
  monkeypatch.setattr(watch, "evaluate_step", lambda workdir, step, cfg: {
      b: {"greedy_accuracy": 0.5, "mean_pass_ratio": 0.25} for b in cfg.benchmarks})
  c = study.study_config()
  c.modes, c.seeds, c.num_steps = ("rlvr", study.BASELINE, "arena_live"), (0, 1), 3
  c.root, c.out_dir = str(tmp_path / "runs"), str(tmp_path / "results")
  runs = study.run_study(c)
  assert len(runs) == len(trained) == 6
  assert sft_configs[0][0].output_dir == "runs/sft_demo" and sft_configs[0][1] == c.sft_dir
  assert study.run_study(c) == runs and len(trained) == 6  # a restart skips finished runs

  md = study.write_results(c, runs)
  assert md == (tmp_path / "results" / "README.md").read_text()
  assert (tmp_path / "results" / "curves.png").stat().st_size > 0
  assert set(json.loads((tmp_path / "results" / "study.json").read_text())["runs"]) == set(c.modes)
  run = mode_config("rlvr")
  assert f"{run.rollout.prompts_per_step} prompts × G={run.rollout.group_size}" in md
  assert "the SFT policy of `configs/sft.py`" in md and "seeds (0, 1)" in md
  assert f"| {study.BASELINE} | 0.500 ± 0.000 | 0.250 ± 0.000 |" in md
  assert md.count(f"| 3.0 | 0.50 | 128 | 1.00 |") == 2  # the judged modes, relative to the baseline
  # The names the text cites exist.
  assert "`experiments.study.study_config()`" in md and "`arena_jax.train.config.mode_config(mode)`" in md
  for path in re.findall(r"`(configs/[\w./]+)`", md):
    assert (ROOT / path).exists(), path
  assert len(read_metrics(os.path.join(c.root, "rlvr", "seed0"))) == 3


@pytest.mark.slow
def test_demo_end_to_end_on_the_smoke_configs(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  sft_config = experiments.load_config("configs/sft.py:smoke")
  rl_config = experiments.load_config("configs/arith_arena_live.py:smoke")
  sft_config.tasks.data_dir = str(tmp_path / "data")
  rl_before = rl_config.to_dict()
  summary = demo.run_demo(sft_config, rl_config, root=str(tmp_path / "runs"), rl_steps=2)
  assert rl_config.to_dict() == rl_before  # the caller's config is not modified
  assert summary["rl_steps"] == 2 and not summary["sft_cached"]
  for key in ("greedy_accuracy", "mean_pass_ratio", "frac_diverse"):
    assert 0.0 <= summary["sft"][key] <= 1.0 and 0.0 <= summary["rl"][key] <= 1.0
  assert (tmp_path / "runs" / "demo_arena_live" / "demo_summary.json").exists()
