"""The orchestrators above the library: configs found from the repository root whatever the working
directory, the study's modes from the reward-mode registry, a study written and restarted with the
trainer and the evaluator faked, the demo end to end on the smoke configs."""

import json
import os
import pathlib
import re
import subprocess
import sys

import ml_collections
import pytest

import experiments
from arena_jax import errors
from arena_jax import rl
from arena_jax.eval import watch
from arena_jax.train import read_metrics
from configs.common import mode_config
from experiments import demo, stats, study
from experiments.study import metrics, runner
from experiments.study import results as study_results

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_config_paths_resolve_from_the_repository_root(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert experiments.REPO_ROOT == ROOT
  assert experiments.repo_path("configs/sft.py") == ROOT / "configs" / "sft.py"
  assert experiments.repo_path(tmp_path / "x.py") == tmp_path / "x.py"
  assert experiments.load_config("configs/sft.py:smoke").output_dir == "runs/sft_smoke"
  assert experiments.load_config("configs/arith_arena_live.py").reward.mode == "arena_live"


@pytest.mark.slow  # every launch main in a child
def test_launch_mains_find_their_default_configs_from_another_directory(tmp_path):
  code = (
    "import json; from absl import flags; import launch.demo as d, launch.compare as c; flags.FLAGS(['x']); "
    "print(json.dumps([d._SFT.value.output_dir, d._RL.value.reward.mode, c._STUDY.value.sft_config]))"
  )
  env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["runs/sft_demo", "arena_live", "configs/sft.py:blind"]
  proc = subprocess.run(
    [sys.executable, "-m", "launch.demo", "--helpfull"], cwd=tmp_path, env=env, capture_output=True, text=True
  )
  assert "--sft_config" in proc.stdout and "--rl_config" in proc.stdout, proc.stderr


def test_study_modes_ablation_and_presets():
  c = study.study_config()
  assert c.modes == study.STUDY_MODES and set(c.modes) <= set(study.ALL_MODES) <= set(rl.REWARD_MODES)
  assert len(c.seeds) >= 5 and study.BASELINE in rl.REWARD_MODES and study.REFERENCE in c.modes
  for name in c.modes:
    run = study.run_config(name, 2, c)
    assert run.reward.to_dict() == mode_config(name).reward.to_dict()
    assert (run.seed, run.num_steps, run.init.policy_dir) == (2, c.num_steps, c.sft_dir)
    assert run.judge.server.flip_rate == 0.0
  assert study.run_config("arena_live", 0, c, 0.8).judge.server.flip_rate == pytest.approx(0.2)
  # The ablation's accuracy 1 is the plain mode's own run; the others are their own run groups.
  # Issue 32: the honest judge (the modes' own runs) and a reversed one, for both tournament modes.
  assert study.variants(c) == {
    **{m: (m, None) for m in c.modes},
    "arena@acc0": ("arena", 0.0),
    "arena_live@acc0": ("arena_live", 0.0),
  }
  assert study.run_config("arena", 0, c, 0.0).judge.server.flip_rate == 1.0
  quick = study.apply_preset(
    ml_collections.ConfigDict({**c.to_dict(), "preset": "quick", "num_steps": 3}), keep={"preset", "num_steps"}
  )
  assert (quick.num_steps, quick.seeds, quick.eval.num_examples, quick.eval.max_new_tokens) == (3, (0, 1), 32, 96)
  assert quick.out_dir != c.out_dir and quick.command == "make reproduce-quick"
  # The page names the command that made it: the preset's own, or the command line that changed more than it.
  assert study.name_command(quick, {"preset"}, ["--study.preset=quick"]).command == "make reproduce-quick"
  other = ml_collections.ConfigDict({**quick.to_dict(), "seeds": (5, 6), "root": "runs/x y"})
  args = ["--study.preset=quick", "--study.seeds=(5,6)", "--study.root=runs/x y"]
  named = study.name_command(other, {"preset", "seeds", "root"}, args)
  assert named.command == "python -m launch.compare --study.preset=quick '--study.seeds=(5,6)' '--study.root=runs/x y'"
  assert other.command == "make reproduce-quick"  # a copy: the study given is left as it was
  # A flag that gives the preset's own value changes nothing.
  same = ["--study.preset=quick", f"--study.root={quick.root}"]
  assert study.name_command(quick, {"preset", "root"}, same).command == "make reproduce-quick"
  assert study.name_command(quick, {"seeds", "command"}, ["--study.command=mine"]).command == "make reproduce-quick"
  assert study.apply_preset(c).to_dict() == c.to_dict()
  for field_name, value, match in (
    ("modes", ("rlvr", "no_such_mode"), "no_such_mode"),
    ("judge_accuracies", (1.0, 1.5), "study.judge_accuracies"),
    ("ablation_modes", ("rlvr",), "study.ablation_modes"),
    ("preset", "huge", "study.preset"),
  ):
    bad = ml_collections.ConfigDict(c.to_dict())
    bad[field_name] = value
    with pytest.raises(errors.ConfigError, match=match):
      study.run_study(bad)


def _fake_metrics(workdir, num_steps, mode):
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for step in range(1, num_steps + 1):
      # All-correct groups grow by 0.2 a step from 0.2, all-wrong ones shrink from 0.5: 0.7 non-diverse.
      ac, aw = 0.2 * step, 0.7 - 0.2 * step
      f.write(
        json.dumps(
          {
            "step": step,
            "accuracy": 0.1 * step,
            "gen/tokens": 100,
            "gen/trajectories": 128,
            "gen/batches": 1,
            "time/wall": 2.0,
            "judge/calls": 3 if mode != "rlvr" else 0,
            "judge/groups": 1,
            "groups/routed": 0.5,
            "adv/nonzero_fraction": 0.8,
            "adv/l1": 0.1,
            "judge/signal_rows": 0.3 if mode != "rlvr" else 0.0,
            "judge/grad_share": 0.25 if mode != "rlvr" else 0.0,
            "judge/distinct_per_group": 5.0 if mode != "rlvr" else 0.0,
            "groups/all_correct": ac,
            "groups/all_wrong": aw,
            "groups/diverse": 1 - ac - aw,
            "process/faithful_accuracy": 0.05 * step,
            "process/blind_flaw_rate": 0.01 * step,
          }
        )
        + "\n"
      )


# Per-mode gains of the fake evaluation over rlvr: paired differences are exactly these on every seed.
_GAIN = {
  "rlvr": 0.0,
  study.BASELINE: 0.05,
  "arena_live": 0.1,
  "arena_live@acc0.7": -0.02,
  "arena": 0.08,
  "arena@acc0.7": -0.03,
}


def test_study_runs_restarts_and_writes_truthful_results(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # not the repository: the SFT config is still found
  sft_configs, trained = [], []
  monkeypatch.setattr(runner, "train_sft", lambda config, out: sft_configs.append((config, out)) or {})

  def fake_train(config, workdir):
    trained.append((config.reward.mode, config.seed, config.judge.server.flip_rate))
    _fake_metrics(workdir, config.num_steps, config.reward.mode)
    return {}

  def fake_eval(workdir, step, cfg):
    group, seed = workdir.split(os.sep)[-2:]
    v = 0.5 + _GAIN[group] + 0.01 * int(seed[4:])  # the seed moves every mode alike: pairs cancel it
    return {
      b: {"greedy_accuracy": v, "mean_pass_ratio": 0.25, "faithful_accuracy": v - 0.1, "compensating_rate": 0.01}
      for b in cfg.benchmarks
    }

  monkeypatch.setattr(runner, "train", fake_train)
  monkeypatch.setattr(watch, "evaluate_step", fake_eval)
  c = study.study_config()
  c.modes, c.seeds, c.num_steps = ("rlvr", study.BASELINE, "arena_live"), (0, 1, 2), 3
  c.judge_accuracies, c.bootstrap.num_resamples = (1.0, 0.7), 200
  c.ablation_modes = ("arena_live", "arena")
  c.bootstrap.min_pairs = 3  # the intervals of three seeds (the default, 5, prints none: checked below)
  c.root, c.out_dir = str(tmp_path / "runs"), str(tmp_path / "results")
  runs = study.run_study(c)
  # 3 modes, arena_live's judge at 0.7 (at 1 it is the mode's own run), arena at 1 and 0.7: 6 groups of 3 seeds
  assert len(runs) == len(trained) == 18
  assert sorted(f for m, _, f in trained if m == "arena_live") == pytest.approx([0, 0, 0, 0.3, 0.3, 0.3])
  assert sft_configs[0][0].output_dir == "runs/sft_blind" and sft_configs[0][1] == c.sft_dir
  assert study.run_study(c) == runs and len(trained) == 18  # a restart skips finished runs
  longer = ml_collections.ConfigDict({**c.to_dict(), "num_steps": 4})
  with pytest.raises(errors.WorkdirError, match=r"rlvr.seed0 holds a finished run of another setup"):
    study.run_study(longer)  # ... but never reuses those of another setup

  md = study.write_results(c, runs)
  assert md == (tmp_path / "results" / "README.md").read_text()
  assert (tmp_path / "results" / "curves.png").stat().st_size > 0
  assert (tmp_path / "results" / "ablation.png").stat().st_size > 0 and "![ablation](ablation.png)" in md
  out = json.loads((tmp_path / "results" / "study.json").read_text())
  assert set(out["runs"]) == {*c.modes, "arena_live@acc0.7", "arena", "arena@acc0.7"} and len(out["runs"]["rlvr"]) == 3
  assert out["runs"]["arena_live"][0]["curves"]["faithful_accuracy"] == pytest.approx([0.05, 0.1, 0.15])
  assert out["runs"]["arena_live"][0]["curves"]["all_correct_share"] == pytest.approx([0.2 / 0.7, 0.4 / 0.7, 0.6 / 0.7])
  run = mode_config("rlvr")
  assert f"{run.rollout.prompts_per_step} prompts × G={run.rollout.group_size}" in md
  assert "the SFT policy of `configs/sft.py:blind`" in md and "seeds (0, 1, 2)" in md and "The 18 runs took" in md
  # Mean ± std over seeds 0.50, 0.51, 0.52 (+ the mode's gain); faithful accuracy 0.1 below.
  assert f"| {study.BASELINE} | 0.560 ± 0.010 | 0.250 ± 0.000 | 0.460 ± 0.010 | – | 0.010 ± 0.000 |" in md
  # The paired differences are the gains exactly (every resample agrees); an interval without 0 is starred.
  diff = out["differences"]
  assert diff["arena_live"]["arithmetic/greedy_accuracy"] == pytest.approx(dict(mean=0.1, low=0.1, high=0.1))
  assert diff[study.BASELINE]["arithmetic_shift/faithful_accuracy"]["mean"] == pytest.approx(0.05)
  assert "| arena_live | +0.100 [+0.100, +0.100]* | +0.000 [+0.000, +0.000] |" in md
  assert out["ablation"]["arena_live@acc0.7"]["arithmetic/greedy_accuracy"]["mean"] == pytest.approx(-0.02)
  assert "| 0.7 | 0.3 | arena_live@acc0.7 | 0.490 ± 0.010 |" in md
  assert "| 0.7 | 0.3 | arena@acc0.7 | 0.480 ± 0.010 |" in md and "| 1 | 0 | arena | 0.590 ± 0.010 |" in md
  # The effective judged signal of every group with a judge (rlvr has none); distinct traces weighted by routing.
  assert "| arena_live | 0.500 ± 0.000 | 5.000 ± 0.000 | 0.300 ± 0.000 | 0.250 ± 0.000 | 0.800 ± 0.000 |" in md
  assert "| rlvr | 0.500" not in md.split("## The effective judged signal")[1].split("##")[0]
  # The blind flaw during training, of every run group (rlvr included): 3 steps, so the first and last 3 agree.
  assert "| rlvr | 0.020 ± 0.000 | 0.020 ± 0.000 |" in md.split("## The flaw the verifier cannot see")[1]
  # A run that predates the metrics reads "–", not a judge that did nothing.
  assert metrics.logged_mean([{"step": 1}], "judge/grad_share") is None and study_results._fmt_mean_std([None]) == "–"
  # Below min_pairs (the default 5) a difference has no interval and no star, and says why.
  few = ml_collections.ConfigDict({**c.to_dict(), "bootstrap": {**c.bootstrap.to_dict(), "min_pairs": 5}})
  md_few = study.write_results(few, runs)
  assert "| arena_live | +0.100 (too few pairs) | +0.000 (too few pairs) |" in md_few
  assert "]*" not in md_few and "below 5 pairs they mean nothing" in md_few
  md = study.write_results(c, runs)  # the page of the test's own config again
  assert "| 1 | 0 | arena_live | 0.610 ± 0.010 |" in md
  # The condition, over the last 5 steps (10% of 3 at least 5: all 3): 0.7 of the groups non-diverse, 1.2 / 2.1
  # of them all-correct.
  assert out["runs"]["rlvr"][0]["final_all_correct_share"] == pytest.approx(1.2 / 2.1)
  assert "| rlvr | 0.700 ± 0.000 | 0.571 ± 0.000 | 0.500 ± 0.000 | yes |" in md
  assert "majority of non-diverse groups by the end in every mode" in md
  assert md.count("| 3.0 | 0.50 | 128 | 1.00 |") == 2  # the judged modes, relative to the baseline
  assert "What the mechanism predicts" in md and "(No `reading.md` beside this page" in md
  # A hand-written reading beside the page is linked, not rewritten.
  (tmp_path / "results" / "reading.md").write_text("by hand")
  md = study.write_results(c, runs)
  assert "[reading.md](reading.md)" in md and (tmp_path / "results" / "reading.md").read_text() == "by hand"
  # The names the text cites exist.
  assert "`experiments.study.study_config()`" in md and "`configs.common.mode_config(mode)`" in md
  assert "`experiments.stats.paired_bootstrap`" in md and stats.paired_bootstrap
  for path in re.findall(r"`(configs/[\w./]+)`", md):
    assert (ROOT / path).exists(), path
  assert len(read_metrics(os.path.join(c.root, "rlvr", "seed0"))) == 3


def test_the_blind_flaw_is_read_at_the_start_and_at_the_end_of_training(tmp_path):
  """Issue 32, condition (a) over a run: as many steps at the start as the end-of-training figures average."""
  _fake_metrics(str(tmp_path), 60, "rlvr")  # blind flaw 0.01 · step
  m = metrics.run_metrics(str(tmp_path), 0.1)  # the last 10% of 60 steps: 6, and the first 6
  assert m["final_steps"] == 6
  assert m["blind_flaw_first"] == pytest.approx(0.035) and m["blind_flaw_final"] == pytest.approx(0.575)
  (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1}) + "\n")  # a run from before the metric
  assert metrics.run_metrics(str(tmp_path), 0.1)["blind_flaw_final"] is None


def test_results_say_when_the_condition_fails(tmp_path, monkeypatch):
  monkeypatch.setattr(runner, "train_sft", lambda config, out: {})
  monkeypatch.setattr(runner, "train", lambda config, workdir: _fake_metrics(workdir, 2, config.reward.mode))
  monkeypatch.setattr(
    watch, "evaluate_step", lambda workdir, step, cfg: {b: {"greedy_accuracy": 0.5} for b in cfg.benchmarks}
  )
  c = study.study_config()
  c.modes, c.seeds, c.num_steps, c.judge_accuracies = ("rlvr", "arena"), (0,), 2, ()
  c.root, c.out_dir = str(tmp_path / "runs"), str(tmp_path / "results")
  md = study.write_results(c, study.run_study(c))
  # Both steps: 0.6 all-correct, 0.8 all-wrong in all: no majority. One seed: no interval.
  assert "| arena | 0.700 ± 0.000 | 0.429 ± 0.000 | 0.500 ± 0.000 | **no** |" in md
  assert "**not** the majority of non-diverse groups by the end for ['rlvr', 'arena']" in md
  assert "| arena | +0.000 (too few pairs) | – |" in md and "(no ablation runs)" in md and "ablation.png" not in md


@pytest.mark.slow  # the slow tier: SFT then three RL runs and their evaluations, minutes of training
def test_study_end_to_end_on_the_smoke_preset(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # the preset's runs/ and the smoke SFT policy land here
  # The embedded judge's child process imports this checkout (not another one an editable install names).
  monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
  c = study.apply_preset(ml_collections.ConfigDict({**study.study_config().to_dict(), "preset": "smoke"}))
  runs = study.run_study(c)
  assert sorted(runs) == ["arena_live/seed0", "arena_live@acc0/seed0", "rlvr/seed0"]
  assert runs["arena_live@acc0/seed0"]["setup"]["judge_accuracy"] == 0.0
  md = study.write_results(c, runs)
  out = json.loads((tmp_path / c.out_dir / "study.json").read_text())
  for group, results in out["runs"].items():
    (run,) = results
    for bench in ("arithmetic", "arithmetic_shift"):  # the evaluator's process metrics reach the tables
      assert {"greedy_accuracy", "faithful_accuracy", "compensating_rate"} <= set(run["eval"][bench]), group
    curves = run["curves"]  # the trainer's process and routing metrics reach the curves
    assert curves["step"] == [1, 2] and None not in curves["faithful_accuracy"], group
    assert run["final_steps"] == 2 and 0.0 <= run["final_non_diverse"] <= 1.0
  assert "| 0 | 1 | arena_live@acc0 |" in md and "| rlvr | " in md
  assert (tmp_path / c.out_dir / "curves.png").exists() and (tmp_path / c.out_dir / "ablation.png").exists()


@pytest.mark.slow  # the slow tier: the demo's SFT, RL and both evaluations end to end, minutes of training
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
