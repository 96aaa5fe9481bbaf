"""The hard regime's study (`--study.preset=hard`, experiments/study/hard.py) with the trainer and the evaluator faked:
held-out curves every few steps, the speed to RLVR's level as defined before the runs, the base's figures and the
checker's agreement with closeness to the right answer."""

import json
import os
import types

import ml_collections
import numpy as np
import pytest

from arena_jax import errors
from arena_jax.eval import watch
from experiments import study
from experiments.study import hard, runner

# Held-out pass ratio at steps 2, 4, 6, 8 (the base, step 0: 0.1). RLVR's level is its evaluation in the final 25% of
# 8 steps (step 8): 0.3, first held (and confirmed) at step 6.
_CURVES = {
  "rlvr": [0.15, 0.2, 0.3, 0.3],
  "rlvr_dapo": [0.2, 0.31, 0.32, 0.3],  # reaches it at 4
  "arena_live": [0.3, 0.35, 0.3, 0.4],  # at 2
  "arena_live@acc0": [0.1, 0.31, 0.1, 0.35],  # 0.31 at 4 is not confirmed; 0.35 at 8 is the last: censored
}


def _fake_train(config, workdir):
  os.makedirs(workdir, exist_ok=True)
  gens = 256 if config.reward.mode == "rlvr_dapo" else 128  # dynamic sampling samples more per step
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for step in range(1, config.num_steps + 1):
      row = {
        "step": step,
        "gen/trajectories": gens,
        "time/wall": 2.0,
        "groups/all_wrong": 0.6,
        "groups/all_correct": 0.1,
      }
      if config.reward.mode == "arena_live":
        row.update({"judge/grad_share": 0.4, "judge/calls": 10})
      f.write(json.dumps(row) + "\n")
  return {}


def _fake_eval(workdir, step, cfg):
  group, seed = workdir.split(os.sep)[-2:]
  v = _CURVES[group][step // 2 - 1] + 0.001 * int(seed[4:])  # a seed shifts every group alike
  return {b: {"mean_pass_ratio": v, "greedy_accuracy": v + 0.1} for b in cfg.benchmarks}


def _fake_base_eval(params, model_config, tokenizer, config, **kwargs):
  assert kwargs["keep_details"]
  example = types.SimpleNamespace(question="Compute 7 + 5 * 3.", answer="22")
  out = {b: {"mean_pass_ratio": 0.1, "greedy_accuracy": 0.1, "frac_all_wrong": 0.6} for b in config.benchmarks}
  out["arithmetic"][watch.DETAILS] = {
    "examples": [example],
    "rewards": np.zeros((1, len(_TRACES))),
    "completions": list(_TRACES),
  }
  return out


# One all-wrong group of 7 + 5 * 3 = 22 (checker penalty, distance of the answer from 22): A (2, 1), B (3, 2), C (2, 2),
# D (3, 8), E (2, 70). Pairs with both different: A–B, A–D, C–D agree (the lower penalty is closer), E–B, E–D do not.
_TRACES = (
  "5 * 3 = 15.\n\n7 + 15 = 23.\n\nAnswer: 23",
  "5 * 3 = 16.\n\n7 + 16 = 24.\n\nAnswer: 24",
  "5 * 3 = 15.\n\n7 + 15 = 20.\n\nAnswer: 20",
  "Answer: 30",
  "5 * 3 = 15.\n\n7 + 15 = 92.\n\nAnswer: 92",
)


def _hard_study(tmp_path):
  c = study.apply_preset(ml_collections.ConfigDict({**study.study_config().to_dict(), "preset": "hard"}))
  c.seeds, c.num_steps, c.eval_every = (0, 1, 2), 8, 2
  c.bootstrap.min_pairs, c.bootstrap.num_resamples = 3, 200
  c.root, c.out_dir = str(tmp_path / "runs"), str(tmp_path / "results")
  return c


def test_the_hard_page_reads_the_speed_to_rlvrs_level(tmp_path, monkeypatch):
  monkeypatch.setattr(runner, "train_sft", lambda config, out: {})
  monkeypatch.setattr(runner, "train", _fake_train)
  monkeypatch.setattr(watch, "evaluate_step", _fake_eval)
  monkeypatch.setattr(watch, "evaluate_params", _fake_base_eval)
  monkeypatch.setattr(
    hard, "load_policy", lambda path: types.SimpleNamespace(model=0, config=0, tokenizer=0, add_bos=1)
  )
  c = _hard_study(tmp_path)
  runs = study.run_study(c)
  assert len(runs) == 12 and runs["rlvr/seed0"]["curve"][0]["step"] == 2
  assert [p["step"] for p in runs["arena_live/seed1"]["curve"]] == [2, 4, 6, 8]
  # The curve's evaluations read the held-out split only; the final one every benchmark.
  assert [sorted(p["eval"]) for p in runs["rlvr/seed0"]["curve"]] == [["arithmetic"]] * 3 + [
    ["arithmetic", "arithmetic_shift"]
  ]
  # Every evaluated checkpoint was kept, and the runs trained on the preset's problems.
  rc = study.run_config("rlvr", 0, c)
  assert rc.checkpoint.every == 2 and rc.checkpoint.keep == 4
  assert (rc.tasks.arithmetic.min_ops, rc.tasks.arithmetic.max_ops, rc.tasks.arithmetic.max_operand) == (3, 5, 20)

  md = study.write_page(c, runs)
  assert md == (tmp_path / "results" / "hard_regime.md").read_text()
  assert (tmp_path / "results" / "hard_regime.png").stat().st_size > 0
  # Strict JSON, every line: a figure that is not a number is null (RLVR's judge share, say), never NaN.
  strict = lambda line: json.loads(line, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
  lines = [strict(line) for line in (tmp_path / "results" / "hard_regime.json").read_text().splitlines()]
  summary = lines[-1]
  assert len(lines) == 13 and lines[0]["curve"][0] == [0, 0.1]  # the base is every curve's step 0
  steps = summary["steps_to_rlvr_level"]
  assert steps["arena_live"]["mean"] == pytest.approx(2 / 6) and steps["arena_live"]["hi"] == pytest.approx(2 / 6)
  assert steps["rlvr_dapo"]["mean"] == pytest.approx(4 / 6)
  assert steps["arena_live@acc0"]["mean"] == pytest.approx(8 / 6) and summary["censored"]["arena_live@acc0"] == 3
  # Generations to the level: dynamic sampling's 4 steps of 256 against RLVR's 6 of 128.
  assert summary["generations_to_rlvr_level"]["rlvr_dapo"]["mean"] == pytest.approx(4 * 256 / (6 * 128))
  assert summary["levels"] == {"0": pytest.approx(0.3), "1": pytest.approx(0.301), "2": pytest.approx(0.302)}
  assert summary["final_pass_ratio_diff"]["arena_live"]["mean"] == pytest.approx(0.1)
  assert summary["base"] == {"pass_ratio": 0.1, "all_wrong_share": 0.6, "checker_agreement": pytest.approx(0.6)}
  assert "| arena_live | 2, 2, 2 | 0 of 3 | 0.33 [0.33, 0.33] |" in md
  assert "| arena_live@acc0 | 8+, 8+, 8+ | 3 of 3 | 1.33 [1.33, 1.33] |" in md
  assert "closer to the reference in **0.600** of them" in md
  # The judge's signal: arena_live's routed groups were 6 of 7 all wrong, its share of Σ|Â| 0.4; RLVR has none.
  assert "| arena_live | 0.857 | 0.143 | 0.7 | 0.4 | 80 | 1.02e+03 |" in md
  assert "| rlvr | 0.857 | 0.143 | 0.7 | – | 0 |" in md

  assert "(No `hard_regime_reading.md` beside this page" in md
  (tmp_path / "results" / "hard_regime_reading.md").write_text("# The reading\n\nArena-Live was faster, by hand.")
  md = study.write_page(c, runs)
  assert md.rstrip().endswith("Arena-Live was faster, by hand.") and "# The reading" not in md  # the section's title
  assert (tmp_path / "results" / "hard_regime_reading.md").read_text().endswith("Arena-Live was faster, by hand.")

  # The base is evaluated once: a restart reads it back.
  monkeypatch.setattr(watch, "evaluate_params", lambda *a, **k: pytest.fail("the base was evaluated again"))
  assert study.write_page(c, study.run_study(c)) == md

  # Fewer seeds than min_pairs: means without intervals, whose ends the JSON holds as null (strict JSON).
  fewer = c.copy_and_resolve_references()
  fewer.bootstrap.min_pairs = len(fewer.seeds) + 1
  assert "(too few pairs)" in study.write_page(fewer, runs)
  summary = strict((tmp_path / "results" / "hard_regime.json").read_text().splitlines()[-1])
  assert summary["steps_to_rlvr_level"]["rlvr_dapo"]["lo"] is None
  assert summary["steps_to_rlvr_level"]["rlvr_dapo"]["mean"] == pytest.approx(4 / 6)


def test_the_speed_to_a_level_is_confirmed_by_the_next_evaluation():
  curve = [(0, 0.1), (10, 0.32), (20, 0.28), (30, 0.31), (40, 0.33), (50, 0.3)]
  assert hard.rlvr_level(curve, 0.25) == pytest.approx(0.315)  # steps > 37.5: 40 and 50
  assert hard.speed_to_level(curve, 0.3) == (30, False)  # 10 is not confirmed by 20
  assert hard.speed_to_level(curve, 0.32) == (50, True)  # 40 is not confirmed by 50: censored at the end
  assert hard.speed_to_level([(0, 0.1), (10, 0.5)], 0.4) == (10, True)  # the last evaluation alone is censored


def test_the_hard_study_refuses_what_it_cannot_read(tmp_path):
  c = _hard_study(tmp_path)
  for field, value, match in (
    ("eval_every", 3, "study.eval_every: 3 does not divide"),
    ("eval_every", 0, "study.page: the hard_regime page needs curves"),
    ("page", "poster", "study.page: 'poster' is not a results page"),
    ("level_fraction", 0.0, r"study.level_fraction: 0.0 is not in \(0, 1\]"),
    ("curve_benchmarks", ("countdown",), r"study.curve_benchmarks: \('countdown',\) must be some of"),
  ):
    bad = ml_collections.ConfigDict(c.to_dict())
    bad[field] = value
    with pytest.raises(errors.ConfigError, match=match):
      study.run_study(bad)
  bad = ml_collections.ConfigDict(c.to_dict())
  bad.arithmetic.min_ops = -1
  with pytest.raises(errors.ConfigError, match="study.arithmetic.min_ops: -1 is negative"):
    study.run_study(bad)
